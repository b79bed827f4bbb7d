// The binding's own message framing: record tags, the stream header, the writer-side copy of a message's
// parts into reserved records and the reader-side reassembly of records into Python objects.
//
// Wire format (inside core ring records of <= Writer::max_reserve() bytes):
//   record tag = (message sequence << 8) | kind, kind in Frame below;
//   logical stream of one message = u32 magic | u32 nparts | u64 length[nparts] | part 0 | part 1 | ...
//   (bit 63 of a length: the part was a `bytes` object and is rebuilt as one; otherwise as a bytearray)
//   A message that fits one record is `whole`; a longer one is `first` (holds the whole stream header),
//   `middle`*, `last`. The writer never builds the stream in memory: it copies header and parts straight
//   into the reserved records (no intermediate concatenation), and the reader copies each record
//   straight into the final Python objects (part 0: bytes, others: bytearray); a one-part message in
//   one record is written and read by the one-call paths without the stream objects (kOnePartHeader). The binding does its own
//   fragmentation instead of the core's Writer::write() fragments because a timed-out core write() of a
//   fragmented message withdraws the whole message, so bounded wait slices would restart it forever,
//   and because core fragments are reassembled into the reader's buffer (a second copy).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "errors.hpp"
#include "gil.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;

namespace ringcast::python::detail {

inline constexpr std::uint32_t kFrameMagic = 0x59504352u;  // "RCPY"
inline constexpr std::uint32_t kMaxParts = 4096;
inline constexpr std::uint64_t kPartIsBytes = 1ULL << 63;

enum class Frame : std::uint64_t { whole = 1, first = 2, middle = 3, last = 4, abort = 5, raw = 6 };
constexpr std::uint64_t make_tag(std::uint64_t seq, Frame f) { return (seq << 8) | static_cast<std::uint64_t>(f); }
constexpr Frame tag_frame(std::uint64_t tag) { return static_cast<Frame>(tag & 0xff); }
constexpr std::uint64_t tag_seq(std::uint64_t tag) { return tag >> 8; }

// The common message: one `bytes` part (a pickle without out-of-band buffers) in one `whole` record.
// Its stream header is 16 bytes: magic | nparts = 1 | length with kPartIsBytes. The one-call paths
// (Writer.send_object, Reader.recv_object) write and read it directly; the general code below reads
// and writes the same bytes, so either side may take either path.
inline constexpr std::size_t kOnePartHeader = 16;

inline void write_one_part_header(std::byte* dst, std::uint64_t len) {
    const std::uint32_t magic = kFrameMagic, nparts = 1;
    const std::uint64_t word = len | kPartIsBytes;
    std::memcpy(dst, &magic, 4);
    std::memcpy(dst + 4, &nparts, 4);
    std::memcpy(dst + 8, &word, 8);
}

// The pickle inside a `whole` record that holds exactly one `bytes` part; empty optional for every
// other record (several parts, a bytearray part, or a malformed header, which the general path
// then reports as corrupt).
[[nodiscard]] inline std::optional<std::span<const std::byte>> one_part_payload(std::span<const std::byte> record) {
    if (record.size() < kOnePartHeader) return std::nullopt;
    std::uint32_t magic = 0, nparts = 0;
    std::uint64_t word = 0;
    std::memcpy(&magic, record.data(), 4);
    std::memcpy(&nparts, record.data() + 4, 4);
    std::memcpy(&word, record.data() + 8, 8);
    if (magic != kFrameMagic || nparts != 1 || word != ((record.size() - kOnePartHeader) | kPartIsBytes))
        return std::nullopt;
    return record.subspan(kOnePartHeader);
}

// Writer side: the logical stream of one message (header, then the parts' own buffers), copied out
// record by record. Built and destroyed with the GIL held (it exports and releases Python buffers).
class OutgoingMessage {
public:
    // Exports the buffers of `parts` (`nparts` of them, already checked by the caller) and builds the
    // stream header.
    OutgoingMessage(const py::sequence& parts, std::size_t nparts);
    OutgoingMessage(const OutgoingMessage&) = delete;
    OutgoingMessage& operator=(const OutgoingMessage&) = delete;

    [[nodiscard]] std::uint64_t total() const { return total_; }  // stream bytes: header and parts
    // Copies the next `n` stream bytes to `dst` (a reserved record); large copies drop the GIL.
    void copy_next(Gil& gil, std::byte* dst, std::size_t n);
    void release_buffers() { bufs_.clear(); }  // PyBuffer_Release needs the GIL

private:
    std::vector<std::unique_ptr<PyBuf>> bufs_;
    std::vector<std::byte> header_;
    std::vector<std::pair<const std::byte*, std::size_t>> src_;  // the sources, in stream order
    std::size_t si_ = 0, soff_ = 0;                               // source cursor
    std::uint64_t total_ = 0;
};

// Reader side: one message in reassembly, from its whole/first record to its last.
class Reassembly {
public:
    // "queue '<name>', rank index <r>": the prefix of corrupt() errors.
    void set_where(std::string where) { where_ = std::move(where); }
    [[noreturn]] void corrupt(const std::string& why) const;

    [[nodiscard]] bool active() const { return active_; }
    [[nodiscard]] std::uint64_t seq() const { return seq_; }
    [[nodiscard]] std::uint64_t remaining() const { return remaining_; }  // stream bytes still expected

    // Starts a message from a whole/first record: parses the stream header, allocates destinations.
    void start(Gil& gil, const Message& m, Frame f);
    // Copies stream bytes [header skipped] into the destinations.
    void scatter(Gil& gil, const std::byte* p, std::size_t n);
    // Forgets a message in progress (decrefs: the GIL must be held).
    void drop();
    // The parts of the message that just ended (moving py::objects needs no GIL).
    std::vector<py::object> take();

private:
    bool active_ = false;
    std::uint64_t seq_ = 0;
    std::vector<py::object> objs_;                         // destinations (own the memory)
    std::vector<std::pair<std::byte*, std::size_t>> dst_;  // stream order: header skipped
    std::size_t di_ = 0, doff_ = 0;
    std::uint64_t header_left_ = 0;  // header bytes still to skip in the stream
    std::uint64_t remaining_ = 0;    // stream bytes still expected
    std::string where_;
};


// The reader side of the framing, one loop for the local reader (queue_reader.cpp) and the remote one
// (remote.cpp): `next_record(drain)` gives the next record (a Message with status ok or timed_out; it
// throws for closed and cancelled itself), `release()` frees the record just copied. Records are
// assembled until a message is whole. drain: return {} quietly where a blocking receive throws
// (nothing there, an acquire_write() message next, which is left in place).
template <class NextRecord, class Release>
std::vector<py::object> receive_framed(Gil& gil, Reassembly& assembly, bool drain,
                                       const std::optional<double>& timeout, NextRecord&& next_record,
                                       Release&& release) {
    for (;;) {
        const Message m = next_record(drain);
        if (m.status == Status::timed_out) {
            gil.acquire();
            if (drain) return {};
            throw TimedOut{"dequeue timed out after " + timeout_text(timeout)};
        }
        const Frame f = tag_frame(m.tag);
        switch (f) {
            case Frame::whole:
            case Frame::first:
                if (assembly.active()) assembly.corrupt("a new message began before the previous one ended");
                assembly.start(gil, m, f);
                assembly.scatter(gil, m.bytes.data(), m.bytes.size());
                break;
            case Frame::middle:
            case Frame::last:
                if (!assembly.active()) break;  // rank (re-)attached mid-stream: skip the orphan
                if (tag_seq(m.tag) != assembly.seq()) assembly.corrupt("record of another message inside a message");
                // The end checks, before anything of the record is taken (scatter counts it): a record
                // that ends the message too early or too late stays at the head, the assembly as it
                // was, and every read reports it the same way (a burst stopped by it delivers what
                // came before). A longer record than the rest: scatter's own first check.
                if (f == Frame::middle && m.bytes.size() == assembly.remaining())
                    assembly.corrupt("message ended on a non-final record");
                if (f == Frame::last && m.bytes.size() < assembly.remaining())
                    assembly.corrupt("last record before the announced length");
                assembly.scatter(gil, m.bytes.data(), m.bytes.size());
                break;
            case Frame::abort:
                if (assembly.active()) {
                    gil.acquire();
                    assembly.drop();
                }
                break;
            case Frame::raw:
                gil.acquire();
                if (drain) return {};  // left in place; the collected messages are delivered
                throw Failure{g_ringcast_error,
                              "dequeue: the next message was written with acquire_write(); read it with "
                              "acquire_read()"};
            default: assembly.corrupt("unknown record kind " + std::to_string(static_cast<int>(f)));
        }
        release();
        // Complete only on a whole or last record: start() matched a whole record's length and found
        // a first record's shorter than the message, and the checks above ended the rest.
        if (assembly.active() && assembly.remaining() == 0) return assembly.take();  // moving py::objects needs no GIL
    }
}

// A received message's parts as the list recv() returns.
inline py::list to_list(std::vector<py::object>&& parts) {
    py::list l(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) l[i] = std::move(parts[i]);
    return l;
}

// ---- the chunk of acquire_write / acquire_read -----------------------------------------------------
// Its memoryview is not made over the ring bytes directly but over a small buffer-exporting object
// (ringcast._core._RawChunk) that counts the buffers taken from it. Every view derived from the
// memoryview — a slice, memoryview(v), a cast, v.toreadonly(), numpy.frombuffer(v) — shares the
// memoryview's one export of that object, which goes back only when the last of them is gone, while
// none of them is an export of the memoryview itself (its release() succeeds regardless). So at the
// block's end the endpoint knows whether any view of the chunk outlived it (viewed()).
class RawChunk {
public:
    // A fresh chunk object over `size` bytes at `data`, and the block's memoryview of it (holding its
    // one export). GIL held.
    py::memoryview open(void* data, std::size_t size, bool readonly);
    // Whether a buffer of the chunk is still out (GIL held). False when there is no chunk.
    [[nodiscard]] bool viewed() const;
    // A view outlived the block: the chunk is kept (kept() until forget()), and the chunk object
    // holds `owner` (the endpoint's Python object, and so the mapping the view shows) until its last
    // buffer goes back. Both sides: the writer withdraws a kept chunk, a reader holds it unreleased.
    void keep(py::handle owner);
    [[nodiscard]] bool kept() const noexcept { return kept_; }
    // Ends the chunk: the chunk object refuses new buffers from here on (it stays reachable as a
    // view's .obj). Only once viewed() is false. GIL held.
    void forget();
    RawChunk() = default;
    RawChunk(const RawChunk&) = delete;
    RawChunk& operator=(const RawChunk&) = delete;
    ~RawChunk() {
        if (obj_ && !viewed()) forget();  // the endpoint goes (its mapping with it): a kept .obj must not map it
    }

    // The read side (a local or a remote reader), whose chunk is the reader's until released:
    // release_raw() with a view still alive keeps the chunk — the writer cannot overwrite the bytes
    // under that view — holds `owner` (the reader's Python object: its mapping) and raises
    // RingcastError (ClosedError once `shut_down`: no read will come to release it; the rank stays
    // until the reader object goes).
    [[noreturn]] void keep_read_chunk(py::handle owner, bool shut_down);
    // Every read first: a kept chunk still viewed raises RingcastError naming `what`. True: a kept
    // chunk no longer viewed, forgotten here, which the caller releases now.
    [[nodiscard]] bool settle_kept_read_chunk(const char* what);
    // Every read first too: the reader's acquire_read() block is open (`peeked`: its chunk not yet
    // released, and the block's view alive) — a read from inside it, on this thread (the one-thread
    // rule lets it in). RingcastError naming `what`: the next record is that chunk (a dequeue would
    // refuse it as an acquire_write() message, a nested acquire_read would show it again and its
    // release would free the bytes under the outer view). A chunk peeked whose views are all gone is
    // not refused: the GPU path's retry of a failed copy shows it again.
    void refuse_if_read_block_open(bool peeked, const char* what) const;

private:
    py::object obj_;
    bool kept_ = false;  // keep() ran: the chunk is kept until no view of it is left (forget())
};

// dequeue_many's loop, one for the local and the remote reader: waits for the first message as a
// blocking receive does, then takes what is ready without waiting, up to max_n messages. Each message
// taken is appended to `into` (MessageQueue's _burst_left) as (False, parts) at once, before anything
// else can run: a burst is off the ring from the moment it is taken, so it must already be where the
// next read looks when an exception ends this call — the signal handler's KeyboardInterrupt that the
// eval loop raises right after this call returns, or one raised while a later message is taken. The
// next read then serves it, and nothing of the burst is lost (short of a MemoryError in keeping one
// message — a tuple and a list slot, after the message's own bytes were allocated — which loses that
// one). `into` is borrowed, never copied: a copy destroyed while an exception unwinds out of a wait
// (the GIL released there) would drop its reference without the GIL. A close or an error after the
// first message ends the burst quietly (the next call reports it: a dead writer's liveness check is due
// again at once, a corrupt or unallocatable record is still at the head — receive_framed checks a
// record whole before it releases it). Python exceptions other than MemoryError are never held back
// (what was taken stays in `into`). `receive(gil, deadline, drain)` gives one message's parts ({}
// when draining finds nothing); it returns with the GIL released or held, the loop takes it back
// either way. Returns how many messages were appended.
template <class Receive>
std::size_t receive_burst_into(const py::list& into, Gil& gil, std::size_t max_n, Deadline deadline, Receive&& receive) {
    const auto keep = [&](std::vector<py::object>&& parts) {  // the GIL held
        const py::tuple kept = py::make_tuple(false, to_list(std::move(parts)));
        if (PyList_Append(into.ptr(), kept.ptr()) != 0) throw py::error_already_set();
    };
    std::vector<py::object> first = receive(gil, deadline, false);
    gil.acquire();
    keep(std::move(first));
    std::size_t taken = 1;
    while (taken < max_n) {
        std::vector<py::object> more;
        try {
            more = receive(gil, Clock::now(), true);
        } catch (const Closed&) {
            break;
        } catch (const Failure&) {
            break;
        } catch (const ringcast::Error&) {
            break;
        } catch (py::error_already_set& e) {  // the GIL is held (Python raised it)
            if (!e.matches(PyExc_MemoryError)) throw;  // a signal handler's exception: never held back
            break;  // a message too large to allocate now: its record is still at the head
        }
        gil.acquire();
        if (more.empty()) break;
        keep(std::move(more));
        ++taken;
    }
    gil.acquire();  // (an exception may leave it released)
    return taken;
}

}  // namespace ringcast::python::detail
