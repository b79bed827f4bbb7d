// PyReader: the receiving end of a queue (see queue.hpp).
#include "args.hpp"
#include "errors.hpp"
#include "pickling.hpp"
#include "stamps.hpp"
#include "queue.hpp"

using namespace std::chrono_literals;

namespace ringcast::python {

using namespace detail;

PyReader::PyReader(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us,
                   double spin_max_us, double liveness_s)
    : Endpoint(liveness_from(liveness_s)) {
    ReaderOptions ro;
    ro.wait = wait_options(wait, spin_us, spin_max_us);
    ro.liveness_interval = liveness_;  // counted across calls by the core: slicing cannot starve it
    reader_ = std::make_unique<Reader>(Reader::attach(name, rank, ro));
    releases_on_shutdown_ = true;  // shutdown() gives the rank back (release_after_shutdown)
    name_ = name;
    assembly_.set_where("queue '" + name_ + "', rank index " + std::to_string(reader_->rank()));
}

PyReader::~PyReader() {
    // A forked child must not detach the parent's rank.
    if (forked_child()) (void)reader_.release();
}

py::list PyReader::recv(std::optional<double> timeout) {
    Busy busy(*this);  // first: once it is held, shutdown() cannot give the rank back under this call
    check_usable("dequeue");
    settle_raw_chunk("dequeue");
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    std::vector<py::object> parts = receive(gil, deadline, false, timeout);
    gil.acquire();
    return to_list(std::move(parts));
}

py::object PyReader::recv_object(std::optional<double> timeout) {
    // Unpickling runs once this reader is free again and the message's records are released, as
    // after recv() and a pickle.loads in Python: unpickled code may dequeue from this reader, or
    // enqueue on this ring from a writer in this process, without finding either held.
    stamp(Stamp::recv_enter);
    py::object message = take_message(timeout);
    stamp(Stamp::recv_copied);
    if (PyList_CheckExact(message.ptr())) return py::cast(MultipartMessage{py::reinterpret_steal<py::list>(message.release())});
    py::object obj = loads(message);
    stamp(Stamp::recv_unpickled);
    return obj;
}

py::object PyReader::take_message(std::optional<double> timeout) {
    Busy busy(*this);  // first: once it is held, shutdown() cannot give the rank back under this call
    check_usable("dequeue");
    settle_raw_chunk("dequeue");
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    if (!assembly_.active()) {
        const Message m = next_record(gil, deadline, timeout, false);
        stamp(Stamp::recv_seen);
        if (m.status == Status::ok && tag_frame(m.tag) == Frame::whole) {
            if (const auto pickle = one_part_payload(m.bytes)) {
                gil.acquire();
                // One copy out of the record (the bytes own their memory), then the record is free
                // and the message consumed. An allocation failure leaves the record for the next call.
                py::bytes data(reinterpret_cast<const char*>(pickle->data()), static_cast<py::ssize_t>(pickle->size()));
                reader_->release();
                return data;
            }
        }
        // Anything else (timed out, several parts, several records, an abort or raw record first):
        // receive() below peeks the same record again (peek() before release() returns it again) and
        // handles it as recv() does.
    }
    std::vector<py::object> parts = receive(gil, deadline, false, timeout);
    stamp(Stamp::recv_seen);  // a message of several records: seen and copied are one span here
    gil.acquire();
    if (parts.size() == 1) return std::move(parts[0]);  // bytes (or a bytearray another writer sent)
    return to_list(std::move(parts));
}

std::size_t PyReader::recv_many(const py::list& into, std::size_t max_n, std::optional<double> timeout) {
    Busy busy(*this);  // first: once it is held, shutdown() cannot give the rank back under this call
    check_usable("dequeue_many");
    settle_raw_chunk("dequeue_many");
    if (max_n == 0) throw Failure{PyExc_ValueError, "max_n must be >= 1"};
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    return receive_burst_into(into, gil, max_n, deadline,
                              [&](Gil& g, Deadline d, bool drain) { return receive(g, d, drain, timeout); });
}

py::object PyReader::try_recv() {
    Busy busy(*this);  // first: once it is held, shutdown() cannot give the rank back under this call
    check_usable("dequeue");
    settle_raw_chunk("dequeue");
    Gil gil;
    std::vector<py::object> parts = receive(gil, Clock::now(), true, std::optional<double>(0.0));
    gil.acquire();
    if (!parts.empty()) return to_list(std::move(parts));
    // receive()'s drain mode also stops silently in front of an acquire_write() message; here that
    // must be said (as recv() does), or an event loop would find "ready" forever and take nothing.
    const Message m = reader_->peek(0ns);
    if (m.status == Status::ok && tag_frame(m.tag) == Frame::raw)
        throw Failure{g_ringcast_error,
                      "dequeue: the next message was written with acquire_write(); read it with acquire_read()"};
    return py::none();
}

py::memoryview PyReader::peek_raw(std::optional<double> timeout) {
    Busy busy(*this);  // first: once it is held, shutdown() cannot give the rank back under this call
    check_usable("acquire_read");
    settle_raw_chunk("acquire_read");
    if (assembly_.active())
        throw Failure{g_ringcast_error, "acquire_read: a message sent with enqueue() is partly received; "
                                        "finish it with dequeue()"};
    const Deadline deadline = deadline_after(to_timeout(timeout));
    Gil gil;
    const Message m = next_record(gil, deadline, timeout, false);
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

void PyReader::settle_raw_chunk(const char* what) {
    raw_chunk_.refuse_if_read_block_open(raw_peeked_, what);
    if (!raw_chunk_.settle_kept_read_chunk(what)) return;
    raw_peeked_ = false;
    reader_->release();
}

void PyReader::release_raw() {
    Busy busy(*this);
    // First, before a shut-down reader's rank goes back (below): not while a view shows the bytes.
    if (raw_peeked_ && raw_chunk_.viewed() && !forked_child())
        raw_chunk_.keep_read_chunk(py::cast(this), shut_.load(std::memory_order_acquire));
    raw_chunk_.forget();  // (a kept chunk no longer viewed: released below)
    release_left_to_the_chunk(raw_peeked_);
    check_usable("acquire_read");
    if (!raw_peeked_) throw Failure{g_ringcast_error, "release without acquire_read"};
    raw_peeked_ = false;
    reader_->release();
}

void PyReader::check_writer_alive() {
    check_usable("wait_until_ready");
    check_writer();
}

void PyReader::shutdown() {
    if (forked_child()) return;
    if (shut_.exchange(true, std::memory_order_seq_cst)) return;
    reader_->cancel();  // a call blocked in another thread wakes and raises ClosedError
    release_when_idle();  // the rank goes back now, or when that call leaves
}

void PyReader::release_after_shutdown() noexcept {
    // A chunk of acquire_read still shown by a view keeps the rank until release_raw() (the writer,
    // no longer waiting for this rank, would overwrite the bytes under the view).
    // Never in a forked child: the claim in the slot is the parent's (its word, copied by fork).
    if (raw_peeked_ || reader_->detached() || forked_child()) return;
    waits_at_detach_ = reader_->waits();
    reader_->detach();
}

int PyReader::wake_fd() {
    Busy busy(*this);
    check_usable("wake_fd");
    return reader_->wake_fd();
}

bool PyReader::arm() {
    Busy busy(*this);
    check_usable("arm");
    return reader_->arm_wake_fd();
}

void PyReader::disarm() {
    Busy busy(*this);
    // Not in a forked child: the announcement is the parent's (its rank's bit), which the parent may be
    // asleep on. detach() cleared it already.
    if (!forked_child() && !reader_->detached()) reader_->disarm_wake_fd();
}

void PyReader::check_peers() {
    Busy busy(*this);
    check_usable("dequeue");
    reader_->check_liveness();
}

Message PyReader::next_record(Gil& gil, Deadline deadline, const std::optional<double>& timeout, bool probe_only) {
    Message m = reader_->peek(0ns);
    if (m.status == Status::timed_out && !probe_only && Clock::now() < deadline) {
        m.status = wait_sliced(
            gil, deadline, *reader_,
            [&](std::chrono::nanoseconds t) {
                m = reader_->peek(t);
                return m.status;
            });
    }
    if (m.status == Status::closed) {
        gil.acquire();
        assembly_.drop();  // a stream the writer never finished never completes
        throw Closed{"dequeue: the writer shut the queue down and every message has been read"};
    }
    if (m.status == Status::cancelled) {
        gil.acquire();
        throw Closed{"dequeue: the queue was shut down"};
    }
    (void)timeout;
    return m;
}

std::vector<py::object> PyReader::receive(Gil& gil, Deadline deadline, bool drain, const std::optional<double>& timeout) {
    return receive_framed(
        gil, assembly_, drain, timeout,
        [&](bool probe_only) { return next_record(gil, deadline, timeout, probe_only); },
        [&] { reader_->release(); });
}

}  // namespace ringcast::python
