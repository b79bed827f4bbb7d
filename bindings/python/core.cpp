// ringcast._core — the C++ half of the Python binding (the package `ringcast` sits on top).
//
// GIL rules, kept by every blocking call below:
//  * Ready data (or free space) is probed first with a zero timeout while the GIL is held: the fast path
//    never drops and re-takes the GIL (re-taking it can cost a whole 5 ms switch interval when the main
//    thread is busy in Python).
//  * Only then is the GIL released for the wait. The wait runs in bounded slices: in the main thread
//    50 ms, after which the GIL is re-taken just long enough for PyErr_CheckSignals (Ctrl-C interrupts a
//    blocked call within ~50 ms: the core's futex loop swallows EINTR, so a signal alone cannot end
//    the wait); in other threads the liveness interval (signals are only handled in the main thread).
//  * Copies of large payloads (>= kNoGilCopy) run without the GIL; a message that spans several ring
//    records is received and sent entirely inside one GIL-released region, re-taking the GIL only to
//    allocate its destination objects and to check signals.
//
// Wire format (this binding's own framing, inside core ring records of <= Writer::max_reserve() bytes):
//   record tag = (message sequence << 8) | kind, kind in Frame below;
//   logical stream of one message = u32 magic | u32 nparts | u64 length[nparts] | part 0 | part 1 | ...
//   (bit 63 of a length: the part was a `bytes` object and is rebuilt as one; otherwise as a bytearray)
//   A message that fits one record is `whole`; a longer one is `first` (holds the whole stream header),
//   `middle`*, `last`. The writer never builds the stream in memory: it copies header and parts straight
//   into the reserved records (no intermediate concatenation), and the reader copies each record
//   straight into the final Python objects (part 0: bytes, others: bytearray). The binding does its own
//   fragmentation instead of the core's Writer::write() fragments because a timed-out core write() of a
//   fragmented message withdraws the whole message, so bounded wait slices would restart it forever,
//   and because core fragments are reassembled into the reader's buffer (a second copy).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>

#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;
using namespace std::chrono_literals;

namespace ringcast::python {
namespace {

// ---- exceptions ------------------------------------------------------------------------------------
PyObject* g_ringcast_error = nullptr;   // ringcast.RingcastError(Exception)
PyObject* g_closed_error = nullptr;     // ringcast.ClosedError(RingcastError)
PyObject* g_peer_dead_error = nullptr;  // ringcast.PeerDeadError(RingcastError)
PyObject* g_stale_reply_error = nullptr;  // ringcast.StaleReplyError(RingcastError)

struct TimedOut {
    std::string what;
};
struct Closed {
    std::string what;
};
struct Failure {  // a binding-level failure that is not a core Error (corrupt framing, misuse)
    PyObject* type;
    std::string what;
};

void translate(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const TimedOut& e) {
        PyErr_SetString(PyExc_TimeoutError, e.what.c_str());
    } catch (const Closed& e) {
        PyErr_SetString(g_closed_error, e.what.c_str());
    } catch (const Failure& e) {
        PyErr_SetString(e.type, e.what.c_str());
    } catch (const Error& e) {
        PyObject* type = g_ringcast_error;
        switch (e.code()) {
            case ErrorCode::peer_dead: type = g_peer_dead_error; break;
            case ErrorCode::invalid_argument:
            case ErrorCode::not_found:
            case ErrorCode::already_exists:
            case ErrorCode::not_ringcast:
            case ErrorCode::version_mismatch:
            case ErrorCode::rank_in_use:
            case ErrorCode::rank_left:
            case ErrorCode::writer_in_use:
            case ErrorCode::message_too_large: type = PyExc_ValueError; break;
            case ErrorCode::permission_denied: type = PyExc_PermissionError; break;
            case ErrorCode::system: type = PyExc_OSError; break;
            case ErrorCode::no_space: type = PyExc_MemoryError; break;
            case ErrorCode::stale_reply: type = g_stale_reply_error; break;
            case ErrorCode::corrupt:
            case ErrorCode::protocol: type = g_ringcast_error; break;
        }
        PyErr_SetString(type, e.what());
    }
}

// ---- the deterministic GIL probe (tests) -----------------------------------------------------------
// WaitOptions::before_sleep runs in the waiting thread right before the kernel wait: it records whether
// that thread holds the GIL at that moment. PyGILState_Check is safe to call without the GIL.
std::atomic<std::uint64_t> g_sleeps{0};
std::atomic<std::uint64_t> g_sleeps_holding_gil{0};
// Test-only negative control: false keeps the GIL during waits, so the probe is shown to detect it.
std::atomic<bool> g_release_gil{true};

void gil_probe(void*) {
    g_sleeps.fetch_add(1, std::memory_order_relaxed);
    if (PyGILState_Check()) g_sleeps_holding_gil.fetch_add(1, std::memory_order_relaxed);
}

unsigned long g_main_thread_ident = 0;

constexpr std::chrono::nanoseconds kMainThreadSlice = 50ms;  // Ctrl-C latency bound (bound: 100 ms)
constexpr std::size_t kNoGilCopy = 256 * 1024;  // smaller copies take less than a GIL hand-off costs
constexpr std::uint32_t kFrameMagic = 0x59504352u;  // "RCPY"
constexpr std::uint32_t kMaxParts = 4096;
constexpr std::uint64_t kPartIsBytes = 1ULL << 63;

enum class Frame : std::uint64_t { whole = 1, first = 2, middle = 3, last = 4, abort = 5, raw = 6 };
constexpr std::uint64_t make_tag(std::uint64_t seq, Frame f) { return (seq << 8) | static_cast<std::uint64_t>(f); }
constexpr Frame tag_frame(std::uint64_t tag) { return static_cast<Frame>(tag & 0xff); }
constexpr std::uint64_t tag_seq(std::uint64_t tag) { return tag >> 8; }

// Holds or has released the GIL; re-takes it when destroyed (so exceptions reach pybind11 with it).
class Gil {
public:
    Gil() = default;
    Gil(const Gil&) = delete;
    Gil& operator=(const Gil&) = delete;
    ~Gil() { acquire(); }
    void release() {
        if (saved_ == nullptr && g_release_gil.load(std::memory_order_relaxed)) saved_ = PyEval_SaveThread();
    }
    void acquire() {
        if (saved_ != nullptr) {
            PyEval_RestoreThread(saved_);
            saved_ = nullptr;
        }
    }
    [[nodiscard]] bool held() const { return saved_ == nullptr; }

private:
    PyThreadState* saved_ = nullptr;
};

// A copy that drops the GIL when it is large (and we hold it).
void copy_bytes(Gil& gil, void* dst, const void* src, std::size_t n) {
    if (n >= kNoGilCopy && gil.held()) {
        gil.release();
        std::memcpy(dst, src, n);
        gil.acquire();
    } else if (n != 0) {
        std::memcpy(dst, src, n);
    }
}

std::chrono::nanoseconds to_timeout(const std::optional<double>& seconds) {
    if (!seconds) return kForever;
    if (!(*seconds >= 0.0)) throw Failure{PyExc_ValueError, "timeout must be None or >= 0 seconds"};
    if (*seconds >= 1e9) return kForever;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(*seconds * 1e9));
}

std::string timeout_text(const std::optional<double>& seconds) {
    return seconds ? std::to_string(*seconds) + " s" : std::string("forever");
}

WaitKind parse_wait(const std::string& s) {
    if (s == "hybrid") return WaitKind::hybrid;
    if (s == "futex") return WaitKind::futex;
    if (s == "spin") return WaitKind::spin;
    if (s == "spin_yield") return WaitKind::spin_yield;
    throw Failure{PyExc_ValueError, "wait must be 'hybrid', 'futex', 'spin' or 'spin_yield', got '" + s + "'"};
}

bool in_main_thread() { return PyThread_get_thread_ident() == g_main_thread_ident; }

// ---- common endpoint machinery ---------------------------------------------------------------------
class Endpoint {
public:
    explicit Endpoint(std::chrono::nanoseconds liveness) : liveness_(liveness), owner_pid_(::getpid()) {}

protected:
    // One thread at a time per endpoint (the core's rule); a second one is told so instead of
    // corrupting the cursor state. shutdown() is exempt: it only sets atomics and wakes.
    class Busy {
    public:
        explicit Busy(Endpoint& e) : e_(e) {
            if (e_.busy_.exchange(true, std::memory_order_acquire))
                throw Failure{PyExc_RuntimeError,
                              "this ringcast endpoint is already in use by another thread; use one "
                              "MessageQueue per thread"};
        }
        ~Busy() { e_.busy_.store(false, std::memory_order_release); }
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;

    private:
        Endpoint& e_;
    };

    void check_usable(const char* what) const {
        if (::getpid() != owner_pid_)
            throw Failure{g_ringcast_error, std::string(what) + ": this endpoint was created by pid " +
                                                std::to_string(owner_pid_) + " and inherited through fork; "
                                                "create a new one from the Handle in this process"};
        if (shut_.load(std::memory_order_acquire)) throw Closed{std::string(what) + ": the queue was shut down"};
    }
    [[nodiscard]] bool forked_child() const { return ::getpid() != owner_pid_; }

    // Repeats attempt(slice) (a core call with a timeout, returning Status) until it returns anything
    // but timed_out or the deadline passes. Slices: see the file comment. `liveness()` runs every
    // liveness interval without the GIL and may throw PeerDead.
    template <class Core, class Attempt, class Liveness>
    Status wait_sliced(Gil& gil, Deadline deadline, Core& core, Attempt&& attempt, Liveness&& liveness) {
        const bool main = in_main_thread();
        const std::chrono::nanoseconds slice = main ? std::min(kMainThreadSlice, liveness_) : liveness_;
        // A hybrid wait spins only in the first slice: the later slices resume the same wait, and
        // spinning again at every slice boundary would cost CPU while idle (2 ms per 50 ms = 4 %).
        struct RestoreWait {
            Core& core;
            WaitOptions original;
            ~RestoreWait() { core.set_wait(original); }
        } restore{core, core.wait_options()};
        Deadline next_live = Clock::now() + liveness_;
        for (bool first = true;; first = false) {
            Deadline now = Clock::now();
            if (now >= deadline) return Status::timed_out;
            Deadline until = std::min({deadline, now + slice, next_live});
            gil.release();
            if (!first && restore.original.kind == WaitKind::hybrid) {
                WaitOptions sleep_only = restore.original;
                sleep_only.kind = WaitKind::futex;
                core.set_wait(sleep_only);
            }
            const Status s = attempt(std::max(std::chrono::nanoseconds(until - now), std::chrono::nanoseconds(1)));
            if (s != Status::timed_out) return s;
            now = Clock::now();
            if (now >= next_live) {
                liveness();
                next_live = now + liveness_;
            }
            if (main) {
                gil.acquire();
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            }
        }
    }

    std::chrono::nanoseconds liveness_;
    pid_t owner_pid_;
    std::atomic<bool> busy_{false};
    std::atomic<bool> shut_{false};
};

WaitOptions wait_options(const std::string& wait, double spin_us, double spin_max_us) {
    if (!(spin_us >= 0.0) || !(spin_max_us >= 0.0))
        throw Failure{PyExc_ValueError, "spin_us and spin_max_us must be >= 0"};
    WaitOptions w;
    w.kind = parse_wait(wait);
    w.spin_for = std::chrono::nanoseconds(static_cast<std::int64_t>(spin_us * 1000.0));
    w.spin_max = std::chrono::nanoseconds(static_cast<std::int64_t>(spin_max_us * 1000.0));
    w.before_sleep = {&gil_probe, nullptr};
    return w;
}

std::chrono::nanoseconds liveness_from(double seconds) {
    if (!(seconds > 0.0)) throw Failure{PyExc_ValueError, "liveness interval must be > 0 seconds"};
    return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

// A buffer exported by a Python object, released (with the GIL) when destroyed.
class PyBuf {
public:
    explicit PyBuf(py::handle obj) {
        if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
    }
    ~PyBuf() { PyBuffer_Release(&view_); }
    PyBuf(const PyBuf&) = delete;
    PyBuf& operator=(const PyBuf&) = delete;
    [[nodiscard]] const std::byte* data() const { return static_cast<const std::byte*>(view_.buf); }
    [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(view_.len); }

private:
    Py_buffer view_{};
};

// ====================================================================================================
class PyWriter : public Endpoint {
public:
    PyWriter(const std::string& name, std::uint32_t readers, std::uint64_t capacity, std::uint32_t mode,
             const std::string& wait, double spin_us, double spin_max_us, double liveness_s)
        : Endpoint(liveness_from(liveness_s)) {
        SegmentOptions so;
        so.readers = readers;
        so.capacity = capacity;
        so.mode = static_cast<mode_t>(mode);
        WriterOptions wo;
        wo.wait = wait_options(wait, spin_us, spin_max_us);
        // The binding waits in slices shorter than the interval, so it runs the liveness check itself
        // (check_readers); the core's own check would never fire inside a slice.
        wo.liveness_interval = std::chrono::hours(24);
        wo.unlink_on_destroy = true;
        writer_ = std::make_unique<Writer>(Writer::create(name, so, wo));
        name_ = name;
    }

    ~PyWriter() {
        // A forked child inherits this object but is not the writer: closing or unlinking from it would
        // end the parent's queue. Leak the core object (its mapping dies with the child).
        if (forked_child()) (void)writer_.release();
    }

    PyWriter(const PyWriter&) = delete;
    PyWriter& operator=(const PyWriter&) = delete;

    // One message made of `parts` (buffer objects). Each part is copied straight into the ring.
    void send(const py::sequence& parts, std::optional<double> timeout) {
        check_usable("enqueue");
        Busy busy(*this);
        const std::size_t nparts = py::len(parts);
        if (nparts == 0 || nparts > max_parts())
            throw Failure{PyExc_ValueError, "a message has 1.." + std::to_string(max_parts()) + " parts, got " +
                                                std::to_string(nparts)};
        std::vector<std::unique_ptr<PyBuf>> bufs;
        std::vector<bool> is_bytes;
        bufs.reserve(nparts);
        for (auto item : parts) {
            bufs.push_back(std::make_unique<PyBuf>(item));
            is_bytes.push_back(PyBytes_CheckExact(item.ptr()) != 0);
        }

        // Stream header.
        std::vector<std::byte> header(8 + 8 * nparts);
        const std::uint32_t magic = kFrameMagic, n32 = static_cast<std::uint32_t>(nparts);
        std::memcpy(header.data(), &magic, 4);
        std::memcpy(header.data() + 4, &n32, 4);
        std::uint64_t total = header.size();
        for (std::size_t i = 0; i < nparts; ++i) {
            const std::uint64_t len = bufs[i]->size();
            const std::uint64_t word = len | (is_bytes[i] ? kPartIsBytes : 0);
            std::memcpy(header.data() + 8 + 8 * i, &word, 8);
            total += len;
        }
        // The sources, in stream order.
        std::vector<std::pair<const std::byte*, std::size_t>> src;
        src.reserve(nparts + 1);
        src.emplace_back(header.data(), header.size());
        for (auto& b : bufs) src.emplace_back(b->data(), b->size());

        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        if (broken_) finish_broken_stream(gil, deadline, timeout);
        const std::uint64_t seq = ++seq_;
        const std::size_t max_rec = writer_->max_reserve();
        std::size_t si = 0, soff = 0;  // source cursor
        std::uint64_t sent = 0;
        bool first = true;
        try {
            while (sent < total) {
                const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(total - sent, max_rec));
                std::span<std::byte> dst = reserve(gil, chunk, deadline, timeout);
                std::size_t doff = 0;
                while (doff < chunk) {
                    const std::size_t n = std::min(chunk - doff, src[si].second - soff);
                    copy_bytes(gil, dst.data() + doff, src[si].first + soff, n);
                    doff += n;
                    soff += n;
                    if (soff == src[si].second) {
                        ++si;
                        soff = 0;
                    }
                }
                // Skip empty parts so the cursor never points at an exhausted source.
                while (si < src.size() && src[si].second == 0) ++si;
                sent += chunk;
                const Frame f = first ? (sent == total ? Frame::whole : Frame::first)
                                      : (sent == total ? Frame::last : Frame::middle);
                writer_->commit(chunk, make_tag(seq, f));
                first = false;
            }
        } catch (...) {
            // Records of this message are out: readers must be told to drop them before the next one.
            if (!first) broken_ = true;
            throw;
        }
        gil.acquire();
        bufs.clear();  // PyBuffer_Release needs the GIL
    }

    // acquire_write: a span of `size` bytes in the ring, published by commit_raw().
    py::memoryview reserve_raw(std::size_t size, std::optional<double> timeout) {
        check_usable("acquire_write");
        Busy busy(*this);
        if (size > writer_->max_reserve())
            throw Failure{PyExc_ValueError, "acquire_write of " + std::to_string(size) +
                                                " bytes exceeds the largest record of this ring (" +
                                                std::to_string(writer_->max_reserve()) + " bytes)"};
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        if (broken_) finish_broken_stream(gil, deadline, timeout);
        std::span<std::byte> dst = reserve(gil, size, deadline, timeout);
        gil.acquire();
        raw_reserved_ = true;
        return py::memoryview::from_memory(static_cast<void*>(dst.data()), static_cast<py::ssize_t>(dst.size()), false);
    }

    // Publishes the reservation (its first `used` bytes; all by default). publish=False drops it: nothing
    // became visible and the next reserve replaces it.
    void commit_raw(std::optional<std::size_t> used, bool publish) {
        check_usable("acquire_write");
        Busy busy(*this);
        if (!raw_reserved_) throw Failure{g_ringcast_error, "commit without acquire_write"};
        raw_reserved_ = false;
        if (!publish) return;
        const std::size_t n = used.value_or(reserved_size_);
        if (n > reserved_size_)
            throw Failure{PyExc_ValueError, "acquire_write: used " + std::to_string(n) + " bytes of a " +
                                                std::to_string(reserved_size_) + "-byte reservation"};
        writer_->commit(n, make_tag(++seq_, Frame::raw));
    }

    // Waits until every reader rank has attached at least once (slot state left never_attached).
    void wait_readers(std::optional<double> timeout) {
        check_usable("wait_until_ready");
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        const bool main = in_main_thread();
        Deadline next_signal_check = Clock::now() + kMainThreadSlice;
        for (;;) {
            if (missing_readers().empty()) return;
            const Deadline now = Clock::now();
            if (now >= deadline) {
                gil.acquire();
                throw TimedOut{"wait_until_ready timed out after " + timeout_text(timeout) +
                               ": reader ranks (local indices) " + join(missing_readers()) + " never attached"};
            }
            gil.release();
            const timespec ts{0, 1'000'000};  // readers attach once per queue: a 1 ms poll is plenty
            ::nanosleep(&ts, nullptr);
            if (main && Clock::now() >= next_signal_check) {
                gil.acquire();
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
                next_signal_check = Clock::now() + kMainThreadSlice;
            }
        }
    }

    std::vector<std::uint32_t> missing_readers() const {
        std::vector<std::uint32_t> out;
        for (std::uint32_t r = 0; r < writer_->reader_count(); ++r)
            if (layout::unpack_owner(writer_->segment().reader_slot(r).owner.load(std::memory_order_acquire)).state ==
                layout::SlotState::never_attached)
                out.push_back(r);
        return out;
    }

    // Close: readers drain, then get ClosedError. A call blocked in another thread wakes with ClosedError.
    // The name is unlinked now (mappings stay valid), so nothing is left in /dev/shm.
    void shutdown() {
        if (forked_child()) return;
        if (shut_.exchange(true, std::memory_order_acq_rel)) return;
        writer_->close();
        writer_->cancel();
        try {
            Segment::remove(name_);
        } catch (const Error&) {
        }
    }

    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint64_t capacity() const { return writer_->capacity(); }
    [[nodiscard]] std::size_t max_reserve() const { return writer_->max_reserve(); }
    [[nodiscard]] std::uint32_t reader_count() const { return writer_->reader_count(); }
    [[nodiscard]] std::uint64_t creation_time_ns() const { return writer_->segment().header().creation_time_ns; }
    [[nodiscard]] std::size_t max_parts() const {
        return std::min<std::size_t>(kMaxParts, (writer_->max_reserve() - 8) / 8);
    }
    [[nodiscard]] bool closed() const { return shut_.load(std::memory_order_acquire); }

private:
    static std::string join(const std::vector<std::uint32_t>& v) {
        std::string s;
        for (auto r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
        return s;
    }

    // Reserve with the fast probe first (GIL as the caller has it), then sliced waits without the GIL.
    std::span<std::byte> reserve(Gil& gil, std::size_t n, Deadline deadline, const std::optional<double>& timeout) {
        Reservation r = writer_->reserve(n, 0ns);
        if (r.status == Status::timed_out && Clock::now() < deadline) {
            const Status s = wait_sliced(
                gil, deadline, *writer_,
                [&](std::chrono::nanoseconds t) {
                    r = writer_->reserve(n, t);
                    return r.status;
                },
                [&] { check_readers(); });
            r.status = s;
        }
        switch (r.status) {
            case Status::ok: reserved_size_ = n; return r.bytes;
            case Status::timed_out:
                gil.acquire();
                throw TimedOut{"enqueue timed out after " + timeout_text(timeout) +
                               ": the slowest reader did not free ring space"};
            case Status::cancelled:
            case Status::closed: break;
        }
        gil.acquire();
        throw Closed{"enqueue: the queue was shut down"};
    }

    void finish_broken_stream(Gil& gil, Deadline deadline, const std::optional<double>& timeout) {
        (void)reserve(gil, 0, deadline, timeout);
        writer_->commit(0, make_tag(seq_, Frame::abort));
        broken_ = false;
    }

    // A dead reader at the minimum head can never release: waiting for it is an error that names it.
    void check_readers() { writer_->check_liveness(); }

    std::unique_ptr<Writer> writer_;
    std::string name_;
    std::uint64_t seq_ = 0;
    std::size_t reserved_size_ = 0;
    bool broken_ = false;
    bool raw_reserved_ = false;
};

// ====================================================================================================
class PyReader : public Endpoint {
public:
    PyReader(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us, double spin_max_us, double liveness_s)
        : Endpoint(liveness_from(liveness_s)) {
        ReaderOptions ro;
        ro.wait = wait_options(wait, spin_us, spin_max_us);
        ro.liveness_interval = std::chrono::hours(24);  // checked by the binding (see PyWriter)
        reader_ = std::make_unique<Reader>(Reader::attach(name, rank, ro));
        name_ = name;
    }
    ~PyReader() {
        // A forked child must not detach the parent's rank.
        if (forked_child()) (void)reader_.release();
    }
    PyReader(const PyReader&) = delete;
    PyReader& operator=(const PyReader&) = delete;

    // The parts of the next message (bytes, bytearray, ...).
    py::list recv(std::optional<double> timeout) {
        check_usable("dequeue");
        Busy busy(*this);
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        std::vector<py::object> parts = receive(gil, deadline, false, timeout);
        gil.acquire();
        return to_list(std::move(parts));
    }

    // Up to max_n messages: waits (up to timeout) for the first, then takes whatever else is complete
    // and ready without waiting — all under this one call, so a woken thread pays one GIL acquisition
    // for a burst instead of one per message.
    py::list recv_many(std::size_t max_n, std::optional<double> timeout) {
        check_usable("dequeue_many");
        Busy busy(*this);
        if (max_n == 0) throw Failure{PyExc_ValueError, "max_n must be >= 1"};
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        py::list out;
        std::vector<py::object> parts = receive(gil, deadline, false, timeout);
        gil.acquire();
        out.append(to_list(std::move(parts)));
        while (out.size() < max_n) {
            std::vector<py::object> more;
            try {
                more = receive(gil, Clock::now(), true, timeout);
            } catch (const Closed&) {
                break;  // what was collected is delivered; the next call reports the close
            }
            gil.acquire();
            if (more.empty()) break;
            out.append(to_list(std::move(more)));
        }
        return out;
    }

    // acquire_read: a read-only view of the next message written with acquire_write; released by
    // release_raw(). Anything else is left in place and reported.
    py::memoryview peek_raw(std::optional<double> timeout) {
        check_usable("acquire_read");
        Busy busy(*this);
        if (assembly_.active)
            throw Failure{g_ringcast_error, "acquire_read: a message sent with enqueue() is partly received; "
                                            "finish it with dequeue()"};
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Gil gil;
        const Message m = next_record(gil, deadline, timeout, false);
        gil.acquire();
        if (m.status != Status::ok) throw TimedOut{"acquire_read timed out after " + timeout_text(timeout)};
        if (tag_frame(m.tag) != Frame::raw)
            throw Failure{g_ringcast_error, "acquire_read: the next message was sent with enqueue(); use dequeue()"};
        raw_peeked_ = true;
        return py::memoryview::from_memory(static_cast<const void*>(m.bytes.data()),
                                           static_cast<py::ssize_t>(m.bytes.size()));
    }
    void release_raw() {
        check_usable("acquire_read");
        Busy busy(*this);
        if (!raw_peeked_) throw Failure{g_ringcast_error, "release without acquire_read"};
        raw_peeked_ = false;
        reader_->release();
    }

    // Raises PeerDeadError if the writer process is gone.
    void check_writer_alive() {
        check_usable("wait_until_ready");
        check_writer();
    }

    // Wakes a call blocked in another thread (it raises ClosedError); later calls raise ClosedError.
    void shutdown() {
        if (forked_child()) return;
        if (shut_.exchange(true, std::memory_order_acq_rel)) return;
        reader_->cancel();
    }

    [[nodiscard]] std::uint32_t rank() const { return reader_->rank(); }
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint64_t creation_time_ns() const { return reader_->segment().header().creation_time_ns; }
    [[nodiscard]] std::uint64_t capacity() const { return reader_->segment().header().capacity; }
    [[nodiscard]] std::uint64_t waits() const { return reader_->waits(); }

private:
    struct Assembly {
        bool active = false;
        std::uint64_t seq = 0;
        std::vector<py::object> objs;                       // destinations (own the memory)
        std::vector<std::pair<std::byte*, std::size_t>> dst;  // stream order: header skipped
        std::size_t di = 0, doff = 0;
        std::uint64_t header_left = 0;  // header bytes still to skip in the stream
        std::uint64_t remaining = 0;    // stream bytes still expected
    };

    static py::list to_list(std::vector<py::object>&& parts) {
        py::list l(parts.size());
        for (std::size_t i = 0; i < parts.size(); ++i) l[i] = std::move(parts[i]);
        return l;
    }

    void drop_assembly() {
        assembly_.objs.clear();  // decrefs: callers hold the GIL
        assembly_.dst.clear();
        assembly_.active = false;
    }

    [[noreturn]] void corrupt(const std::string& why) {
        throw Error(ErrorCode::corrupt, "queue '" + name_ + "', rank index " + std::to_string(reader_->rank()) +
                                            ": " + why);
    }

    void check_writer() { reader_->check_liveness(); }

    // The next record: probe first with the GIL as the caller holds it; then, unless `probe_only`,
    // sliced waits without it. Returns ok or timed_out; closed/cancelled become ClosedError.
    Message next_record(Gil& gil, Deadline deadline, const std::optional<double>& timeout, bool probe_only) {
        Message m = reader_->peek(0ns);
        if (m.status == Status::timed_out && !probe_only && Clock::now() < deadline) {
            m.status = wait_sliced(
                gil, deadline, *reader_,
                [&](std::chrono::nanoseconds t) {
                    m = reader_->peek(t);
                    return m.status;
                },
                [&] { check_writer(); });
        }
        if (m.status == Status::closed) {
            gil.acquire();
            drop_assembly();  // a stream the writer never finished never completes
            throw Closed{"dequeue: the writer shut the queue down and every message has been read"};
        }
        if (m.status == Status::cancelled) {
            gil.acquire();
            throw Closed{"dequeue: the queue was shut down"};
        }
        (void)timeout;
        return m;
    }

    // Copies stream bytes [header skipped] into the destinations.
    void scatter(Gil& gil, const std::byte* p, std::size_t n) {
        Assembly& a = assembly_;
        if (n > a.remaining) corrupt("message longer than its header announced");
        a.remaining -= n;
        const std::size_t skip = static_cast<std::size_t>(std::min<std::uint64_t>(n, a.header_left));
        a.header_left -= skip;
        p += skip;
        n -= skip;
        while (n > 0) {
            while (a.di < a.dst.size() && a.doff == a.dst[a.di].second) {
                ++a.di;
                a.doff = 0;
            }
            if (a.di == a.dst.size()) corrupt("message bytes beyond its parts");
            const std::size_t k = std::min(n, a.dst[a.di].second - a.doff);
            copy_bytes(gil, a.dst[a.di].first + a.doff, p, k);
            a.doff += k;
            p += k;
            n -= k;
        }
    }

    // Starts a message from a whole/first record: parses the stream header, allocates destinations.
    void start(Gil& gil, const Message& m, Frame f) {
        const std::size_t n = m.bytes.size();
        std::uint32_t magic = 0, nparts = 0;
        if (n < 8) corrupt("record too short for a message header");
        std::memcpy(&magic, m.bytes.data(), 4);
        std::memcpy(&nparts, m.bytes.data() + 4, 4);
        if (magic != kFrameMagic) corrupt("bad message magic (not written by ringcast's Python writer)");
        if (nparts == 0 || nparts > kMaxParts || 8 + 8ull * nparts > n) corrupt("bad part count " + std::to_string(nparts));
        std::vector<std::uint64_t> lens(nparts);
        std::vector<bool> is_bytes(nparts);
        std::uint64_t total = 8 + 8ull * nparts;
        for (std::uint32_t i = 0; i < nparts; ++i) {
            std::memcpy(&lens[i], m.bytes.data() + 8 + 8 * i, 8);
            is_bytes[i] = (lens[i] & kPartIsBytes) != 0;
            lens[i] &= ~kPartIsBytes;
            if (lens[i] > kMaxMessage || total + lens[i] > kMaxMessage) corrupt("absurd part length");
            total += lens[i];
        }
        if (f == Frame::whole ? total != n : total <= n) corrupt("message length does not match its records");
        const bool had_gil = gil.held();
        gil.acquire();
        Assembly& a = assembly_;
        drop_assembly();
        a.objs.reserve(nparts);
        a.dst.reserve(nparts);
        for (std::uint32_t i = 0; i < nparts; ++i) {
            const auto len = static_cast<Py_ssize_t>(lens[i]);
            // Fresh objects nobody else references yet: filling them later without the GIL is safe.
            PyObject* o = is_bytes[i] ? PyBytes_FromStringAndSize(nullptr, len) : PyByteArray_FromStringAndSize(nullptr, len);
            if (o == nullptr) throw py::error_already_set();
            a.objs.push_back(py::reinterpret_steal<py::object>(o));
            char* p = is_bytes[i] ? PyBytes_AS_STRING(o) : PyByteArray_AS_STRING(o);
            a.dst.emplace_back(reinterpret_cast<std::byte*>(p), static_cast<std::size_t>(lens[i]));
        }
        // A whole (single-record) message keeps the GIL it now has: its copy is short or drops the GIL
        // itself, and the caller needs the GIL right after anyway (one hand-off per message, not two).
        if (!had_gil && f != Frame::whole) gil.release();
        a.active = true;
        a.seq = tag_seq(m.tag);
        a.di = 0;
        a.doff = 0;
        a.header_left = 8 + 8ull * nparts;
        a.remaining = total;
    }

    // Receives one whole message. `drain`: only what is ready now (an empty result: nothing complete);
    // a partly received message is kept for the next call.
    std::vector<py::object> receive(Gil& gil, Deadline deadline, bool drain, const std::optional<double>& timeout) {
        for (;;) {
            const Message m = next_record(gil, deadline, timeout, drain);
            if (m.status == Status::timed_out) {
                gil.acquire();
                if (drain) return {};
                throw TimedOut{"dequeue timed out after " + timeout_text(timeout)};
            }
            const Frame f = tag_frame(m.tag);
            switch (f) {
                case Frame::whole:
                case Frame::first:
                    if (assembly_.active) corrupt("a new message began before the previous one ended");
                    start(gil, m, f);
                    scatter(gil, m.bytes.data(), m.bytes.size());
                    break;
                case Frame::middle:
                case Frame::last:
                    if (!assembly_.active) break;  // rank re-attached mid-stream: skip the orphan
                    if (tag_seq(m.tag) != assembly_.seq) corrupt("record of another message inside a message");
                    scatter(gil, m.bytes.data(), m.bytes.size());
                    break;
                case Frame::abort:
                    if (assembly_.active) {
                        gil.acquire();
                        drop_assembly();
                    }
                    break;
                case Frame::raw:
                    gil.acquire();
                    if (drain) return {};  // left in place; the collected messages are delivered
                    throw Failure{g_ringcast_error,
                                  "dequeue: the next message was written with acquire_write(); read it with "
                                  "acquire_read()"};
                default: corrupt("unknown record kind " + std::to_string(static_cast<int>(f)));
            }
            reader_->release();
            if (assembly_.active && assembly_.remaining == 0) {
                if (f != Frame::whole && f != Frame::last) corrupt("message ended on a non-final record");
                assembly_.active = false;
                assembly_.dst.clear();
                return std::move(assembly_.objs);  // moving py::objects needs no GIL
            }
            if (assembly_.active && f == Frame::last) corrupt("last record before the announced length");
        }
    }

    std::unique_ptr<Reader> reader_;
    std::string name_;
    Assembly assembly_;
    bool raw_peeked_ = false;
};

// ---- the gather group: replies from N workers, collected with one GIL release -----------------------
// The executor side. collect() probes with the GIL held, then waits for the whole pending set in
// slices with the GIL released (one release per slice, not per rank); replies arriving in any order
// are kept across slices.
class PyGatherCollector : public Endpoint {
public:
    PyGatherCollector(const std::string& name, std::uint32_t ranks, std::uint64_t capacity, std::uint32_t mode,
                      const std::string& method, const std::string& wait, double spin_us, double spin_max_us, double liveness_s)
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
    }

    // Replies (bytes) for `ranks` (empty: all), in the order of `ranks`.
    py::list collect(std::uint64_t tag, std::vector<std::uint32_t> ranks, const std::optional<double>& timeout) {
        if (async_)
            throw Failure{PyExc_RuntimeError, "collect: a collect_async is pending on this ReplyGather; call its "
                                              "result() first"};
        Busy busy(*this);
        check_usable("collect");
        Collect c = begin(tag, std::move(ranks), timeout);
        Gil gil;
        return finish(c, gil);
    }

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
    void collect_start(std::uint64_t tag, std::vector<std::uint32_t> ranks, const std::optional<double>& timeout) {
        if (async_)
            throw Failure{PyExc_RuntimeError, "collect_async: a collect is already pending on this ReplyGather "
                                              "(call result() first)"};
        check_usable("collect_async");
        for (std::uint32_t r : ranks)
            if (r >= collector_->ranks())
                throw Failure{PyExc_ValueError, "rank " + std::to_string(r) + " out of range: the group has ranks 0.." +
                                                    std::to_string(collector_->ranks() - 1)};
        async_ = std::make_unique<Collect>(begin(tag, std::move(ranks), timeout));
    }

    // True once result() would not wait: every reply is in, or the collect has failed (a stale reply,
    // a closed ring, the deadline passed).
    [[nodiscard]] bool collect_done() {
        if (!async_) return false;
        if (async_->status != Status::timed_out || async_->error) return true;
        Busy busy(*this);
        try {
            async_->status = attempt(*async_, 0ns);
        } catch (const Error&) {
            async_->error = std::current_exception();
            return true;
        }
        return async_->status != Status::timed_out || Clock::now() >= async_->deadline;
    }

    py::list collect_result() {
        if (!async_) throw Failure{PyExc_RuntimeError, "result(): no collect_async is pending"};
        Busy busy(*this);
        std::unique_ptr<Collect> c = std::move(async_);
        if (c->error) std::rethrow_exception(c->error);
        Gil gil;
        try {
            return finish(*c, gil);
        } catch (py::error_already_set& e) {  // Ctrl-C while waiting: still pending, result() may be retried
            if (e.matches(PyExc_KeyboardInterrupt)) async_ = std::move(c);
            throw;
        }
    }

    void shutdown() {
        if (forked_child()) return;
        if (shut_.exchange(true, std::memory_order_acq_rel)) return;
        collector_->cancel();
    }
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint32_t ranks() const { return collector_->ranks(); }
    [[nodiscard]] std::uint64_t kernel_waits() const { return collector_->kernel_waits(); }

    ~PyGatherCollector() {
        if (forked_child()) (void)collector_.release();  // the parent owns the names: never remove them here
    }

private:
    struct Collect {  // one collect in progress: what is asked, what came, what is left
        std::uint64_t tag = 0;
        std::vector<std::uint32_t> ranks;    // as asked, in the caller's order
        std::vector<std::uint32_t> pending;  // not in yet
        std::vector<std::optional<std::vector<std::byte>>> got;  // by rank
        Deadline deadline{};
        std::string timeout_text;
        Status status = Status::timed_out;  // of the last attempt
        std::exception_ptr error;           // a core Error from a done() poll, rethrown by result()
    };

    Collect begin(std::uint64_t tag, std::vector<std::uint32_t> ranks, const std::optional<double>& timeout) {
        Collect c;
        c.tag = tag;
        if (ranks.empty())
            for (std::uint32_t r = 0; r < collector_->ranks(); ++r) ranks.push_back(r);
        c.ranks = std::move(ranks);
        c.pending = c.ranks;
        c.got.resize(collector_->ranks());
        c.deadline = deadline_after(to_timeout(timeout));
        c.timeout_text = timeout_text(timeout);
        return c;
    }

    // One core collect over what is still pending, waiting at most t; keeps what came.
    Status attempt(Collect& c, std::chrono::nanoseconds t) {
        GatherResult last = collector_->collect(c.tag, c.pending, t);
        for (std::uint32_t r = 0; r < last.replies.size(); ++r)
            if (last.replies[r]) c.got[r] = std::move(last.replies[r]);
        c.pending = std::move(last.missing);
        return last.status;
    }

    // Probe with the GIL held (no release when everything is there), then one sliced wait for the rest.
    py::list finish(Collect& c, Gil& gil) {
        Status s = c.pending.empty() ? Status::ok : attempt(c, 0ns);
        if (s == Status::timed_out && c.deadline != kPollOnly && Clock::now() < c.deadline)
            s = wait_sliced(gil, c.deadline, *collector_, [&](std::chrono::nanoseconds t) { return attempt(c, t); },
                            [&] { collector_->check_liveness(c.pending); });
        gil.acquire();
        return replies_or_raise(s, c.tag, c.ranks, c.pending, c.got, c.timeout_text);
    }

    py::list replies_or_raise(Status s, std::uint64_t tag, const std::vector<std::uint32_t>& ranks,
                              const std::vector<std::uint32_t>& missing,
                              const std::vector<std::optional<std::vector<std::byte>>>& got,
                              const std::string& timeout_txt) const {
        if (s != Status::ok) {
            GatherResult r;
            r.status = s;
            r.missing = missing;
            const std::string what = "collect(tag=" + std::to_string(tag) + ") on '" + name_ + "': " + r.describe();
            if (s == Status::timed_out) throw TimedOut{what + " (timeout " + timeout_txt + ")"};
            if (s == Status::cancelled) throw Closed{what + " (shut down)"};
            throw Closed{what + " (those workers closed their reply rings)"};
        }
        py::list out(ranks.size());
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            const auto& v = got[ranks[i]];
            out[i] = py::bytes(reinterpret_cast<const char*>(v->data()), v->size());
        }
        return out;
    }

    std::string name_;
    std::unique_ptr<GatherCollector> collector_;
    std::unique_ptr<Collect> async_;  // the pending collect_async, if any (GIL-protected)
};

// The worker side: reply(tag, bytes) onto this rank's reply ring, then ring the doorbell if needed.
class PyGatherWorker : public Endpoint {
public:
    PyGatherWorker(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us, double spin_max_us, double liveness_s)
        : Endpoint(liveness_from(liveness_s)), name_(name) {
        WriterOptions wo;
        wo.wait = wait_options(wait, spin_us, spin_max_us);
        wo.liveness_interval = liveness_;
        worker_ = std::make_unique<GatherWorker>(GatherWorker::attach(name, rank, wo));
    }

    void reply(std::uint64_t tag, py::buffer data, const std::optional<double>& timeout) {
        Busy busy(*this);
        check_usable("reply");
        PyBuf buf(data);
        const std::span<const std::byte> bytes(buf.data(), buf.size());
        Gil gil;
        const Deadline deadline = deadline_after(to_timeout(timeout));
        Status s = worker_->reply(tag, bytes, 0ns);  // probe: room now → no GIL release
        if (s == Status::timed_out && deadline != kPollOnly) {
            if (bytes.size() > worker_->max_reserve()) {
                // A fragmented reply is withdrawn when its write times out, so it is not sliced: one
                // GIL-released wait for the whole timeout (Ctrl-C is seen when it returns).
                gil.release();
                s = worker_->reply(tag, bytes, deadline == kNoDeadline ? kForever : std::chrono::nanoseconds(deadline - Clock::now()));
            } else {
                s = wait_sliced(gil, deadline, *worker_, [&](std::chrono::nanoseconds t) { return worker_->reply(tag, bytes, t); },
                                [&] { worker_->check_liveness(); });
            }
        }
        gil.acquire();
        if (s == Status::timed_out) throw TimedOut{"reply(tag=" + std::to_string(tag) + ") on '" + name_ + "': timed out after " + timeout_text(timeout)};
        if (s != Status::ok) throw Closed{"reply on '" + name_ + "': shut down"};
    }

    void close() {
        if (forked_child()) return;
        shut_.store(true, std::memory_order_release);
        worker_->close();
    }
    [[nodiscard]] std::uint32_t rank() const { return worker_->rank(); }

private:
    std::string name_;
    std::unique_ptr<GatherWorker> worker_;
};

}  // namespace
}  // namespace ringcast::python

PYBIND11_MODULE(_core, m) {
    using namespace ringcast;
    using namespace ringcast::python;
    m.doc() = "ringcast C++ core binding (use the `ringcast` package)";

    g_ringcast_error = PyErr_NewExceptionWithDoc("ringcast.RingcastError", "Base of ringcast's exceptions.",
                                                 PyExc_Exception, nullptr);
    g_closed_error = PyErr_NewExceptionWithDoc("ringcast.ClosedError", "The queue was shut down (and drained).",
                                               g_ringcast_error, nullptr);
    g_peer_dead_error = PyErr_NewExceptionWithDoc(
        "ringcast.PeerDeadError", "The writer or a reader process died.", g_ringcast_error, nullptr);
    m.attr("RingcastError") = py::handle(g_ringcast_error);
    m.attr("ClosedError") = py::handle(g_closed_error);
    m.attr("PeerDeadError") = py::handle(g_peer_dead_error);
    g_stale_reply_error = PyErr_NewExceptionWithDoc(
        "ringcast.StaleReplyError", "A reply carried another request's tag.", g_ringcast_error, nullptr);
    m.attr("StaleReplyError") = py::handle(g_stale_reply_error);
    py::register_exception_translator(&translate);

    g_main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

    m.attr("MAX_PARTS") = kMaxParts;
    m.attr("ABI_VERSION") = layout::kAbiVersion;
    m.attr("MIN_CAPACITY") = layout::kMinCapacity;
    m.attr("MAX_READERS") = layout::kMaxReaders;
    m.attr("MAIN_THREAD_SLICE_S") = std::chrono::duration<double>(kMainThreadSlice).count();
    m.attr("NO_GIL_COPY_BYTES") = kNoGilCopy;

    m.def("max_record_payload", [](std::uint64_t capacity) { return layout::max_record_payload(capacity); });
    m.def("remove_segment", [](const std::string& name) { return Segment::remove(name); });
    m.def(
        "segment_info",
        [](const std::string& name) {
            const Segment seg = Segment::open(name);
            const auto& h = seg.header();
            return py::dict(py::arg("readers") = h.reader_count, py::arg("capacity") = h.capacity,
                            py::arg("creation_time_ns") = h.creation_time_ns, py::arg("creator_pid") = h.creator_pid,
                            py::arg("writer_pid") = layout::unpack_owner(h.writer_owner.load()).pid,
                            py::arg("closed") = (h.flags.load() & layout::kFlagClosed) != 0);
        },
        "Header fields of a segment (raises ValueError if it does not exist or is not ringcast's)");
    m.def(
        "gil_probe", [] { return py::make_tuple(g_sleeps.load(), g_sleeps_holding_gil.load()); },
        "(kernel waits entered, of which with the GIL held) since the last reset");
    m.def("gil_probe_reset", [] {
        g_sleeps = 0;
        g_sleeps_holding_gil = 0;
    });
    m.def(
        "_set_release_gil", [](bool on) { g_release_gil = on; },
        "TEST ONLY: False keeps the GIL while blocked (the negative control of the GIL probe)");

    py::class_<PyWriter>(m, "Writer")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&, double, double, double>(),
             py::arg("name"), py::arg("readers"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("send", &PyWriter::send, py::arg("parts"), py::arg("timeout") = py::none())
        .def("reserve_raw", &PyWriter::reserve_raw, py::arg("size"), py::arg("timeout") = py::none())
        .def("commit_raw", &PyWriter::commit_raw, py::arg("used") = py::none(), py::arg("publish") = true)
        .def("wait_readers", &PyWriter::wait_readers, py::arg("timeout") = py::none())
        .def("missing_readers", &PyWriter::missing_readers)
        .def("shutdown", &PyWriter::shutdown)
        .def_property_readonly("name", &PyWriter::name)
        .def_property_readonly("capacity", &PyWriter::capacity)
        .def_property_readonly("max_reserve", &PyWriter::max_reserve)
        .def_property_readonly("max_parts", &PyWriter::max_parts)
        .def_property_readonly("reader_count", &PyWriter::reader_count)
        .def_property_readonly("creation_time_ns", &PyWriter::creation_time_ns)
        .def_property_readonly("closed", &PyWriter::closed);

    py::class_<PyReader>(m, "Reader")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("recv", &PyReader::recv, py::arg("timeout") = py::none())
        .def("recv_many", &PyReader::recv_many, py::arg("max_n"), py::arg("timeout") = py::none())
        .def("peek_raw", &PyReader::peek_raw, py::arg("timeout") = py::none())
        .def("release_raw", &PyReader::release_raw)
        .def("check_writer_alive", &PyReader::check_writer_alive)
        .def("shutdown", &PyReader::shutdown)
        .def_property_readonly("rank", &PyReader::rank)
        .def_property_readonly("name", &PyReader::name)
        .def_property_readonly("capacity", &PyReader::capacity)
        .def_property_readonly("creation_time_ns", &PyReader::creation_time_ns)
        .def_property_readonly("waits", &PyReader::waits);

    py::class_<PyGatherCollector>(m, "GatherCollector")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&,
                      const std::string&, double, double, double>(),
             py::arg("name"), py::arg("ranks"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("method") = "doorbell", py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0,
             py::arg("liveness_s") = 1.0)
        .def("collect", &PyGatherCollector::collect, py::arg("tag"), py::arg("ranks"), py::arg("timeout") = py::none())
        .def("collect_start", &PyGatherCollector::collect_start, py::arg("tag"), py::arg("ranks"),
             py::arg("timeout") = py::none())
        .def("collect_done", &PyGatherCollector::collect_done)
        .def("collect_result", &PyGatherCollector::collect_result)
        .def("shutdown", &PyGatherCollector::shutdown)
        .def_property_readonly("name", &PyGatherCollector::name)
        .def_property_readonly("ranks", &PyGatherCollector::ranks)
        .def_property_readonly("kernel_waits", &PyGatherCollector::kernel_waits);

    py::class_<PyGatherWorker>(m, "GatherWorker")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("reply", &PyGatherWorker::reply, py::arg("tag"), py::arg("data"), py::arg("timeout") = py::none())
        .def("close", &PyGatherWorker::close)
        .def_property_readonly("rank", &PyGatherWorker::rank);
}
