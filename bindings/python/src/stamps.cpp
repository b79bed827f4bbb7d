#include "stamps.hpp"

#include <cstddef>
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
        "BENCHMARKS ONLY: this process's stamps (ns; 0: not reached since the last take), in the order of\n"
        "_STAMP_NAMES; clears them.");
    pybind11::tuple names(kStampNames.size());
    for (std::size_t i = 0; i < kStampNames.size(); ++i) names[i] = pybind11::str(kStampNames[i]);
    m.attr("_STAMP_NAMES") = names;
}

}  // namespace ringcast::python::detail
