// Benchmarks only: clock stamps at fixed points of the one-call paths, so that a benchmark can split a
// step's transport time into the binding's own parts — the Python call into the module, pickling, the
// copy and publish, the hand-over to the other process, and back (bench/python/bench_step_split.py).
// CLOCK_MONOTONIC (steady_clock), comparable across the processes of one machine.
//
// One slot per point, per process, last value wins: meant for one thread per process driving one
// queue and one gather (the benchmark's executor and worker). Off by default: then each point costs
// one relaxed load.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // every translation unit sees the same type casters (gil.hpp)

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace ringcast::python::detail {

enum class Stamp : unsigned {
    send_enter,        // Writer.send_object entered
    send_pickled,      // ... pickle made
    send_committed,    // ... message published (and readers woken where asleep)
    recv_enter,        // Reader.recv_object entered
    recv_seen,         // ... the message's record found (the wait is over)
    recv_copied,       // ... copied out, record released
    recv_unpickled,    // ... unpickled
    reply_enter,       // GatherWorker.reply_object entered
    reply_pickled,     // ... pickle made
    reply_committed,   // ... reply published (doorbell rung where the collector sleeps)
    collect_enter,     // GatherCollector.collect_objects entered
    collect_all_in,    // ... every reply in (the wait is over)
    collect_unpickled, // ... replies copied and unpickled
    count
};

// The points' names, in the enum's order (_core._STAMP_NAMES, what _stamps_take's list is indexed by).
inline constexpr std::array<const char*, static_cast<unsigned>(Stamp::count)> kStampNames{
    "send_enter", "send_pickled", "send_committed", "recv_enter", "recv_seen", "recv_copied", "recv_unpickled",
    "reply_enter", "reply_pickled", "reply_committed", "collect_enter", "collect_all_in", "collect_unpickled"};
static_assert(kStampNames.back() != nullptr, "a name for every stamp point");

extern std::atomic<bool> g_stamping;
extern std::array<std::atomic<std::int64_t>, static_cast<unsigned>(Stamp::count)> g_stamps;

inline void stamp(Stamp s) noexcept {
    if (!g_stamping.load(std::memory_order_relaxed)) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch()).count();
    g_stamps[static_cast<unsigned>(s)].store(ns, std::memory_order_relaxed);
}

// _core._stamps_enable / _core._stamps_take.
void register_stamps(pybind11::module_& m);

}  // namespace ringcast::python::detail
