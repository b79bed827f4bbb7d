// ringcast._core event-loop hooks (the asyncio layer is ringcast/aio.py): an endpoint's eventfd and
// the arm / disarm steps of include/ringcast/events/eventfd.hpp, for Writer, Reader and
// GatherCollector. All are quick and non-blocking: they keep the GIL (the loop thread holds it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "gather.hpp"
#include "queue.hpp"

namespace py = pybind11;

namespace ringcast::python {

namespace {

// The Writer's and the GatherCollector's hooks take PyReader's guard path (queue_reader.cpp wake_fd /
// arm / check_peers): one thread at a time (Busy), and refused in a forked child or once shut down
// (check_usable), with the reader's error. Unguarded, a forked child's wake_fd(writer) registered the
// child's eventfd as the parent writer's space doorbell: readers then signalled the child's fd and
// skipped the futex wake, and the parent's blocked enqueue slept through every release. Endpoint keeps
// both protected (its derived classes use them); this names them for the free functions below.
struct Guard : detail::Endpoint {
    using Endpoint::Busy;
    using Endpoint::check_usable;
    using Endpoint::forked_child;
};

// f() inside the endpoint: `what` names the call in the refusal (as the reader's: "wake_fd", "arm", or
// the blocking call whose dead-peer check it is).
template <class F>
decltype(auto) guarded(detail::Endpoint& e, const char* what, F&& f) {
    const Guard::Busy busy(e);
    (e.*&Guard::check_usable)(what);
    return f();
}

// disarm() withdraws an announcement in shared memory — in a forked child, the parent's (the bit is the
// endpoint's own): there it does nothing. Not refused: it is the clean-up a finally block runs.
template <class F>
void guarded_disarm(detail::Endpoint& e, F&& f) {
    const Guard::Busy busy(e);
    if (!(e.*&Guard::forked_child)()) f();
}

}  // namespace

// Core Errors (permission_denied, system, ...) reach Python through errors.cpp's translator.
void register_events(py::module_& m) {
    m.def("wake_fd", [](PyReader& r) { return r.wake_fd(); }, py::arg("endpoint"));
    m.def("wake_fd", [](PyWriter& w) { return guarded(w, "wake_fd", [&] { return w.core().wake_fd(); }); },
          py::arg("endpoint"));
    m.def("wake_fd", [](PyGatherCollector& c) { return guarded(c, "wake_fd", [&] { return c.core().wake_fd(); }); },
          py::arg("endpoint"),
          "wake_fd(endpoint): the eventfd an event loop watches for this Reader / Writer (space) /\n"
          "GatherCollector; registered on first call, after which the endpoint's blocking waits sleep on it\n"
          "too. Use it only through arm() / disarm() (see ringcast.aio and docs/events.md).");
    m.def("arm", [](PyReader& r) { return r.arm(); }, py::arg("endpoint"));
    m.def(
        "arm",
        [](PyWriter& w, std::optional<std::size_t> bytes) {
            return guarded(w, "arm", [&] { return w.core().arm_wake_fd(bytes.value_or(w.pending_record_bytes())); });
        },
        py::arg("endpoint"), py::arg("message_bytes") = py::none());
    m.def(
        "arm",
        [](PyGatherCollector& c, std::uint64_t tag, std::optional<std::vector<std::uint32_t>> ranks) {
            const std::vector<std::uint32_t> which = ranks.value_or(std::vector<std::uint32_t>{});
            return guarded(c, "arm", [&] { return c.core().arm_wake_fd(tag, which); });
        },
        py::arg("endpoint"), py::arg("tag"), py::arg("ranks") = py::none(),
        "arm(endpoint[, message_bytes | tag, ranks]): drains the eventfd, announces the wait, re-checks.\n"
        "A Writer waits for room for message_bytes (default: the next record of its send_nowait() message);\n"
        "a GatherCollector for a reply to `tag` from `ranks` (None: all) that a collect of `tag` still needs.\n"
        "True: ready now (nothing armed: take it). False: armed: wait until wake_fd() is readable, then\n"
        "disarm() and take what is there with a zero timeout (a wake may find nothing: arm again).\n"
        "Raises PermissionError when the peer cannot take the eventfd (pidfd_getfd refused).");
    m.def("disarm", [](PyReader& r) { r.disarm(); }, py::arg("endpoint"));
    m.def("disarm", [](PyWriter& w) { guarded_disarm(w, [&] { w.core().disarm_wake_fd(); }); }, py::arg("endpoint"));
    m.def("disarm", [](PyGatherCollector& c) { guarded_disarm(c, [&] { c.core().disarm_wake_fd(); }); },
          py::arg("endpoint"),
          "disarm(endpoint): withdraws the announcement of arm() (call it once the wait is over).");

    // The dead-peer check a blocking wait runs every liveness interval, for a loop that waits on the
    // eventfd instead (a dead peer never signals it): PeerDeadError names the dead peer.
    m.def("check_peers", [](PyReader& r) { r.check_peers(); }, py::arg("endpoint"));
    m.def("check_peers", [](PyWriter& w) { guarded(w, "enqueue", [&] { w.check_peers(); }); }, py::arg("endpoint"));
    m.def(
        "check_peers",
        [](PyGatherCollector& c, std::uint64_t tag, std::optional<std::vector<std::uint32_t>> ranks) {
            guarded(c, "collect", [&] { c.core().check_liveness(tag, ranks.value_or(std::vector<std::uint32_t>{})); });
        },
        py::arg("endpoint"), py::arg("tag"), py::arg("ranks") = py::none(),
        "check_peers(endpoint[, tag, ranks]): the dead-peer check of a blocking wait, for an event loop: a\n"
        "Reader's writer, a Writer's lagging readers, a collect's workers among `ranks` (None: all) less\n"
        "those whose reply to `tag` was taken. Raises PeerDeadError.");
    m.def(
        "check_pending_collect_peers",
        [](PyGatherCollector& c) { guarded(c, "collect", [&] { c.check_pending_peers(); }); }, py::arg("collector"),
        "check_pending_collect_peers(collector): check_peers for the ranks the pending collect_async still\n"
        "misses; a dead one ends that collect (done() is then true, result() raises PeerDeadError).");

    // A pending collect_async awaited on a loop (ReplyGather.collect_async(...).__await__ in aio.py).
    m.def(
        "arm_pending_collect",
        [](PyGatherCollector& c) {
            return guarded(c, "arm", [&] {
                const std::vector<std::uint32_t> missing = c.collect_missing();
                return missing.empty() || c.core().arm_wake_fd(c.collect_tag(), missing);  // nothing missing: look now
            });
        },
        py::arg("collector"),
        "arm_pending_collect(collector): arm() for the ranks the pending collect_async still misses.");
    m.def(
        "pending_collect_seconds_left",
        [](PyGatherCollector& c) -> std::optional<double> {
            const Deadline d = c.collect_deadline();
            if (d == kNoDeadline) return std::nullopt;
            if (d == kPollOnly) return 0.0;  // timeout 0 (and no subtraction from Deadline::min())
            return std::max(0.0, std::chrono::duration<double>(d - Clock::now()).count());
        },
        py::arg("collector"),
        "pending_collect_seconds_left(collector): seconds until the pending collect_async times out; None:\n"
        "no timeout.");

    // The non-waiting halves of dequeue / enqueue (queue.hpp says what stays pending between calls).
    m.def("try_recv", [](PyReader& r) { return r.try_recv(); }, py::arg("reader"),
          "try_recv(reader): the parts of the next message if all of it is there, else None; never waits.\n"
          "A message that has only partly arrived is consumed as far as it is there and kept assembled in\n"
          "the reader: the next try_recv() or recv() continues it (nothing lost or duplicated).");
    m.def("send_nowait", [](PyWriter& w, const py::sequence& parts) { return w.send_nowait(parts); },
          py::arg("writer"), py::arg("parts"),
          "send_nowait(writer, parts): starts a message and publishes what fits now; never waits.\n"
          "True: all of it is out. False: the rest is pending (its buffers held: do not change them);\n"
          "wait with arm(writer) / wake_fd, then send_more(); send_abandon() gives it up.");
    m.def("send_more", [](PyWriter& w) { return w.send_more(); }, py::arg("writer"),
          "send_more(writer): publishes what fits now of the pending message; True once all of it is out.");
    m.def("send_abandon", [](PyWriter& w) { w.send_abandon(); }, py::arg("writer"),
          "send_abandon(writer): gives the pending message up; readers drop any part of it already out.");
}

}  // namespace ringcast::python
