// PyGatherCollector (incl. collect_async) and PyGatherWorker (see gather.hpp).
#include "gather.hpp"

#include "args.hpp"
#include "errors.hpp"
#include "pickling.hpp"
#include "stamps.hpp"

using namespace std::chrono_literals;

namespace ringcast::python {

using namespace detail;

namespace {
bool raised_by_signal_handler(py::handle trace);  // below
}  // namespace

// ---- PyGatherCollector -----------------------------------------------------------------------------
PyGatherCollector::PyGatherCollector(const std::string& name, std::uint32_t ranks, std::uint64_t capacity,
                                     std::uint32_t mode, const std::string& method, const std::string& wait,
                                     double spin_us, double spin_max_us, double liveness_s)
    : Endpoint(liveness_from(liveness_s)), name_(name) {
    GatherOptions o;
    o.ranks = ranks;
    o.capacity = capacity;
    o.mode = static_cast<mode_t>(mode);
    if (method == "doorbell") o.method = GatherWait::doorbell;
    else if (method == "futex_waitv") o.method = GatherWait::futex_waitv;
    else throw Failure{PyExc_ValueError, "method must be 'doorbell' or 'futex_waitv', got '" + method + "'"};
    o.wait = wait_options(wait, spin_us, spin_max_us);
    o.liveness_interval = liveness_;
    collector_ = std::make_unique<GatherCollector>(GatherCollector::create(name, o));
    shut_text_ = "this ReplyGather was closed";
    releases_on_shutdown_ = true;  // shutdown() gives the reply rings back (release_after_shutdown)
}

PyGatherCollector::~PyGatherCollector() {
    if (forked_child()) (void)collector_.release();  // the parent owns the names: never remove them here
}

py::list PyGatherCollector::collect(std::uint64_t tag, Ranks ranks,
                                    const std::optional<double>& timeout) {
    Collect c = collect_as(tag, std::move(ranks), timeout, false);
    return replies(c, false);
}

py::list PyGatherCollector::collect_objects(std::uint64_t tag, Ranks ranks,
                                            const std::optional<double>& timeout) {
    // The replies that end the collect are unpickled once this collector is free again (after the
    // one-thread check): their unpickling may use this gather, as after collect() and a pickle.loads
    // in Python. Early replies are unpickled during the collect (unpickle_early).
    stamp(Stamp::collect_enter);
    Collect c = collect_as(tag, std::move(ranks), timeout, true);
    stamp(Stamp::collect_all_in);
    py::list out = replies(c, true);
    stamp(Stamp::collect_unpickled);
    return out;
}

PyGatherCollector::Collect PyGatherCollector::collect_as(std::uint64_t tag, Ranks ranks,
                                                         const std::optional<double>& timeout, bool unpickle) {
    check_not_unpickling("collect");
    Busy busy(*this);
    check_usable("collect");  // first: a closed gather says so, whatever was pending
    if (async_)
        throw Failure{PyExc_RuntimeError, "collect: a collect_async is pending on this ReplyGather; call its "
                                          "result() first"};
    Collect c = begin(tag, std::move(ranks), timeout, unpickle);
    Gil gil;
    finish(c, gil);
    return c;
}

std::uint64_t PyGatherCollector::collect_start(std::uint64_t tag, Ranks ranks,
                                               const std::optional<double>& timeout, bool unpickle) {
    check_not_unpickling("collect_async");
    // A collect in another thread holds the endpoint: this one is refused now, not accepted and left
    // to fail at its first done() or result().
    Busy busy(*this);
    check_usable("collect_async");  // first: a closed gather says so, whatever was pending
    if (async_)
        throw Failure{PyExc_RuntimeError, "collect_async: a collect is already pending on this ReplyGather "
                                          "(call result() first)"};
    for (std::uint32_t r : ranks ? std::span<const std::uint32_t>(*ranks) : std::span<const std::uint32_t>())
        if (r >= collector_->ranks())
            throw Failure{PyExc_ValueError, "rank " + std::to_string(r) + " out of range: the group has ranks 0.." +
                                                std::to_string(collector_->ranks() - 1)};
    async_ = std::make_unique<Collect>(begin(tag, std::move(ranks), timeout, unpickle));
    async_->id = ++last_collect_id_;
    return async_->id;
}

bool PyGatherCollector::collect_done() {
    check_not_unpickling("done");
    // A forked child's poll would take the parent's replies from the rings (the parent's result()
    // would then wait for replies that already came): refused as the child's collect is. Only that:
    // after close() done() says true, and result() raises ClosedError.
    if (forked_child()) check_usable("done");
    if (!async_) return false;
    if (async_->status != Status::timed_out || async_->error) return true;
    if (shut_.load(std::memory_order_acquire)) return true;  // result() raises ClosedError: the rings are given back
    Busy busy(*this);
    try {
        async_->status = attempt(*async_, 0ns, nullptr);  // the GIL is held
    } catch (const Error&) {
        async_->error = std::current_exception();
        return true;
    }
    return async_->status != Status::timed_out || Clock::now() >= async_->deadline;
}

void PyGatherCollector::collect_abandon(std::uint64_t id) noexcept {
    // What its attempts took is kept by the core (a timed-out collect keeps its replies): the next
    // collect of the tag returns them, as after a collect() that timed out. Only collect `id` (a
    // finalizer may run long after its collect ended and another began), and never while a call is
    // inside the endpoint (a finalizer run by the garbage collector from a reply's unpickling in
    // done() would free the Collect that call is using): the collect then stays for its caller.
    if (!collect_is(id) || busy_.load(std::memory_order_acquire)) return;
    async_.reset();
}

void PyGatherCollector::check_pending_peers() {
    if (!async_ || async_->error || async_->pending.empty()) return;
    try {
        collector_->check_liveness(async_->pending);
    } catch (const Error&) {
        async_->error = std::current_exception();
    }
}

py::list PyGatherCollector::collect_result() {
    Collect c = result();
    return replies(c, false);
}

py::list PyGatherCollector::collect_result_objects() {
    Collect c = result();
    try {
        return replies(c, true);
    } catch (py::error_already_set& e) {
        // Ctrl-C (or another signal handler's exception, as unpickle_early tells them) while the
        // replies that ended the collect were unpickled: the collect is still pending, complete, so
        // that result() may be called again (PendingReplies.result says so, as for an interrupt
        // during the wait). Every reply is still in c.got; one whose early unpickling replies() had
        // moved out is unpickled again from it. Nothing else ran in between (the GIL is held), so no
        // other collect can have begun — unless the unpickling began one (!async_ says not).
        if ((!e.matches(PyExc_Exception) || raised_by_signal_handler(e.trace())) && !async_) {
            c.status = Status::ok;
            c.pending.clear();
            async_ = std::make_unique<Collect>(std::move(c));
        }
        throw;
    }
}

PyGatherCollector::Collect PyGatherCollector::result() {
    check_not_unpickling("result");
    if (!async_) throw Failure{PyExc_RuntimeError, "result(): no collect_async is pending"};
    Busy busy(*this);
    check_usable("result");  // closed: its rings were given back (release_after_shutdown)
    std::unique_ptr<Collect> c = std::move(async_);
    if (c->error) std::rethrow_exception(c->error);
    Gil gil;
    try {
        finish(*c, gil);
    } catch (py::error_already_set& e) {  // Ctrl-C while waiting: still pending, result() may be retried
        gil.acquire();
        if (e.matches(PyExc_KeyboardInterrupt)) async_ = std::move(c);
        throw;
    }
    return std::move(*c);
}

void PyGatherCollector::shutdown() {
    if (forked_child()) return;
    if (shut_.exchange(true, std::memory_order_seq_cst)) return;  // seq_cst: pairs with Busy's (gil.hpp)
    collector_->cancel();  // a collect blocked in another thread wakes and raises ClosedError
    release_when_idle();   // the rings go back now, or when that call leaves
}

// Every later call that would read the rings is refused (check_usable) or ends at shut_ (collect_done,
// result()); the event-loop helpers that skip Busy touch only the bell and the writers' claims.
// Never in a forked child: the claims in the rings are the parent's.
void PyGatherCollector::release_after_shutdown() noexcept {
    if (forked_child()) return;
    collector_->detach_readers();
}

// The group's names go at close(), as a MessageQueue's shutdown() removes its name: a worker attaching
// later finds nothing rather than a group nobody collects (the mappings stay: a collect blocked in
// another thread returns through its cancel, not through a fault). Not in shutdown() itself: close()
// stops the reply bridge in between, whose serving of a remote worker's hello attaches by name.
void PyGatherCollector::remove_names() {
    if (forked_child()) return;
    collector_->remove_names();
}

PyGatherCollector::Collect PyGatherCollector::begin(std::uint64_t tag, Ranks ranks,
                                                    const std::optional<double>& timeout, bool unpickle) {
    Collect c;
    c.tag = tag;
    if (ranks) {
        c.ranks = std::move(*ranks);  // none: nothing to wait for, [] at once
    } else {
        for (std::uint32_t r = 0; r < collector_->ranks(); ++r) c.ranks.push_back(r);
    }
    c.pending = c.ranks;
    c.got.resize(collector_->ranks());
    c.deadline = deadline_after(to_timeout(timeout));
    // Early unpickling only in a collect that may wait: a poll (timeout 0, as ringcast.aio's collect
    // makes after each wake-up) that finds some replies ends with TimeoutError, and what it unpickled
    // would be unpickled again by the next poll from the replies the core keeps.
    c.unpickle = unpickle && c.deadline != kPollOnly;
    if (c.unpickle) c.objects.resize(collector_->ranks());
    c.timeout_text = timeout_text(timeout);
    return c;
}

Status PyGatherCollector::attempt(Collect& c, std::chrono::nanoseconds t, detail::Gil* gil) {
    // Nothing pending: done. (Never ask the core with no ranks: it reads an empty list as every rank.)
    if (c.pending.empty()) return Status::ok;
    // The hook runs between two waits of the core collect: in a slice of the wait the GIL is released
    // (gil), so it is taken back for the unpickling and released again after it. An exception leaves
    // with the GIL held (the gil holder knows), as every exception reaches pybind11.
    const auto unpickle_with_gil = [&](std::uint32_t rank, std::span<const std::byte> reply) {
        const bool retake = gil != nullptr && !gil->held();
        if (retake) gil->acquire();
        unpickle_early(c, rank, reply);
        if (retake) gil->release();
    };
    GatherResult last = collector_->collect(c.tag, c.pending, t,
                                            c.unpickle ? GatherCollector::EarlyReply(unpickle_with_gil)
                                                       : GatherCollector::EarlyReply());
    for (std::uint32_t r = 0; r < last.replies.size(); ++r)
        if (last.replies[r]) c.got[r] = std::move(last.replies[r]);
    c.pending = std::move(last.missing);
    return last.status;
}

void PyGatherCollector::finish(Collect& c, Gil& gil) {
    // What is there is taken with the GIL held (gil.hpp, rule 1): a poll, when a look that reads no
    // clock finds something. A collect that finds nothing goes straight to its sliced wait, whose first
    // core call takes what came meanwhile: a poll that finds nothing (a whole core collect, ~0.4 us
    // for two ranks on the 2-core VM) would only delay the wait — and with it the wait's first yield,
    // which hands a CPU the executor shares with a worker to that worker (wait.hpp,
    // AdaptiveHybridStrategy).
    Status s = Status::timed_out;
    const bool polled = c.deadline == kPollOnly || c.pending.empty() || collector_->has_ready(c.tag, c.pending);
    if (polled) s = attempt(c, 0ns, &gil);  // ok at once when nothing is pending
    if (s == Status::timed_out && c.deadline != kPollOnly) {
        bool attempted = false;
        s = wait_sliced(gil, c.deadline, *collector_, [&](std::chrono::nanoseconds t) {
            attempted = true;
            return attempt(c, t, &gil);
        });
        // The deadline passed before the first slice (a timeout of a microsecond, a thread descheduled
        // since begin()): a collect still takes what is there, and says closed where a ring closed.
        if (!attempted && !polled) s = attempt(c, 0ns, &gil);
    }
    gil.acquire();
    if (s == Status::ok) return;
    GatherResult r;
    r.status = s;
    r.missing = c.pending;
    const std::string what = "collect(tag=" + std::to_string(c.tag) + ") on '" + name_ + "': " + r.describe();
    if (s == Status::timed_out) throw TimedOut{what + " (timeout " + c.timeout_text + ")"};
    if (s == Status::cancelled) throw Closed{what + " (shut down)"};
    throw Closed{what + " (those workers closed their reply rings)"};
}

namespace {

// One reply as a bytes object: what collect() returns, and what collect_objects() unpickles.
py::bytes reply_bytes(std::span<const std::byte> reply) {
    return py::bytes(reinterpret_cast<const char*>(reply.data()), static_cast<py::ssize_t>(reply.size()));
}

// The code object whose frame a signal handler runs in: a function's own; a bound method's function's;
// functools.partial's function's; a callable object's class's __call__ (looked up in the class's own
// MRO dicts: getattr on a class would find its metaclass's __call__, e.g. EnumType.__call__ for the
// signal.Handlers members that stand for SIG_DFL and SIG_IGN, and take an enum's unpickling error for
// a handler's). None for a handler that runs no Python frame (SIG_DFL, SIG_IGN, None, a builtin).
py::object handler_code(py::object handler) {
    static const py::handle partial_type = py::object(py::module_::import("functools").attr("partial")).release();
    static const py::handle default_handlers = py::object(py::module_::import("signal").attr("Handlers")).release();
    for (int unwrap = 0; unwrap < 4 && !handler.is_none(); ++unwrap) {
        if (py::isinstance(handler, default_handlers)) return py::none();
        if (py::hasattr(handler, "__code__")) return handler.attr("__code__");
        if (py::hasattr(handler, "__func__")) {
            handler = handler.attr("__func__");
        } else if (py::isinstance(handler, partial_type)) {
            handler = handler.attr("func");
        } else {
            py::object call = py::none();
            for (py::handle klass : py::type::handle_of(handler).attr("__mro__")) {
                py::object members = klass.attr("__dict__");  // a mappingproxy
                if (members.contains("__call__")) {
                    call = members["__call__"];
                    break;
                }
            }
            handler = call;
        }
    }
    return py::none();
}

// Whether a frame of a Python signal handler installed now is in `trace`: a traceback, None, or null
// (an exception raised in C, e.g. by the C unpickler, that no Python frame saw has no traceback).
// Never raises: a failure to tell counts as "no" (the exception is then the reply's failure).
bool raised_by_signal_handler(py::handle trace) {
    if (!trace || trace.is_none() || !in_main_thread()) return false;  // handlers run in the main thread only
    try {
        py::module_ signal = py::module_::import("signal");
        py::set handlers;
        for (py::handle number : signal.attr("valid_signals")()) {
            py::object handler;
            try {
                handler = signal.attr("getsignal")(number);
            } catch (py::error_already_set&) {
                continue;
            }
            if (py::object code = handler_code(handler); !code.is_none()) handlers.add(code);
        }
        for (py::handle tb = trace; !tb.is_none(); tb = tb.attr("tb_next"))
            if (handlers.contains(tb.attr("tb_frame").attr("f_code"))) return true;
    } catch (py::error_already_set&) {
    }
    return false;
}

}  // namespace

void PyGatherCollector::unpickle_early(Collect& c, std::uint32_t rank, std::span<const std::byte> reply) {
    // A failure raised before: nothing after it in `ranks` order is returned, so only earlier ranks
    // (which might fail first) are still worth unpickling.
    const auto position = [&](std::uint32_t r) { return std::find(c.ranks.begin(), c.ranks.end(), r) - c.ranks.begin(); };
    if (c.error_type && position(rank) > position(c.failed_rank)) return;
    // A signal that came during the wait: its handler runs now, and what it raises is its own, not
    // this reply's (the wait itself would have raised it at the end of its slice).
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    unpickling_in_ = PyThreadState_Get();
    struct Reset {
        PyThreadState*& in;
        ~Reset() { in = nullptr; }
    } reset{unpickling_in_};
    try {
        c.objects[rank] = loads(reply_bytes(reply));
    } catch (py::error_already_set& e) {
        // Ends the collect now, the core keeping the replies it took (a retry of the tag, or
        // result() again after Ctrl-C, gets them): KeyboardInterrupt and every other BaseException
        // that is not an Exception (SystemExit, ...), and what a signal handler raised while the
        // unpickling ran Python code (a handler's frame in the traceback: SIGALRM bounding a call).
        if (!e.matches(PyExc_Exception) || raised_by_signal_handler(e.trace())) throw;
        // Else the collect goes on, so that every reply of this tag leaves its ring (the next collect
        // starts clean, as when collect() returned and unpickling one of them raised); the failure
        // is raised in its turn by replies().
        e.restore();
        PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
        PyErr_Fetch(&type, &value, &trace);
        c.error_type = py::reinterpret_steal<py::object>(type);
        c.error_value = py::reinterpret_steal<py::object>(value);
        c.error_trace = py::reinterpret_steal<py::object>(trace);
        c.failed_rank = rank;
    }
}

void PyGatherCollector::check_not_unpickling(const char* what) const {
    if (unpickling_in_ != nullptr && unpickling_in_ == PyThreadState_Get())
        throw Failure{PyExc_RuntimeError,
                      std::string(what) + ": called while a reply of this ReplyGather's own collect is being "
                                          "unpickled (a reply's unpickling code used the ReplyGather it came "
                                          "from; replies that come while others are awaited are unpickled "
                                          "during the collect)"};
}

py::list PyGatherCollector::replies(Collect& c, bool unpickle) {
    py::list out(c.ranks.size());
    for (std::size_t i = 0; i < c.ranks.size(); ++i) {
        const std::uint32_t rank = c.ranks[i];
        if (unpickle && !c.objects.empty() && c.objects[rank]) {
            out[i] = std::move(c.objects[rank]);  // once: a rank asked for twice is unpickled twice, as before
            c.objects[rank] = py::object();
            continue;
        }
        if (unpickle && c.error_type && rank == c.failed_rank) {
            PyErr_Restore(c.error_type.release().ptr(), c.error_value.release().ptr(), c.error_trace.release().ptr());
            throw py::error_already_set();
        }
        py::bytes data = reply_bytes(*c.got[rank]);
        out[i] = unpickle ? loads(data) : py::object(std::move(data));
    }
    return out;
}

// ---- PyGatherWorker --------------------------------------------------------------------------------
PyGatherWorker::PyGatherWorker(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us,
                               double spin_max_us, double liveness_s)
    : Endpoint(liveness_from(liveness_s)), name_(name) {
    WriterOptions wo;
    wo.wait = wait_options(wait, spin_us, spin_max_us);
    wo.liveness_interval = liveness_;
    worker_ = std::make_unique<GatherWorker>(GatherWorker::attach(name, rank, wo));
    shut_text_ = "this ReplyGather was closed";
    releases_on_shutdown_ = true;  // close() from another thread closes the ring once a reply in it leaves
}

void PyGatherWorker::reply(std::uint64_t tag, py::buffer data, const std::optional<double>& timeout) {
    Busy busy(*this);
    check_usable("reply");
    PyBuf buf(data);
    reply_bytes(tag, std::span<const std::byte>(buf.data(), buf.size()), timeout);
}

void PyGatherWorker::reply_object(std::uint64_t tag, py::handle obj, const std::optional<double>& timeout) {
    stamp(Stamp::reply_enter);
    check_usable("reply");
    const py::bytes pickle = dumps_in_band(obj);
    stamp(Stamp::reply_pickled);
    Busy busy(*this);
    // `pickle` is immutable and outlives the GIL-released wait below: its bytes stay readable.
    reply_bytes(tag,
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(PyBytes_AS_STRING(pickle.ptr())),
                                           static_cast<std::size_t>(PyBytes_GET_SIZE(pickle.ptr()))),
                timeout);
    stamp(Stamp::reply_committed);
}

void PyGatherWorker::reply_bytes(std::uint64_t tag, std::span<const std::byte> bytes,
                                 const std::optional<double>& timeout) {
    try {
        reply_waiting(tag, bytes, timeout);
    } catch (const Error& e) {
        // The reply ring's only reader is the executor's collector: the core's words ("reader rank 0
        // died ...") are told in the worker's.
        if (e.code() != ErrorCode::peer_dead) throw;
        throw Error(ErrorCode::peer_dead, "reply(tag=" + std::to_string(tag) + ") as worker rank " +
                                              std::to_string(rank()) + " of gather '" + name_ +
                                              "': the executor collecting the replies died (" + e.what() + ")");
    }
}

void PyGatherWorker::reply_waiting(std::uint64_t tag, std::span<const std::byte> bytes,
                                   const std::optional<double>& timeout) {
    Gil gil;
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Status s = worker_->reply(tag, bytes, 0ns);  // probe: room now → no GIL release
    if (s == Status::timed_out && deadline != kPollOnly) {
        if (bytes.size() > worker_->max_reserve()) {
            // A fragmented reply waits in slices too (signal handlers run between them: a worker whose
            // executor stopped collecting must still see Ctrl-C), resumed where each slice stopped
            // (`progress`: its fragments stay published across slices). A reply that does not
            // complete — timed out, closed, or a handler raised — is withdrawn before this call
            // returns, as the core's one-call write withdraws it: its abort record now if there is
            // room, else first thing at the next reply, so no collect ever takes a torn reply.
            WriteProgress progress;
            const auto withdraw = [&] { (void)worker_->abort_reply(progress, 0ns); };
            try {
                s = wait_sliced(gil, deadline, *worker_,
                                [&](std::chrono::nanoseconds t) { return worker_->reply(tag, bytes, t, progress); });
            } catch (...) {
                withdraw();
                throw;
            }
            if (s != Status::ok) withdraw();
        } else {
            s = wait_sliced(gil, deadline, *worker_, [&](std::chrono::nanoseconds t) { return worker_->reply(tag, bytes, t); });
        }
    }
    gil.acquire();
    if (s == Status::timed_out) throw TimedOut{"reply(tag=" + std::to_string(tag) + ") on '" + name_ + "': timed out after " + timeout_text(timeout)};
    if (s != Status::ok) throw Closed{"reply on '" + name_ + "': shut down"};
}

void PyGatherWorker::close() {
    if (forked_child()) return;
    if (shut_.exchange(true, std::memory_order_seq_cst)) return;  // seq_cst: pairs with Busy's (gil.hpp)
    worker_->cancel();   // a reply blocked in another thread wakes and raises ClosedError
    release_when_idle();  // the close comes now, or when that reply leaves
}

// The core's close() only from the thread that replies (it is not cancel()): a reply that found room
// between our cancel and its next record would otherwise land after the close.
void PyGatherWorker::release_after_shutdown() noexcept {
    if (forked_child()) return;
    worker_->close();
}

}  // namespace ringcast::python
