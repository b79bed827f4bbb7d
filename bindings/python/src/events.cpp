// ringcast._core event-loop hooks (the asyncio layer is ringcast/aio.py): an endpoint's eventfd and
// the arm / disarm steps of include/ringcast/events/eventfd.hpp, for Writer, Reader and
// GatherCollector. All are quick and non-blocking: they keep the GIL (the loop thread holds it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "gather.hpp"
#include "queue.hpp"

namespace py = pybind11;

namespace ringcast::python {

// Core Errors (permission_denied, system, ...) reach Python through errors.cpp's translator.
void register_events(py::module_& m) {
    m.def("wake_fd", [](PyReader& r) { return r.core().wake_fd(); }, py::arg("endpoint"));
    m.def("wake_fd", [](PyWriter& w) { return w.core().wake_fd(); }, py::arg("endpoint"));
    m.def("wake_fd", [](PyGatherCollector& c) { return c.core().wake_fd(); },
          py::arg("endpoint"),
          "wake_fd(endpoint): the eventfd an event loop watches for this Reader / Writer (space) /\n"
          "GatherCollector; registered on first call, after which the endpoint's blocking waits sleep on it\n"
          "too. Use it only through arm() / disarm() (see ringcast.aio and docs/events.md).");
    m.def("arm", [](PyReader& r) { return r.core().arm_wake_fd(); }, py::arg("endpoint"));
    m.def(
        "arm", [](PyWriter& w, std::size_t bytes) { return w.core().arm_wake_fd(bytes); },
        py::arg("endpoint"), py::arg("message_bytes"));
    m.def(
        "arm",
        [](PyGatherCollector& c, std::optional<std::vector<std::uint32_t>> ranks) {
            const std::vector<std::uint32_t> which = ranks.value_or(std::vector<std::uint32_t>{});
            return c.core().arm_wake_fd(which);
        },
        py::arg("endpoint"), py::arg("ranks") = py::none(),
        "arm(endpoint[, message_bytes | ranks]): drains the eventfd, announces the wait, re-checks.\n"
        "True: ready now (nothing armed: take it). False: armed: wait until wake_fd() is readable, then\n"
        "disarm() and take what is there with a zero timeout (a wake may find nothing: arm again).\n"
        "Raises PermissionError when the peer cannot take the eventfd (pidfd_getfd refused).");
    m.def("disarm", [](PyReader& r) { r.core().disarm_wake_fd(); }, py::arg("endpoint"));
    m.def("disarm", [](PyWriter& w) { w.core().disarm_wake_fd(); }, py::arg("endpoint"));
    m.def("disarm", [](PyGatherCollector& c) { c.core().disarm_wake_fd(); }, py::arg("endpoint"),
          "disarm(endpoint): withdraws the announcement of arm() (call it once the wait is over).");
}

}  // namespace ringcast::python
