// ringcast._core remote part (ZeroMQ): RemotePublisher (beside a queue's writer), RemoteReader (a reader
// rank on another machine, the same methods as Reader), RemoteReplyBridge / RemoteGatherWorker, and
// FellBehindError. Compiled always; without the C++ remote part (no ZeroMQ at build time) it only sets
// HAVE_REMOTE = False.
//
// GIL: a remote reader takes what is already received with the GIL held (no hand-off on the fast
// path); only then does it wait in the kernel (zmq_poll) with the GIL released, in slices: 50 ms in the
// main thread (Ctrl-C), the liveness interval elsewhere. The remote records carry the binding's own
// framing (framing.hpp) unchanged, so they are reassembled exactly as a local reader does.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

#include "errors.hpp"

namespace ringcast::python {
namespace {
const char* const kFellBehindDoc =
    "A remote reader missed messages: it stayed past the high-water mark (slow_reader='drop_after') or "
    "joined after messages were sent. Never silent: the reader raises this instead.";
}  // namespace
}  // namespace ringcast::python

#ifndef RINGCAST_HAVE_REMOTE
namespace ringcast::python {
void register_remote(py::module_& m) {
    m.attr("HAVE_REMOTE") = false;
    m.attr("FellBehindError") = py::handle(
        PyErr_NewExceptionWithDoc("ringcast.FellBehindError", kFellBehindDoc, detail::g_ringcast_error, nullptr));
}
}  // namespace ringcast::python
#else

#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "errors.hpp"
#include "framing.hpp"
#include "gil.hpp"
#include "ringcast/detail/process.hpp"
#include "ringcast/remote/publisher.hpp"
#include "ringcast/remote/reader.hpp"
#include "ringcast/remote/reply.hpp"

using namespace std::chrono_literals;

namespace ringcast::python {

using namespace detail;

namespace {

PyObject* g_fell_behind_error = nullptr;

std::chrono::nanoseconds seconds(double s) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// A remote endpoint's blocking call in slices, the GIL released for each: the main thread runs its
// signal handlers between slices (Ctrl-C within kSignalPollInterval; a handler's exception ends the
// call), other threads' slices last `other_slice`. `attempt(t)` waits up to t; anything but timed_out
// ends the call.
template <class Attempt>
Status sliced_wait(Gil& gil, Deadline deadline, std::chrono::nanoseconds other_slice, Attempt&& attempt) {
    const bool main = in_main_thread();
    const std::chrono::nanoseconds slice = main ? std::min(kSignalPollInterval, other_slice) : other_slice;
    for (;;) {
        const Deadline now = Clock::now();
        if (now >= deadline) return Status::timed_out;
        const Deadline until = std::min(deadline, now + slice);
        gil.release();
        const Status s = attempt(std::max(std::chrono::nanoseconds(until - now), std::chrono::nanoseconds(1)));
        if (s != Status::timed_out) return s;
        if (main) check_signals(gil);
    }
}

// Starts a publisher or a reply bridge (`start` returns it). A port another socket holds is an OSError
// with errno EADDRINUSE, as Python's own socket.bind raises (the core's already_exists is a ValueError
// everywhere else: a name that exists). Called with the GIL held (a constructor's).
template <class Start>
auto start_listener(Start&& start) {
    using Listener = decltype(start());
    try {
        return std::make_unique<Listener>(start());
    } catch (const Error& e) {
        if (e.code() != ErrorCode::already_exists) throw;
        PyErr_SetObject(PyExc_OSError, py::make_tuple(EADDRINUSE, std::string(e.what())).ptr());
        throw py::error_already_set();
    }
}

// ---- publisher -------------------------------------------------------------------------------------
class PyRemotePublisher {
public:
    PyRemotePublisher(const std::string& ring_name, std::uint32_t ring_rank, const std::string& ip, std::uint16_t port,
                      std::vector<std::uint32_t> ranks, int high_water_mark, const std::string& slow_reader,
                      double slow_reader_timeout_s, double heartbeat_s, double liveness_s,
                      const std::string& curve_secret_key, std::vector<std::string> curve_allowed_clients,
                      const std::string& wait, double spin_us, double spin_max_us) {
        remote::RemotePublisherOptions o;
        o.listen.ip = ip;
        o.listen.port = port;
        o.listen.curve_secret_key = curve_secret_key;
        o.listen.curve_allowed_clients = std::move(curve_allowed_clients);
        o.ranks = std::move(ranks);
        o.high_water_mark = high_water_mark;
        if (slow_reader == "block") {
            o.slow_reader = remote::SlowReaderPolicy::block;
        } else if (slow_reader == "drop_after") {
            o.slow_reader = remote::SlowReaderPolicy::drop_after;
        } else {
            throw Failure{PyExc_ValueError, "slow_reader must be 'block' or 'drop_after', got '" + slow_reader + "'"};
        }
        o.slow_reader_timeout = seconds(slow_reader_timeout_s);
        o.heartbeat_interval = seconds(heartbeat_s);
        o.ring.liveness_interval = liveness_from(liveness_s);
        // The publisher's thread waits on the ring like the queue's local readers (the queue passes its
        // own wait options): with the adaptive spin it is awake when the next message comes, instead of
        // paying a futex wake per message on the remote path.
        o.ring.wait = wait_options(wait, spin_us, spin_max_us);
        pub_ = start_listener([&] { return remote::RemotePublisher::start(ring_name, ring_rank, o); });
    }
    // Waits (GIL released) for every remote rank's hello; TimeoutError names the missing ones.
    void wait_ready(std::optional<double> timeout) {
        require_owner("wait_until_ready");
        const auto t = to_timeout(timeout);
        Status s;
        {
            py::gil_scoped_release release;
            s = pub_->wait_ready(t);
        }
        std::string missing;
        if (s != Status::ok)
            for (const auto r : pub_->missing_ranks()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (s == Status::timed_out)
            throw TimedOut{"wait_until_ready: remote reader rank(s) " + missing + " did not connect to " +
                           pub_->endpoint() + " within " + timeout_text(timeout)};
        // closed: stopped (the queue was shut down) before or while waiting — never reported as ready.
        if (s != Status::ok)
            throw Closed{"wait_until_ready: the remote publisher at " + pub_->endpoint() +
                         " was stopped (the queue was shut down)" +
                         (missing.empty() ? std::string("; it forwards nothing any more")
                                          : "; remote reader rank(s) " + missing + " never connected")};
    }
    bool drain(std::optional<double> timeout) {
        if (made_in_.in_forked_child()) return true;  // a forked child's copy (a finalizer): nothing of ours
        const auto t = to_timeout(timeout);
        py::gil_scoped_release release;
        return pub_->drain(t) == Status::ok;
    }
    void stop() {  // (in a forked child the core's stop() does nothing: remote/publisher.hpp)
        py::gil_scoped_release release;
        pub_->stop();
    }
    py::dict stats() const {
        const auto s = pub_->stats();
        py::dict d;
        d["forwarded"] = s.forwarded;
        d["connected_ranks"] = s.connected_ranks;
        d["lost_ranks"] = s.lost_ranks;
        d["fell_behind_ranks"] = s.fell_behind_ranks;
        d["left_ranks"] = s.left_ranks;
        d["back_pressure_waits"] = s.back_pressure_waits;
        return d;
    }
    PyRemotePublisher(const PyRemotePublisher&) = delete;
    PyRemotePublisher& operator=(const PyRemotePublisher&) = delete;
    void require_owner(const char* what) const {
        if (made_in_.in_forked_child())
            throw Failure{g_ringcast_error,
                          made_in_.copy_refusal(what, "this RemotePublisher", "Make a new one in this process")};
    }
    std::unique_ptr<remote::RemotePublisher> pub_;
    ringcast::detail::MadeInProcess made_in_;
};

// ---- reader: Reader's methods over a RemoteReader --------------------------------------------------
class PyRemoteReader : public Endpoint {
public:
    PyRemoteReader(const std::string& endpoint, std::uint32_t rank, double liveness_s, int high_water_mark,
                   const std::string& curve_server_key, const std::string& curve_public_key,
                   const std::string& curve_secret_key)
        : Endpoint(liveness_from(liveness_s)), rank_(rank), endpoint_(endpoint), curve_(!curve_server_key.empty()) {
        remote::RemoteReaderOptions o;
        o.liveness_interval = liveness_;
        o.high_water_mark = high_water_mark;
        o.security = {curve_server_key, curve_public_key, curve_secret_key};
        reader_ = std::make_unique<remote::RemoteReader>(remote::RemoteReader::connect(endpoint, rank, o));
        releases_on_shutdown_ = true;  // shutdown() says goodbye at once (release_after_shutdown)
        assembly_.set_where("remote queue at " + endpoint + ", rank " + std::to_string(rank));
    }
    // Every call takes the endpoint (Busy) before it checks it is usable: once a call holds it,
    // shutdown() leaves the goodbye to that call's way out instead of dropping the reader under it.
    void wait_ready(std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("wait_until_ready");
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        if (reader_->wait_ready(0ns) == Status::ok) return;
        const Status s = sliced(gil, deadline, [&](std::chrono::nanoseconds t) { return reader_->wait_ready(t); });
        gil.acquire();
        if (s == Status::timed_out)
            throw TimedOut{"wait_until_ready: no welcome from the remote publisher at " + reader_->endpoint() +
                           " within " + timeout_text(timeout) +
                           // a refused CURVE handshake is silent on this side (libzmq retries quietly)
                           (curve_ ? " (with CURVE: or this reader's curve_public_key is not in the writer's "
                                     "curve_allowed_clients, or the handle's server key is not the writer's)"
                                   : "")};
        if (s == Status::cancelled) throw Closed{"wait_until_ready: the queue was shut down"};
    }

    py::list recv(std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("dequeue");
        settle_raw_chunk("dequeue");
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        auto parts = receive(gil, deadline, false, timeout);
        gil.acquire();
        return to_list(std::move(parts));
    }

    std::size_t recv_many(const py::list& into, std::size_t max_n, std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("dequeue_many");
        settle_raw_chunk("dequeue_many");
        if (max_n == 0) throw Failure{PyExc_ValueError, "max_n must be >= 1"};
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        return receive_burst_into(into, gil, max_n, deadline,
                                  [&](Gil& g, Deadline d, bool drain) { return receive(g, d, drain, timeout); });
    }

    py::memoryview peek_raw(std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("acquire_read");
        settle_raw_chunk("acquire_read");
        if (assembly_.active())
            throw Failure{g_ringcast_error, "acquire_read: a message sent with enqueue() is partly received"};
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        const Message m = next_record(gil, deadline, false);
        gil.acquire();
        if (m.status != Status::ok) throw TimedOut{"acquire_read timed out after " + timeout_text(timeout)};
        if (tag_frame(m.tag) != Frame::raw)
            throw Failure{g_ringcast_error, "acquire_read: the next message was sent with enqueue() (or is what is "
                                            "left of one whose enqueue was withdrawn, which dequeue() skips); use "
                                            "dequeue()"};
        py::memoryview view = raw_chunk_.open(const_cast<std::byte*>(m.bytes.data()), m.bytes.size(), true);
        raw_peeked_ = true;
        return view;
    }
    // As PyReader's: a view of the chunk still alive keeps it (the frame stays the reader's), and
    // every read raises RingcastError until that view is gone.
    void release_raw() {
        Busy busy(*this);
        if (raw_peeked_ && raw_chunk_.viewed() && !forked_child())
            raw_chunk_.keep_read_chunk(py::cast(this), shut_.load(std::memory_order_acquire));
        raw_chunk_.forget();
        release_left_to_the_chunk(raw_peeked_);  // (the frame a view showed belongs to the reader's state)
        check_usable("acquire_read");
        if (!raw_peeked_) throw Failure{g_ringcast_error, "release without acquire_read"};
        raw_peeked_ = false;
        reader_->release();
    }
    // A remote reader learns of a dead writer from its publisher or from silence: nothing to probe.
    void check_writer_alive() { check_usable("wait_until_ready"); }
    void check_open(const std::string& what) const { check_usable(what.c_str()); }  // as PyReader's
    void shutdown() {
        if (forked_child()) return;
        if (shut_.exchange(true, std::memory_order_seq_cst)) return;
        // reader_ is still here: a call leaving in another thread could release it (Busy's destructor
        // sees shut_) only with the GIL, which this call holds from the exchange through cancel().
        reader_->cancel();    // a call blocked in another thread wakes and raises ClosedError
        release_when_idle();  // goodbye now, or when that call leaves
    }
    std::uint32_t rank() const { return rank_; }
    bool holds_raw_chunk() const { return raw_peeked_ && !forked_child(); }  // as PyReader's
    const std::string& endpoint() const { return endpoint_; }

private:
    // The goodbye: the publisher stops sending to this rank and no longer counts it (a writer held
    // back by it goes on). Destroying the RemoteReader sends it and closes the socket, waiting up to
    // its linger (500 ms) for the frame to leave: without the GIL. The endpoint is held meanwhile
    // (release_when_idle or the call's Busy): no other call of this object runs; rank() and
    // endpoint() answer from copies. Not while an acquire_read view shows a frame of the reader's.
    void release_after_shutdown() noexcept override {
        if (raw_peeked_ || !reader_ || forked_child()) return;
        std::unique_ptr<remote::RemoteReader> leaving = std::move(reader_);
        PyThreadState* thread = PyEval_SaveThread();
        leaving.reset();
        PyEval_RestoreThread(thread);
    }

    template <class Attempt>
    Status sliced(Gil& gil, Deadline deadline, Attempt&& attempt) {
        return sliced_wait(gil, deadline, liveness_, std::forward<Attempt>(attempt));
    }

    Message next_record(Gil& gil, Deadline deadline, bool probe_only) {
        Message m = reader_->peek(0ns);  // what already arrived: taken with the GIL held
        if (m.status == Status::timed_out && !probe_only && Clock::now() < deadline)
            m.status = sliced(gil, deadline, [&](std::chrono::nanoseconds t) {
                m = reader_->peek(t);
                return m.status;
            });
        if (m.status == Status::closed) {
            gil.acquire();
            assembly_.drop();
            throw Closed{"dequeue: the writer shut the queue down and every message has been read"};
        }
        if (m.status == Status::cancelled) {
            gil.acquire();
            throw Closed{"dequeue: the queue was shut down"};
        }
        return m;
    }

    std::vector<py::object> receive(Gil& gil, Deadline deadline, bool drain, const std::optional<double>& timeout) {
        return receive_framed(
            gil, assembly_, drain, timeout, [&](bool probe_only) { return next_record(gil, deadline, probe_only); },
            [&] { reader_->release(); });
    }

    const std::uint32_t rank_;
    const std::string endpoint_;
    const bool curve_;  // a CURVE reader: a missing welcome may also be a refused key
    std::unique_ptr<remote::RemoteReader> reader_;  // null once shut down and gone (the goodbye)
    Reassembly assembly_;
    bool raw_peeked_ = false;
    RawChunk raw_chunk_;  // the chunk of the last acquire_read (kept while a view outlives its block)

    void settle_raw_chunk(const char* what) {  // as PyReader's
        raw_chunk_.refuse_if_read_block_open(raw_peeked_, what);
        if (!raw_chunk_.settle_kept_read_chunk(what)) return;
        raw_peeked_ = false;
        reader_->release();
    }
};

// ---- replies ---------------------------------------------------------------------------------------
class PyRemoteReplyBridge {
public:
    PyRemoteReplyBridge(const std::string& gather_name, const std::string& ip, std::uint16_t port,
                        std::vector<std::uint32_t> ranks, double heartbeat_s, const std::string& curve_secret_key,
                        std::vector<std::string> curve_allowed_clients) {
        remote::RemoteReplyOptions o;
        o.listen.ip = ip;
        o.listen.port = port;
        o.listen.curve_secret_key = curve_secret_key;
        o.listen.curve_allowed_clients = std::move(curve_allowed_clients);
        o.ranks = std::move(ranks);
        o.heartbeat_interval = seconds(heartbeat_s);
        bridge_ = start_listener([&] { return remote::RemoteReplyBridge::start(gather_name, o); });
    }
    void wait_ready(std::optional<double> timeout) {
        const auto t = to_timeout(timeout);
        Status s;
        {
            py::gil_scoped_release release;
            s = bridge_->wait_ready(t);
        }
        std::string missing;
        if (s != Status::ok)
            for (const auto r : bridge_->missing_ranks()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (s == Status::timed_out)
            throw TimedOut{"wait_until_ready: remote worker rank(s) " + missing + " did not connect to " +
                           bridge_->endpoint() + " within " + timeout_text(timeout)};
        // closed: the bridge was stopped (the gather was closed) before or while waiting: not ready.
        if (s != Status::ok)
            throw Closed{"wait_until_ready: the reply bridge at " + bridge_->endpoint() +
                         " was stopped (the gather was closed)" +
                         (missing.empty() ? std::string("; it takes no replies any more")
                                          : "; remote worker rank(s) " + missing + " never connected")};
    }
    void stop() {  // (in a forked child the core's stop() does nothing: remote/reply.hpp)
        py::gil_scoped_release release;
        bridge_->stop();
    }
    PyRemoteReplyBridge(const PyRemoteReplyBridge&) = delete;
    PyRemoteReplyBridge& operator=(const PyRemoteReplyBridge&) = delete;
    std::unique_ptr<remote::RemoteReplyBridge> bridge_;
};

// One thread at a time (Endpoint's Busy, as every other endpoint): the worker's ZeroMQ socket is not
// thread-safe, and reply() drops the GIL, so two threads in it would use the socket at once — which
// loses replies without an error. A second thread's call raises RuntimeError instead.
class PyRemoteGatherWorker : public Endpoint {
public:
    PyRemoteGatherWorker(const std::string& endpoint, std::uint32_t rank, double liveness_s,
                         const std::string& curve_server_key)
        : Endpoint(liveness_from(liveness_s)), rank_(rank) {
        remote::RemoteWorkerOptions o;
        o.liveness_interval = liveness_;
        o.security.curve_server_key = curve_server_key;
        worker_ = std::make_unique<remote::RemoteGatherWorker>(remote::RemoteGatherWorker::connect(endpoint, rank, o));
    }
    // Both wait in slices (sliced_wait): Ctrl-C and the main thread's signal handlers are honoured.
    void wait_ready(std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("wait_until_ready");  // (a forked child's copy: RingcastError, as every endpoint's)
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Status s;
        {
            Gil gil;
            s = sliced_wait(gil, deadline, liveness_, [&](std::chrono::nanoseconds t) { return worker_->wait_ready(t); });
        }
        if (s == Status::closed) throw Closed{"wait_ready: this remote worker was closed"};
        if (s != Status::ok) throw TimedOut{"remote gather worker: no welcome from the reply bridge within " + timeout_text(timeout)};
    }
    void reply(std::uint64_t tag, const py::buffer& data, std::optional<double> timeout) {
        Busy busy(*this);
        check_usable("reply");
        const Deadline deadline = deadline_after(to_timeout(timeout));
        PyBuf buf(data);
        Status s;
        {
            Gil gil;
            s = sliced_wait(gil, deadline, liveness_,
                            [&](std::chrono::nanoseconds t) { return worker_->reply(tag, {buf.data(), buf.size()}, t); });
        }
        if (s == Status::closed) throw Closed{"reply(tag=" + std::to_string(tag) + "): this remote worker was closed"};
        if (s != Status::ok)
            throw TimedOut{"reply(tag=" + std::to_string(tag) + ") timed out after " + timeout_text(timeout) +
                           ", waiting for " + worker_->blocked_on()};
    }
    void check_liveness() {
        Busy busy(*this);
        check_usable("check_liveness");
        py::gil_scoped_release release;  // only a non-blocking poll of the socket, but it takes the lock of libzmq
        worker_->check_liveness();
    }
    void close() {
        if (forked_child()) return;
        Busy busy(*this);  // close() sends the bye on the same socket
        worker_->close();
    }
    ~PyRemoteGatherWorker() override {
        // (A forked child's copy lets go of the parent's socket itself: let_go_in_forked_child.)
        // Its close flushes what is queued (the replies, the bye) for up to the linger, 2 s: without
        // the GIL, as a remote reader's goodbye (the process's other threads run meanwhile).
        std::unique_ptr<remote::RemoteGatherWorker> leaving = std::move(worker_);
        PyThreadState* thread = PyEval_SaveThread();
        leaving.reset();
        PyEval_RestoreThread(thread);
    }
    PyRemoteGatherWorker(const PyRemoteGatherWorker&) = delete;
    PyRemoteGatherWorker& operator=(const PyRemoteGatherWorker&) = delete;
    std::uint32_t rank_;
    std::unique_ptr<remote::RemoteGatherWorker> worker_;
};

void translate_fell_behind(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::fell_behind) throw;
        PyErr_SetString(g_fell_behind_error, e.what());
    }
}

}  // namespace

void register_remote(py::module_& m) {
    m.attr("HAVE_REMOTE") = true;
    g_fell_behind_error = PyErr_NewExceptionWithDoc("ringcast.FellBehindError", kFellBehindDoc, g_ringcast_error, nullptr);
    m.attr("FellBehindError") = py::handle(g_fell_behind_error);
    py::register_exception_translator(&translate_fell_behind);  // tried before register_exceptions' one

    m.def("curve_keypair", [] {
        const auto k = remote::curve_keypair();
        return py::make_tuple(k.public_key, k.secret_key);
    }, "curve_keypair() -> (public_key, secret_key): a fresh CURVE keypair (Z85 text).");

    py::class_<PyRemotePublisher>(m, "RemotePublisher",
                                  "Forwards a queue's messages to remote readers (a ring reader rank of its own).")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, std::uint16_t, std::vector<std::uint32_t>,
                      int, const std::string&, double, double, double, const std::string&, std::vector<std::string>,
                      const std::string&, double, double>(),
             py::arg("ring_name"), py::arg("ring_rank"), py::arg("ip"), py::arg("port"), py::arg("ranks"),
             py::arg("high_water_mark") = 16, py::arg("slow_reader") = "block", py::arg("slow_reader_timeout_s") = 5.0,
             py::arg("heartbeat_s") = 0.2, py::arg("liveness_s") = 1.0, py::arg("curve_secret_key") = "",
             py::arg("curve_allowed_clients") = std::vector<std::string>{}, py::arg("wait") = "hybrid",
             py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 2000.0,
             "Attaches to queue `ring_name` as reader rank `ring_rank`, binds tcp://ip:port (a literal address;\n"
             "port 0: ephemeral) and starts forwarding once every rank in `ranks` said hello (or drain() gave\n"
             "the missing ones up). slow_reader:\n"
             "'block' (bounded back-pressure) or 'drop_after' (cut off after slow_reader_timeout_s at the\n"
             "high-water mark: FellBehindError on that reader). Raises ValueError for a bad address, key or\n"
             "rank, or a port in use. wait / spin_us / spin_max_us: how its thread waits on the ring (as a Reader's).")
        .def_property_readonly("endpoint", [](const PyRemotePublisher& p) { return p.pub_->endpoint(); },
                               "The endpoint remote readers connect to, with the real port.")
        .def_property_readonly("curve_public_key", [](const PyRemotePublisher& p) { return p.pub_->curve_public_key(); },
                               "The CURVE public key readers need ('' without CURVE).")
        .def("wait_ready", &PyRemotePublisher::wait_ready, py::arg("timeout") = py::none(),
             "Waits (GIL released) until every remote rank connected. Raises TimeoutError naming the missing ones,\n"
             "ClosedError once the publisher was stopped (before or during the wait; naming the ranks that never\n"
             "connected): a stopped publisher is never reported ready.")
        .def("missing_ranks", [](const PyRemotePublisher& p) { return p.pub_->missing_ranks(); },
             "The expected remote ranks that have not connected yet.")
        .def("stats", &PyRemotePublisher::stats,
             "dict: forwarded, connected_ranks, lost_ranks, fell_behind_ranks, left_ranks, back_pressure_waits.")
        .def("drain", &PyRemotePublisher::drain, py::arg("timeout") = py::none(),
             "After the queue closed: waits until everything and the close were handed to ZeroMQ. False on timeout.\n"
             "Ranks that never connected are waited for at most min(1 s, timeout / 2) (not at all if nothing\n"
             "was written); the connected ones then get everything and the close.")
        .def("stop", &PyRemotePublisher::stop,
             "Stops forwarding (readers that have not seen the close get PeerDeadError); idempotent.");

    py::class_<PyRemoteReader>(m, "RemoteReader", "A reader rank on another machine: Reader's methods over ZeroMQ.")
        .def(py::init<const std::string&, std::uint32_t, double, int, const std::string&, const std::string&,
                      const std::string&>(),
             py::arg("endpoint"), py::arg("rank"), py::arg("liveness_s") = 1.0, py::arg("high_water_mark") = 16,
             py::arg("curve_server_key") = "", py::arg("curve_public_key") = "", py::arg("curve_secret_key") = "",
             "Connects as remote rank `rank` to a RemotePublisher's endpoint (in the background). liveness_s:\n"
             "the publisher's silence this long while waiting is PeerDeadError. CURVE: the publisher's public\n"
             "key, and this reader's keypair (a fresh one if empty).")
        .def("wait_ready", &PyRemoteReader::wait_ready, py::arg("timeout") = py::none(),
             "The handshake: waits for the publisher's welcome. TimeoutError names the endpoint.")
        .def("recv", &PyRemoteReader::recv, py::arg("timeout") = py::none(),
             "The parts of the next message. TimeoutError, ClosedError, PeerDeadError, FellBehindError.")
        .def("recv_many", &PyRemoteReader::recv_many, py::arg("into"), py::arg("max_n"), py::arg("timeout") = py::none(),
             "Up to max_n messages: waits for the first, then takes what already arrived; each is appended to\n"
             "`into` as (False, parts) as it is taken. Returns how many.")
        .def("peek_raw", &PyRemoteReader::peek_raw, py::arg("timeout") = py::none(),
             "A read-only view of the next acquire_write() chunk, valid until release_raw().")
        .def("release_raw", &PyRemoteReader::release_raw, "Releases the chunk of peek_raw().")
        .def("check_open", &PyRemoteReader::check_open, py::arg("what"), "As Reader.check_open.")
        .def("check_writer_alive", &PyRemoteReader::check_writer_alive,
             "No probe over the network: a dead writer shows as PeerDeadError from recv.")
        .def("shutdown", &PyRemoteReader::shutdown,
             "Says goodbye to the publisher (it stops sending to this rank and no longer waits for it):\n"
             "at once, or as a call blocked in another thread leaves (it wakes with ClosedError), or at\n"
             "the release of an acquire_read chunk still open. Later calls raise ClosedError.")
        .def_property_readonly("rank", &PyRemoteReader::rank, "This reader's remote rank.")
        .def_property_readonly("holds_raw_chunk", &PyRemoteReader::holds_raw_chunk,
                               "True while a peek_raw() chunk is not released (False in a forked child).")
        .def_property_readonly("endpoint", &PyRemoteReader::endpoint, "The publisher's endpoint.");

    py::class_<PyRemoteReplyBridge>(m, "RemoteReplyBridge",
                                    "Writes replies that arrive over ZeroMQ into a gather's reply rings.")
        .def(py::init<const std::string&, const std::string&, std::uint16_t, std::vector<std::uint32_t>, double,
                      const std::string&, std::vector<std::string>>(),
             py::arg("gather_name"), py::arg("ip"), py::arg("port"), py::arg("ranks"), py::arg("heartbeat_s") = 0.2,
             py::arg("curve_secret_key") = "", py::arg("curve_allowed_clients") = std::vector<std::string>{},
             "Becomes the writer of the reply rings of `ranks` of gather `gather_name` and binds tcp://ip:port:\n"
             "replies from RemoteGatherWorker processes land in those rings (one collect over all ranks).")
        .def_property_readonly("endpoint", [](const PyRemoteReplyBridge& b) { return b.bridge_->endpoint(); },
                               "The endpoint remote workers connect to.")
        .def_property_readonly("curve_public_key", [](const PyRemoteReplyBridge& b) { return b.bridge_->curve_public_key(); },
                               "The CURVE public key workers need ('' without CURVE).")
        .def("wait_ready", &PyRemoteReplyBridge::wait_ready, py::arg("timeout") = py::none(),
             "Waits until every remote worker rank connected; TimeoutError names the missing ones, ClosedError\n"
             "says the bridge was stopped (before or during the wait).")
        .def("lost_ranks", [](const PyRemoteReplyBridge& b) { return b.bridge_->lost_ranks(); },
             "Ranks whose connection was lost (their reply rings were closed).")
        .def("left_ranks", [](const PyRemoteReplyBridge& b) { return b.bridge_->left_ranks(); },
             "Ranks whose worker closed cleanly (said bye; their reply rings were closed).")
        .def("missing_ranks", [](const PyRemoteReplyBridge& b) { return b.bridge_->missing_ranks(); },
             "The remote worker ranks that never connected.")
        .def("replies", [](const PyRemoteReplyBridge& b) { return b.bridge_->replies(); },
             "How many remote replies were written into the reply rings.")
        .def("stop", &PyRemoteReplyBridge::stop, "Stops the bridge and closes the remote ranks' reply rings.");

    py::class_<PyRemoteGatherWorker>(m, "RemoteGatherWorker", "A gather worker rank on another machine.")
        .def(py::init<const std::string&, std::uint32_t, double, const std::string&>(), py::arg("endpoint"),
             py::arg("rank"), py::arg("liveness_s") = 1.0, py::arg("curve_server_key") = "",
             "Connects worker rank `rank` to a RemoteReplyBridge's endpoint.")
        .def("wait_ready", &PyRemoteGatherWorker::wait_ready, py::arg("timeout") = py::none(),
             "Waits for the bridge's welcome; TimeoutError otherwise.")
        .def("reply", &PyRemoteGatherWorker::reply, py::arg("tag"), py::arg("data"), py::arg("timeout") = py::none(),
             "Sends one reply (raw bytes) for request `tag`: waits for the bridge's welcome, and while 16 of its\n"
             "replies are not yet written into its reply ring (the bridge's credit). TimeoutError, PeerDeadError\n"
             "(bridge silent), ClosedError (after close()), ValueError (the rank is held by another live worker).")
        .def("check_liveness", &PyRemoteGatherWorker::check_liveness,
             "Raises PeerDeadError when the bridge has been silent for the liveness interval.")
        .def("close", &PyRemoteGatherWorker::close,
             "Clean detach (bye): a collect waiting for this rank raises ClosedError. Idempotent.")
        .def_property_readonly("rank", [](const PyRemoteGatherWorker& w) { return w.rank_; }, "This worker's rank.");
}

}  // namespace ringcast::python

#endif  // RINGCAST_HAVE_REMOTE
