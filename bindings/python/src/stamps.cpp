#include "stamps.hpp"

#include <vector>

namespace ringcast::python::detail {

std::atomic<bool> g_stamping{false};
std::array<std::atomic<std::int64_t>, static_cast<unsigned>(Stamp::count)> g_stamps{};

void register_stamps(pybind11::module_& m) {
    m.def(
        "_stamps_enable", [](bool on) { g_stamping.store(on, std::memory_order_relaxed); }, pybind11::arg("on"),
        "BENCHMARKS ONLY: record CLOCK_MONOTONIC stamps (ns) at fixed points of the one-call paths\n"
        "(send_object, recv_object, reply_object, collect_objects); off by default.");
    m.def(
        "_stamps_take",
        [] {
            std::vector<std::int64_t> out;
            for (auto& s : g_stamps) out.push_back(s.exchange(0, std::memory_order_relaxed));
            return out;
        },
        "BENCHMARKS ONLY: this process's stamps (ns; 0: not reached since the last take), in the order\n"
        "send_enter, send_pickled, send_committed, recv_enter, recv_seen, recv_copied, recv_unpickled,\n"
        "reply_enter, reply_pickled, reply_committed, collect_enter, collect_all_in, collect_unpickled;\n"
        "clears them.");
    m.attr("_STAMP_NAMES") = pybind11::make_tuple(
        "send_enter", "send_pickled", "send_committed", "recv_enter", "recv_seen", "recv_copied", "recv_unpickled",
        "reply_enter", "reply_pickled", "reply_committed", "collect_enter", "collect_all_in", "collect_unpickled");
}

}  // namespace ringcast::python::detail
