// The queue endpoints of ringcast._core: Writer (PyWriter) and Reader (PyReader), the C++ half of the
// package's MessageQueue. Messages use the binding's framing (framing.hpp); blocking calls keep the
// GIL rules (gil.hpp).
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "framing.hpp"
#include "gil.hpp"
#include "pickling.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;

namespace ringcast::python {

class PyWriter : public detail::Endpoint {
public:
    PyWriter(const std::string& name, std::uint32_t readers, std::uint64_t capacity, std::uint32_t mode,
             const std::string& wait, double spin_us, double spin_max_us, double liveness_s);
    ~PyWriter();
    PyWriter(const PyWriter&) = delete;
    PyWriter& operator=(const PyWriter&) = delete;

    // One message made of `parts` (buffer objects). Each part is copied straight into the ring.
    void send(const py::sequence& parts, std::optional<double> timeout);

    // enqueue in one call: pickles `obj` (pickling.hpp: protocol 5, the out-of-band rule set below)
    // and sends it. A pickle without out-of-band buffers that fits one record — a step's request —
    // goes straight from the pickle's bytes into the record (no parts list, no stream object);
    // anything else takes send()'s path. The pickling runs before the one-thread check, as a pickle
    // made in Python before send() would: a __reduce__ that enqueues on this queue sends its message
    // first, not a deadlock or a torn stream. Nothing is sent if pickling raises.
    // While a GPU array library is loaded (set_device_pickler), the pickling is the device pickler's,
    // which finds device arrays: an object without any is sent here as any other; one with some is
    // not sent — the call returns (pickle, out-of-band buffers, pickler) for the GPU path, which
    // sends the arrays' bytes by DMA after the message (ringcast/_gpu.py). Returns None when sent.
    // Thread-safety: as send().
    py::object send_object(py::handle obj, std::optional<double> timeout);
    // The pickler send_object uses while any of `libraries` is in sys.modules: factory(file,
    // protocol=5, buffer_callback=...) -> a pickle.Pickler whose `arrays` attribute, after its dump,
    // lists the device arrays it found. Two buffers fewer out of band than set_out_of_band's (a device
    // message has two parts more). MessageQueue sets it for every writer; None turns it off.
    void set_device_pickler(py::object factory, const std::vector<std::string>& libraries);
    // The out-of-band rule of send_object (MessageQueue sets its oob_threshold and max_parts - 1).
    void set_out_of_band(std::size_t threshold, std::size_t max_buffers) {
        oob_threshold_ = threshold;
        oob_max_buffers_ = max_buffers;
    }
    // Whether send_object and wake_ahead() wake sleeping readers before a message is pickled
    // (Writer::wake_ahead). Only with the adaptive hybrid wait, which the readers take from the
    // handle: a futex or fixed-spin reader would sleep again and need the publish's wake too. On by
    // default where it can be; set_wake_ahead(true) cannot turn it on elsewhere.
    void set_wake_ahead(bool on) noexcept { wake_ahead_ = on && writer_->wait_options().adaptive(); }
    [[nodiscard]] bool wake_ahead_enabled() const noexcept { return wake_ahead_; }
    // Writer::wake_ahead, for a caller that pickles in Python before send(): true if readers were
    // woken. False, doing nothing, when wake-ahead is off, once shut down or in a forked child.
    bool wake_ahead();

    // acquire_write: a span of `size` bytes in the ring, published by commit_raw(). The memoryview
    // shows a detail::RawChunk (framing.hpp), which tells commit_raw() whether a view survived.
    py::memoryview reserve_raw(std::size_t size, std::optional<double> timeout);

    // Publishes the reservation (its first `used` bytes; all by default). publish=False drops it: nothing
    // became visible and the next reserve replaces it. A view of the chunk still alive (one derived
    // from the block's memoryview and kept past the block): the chunk is dropped, not published, and
    // RingcastError says so; every write of this writer then raises RingcastError until that view is
    // gone (refuse_if_pending), since the bytes under it are free ring space the next write would
    // reuse. The view keeps this writer's Python object (its mapping) alive meanwhile.
    void commit_raw(std::optional<std::size_t> used, bool publish);

    // ---- enqueue without waiting (ringcast.aio: the event loop waits, on wake_fd(), between calls) ----
    // send_nowait() starts a message and publishes as many of its records as fit now; what does not
    // fit stays pending here (its buffers exported: the caller must not change them meanwhile), and
    // send_more() publishes further records as readers make room. Neither ever waits. true: the whole
    // message is published (nothing pending). One pending message at a time: send(), acquire_write()
    // and a second send_nowait() raise RuntimeError while one is pending (their records would
    // interleave with its records, which readers reject as corrupt).
    // Thread-safety: as send() (one thread at a time, checked); the GIL is held throughout.
    [[nodiscard]] bool send_nowait(const py::sequence& parts);
    [[nodiscard]] bool send_more();
    // Gives the pending message up (its enqueue was cancelled or failed): nothing of it is delivered.
    // Records of it already published are dropped by the readers: the next message is preceded by an
    // abort record (Frame::abort, as after a failed send()). No-op when nothing is pending.
    void send_abandon();
    // The payload bytes the pending message's next record needs (what arm() waits for); 0 if none.
    [[nodiscard]] std::size_t pending_record_bytes() const;

    // Waits until every reader rank has attached at least once (slot state left never_attached).
    void wait_readers(std::optional<double> timeout);
    std::vector<std::uint32_t> missing_readers() const;

    // Close: readers drain, then get ClosedError. A call blocked in another thread wakes with ClosedError.
    // The name is unlinked now (mappings stay valid), so nothing is left in /dev/shm. Returns at once;
    // a send running in another thread closes the queue as it leaves (release_after_shutdown).
    void shutdown();

    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint64_t capacity() const { return writer_->capacity(); }
    [[nodiscard]] std::size_t max_reserve() const { return writer_->max_reserve(); }
    [[nodiscard]] std::uint32_t reader_count() const { return writer_->reader_count(); }
    [[nodiscard]] std::uint64_t creation_time_ns() const { return writer_->segment().header().creation_time_ns; }
    [[nodiscard]] std::size_t max_parts() const {
        return std::min<std::size_t>(detail::kMaxParts, (writer_->max_reserve() - 8) / 8);
    }
    [[nodiscard]] bool closed() const { return shut_.load(std::memory_order_acquire); }
    [[nodiscard]] Writer& core() noexcept { return *writer_; }  // events.cpp: the event-loop wake fd
    // The ring rank of the publisher to remote readers (MessageQueue sets it): a timeout names it as such.
    void set_remote_publisher_index(std::uint32_t index) noexcept { remote_publisher_index_ = index; }
    // The global rank of each local reader (MessageQueue's local_reader_ranks): a dead reader's error
    // names it (rethrow_in_callers_ranks).
    void set_reader_ranks(std::vector<std::uint32_t> ranks) { reader_ranks_ = std::move(ranks); }
    // The dead-reader check of a blocked send, for an event loop (events.cpp): PeerDeadError in the
    // caller's ranks.
    void check_peers();

private:
    void release_after_shutdown() noexcept override;
    // The core's reserve, in the binding's terms: a dead reader named in the caller's ranks, and a
    // reservation made after shutdown() came from another thread given up (cancelled).
    [[nodiscard]] Reservation core_reserve(std::size_t n, std::chrono::nanoseconds t);
    // Reserve with the fast probe first (GIL as the caller has it), then sliced waits without the GIL.
    // `what` names the caller's operation in a TimeoutError or ClosedError.
    std::span<std::byte> reserve(detail::Gil& gil, std::size_t n, Deadline deadline,
                                 const std::optional<double>& timeout, const char* what = "enqueue");
    // send() of one `bytes` part that fits one record: header and pickle copied into it directly.
    void send_whole(const py::bytes& data, std::optional<double> timeout);
    // "the slowest reader (rank index 1)": whom a timed-out wait for space waited for.
    [[nodiscard]] std::string slowest_readers_text() const;
    // The core's dead reader, named by ring index and by the caller's rank (PeerDeadError).
    [[noreturn]] void rethrow_in_callers_ranks(const ReaderDiedError& e) const;
    // Tells the readers to drop the records of a message whose sending failed part-way (Frame::abort).
    // `what`: the call that writes it now (its TimeoutError / ClosedError name that call).
    void finish_broken_stream(detail::Gil& gil, Deadline deadline, const std::optional<double>& timeout,
                              const char* what);
    // Publishes the pending message's records while the ring has room (zero-timeout reserves).
    [[nodiscard]] bool publish_pending(detail::Gil& gil);
    // send() / acquire_write() / send_nowait() while a message is pending: RuntimeError; while a view
    // of an acquire_write() chunk that outlived its block is alive: RingcastError (commit_raw).
    void refuse_if_pending(const char* what);
    // py::len(parts), or ValueError unless 1..max_parts() (send and send_nowait).
    [[nodiscard]] std::size_t checked_part_count(const py::sequence& parts) const;
    // A dead reader at the minimum head can never release: waiting for it is an error that names it.
    void check_readers() { writer_->check_liveness(); }

    std::unique_ptr<Writer> writer_;
    std::string name_;
    std::uint32_t remote_publisher_index_ = layout::kMaxReaders;  // none unless set
    std::vector<std::uint32_t> reader_ranks_;  // set_reader_ranks: empty, the core's indices are said as such
    std::uint64_t seq_ = 0;
    std::size_t reserved_size_ = 0;
    bool broken_ = false;
    bool raw_reserved_ = false;
    detail::RawChunk raw_chunk_;  // the chunk of the last acquire_write (kept while a view outlives its
                                  // block: no write until that view is gone)
    // The message of send_nowait() not yet fully published (null: none). Its first record takes its
    // sequence number (pending_seq_); pending_sent_ stream bytes of it are out.
    std::unique_ptr<detail::OutgoingMessage> pending_;
    std::uint64_t pending_seq_ = 0;
    std::uint64_t pending_sent_ = 0;
    std::size_t oob_threshold_ = 4096;  // MessageQueue's OOB_THRESHOLD until set_out_of_band()
    std::size_t oob_max_buffers_ = 0;   // none out of band until set_out_of_band()
    bool wake_ahead_ = false;           // send_object wakes sleeping readers before it pickles
    py::object device_pickler_;                // none: send_object always pickles with pickle.dumps
    py::object idle_pickler_;                  // one device_pickler_ made, not pickling now (or none)
    std::vector<py::object> device_libraries_;  // module names (interned str) that may hold device arrays

    [[nodiscard]] bool device_library_loaded() const;
    void send_pickled(const detail::Pickled& p, std::optional<double> timeout);
};

class PyReader : public detail::Endpoint {
public:
    PyReader(const std::string& name, std::uint32_t rank, const std::string& wait, double spin_us,
             double spin_max_us, double liveness_s);
    ~PyReader();
    PyReader(const PyReader&) = delete;
    PyReader& operator=(const PyReader&) = delete;

    // The parts of the next message (bytes, bytearray, ...).
    py::list recv(std::optional<double> timeout);

    // dequeue in one call: the next message, unpickled. A one-part message in one record (what
    // send_object sends for a step's request) is copied from its record into one bytes object (no
    // parts list, no reassembly state); a one-part message of
    // several records is received as recv() does. Either is unpickled here after the records are
    // released and the one-thread check is over, so a message whose unpickling raises is consumed
    // (as when recv() returned and pickle.loads raised) and unpickled code may use this queue. A
    // message with out-of-band parts comes back as a MultipartMessage holding its parts (Python
    // rebuilds those: buffers, device arrays); no state is kept here between the two.
    // Raises as recv(), and what pickle.loads raises.
    // Thread-safety: as recv().
    py::object recv_object(std::optional<double> timeout);

    // Up to max_n messages: waits (up to timeout) for the first, then takes whatever else is complete
    // and ready without waiting — all under this one call, so a woken thread pays one GIL acquisition
    // for a burst instead of one per message. Each is appended to `into` (MessageQueue._burst_left) as
    // (False, parts) as it is taken (framing.hpp, receive_burst_into); returns how many.
    std::size_t recv_many(const py::list& into, std::size_t max_n, std::optional<double> timeout);

    // dequeue without waiting (ringcast.aio): the parts of the next message when all of it is there,
    // else None. Records of a message that has only partly arrived are consumed as far as they are
    // there and kept assembled in this reader (assembly_), so the next call — try_recv() or recv() —
    // continues it: a caller that stops half way (a cancelled await) loses and duplicates nothing.
    // Raises as recv() (ClosedError, the acquire_write() message next, corrupt framing).
    [[nodiscard]] py::object try_recv();

    // acquire_read: a read-only view of the next message written with acquire_write; released by
    // release_raw(). Anything else is left in place and reported. The memoryview shows a
    // detail::RawChunk (framing.hpp): release_raw() knows whether a view of it survived the block.
    py::memoryview peek_raw(std::optional<double> timeout);
    // Consumes the peek_raw() chunk. A view of it still alive (derived from the block's memoryview
    // and kept past the block): the chunk is kept, not released — the writer cannot overwrite the
    // bytes under that view — and RingcastError says so; every read of this reader then raises
    // RingcastError until the view is gone, and the first read after that releases the chunk
    // (settle_raw_chunk). The view keeps this reader's Python object (its mapping) alive meanwhile.
    void release_raw();

    // Raises PeerDeadError if the writer process is gone.
    void check_writer_alive();
    // Raises as every call of this reader does once it is shut down (or in a forked child): for what
    // MessageQueue serves from Python (what a dequeue_many left).
    void check_open(const std::string& what) const { check_usable(what.c_str()); }

    // Wakes a call blocked in another thread (it raises ClosedError); later calls raise ClosedError.
    // The rank goes back to the writer now (it stops waiting for this reader), or, when a call is in
    // progress in another thread, as that call leaves; with an acquire_read chunk out, at its release.
    void shutdown();

    // ringcast.aio's calls (events.cpp), one thread at a time as every call, refused once shut down
    // (disarm then does nothing: the rank's registration went with it).
    [[nodiscard]] int wake_fd();
    [[nodiscard]] bool arm();
    void disarm();
    void check_peers();

    [[nodiscard]] std::uint32_t rank() const { return reader_->rank(); }
    // A peek_raw() chunk not yet released (never in a forked child: the parent's chunk is not its own).
    [[nodiscard]] bool holds_raw_chunk() const { return raw_peeked_ && !forked_child(); }
    [[nodiscard]] const std::string& name() const { return name_; }
    [[nodiscard]] std::uint64_t creation_time_ns() const { return reader_->segment().header().creation_time_ns; }
    [[nodiscard]] std::uint64_t capacity() const { return reader_->segment().header().capacity; }
    [[nodiscard]] std::uint64_t waits() const { return reader_->detached() ? waits_at_detach_ : reader_->waits(); }
    [[nodiscard]] double spin_max_us() const { return static_cast<double>(reader_->wait_options().spin_max.count()) / 1e3; }

private:
    void release_after_shutdown() noexcept override;
    // Every read first: a kept chunk (release_raw) still viewed raises RingcastError; no longer
    // viewed, it is released now.
    void settle_raw_chunk(const char* what);
    [[noreturn]] void corrupt(const std::string& why) const { assembly_.corrupt(why); }
    void check_writer() { reader_->check_liveness(); }

    // The next record: probe first with the GIL as the caller holds it; then, unless `probe_only`,
    // sliced waits without it. Returns ok or timed_out; closed/cancelled become ClosedError.
    Message next_record(detail::Gil& gil, Deadline deadline, const std::optional<double>& timeout, bool probe_only);

    // recv_object's receive: a one-part message as its one part, anything else as recv()'s parts list.
    py::object take_message(std::optional<double> timeout);

    // Receives one whole message. `drain`: only what is ready now (an empty result: nothing complete);
    // a partly received message is kept for the next call.
    std::vector<py::object> receive(detail::Gil& gil, Deadline deadline, bool drain,
                                    const std::optional<double>& timeout);

    std::unique_ptr<Reader> reader_;
    std::string name_;
    detail::Reassembly assembly_;
    bool raw_peeked_ = false;
    detail::RawChunk raw_chunk_;  // the chunk of the last acquire_read (kept while a view outlives its block)
    std::uint64_t waits_at_detach_ = 0;  // waits() once the rank went back (the slot may be another's)
};

// recv_object's answer for a message of several parts: ringcast._core.MultipartMessage (a type no
// unpickled object has: it cannot be pickled).
struct MultipartMessage {
    py::list parts;
};

}  // namespace ringcast::python
