// PyWriter: the sending end of a queue (see queue.hpp).
#include <time.h>

#include <algorithm>

#include "args.hpp"
#include "errors.hpp"
#include "pickling.hpp"
#include "stamps.hpp"
#include "queue.hpp"

using namespace std::chrono_literals;

namespace ringcast::python {

using namespace detail;

namespace {

// A device pickler is kept for the next message only after a pickle this small: at most this many
// memo entries (each takes a byte of the pickle or more), so clearing its memo stays cheap.
constexpr std::size_t kReusedPicklerMaxBytes = 4096;

// Whether the pickler's `arrays` (its device arrays; the class's () when none) holds any. A pickler
// without the attribute found none; any other error is raised.
int device_arrays_found(const py::object& pickler) {
    PyObject* arrays = PyObject_GetAttrString(pickler.ptr(), "arrays");
    if (arrays == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
        PyErr_Clear();
        return 0;
    }
    const int found = PyObject_IsTrue(arrays);
    Py_DECREF(arrays);
    if (found < 0) throw py::error_already_set();
    return found;
}

std::string join(const std::vector<std::uint32_t>& v) {
    std::string s;
    for (auto r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
}

}  // namespace

PyWriter::PyWriter(const std::string& name, std::uint32_t readers, std::uint64_t capacity, std::uint32_t mode,
                   const std::string& wait, double spin_us, double spin_max_us, double liveness_s)
    : Endpoint(liveness_from(liveness_s)) {
    SegmentOptions so;
    so.readers = readers;
    so.capacity = capacity;
    so.mode = static_cast<mode_t>(mode);
    WriterOptions wo;
    wo.wait = wait_options(wait, spin_us, spin_max_us);
    wo.liveness_interval = liveness_;  // counted across calls by the core: slicing cannot starve it
    wo.unlink_on_destroy = true;
    writer_ = std::make_unique<Writer>(Writer::create(name, so, wo));
    set_wake_ahead(true);  // where the wait allows it (set_wake_ahead)
    name_ = name;
    releases_on_shutdown_ = true;  // a send in progress closes the queue as it leaves (release_after_shutdown)
}

PyWriter::~PyWriter() {
    // A forked child inherits this object but is not the writer: closing or unlinking from it would
    // end the parent's queue. Leak the core object (its mapping dies with the child).
    if (forked_child()) (void)writer_.release();
}

std::size_t PyWriter::checked_part_count(const py::sequence& parts) const {
    const std::size_t nparts = py::len(parts);
    if (nparts == 0 || nparts > max_parts())
        throw Failure{PyExc_ValueError, "a message has 1.." + std::to_string(max_parts()) + " parts, got " +
                                            std::to_string(nparts)};
    return nparts;
}

void PyWriter::send(const py::sequence& parts, std::optional<double> timeout) {
    check_usable("enqueue");
    Busy busy(*this);
    refuse_if_pending("enqueue");
    OutgoingMessage msg(parts, checked_part_count(parts));  // destroyed after `gil`: its buffers are released with the GIL

    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    if (broken_) finish_broken_stream(gil, deadline, timeout, "enqueue");
    const std::uint64_t seq = ++seq_;
    const std::size_t max_rec = writer_->max_reserve();
    const std::uint64_t total = msg.total();
    std::uint64_t sent = 0;
    bool first = true;
    try {
        while (sent < total) {
            const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(total - sent, max_rec));
            std::span<std::byte> dst = reserve(gil, chunk, deadline, timeout);
            msg.copy_next(gil, dst.data(), chunk);
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
    msg.release_buffers();  // PyBuffer_Release needs the GIL
}

py::object PyWriter::send_object(py::handle obj, std::optional<double> timeout) {
    stamp(Stamp::send_enter);
    check_usable("enqueue");
    // Readers asleep wake up while the message is pickled, not after it is published (their wake-up
    // then overlaps the pickling). Before the one-thread check, as the pickling: Writer::wake_ahead
    // may run beside another thread's send.
    if (wake_ahead_) (void)writer_->wake_ahead();
    if (device_pickler_ && device_library_loaded()) {
        // The idle pickler is taken while it pickles: a send_object nested in this pickling (a
        // __reduce__ that enqueues here) or another thread's, while a hook has the GIL given up,
        // makes one of its own. One that found device arrays goes to the GPU path, not back; nor
        // does one that made a large pickle (its memo table and output buffer only grow, and every
        // later dump would clear and allocate them whole).
        const std::size_t max_buffers = oob_max_buffers_ >= 2 ? oob_max_buffers_ - 2 : 0;  // [magic, metas, ...]
        const py::object factory = device_pickler_;  // ours for the call: set_device_pickler may run meanwhile
        PickledWith p = dumps_with_pickler(std::move(idle_pickler_), factory, obj, oob_threshold_, max_buffers);
        stamp(Stamp::send_pickled);
        int found = 0;
        try {
            found = device_arrays_found(p.pickler);
        } catch (...) {
            abandon_pickler(p.pickler);
            throw;
        }
        if (found == 1)  // device arrays: the GPU path sends the message
            return py::make_tuple(std::move(p.pickled.data), std::move(p.pickled.out_of_band), std::move(p.pickler));
        if (static_cast<std::size_t>(PyBytes_GET_SIZE(p.pickled.data.ptr())) <= kReusedPicklerMaxBytes)
            idle_pickler_ = std::move(p.pickler);
        send_pickled(p.pickled, timeout);
    } else {
        const Pickled p = dumps_out_of_band(obj, oob_threshold_, oob_max_buffers_);
        stamp(Stamp::send_pickled);
        send_pickled(p, timeout);
    }
    stamp(Stamp::send_committed);
    return py::none();
}

void PyWriter::send_pickled(const Pickled& p, std::optional<double> timeout) {
    const auto len = static_cast<std::size_t>(PyBytes_GET_SIZE(p.data.ptr()));
    if (p.out_of_band.empty() && kOnePartHeader + len <= writer_->max_reserve()) {
        send_whole(p.data, timeout);
    } else {
        py::list parts(1 + p.out_of_band.size());
        parts[0] = p.data;
        for (std::size_t i = 0; i < p.out_of_band.size(); ++i) parts[i + 1] = p.out_of_band[i];
        send(parts, timeout);
    }
}

void PyWriter::set_device_pickler(py::object factory, const std::vector<std::string>& libraries) {
    device_libraries_.clear();
    for (const auto& name : libraries) {
        PyObject* interned = PyUnicode_InternFromString(name.c_str());
        if (interned == nullptr) throw py::error_already_set();
        device_libraries_.push_back(py::reinterpret_steal<py::object>(interned));
    }
    device_pickler_ = factory.is_none() ? py::object() : std::move(factory);
    idle_pickler_ = py::object();
}

// Whether a library that can hold device arrays is imported: only then can the message hold one
// (ringcast._gpu.may_hold_device_arrays, the same test, for the paths that stay in Python).
bool PyWriter::device_library_loaded() const {
    PyObject* modules = PyImport_GetModuleDict();  // borrowed: sys.modules
    for (const auto& name : device_libraries_) {
        const int has = PyDict_Contains(modules, name.ptr());
        if (has < 0) throw py::error_already_set();
        if (has == 1) return true;
    }
    return false;
}

bool PyWriter::wake_ahead() {
    if (!wake_ahead_ || forked_child() || shut_.load(std::memory_order_acquire)) return false;
    return writer_->wake_ahead();
}

void PyWriter::send_whole(const py::bytes& data, std::optional<double> timeout) {
    // send()'s single-record case, without its stream object: the same wire bytes (framing.hpp).
    check_usable("enqueue");
    Busy busy(*this);
    refuse_if_pending("enqueue");
    const char* src = PyBytes_AS_STRING(data.ptr());  // immutable, and `data` outlives `gil`: readable
    const auto len = static_cast<std::size_t>(PyBytes_GET_SIZE(data.ptr()));  // without the GIL too
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    if (broken_) finish_broken_stream(gil, deadline, timeout, "enqueue");
    std::span<std::byte> dst = reserve(gil, kOnePartHeader + len, deadline, timeout);
    write_one_part_header(dst.data(), len);
    copy_bytes(gil, dst.data() + kOnePartHeader, src, len);
    // One record: nothing of the message is out before this commit, so a failure above leaves no
    // stream to abort (broken_ stays as it was).
    writer_->commit(kOnePartHeader + len, make_tag(++seq_, Frame::whole));
}

py::memoryview PyWriter::reserve_raw(std::size_t size, std::optional<double> timeout) {
    check_usable("acquire_write");
    Busy busy(*this);
    refuse_if_pending("acquire_write");
    if (size > writer_->max_reserve())
        throw Failure{PyExc_ValueError, "acquire_write of " + std::to_string(size) +
                                            " bytes exceeds the largest record of this ring (" +
                                            std::to_string(writer_->max_reserve()) + " bytes)"};
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    if (broken_) finish_broken_stream(gil, deadline, timeout, "acquire_write");
    std::span<std::byte> dst = reserve(gil, size, deadline, timeout, "acquire_write");
    gil.acquire();
    py::memoryview view = raw_chunk_.open(static_cast<void*>(dst.data()), dst.size(), false);
    raw_reserved_ = true;
    return view;
}

void PyWriter::commit_raw(std::optional<std::size_t> used, bool publish) {
    if (forked_child()) check_usable("acquire_write");  // a forked child touches nothing: raises
    Busy busy(*this);
    if (!raw_reserved_) {
        check_usable("acquire_write");
        throw Failure{g_ringcast_error, "commit without acquire_write"};
    }
    // The block ended, whatever else: the reservation goes, and a view that outlived it is caught
    // before the shut-down check below — else a shutdown() from another thread during the block left
    // that view uncounted, and the endpoint's going unmapped the bytes under it.
    raw_reserved_ = false;
    if (raw_chunk_.viewed()) {
        raw_chunk_.keep(py::cast(this));
        throw Failure{g_ringcast_error,
                      "acquire_write: a view of the chunk outlived its with-block (a slice, memoryview(), "
                      "cast or numpy.frombuffer of the block's view, still referenced): the chunk was "
                      "withdrawn, not published, and this writer refuses to write until that view is "
                      "released (del it, and every numpy array made from it, or call a memoryview's "
                      "release()), since its bytes are free ring space the next message would reuse"};
    }
    raw_chunk_.forget();
    check_usable("acquire_write");  // shut down meanwhile: ClosedError, nothing published
    if (!publish) return;
    const std::size_t n = used.value_or(reserved_size_);
    if (n > reserved_size_)
        throw Failure{PyExc_ValueError, "acquire_write: used " + std::to_string(n) + " bytes of a " +
                                            std::to_string(reserved_size_) + "-byte reservation"};
    writer_->commit(n, make_tag(++seq_, Frame::raw));
}

bool PyWriter::send_nowait(const py::sequence& parts) {
    check_usable("enqueue");
    Busy busy(*this);
    refuse_if_pending("enqueue");
    pending_ = std::make_unique<OutgoingMessage>(parts, checked_part_count(parts));
    pending_sent_ = 0;
    Gil gil;
    return publish_pending(gil);
}

bool PyWriter::send_more() {
    check_usable("enqueue");
    Busy busy(*this);
    if (!pending_) throw Failure{g_ringcast_error, "enqueue: no message is pending (send_nowait first)"};
    Gil gil;
    return publish_pending(gil);
}

void PyWriter::send_abandon() {
    if (!pending_) return;
    // Records of it are out: the readers drop them when the abort record comes (before the next
    // message: send() and publish_pending() write it first). Nothing out: nobody saw any of it.
    if (pending_sent_ > 0) broken_ = true;
    pending_.reset();  // releases its buffers (GIL held: called from Python)
    pending_sent_ = 0;
}

std::size_t PyWriter::pending_record_bytes() const {
    if (!pending_) return 0;
    if (broken_) return 0;  // the abort record owed first (arm waits for room for it)
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(pending_->total() - pending_sent_, writer_->max_reserve()));
}

void PyWriter::refuse_if_pending(const char* what) {
    // A reservation whose view is gone has no block: a signal handler's exception (KeyboardInterrupt)
    // raised as reserve_raw returned, before acquire_write's with-block began, dropped the view, and
    // nothing would ever commit it — every later write was refused below for good. Withdrawn as a
    // block that ended with an exception withdraws its chunk (commit_raw, publish false). An open
    // block holds its view (the context manager's frame does): still refused.
    if (raw_reserved_ && !raw_chunk_.viewed()) {
        raw_reserved_ = false;
        raw_chunk_.forget();
    }
    // An acquire_write() block of this queue is open (a write from inside it, on this thread: the
    // one-thread rule lets it in). The core reservation is that block's: this write would reserve the
    // same bytes, publish its message in them, and the block's view would then overwrite it.
    if (raw_reserved_)
        throw Failure{g_ringcast_error, std::string(what) + ": an acquire_write() block of this queue is open; "
                                                            "end it first (this write would use its chunk's bytes)"};
    if (raw_chunk_.kept()) {
        if (raw_chunk_.viewed())
            throw Failure{g_ringcast_error,
                          std::string(what) + ": a view of an acquire_write() chunk that outlived its "
                                              "with-block is still alive; release it first (del it, and "
                                              "every numpy array made from it, or call a memoryview's "
                                              "release()): this write would reuse its bytes"};
        raw_chunk_.forget();
    }
    if (pending_)
        throw Failure{PyExc_RuntimeError, std::string(what) +
                                              ": an enqueue_async of this queue is in progress (await it, or "
                                              "cancel it, first: one coroutine at a time per queue)"};
}

bool PyWriter::publish_pending(Gil& gil) {
    // Every reserve here has a zero timeout: this runs on an event loop's thread, which must not block.
    // A failure (closed, cancelled, an exception from the copy) gives the message up (send_abandon).
    std::span<std::byte> dst;
    const auto reserve_now = [&](std::size_t n) -> bool {  // false: no room now
        const Reservation r = core_reserve(n, 0ns);
        if (r.status == Status::ok) {
            reserved_size_ = n;
            dst = r.bytes;
            return true;
        }
        if (r.status == Status::timed_out) return false;
        gil.acquire();
        send_abandon();
        throw Closed{"enqueue: the queue was shut down"};
    };
    OutgoingMessage& msg = *pending_;
    const std::uint64_t total = msg.total();  // > 0: the stream header is part of it
    const std::size_t max_rec = writer_->max_reserve();
    try {  // every record's reserve may throw (the due dead-reader check): the abort record's too
        if (broken_) {  // an earlier message stopped part-way: the readers drop its records first
            if (!reserve_now(0)) return false;
            writer_->commit(0, make_tag(seq_, Frame::abort));
            broken_ = false;
        }
        while (pending_sent_ < total) {
            const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(total - pending_sent_, max_rec));
            if (!reserve_now(chunk)) return false;  // pending: the loop waits for room (arm, wake_fd)
            if (pending_sent_ == 0) pending_seq_ = ++seq_;
            msg.copy_next(gil, dst.data(), chunk);
            const bool first = pending_sent_ == 0;
            pending_sent_ += chunk;
            const bool end = pending_sent_ == total;
            const Frame f = first ? (end ? Frame::whole : Frame::first) : (end ? Frame::last : Frame::middle);
            writer_->commit(chunk, make_tag(pending_seq_, f));
        }
    } catch (const Closed&) {
        throw;  // already given up
    } catch (...) {
        gil.acquire();
        send_abandon();
        throw;
    }
    gil.acquire();
    pending_.reset();  // PyBuffer_Release needs the GIL
    pending_sent_ = 0;
    return true;
}

void PyWriter::wait_readers(std::optional<double> timeout) {
    check_usable("wait_until_ready");
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    const bool main = in_main_thread();
    Deadline next_signal_check = Clock::now() + kSignalPollInterval;
    for (;;) {
        if (missing_readers().empty()) return;
        if (shut_.load(std::memory_order_acquire)) {  // shutdown() from another thread: ClosedError, not a hang
            gil.acquire();
            check_usable("wait_until_ready");
        }
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
            check_signals(gil);
            next_signal_check = Clock::now() + kSignalPollInterval;
        }
    }
}

std::vector<std::uint32_t> PyWriter::missing_readers() const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t r = 0; r < writer_->reader_count(); ++r)
        if (layout::unpack_owner(writer_->segment().reader_slot(r).owner.load(std::memory_order_acquire)).state ==
            layout::SlotState::never_attached)
            out.push_back(r);
    return out;
}

void PyWriter::shutdown() {
    if (forked_child()) return;
    if (shut_.exchange(true, std::memory_order_seq_cst)) return;
    writer_->cancel();       // a send blocked in another thread wakes and raises ClosedError
    writer_->remove_name();  // at once (by identity; the mapping stays): nothing is left in /dev/shm even
                             // if that send never leaves (a daemon thread at interpreter exit)
    release_when_idle();     // the close comes now, or when that send leaves (release_after_shutdown)
}

// The close, once no call is in the endpoint. A send in another thread must not run on past the close:
// the core's close() may only come from the writer's thread (it is not cancel()), and a message
// whose first records a caught-up reader skipped at the close while a slower one read them whole
// would reach some readers and not others. So the close waits for that send to leave: it stops at its
// next record (reserve() sees shut_) and leaves the stream broken, which every reader drops at the
// close alike — or it was done, and every reader gets it before the close.
void PyWriter::release_after_shutdown() noexcept {
    if (forked_child()) return;
    writer_->close();
}

std::span<std::byte> PyWriter::reserve(Gil& gil, std::size_t n, Deadline deadline, const std::optional<double>& timeout,
                                       const char* what) {
    Reservation r = core_reserve(n, 0ns);
    if (r.status == Status::timed_out && Clock::now() < deadline) {
        const Status s = wait_sliced(
            gil, deadline, *writer_,
            [&](std::chrono::nanoseconds t) {
                r = core_reserve(n, t);
                return r.status;
            });
        r.status = s;
    }
    switch (r.status) {
        case Status::ok: reserved_size_ = n; return r.bytes;
        case Status::timed_out:
            gil.acquire();
            throw TimedOut{std::string(what) + " timed out after " + timeout_text(timeout) + ": " +
                           slowest_readers_text() + " did not free ring space"};
        case Status::cancelled:
        case Status::closed: break;
    }
    gil.acquire();
    throw Closed{std::string(what) + ": the queue was shut down"};
}

Reservation PyWriter::core_reserve(std::size_t n, std::chrono::nanoseconds t) {
    Reservation r;
    try {  // a zero-timeout one too runs a due dead-peer check
        r = writer_->reserve(n, t);
    } catch (const ReaderDiedError& e) {
        rethrow_in_callers_ranks(e);
    }
    // shutdown() from another thread since: no record more (release_after_shutdown says why). The
    // reservation is simply not committed; a message with records out is left broken by the caller.
    if (r.status == Status::ok && shut_.load(std::memory_order_seq_cst)) r.status = Status::cancelled;
    return r;
}

// The core names a dead reader by its index in the ring; a MessageQueue's caller knows its readers by
// local_reader_ranks (set_reader_ranks), as the timeouts' "rank index" says: both are told.
void PyWriter::rethrow_in_callers_ranks(const ReaderDiedError& e) const {
    const std::uint32_t i = e.rank_index();
    const std::string pid = "pid " + std::to_string(e.pid());
    std::string who = "reader rank index " + std::to_string(i);
    if (i == remote_publisher_index_) who += " (the remote publisher's " + pid + ")";
    else if (i < reader_ranks_.size()) who += " (rank " + std::to_string(reader_ranks_[i]) + ", " + pid + ")";
    else who += " (" + pid + ")";
    throw Error(ErrorCode::peer_dead, ReaderDiedError::text(who));
}

void PyWriter::check_peers() {
    try {
        writer_->check_liveness();
    } catch (const ReaderDiedError& e) {
        rethrow_in_callers_ranks(e);
    }
}

std::string PyWriter::slowest_readers_text() const {
    std::vector<std::uint32_t> ranks = writer_->slowest_readers();
    // The ring rank past the local readers is the publisher that streams to the remote readers (its
    // index is no remote rank: say what it is).
    const auto publisher = std::find(ranks.begin(), ranks.end(), remote_publisher_index_);
    const bool remote = publisher != ranks.end();
    if (remote) ranks.erase(publisher);
    if (ranks.empty()) return remote ? "the publisher to the remote readers" : "the slowest reader";
    std::string s = ranks.size() == 1 ? "the slowest reader (rank index " : "the slowest readers (rank indices ";
    for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    // And their ranks of local_reader_ranks, as a PeerDeadError names them (rethrow_in_callers_ranks).
    if (std::all_of(ranks.begin(), ranks.end(), [&](std::uint32_t i) { return i < reader_ranks_.size(); })) {
        s += ranks.size() == 1 ? ", rank " : "; ranks ";
        for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(reader_ranks_[ranks[i]]);
    }
    return s + ")" + (remote ? " and the publisher to the remote readers" : "");
}

void PyWriter::finish_broken_stream(Gil& gil, Deadline deadline, const std::optional<double>& timeout,
                                    const char* what) {
    (void)reserve(gil, 0, deadline, timeout, what);
    writer_->commit(0, make_tag(seq_, Frame::abort));
    broken_ = false;
}

}  // namespace ringcast::python
