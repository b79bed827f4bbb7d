// The gather group of ringcast._core: replies from N workers, collected with one GIL release.
// PyGatherCollector is the executor side (GatherCollector in Python), PyGatherWorker a worker's side.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gil.hpp"
#include "ringcast/gather.hpp"

namespace py = pybind11;

namespace ringcast::python {

// The executor side. collect() probes with the GIL held, then waits for the whole pending set in
// slices with the GIL released (one release per slice, not per rank); replies arriving in any order
// are kept across slices.
class PyGatherCollector : public detail::Endpoint {
public:
    PyGatherCollector(const std::string& name, std::uint32_t ranks, std::uint64_t capacity, std::uint32_t mode,
                      const std::string& method, const std::string& wait, double spin_us, double spin_max_us,
                      double liveness_s);
    ~PyGatherCollector();

    // The ranks a collect asks for, in the caller's order: none (Python's None) for every rank; an
    // empty list asks for none (an executor that worked out which ranks still owe a reply may find none).
    using Ranks = std::optional<std::vector<std::uint32_t>>;

    // Replies (bytes) for `ranks`, in the order of `ranks`.
    py::list collect(std::uint64_t tag, Ranks ranks, const std::optional<double>& timeout);
    // collect in one call: the replies unpickled here (pickling.hpp). A reply that comes while
    // others are still awaited is unpickled then, between two waits (GatherCollector::collect's
    // on_early_reply), so that only the last ones are unpickled after the last worker answered — as
    // a rank-by-rank read overlaps them, with one wait; the last ones once the collect is over and
    // this collector free again. Raises as collect(), and what pickle.loads raises: the first
    // failure in the order of `ranks`, once every reply is in (the replies are consumed either way,
    // as when collect() returned and unpickling them raised). Code run by the unpickling of an early
    // reply must not use this collector (RuntimeError saying so).
    py::list collect_objects(std::uint64_t tag, Ranks ranks,
                             const std::optional<double>& timeout);

    // ---- collect_async: collect() split in two --------------------------------------------------
    // Today's async executors run a Python thread that blocks in collect while the main thread
    // prepares the next step; when the replies come that thread needs the GIL (held by the main
    // thread), and handing the result over costs two more thread wake-ups. No thread is needed: the
    // workers' replies land in their reply rings whether or not anyone waits, so collect_start only
    // records the request and its deadline, collect_done polls the rings (no wait), and
    // collect_result takes what is there and waits (GIL released, one wait for the rest) only for
    // what is not. When the replies are in before the main thread asks, it pays no wait, no wake-up
    // and no GIL hand-off. The price: replies larger than what a reply ring buffers (its capacity,
    // 4 x max_reply_bytes) hold their worker until result() drains them.
    //
    // Thread-safety: one pending collect per collector (the GIL serializes these calls); collect()
    // and a second collect_start raise RuntimeError until result() was taken.
    // `unpickle`: the result will be taken with collect_result_objects(), so polls (collect_done)
    // and the wait unpickle early replies as collect_objects() does.
    // Returns the collect's id (collect_is, collect_abandon).
    std::uint64_t collect_start(std::uint64_t tag, Ranks ranks,
                                const std::optional<double>& timeout, bool unpickle);
    // Whether collect `id` is the pending one (not taken by result(), not abandoned).
    [[nodiscard]] bool collect_is(std::uint64_t id) const { return async_ && async_->id == id; }
    // The id of the last collect begun (0: none yet): what a caller whose collect_start was cut short
    // by a signal handler's exception as it returned compares with the id it read before the call.
    [[nodiscard]] std::uint64_t last_collect_id() const noexcept { return last_collect_id_; }
    // True once result() would not wait: every reply is in, or the collect has failed (a stale reply,
    // a closed ring, the deadline passed).
    [[nodiscard]] bool collect_done();
    py::list collect_result();
    py::list collect_result_objects();  // collect_result(), unpickled as collect_objects() does
    // For an event loop awaiting the pending collect (ringcast.aio, events.cpp): the ranks it still
    // misses (empty: none pending) and its deadline (kNoDeadline: none), so the loop arms for exactly
    // those ranks — arming for a rank already in could find its next reply and report "ready" forever.
    [[nodiscard]] std::vector<std::uint32_t> collect_missing() const {
        return async_ ? async_->pending : std::vector<std::uint32_t>{};
    }
    [[nodiscard]] std::uint64_t collect_tag() const { return async_ ? async_->tag : 0; }
    [[nodiscard]] Deadline collect_deadline() const { return async_ ? async_->deadline : kNoDeadline; }
    // The dead-worker check a blocking wait runs every liveness interval, for the ranks the pending
    // collect still misses: a dead one ends the collect with PeerDeadError (done() turns true and
    // result() raises it), as the check inside a blocking result() would.
    void check_pending_peers();
    // The pending collect_async is forgotten (its PendingReplies was dropped without result()): the
    // gather may collect again; the replies it took stay with the core for the next collect of the tag.
    void collect_abandon(std::uint64_t id) noexcept;

    // A collect blocked in another thread wakes and raises ClosedError; the reply rings go back now,
    // or when that call leaves (release_after_shutdown): workers replying later never block.
    void shutdown();
    void remove_names();  // GatherCollector::remove_names (not in a forked child)
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint32_t ranks() const { return collector_->ranks(); }
    [[nodiscard]] std::uint64_t kernel_waits() const { return collector_->kernel_waits(); }
    [[nodiscard]] GatherCollector& core() noexcept { return *collector_; }  // events.cpp: the wake fd

private:
    void release_after_shutdown() noexcept override;  // GatherCollector::detach_readers

    struct Collect {  // one collect in progress: what is asked, what came, what is left
        std::uint64_t id = 0;  // collect_start's number: a PendingReplies acts on its own collect only
        std::uint64_t tag = 0;
        std::vector<std::uint32_t> ranks;    // as asked, in the caller's order
        std::vector<std::uint32_t> pending;  // not in yet
        std::vector<std::optional<std::vector<std::byte>>> got;  // by rank
        Deadline deadline{};
        std::string timeout_text;
        Status status = Status::timed_out;  // of the last attempt
        std::exception_ptr error;           // a core Error from a done() poll, rethrown by result()
        // Early unpickling (collect_objects). Written with the GIL held (the hook takes it); a Collect
        // holding objects is destroyed with the GIL held (every owner runs under it).
        bool unpickle = false;
        std::vector<py::object> objects;  // by rank: replies unpickled while others were awaited
        std::uint32_t failed_rank = 0;    // the first rank (in `ranks` order) whose unpickling raised
        py::object error_type, error_value, error_trace;  // its exception (PyErr_Fetch), if any
    };

    Collect begin(std::uint64_t tag, Ranks ranks, const std::optional<double>& timeout,
                  bool unpickle);
    // One core collect over what is still pending, waiting at most t; keeps what came. `gil`: the
    // holder of the calling wait (the GIL released in its slices), nullptr where the GIL is held;
    // early replies (c.unpickle) are unpickled with the GIL taken back through it.
    Status attempt(Collect& c, std::chrono::nanoseconds t, detail::Gil* gil);
    // The early-reply hook's work, GIL held: unpickles one reply into c.objects, or records why not.
    void unpickle_early(Collect& c, std::uint32_t rank, std::span<const std::byte> reply);
    // Raises RuntimeError when called from the unpickling of an early reply (the core collect is mid-call).
    void check_not_unpickling(const char* what) const;
    // Probe with the GIL held (no release when everything is there), then one sliced wait for the rest;
    // returns with every reply in, else raises (timeout, closed, shut down) with the GIL held.
    void finish(Collect& c, detail::Gil& gil);
    // collect() / collect_result() up to the replies: the finished collect, this collector free again.
    Collect collect_as(std::uint64_t tag, Ranks ranks, const std::optional<double>& timeout,
                       bool unpickle);
    Collect result();
    // The replies of a finished collect in the order asked: bytes, or unpickled (`unpickle`; those
    // unpickled early are taken as they are; a recorded failure is raised in its turn).
    static py::list replies(Collect& c, bool unpickle);

    std::string name_;
    std::unique_ptr<GatherCollector> collector_;
    std::uint64_t last_collect_id_ = 0;
    std::unique_ptr<Collect> async_;  // the pending collect_async, if any (GIL-protected)
    PyThreadState* unpickling_in_ = nullptr;  // the thread inside unpickle_early, if any (GIL-protected)
};

// The worker side: reply(tag, bytes) onto this rank's reply ring, then ring the doorbell if needed.
class PyGatherWorker : public detail::Endpoint {
public:
    PyGatherWorker(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us,
                   double spin_max_us, double liveness_s);

    void reply(std::uint64_t tag, py::buffer data, const std::optional<double>& timeout);
    // reply in one call: pickles `obj` (protocol 5, in-band) here, then reply()'s path. The pickling
    // runs before the one-thread check (as a pickle made in Python would); nothing is sent if it raises.
    void reply_object(std::uint64_t tag, py::handle obj, const std::optional<double>& timeout);
    // From any thread: a reply blocked in another thread wakes and raises ClosedError (one that finds
    // room as it wakes completes, before the close); the ring closes now, or when that reply leaves
    // (release_after_shutdown) — nothing lands after the close.
    void close();
    [[nodiscard]] std::uint32_t rank() const { return worker_->rank(); }
    // The cap of this worker's adaptive spin (its waits for room in the reply ring), in µs.
    [[nodiscard]] double spin_max_us() const { return static_cast<double>(worker_->wait_options().spin_max.count()) / 1e3; }

private:
    void release_after_shutdown() noexcept override;  // GatherWorker::close

    void reply_bytes(std::uint64_t tag, std::span<const std::byte> bytes, const std::optional<double>& timeout);
    void reply_waiting(std::uint64_t tag, std::span<const std::byte> bytes, const std::optional<double>& timeout);

    std::string name_;
    std::unique_ptr<GatherWorker> worker_;
};

}  // namespace ringcast::python
