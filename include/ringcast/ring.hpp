// ringcast/ring.hpp — the broadcast ring: one Writer, N Readers (ranks 0..N-1), each reader receives
// every message in order, exactly once.
//
// Publish order (Writer::commit_record), the one place bytes become visible:
//   1. payload bytes written into the ring (plain stores)
//   2. record header's length and tag written (plain stores)
//   2b. Z: stamp word at the record's end cleared (relaxed), then the record's stamp stored (release;
//      a padding record in front is stamped after it) ← publishes 1 and 2 to a caught-up reader,
//                                              which polls the stamp at its head (layout.hpp "Stamps")
//   3. tail.exchange(new_tail, seq_cst)     ← publishes 1 and 2 (a release; pairs with the readers'
//                                              acquire loads of tail); w1 of wait.hpp
//   4. if a reader's sleeping bit is set (seq_cst load): notify_seq += 1; futex_wake  (wait.hpp, w2..w3)
//   5. the same w2..w3 on the publish bell, if one is set (the gather doorbell): after EVERY record,
//      fragments included, so a collector asleep on the bell sees a reply that fills the ring
//      before it is complete (the worker would otherwise wait for space the collector never frees)
// Release order (Reader::release, or release_fragments / abandon_fragments of record-by-record
// reading, → Reader::store_head):
//   1. the reader is done with the bytes (plain loads)
//   2. head.exchange(new_head, seq_cst)     ← a release; pairs with the writer's acquire loads of
//                                              heads: it overwrites those bytes only after seeing this
//   3. if writer_sleeping (seq_cst load): space_seq += 1; futex_wake
//
// Back-pressure: the writer may use bytes up to min(head over held ranks) + capacity. A rank is held
// unless evicted or left (its owner word's state). Ranks that never attached have head 0 and hold
// the writer: a late reader misses nothing.
//
// Ownership (layout.hpp, "owner words"): every change of a slot's state is one CAS of its owner
// word, so the writer's eviction and a replacement's claim of the same dead owner cannot both win:
//   C1 claim:   CAS {never_attached | detached | attached by a dead pid} -> {attached, me}
//   C2          clear the rank's sleeping bit (a dead predecessor may have died asleep)
//   E1 evict:   CAS {attached by that dead pid} -> {evicted}  (only then is its head ignored)
//   E2          clear the evicted rank's sleeping bit
//   D1 detach:  CAS {attached, me} -> {left} (default) or {detached} (keep_place); after {left}, wake
//               a writer waiting for space (the CAS is w1 of wait.hpp's handshake)
// Clean-exit policy: a reader that leaves cleanly releases its rank unless it asked to keep its
// place, so no clean exit of a reader can hang the writer; a kept place is honoured until the rank
// re-attaches.
// A crashed writer never exposes a torn record: a record is visible only once its stamp or the tail
// passed it, and both are stored after the whole record. A writer that died between its stamps and
// its tail exchange left records a reader may have taken: its successor adopts them
// (layout::stamped_end), as do the checks that compare a head with the tail.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/error.hpp"
#include "ringcast/detail/movable.hpp"
#include "ringcast/detail/process.hpp"
#include "ringcast/detail/wake_ahead.hpp"
#include "ringcast/layout.hpp"
#include "ringcast/segment.hpp"
#include "ringcast/wait.hpp"

// The hot path's helpers, inlined into their callers whatever the optimizer's budget says: each has
// few callers, and a call's saved registers and frame cost more instructions than its own work
// (bench/profile/hop_instructions.cpp counts them). What blocks stays out of line.
#if defined(__GNUC__)
#define RINGCAST_HOT_INLINE [[gnu::always_inline]] inline
#else
#define RINGCAST_HOT_INLINE inline
#endif

namespace ringcast {

namespace gpu {
class DeviceWriter;
class DeviceReader;
}  // namespace gpu

// The largest message a reader will reassemble (a corrupt fragment total beyond it is an error).
inline constexpr std::uint64_t kMaxMessage = 1ULL << 40;

struct WriterOptions {
    WaitOptions wait{};
    // While blocked on space for this long, check whether the lagging readers are alive. Zero turns
    // the check off: a dead reader then holds write() until its timeout (forever without one).
    std::chrono::nanoseconds liveness_interval = std::chrono::seconds(1);
    // A dead lagging reader: false → write() throws Error(peer_dead) naming it; true → the rank is
    // evicted (its head no longer holds the writer; it cannot re-attach) and the writer goes on.
    bool evict_dead_readers = false;
    // The creating Writer unlinks the segment's name when destroyed (mappings stay valid).
    bool unlink_on_destroy = true;
    // Writer::open of a queue its previous writer closed: false → Error(protocol) (a closed queue
    // stays closed); true → reopen it: the closed flag is cleared and readers that drained it and
    // got `closed` receive the new messages if they read again (a restarted gather worker does this).
    bool reopen_closed = false;
};

struct ReaderOptions {
    WaitOptions wait{};
    // Check the writer this often while blocked. Zero turns the check off: a dead writer is then
    // never reported (peek() waits out its timeout; forever without one).
    std::chrono::nanoseconds liveness_interval = std::chrono::seconds(1);
    // attach() of a name that does not exist yet, or exists but is still being created (no magic
    // yet), waits this long for its writer to create it (a reader started before the writer), then
    // throws the last error (not_found, or not_ringcast for a foreign object). Zero: fail at once.
    // A segment left over under the name — nobody alive uses it, a writer once had it, and that
    // writer died without closing it (a killed run) or this rank in it is left or evicted — is
    // waited past too, for the writer's create to reclaim it; past the wait, attach takes what is
    // there and an error names the left-over. A queue its writer closed before exiting is attached
    // at once and drained (while this reader uses it, a new writer's create of the name is refused
    // as in use); so is a segment no writer has had yet (made with Segment::create for a Writer::open).
    std::chrono::nanoseconds create_timeout{0};
    // On a clean detach (destruction): false → the rank is released: the writer stops keeping
    // messages for it and it cannot re-attach (Error rank_left). true → the writer keeps honouring
    // its head (and may block on it) until the rank re-attaches and resumes where it left. Where it
    // left is a record boundary: a Reader destroyed in the middle of a fragmented message (a peek()
    // that timed out while reassembling it, records taken by peek_fragment) has released the records
    // it took, and the re-attached rank skips the rest of that message as orphans — it resumes at the
    // next whole message, never inside one.
    bool keep_place = false;
};

// Where a resumable write (Writer::write_parts with progress) stopped. Opaque to callers: start with a
// default-constructed one per message, pass the same one to every retry of that message.
struct WriteProgress {
    std::uint64_t written = 0;  // message bytes already published (0: nothing of it is out)
    std::uint64_t stream = 0;   // the Writer's stream serial it belongs to (a stale one is not resumed)
    std::uint64_t total = 0;    // the message's size and tag: a resume with others is refused
    std::uint64_t tag = 0;
    [[nodiscard]] bool started() const noexcept { return written != 0; }
};

struct Reservation {
    Status status = Status::timed_out;
    std::span<std::byte> bytes{};  // valid until commit(); empty unless status == ok
};

struct Message {
    Status status = Status::timed_out;
    std::span<const std::byte> bytes{};  // valid until release(); empty unless status == ok
    std::uint64_t tag = 0;
};

// One record of a message, where it lies in the ring (Reader::peek_fragment): a message of one record
// is one fragment (offset 0, last()); a fragmented message is one per record, in order.
struct Fragment {
    Status status = Status::timed_out;
    std::span<const std::byte> bytes{};  // this record's part of the message; valid until released
    std::uint64_t offset = 0;            // where `bytes` go in the message
    std::uint64_t total = 0;             // the whole message's size (every fragment carries it)
    std::uint64_t tag = 0;
    std::uint64_t release_mark = 0;      // Reader::release_fragments(release_mark) frees this record and all before it
    bool withdrawn = false;              // the writer gave the message up part way: drop it (bytes empty)
    [[nodiscard]] bool last() const noexcept { return status == Status::ok && !withdrawn && offset + bytes.size() == total; }
};

// ===================================================================================================
// Writer. Thread-safety: one thread at a time uses a Writer, except cancel()/clear_cancel(), which any
// thread may call at any time. One Writer per segment (claimed in the header, pid-checked).
class Writer {
public:
    [[nodiscard]] static Writer create(std::string_view name, const SegmentOptions& segment_options,
                                       const WriterOptions& options = {});
    // Become the writer of an existing segment (e.g. created by a launcher).
    [[nodiscard]] static Writer open(std::string_view name, const WriterOptions& options = {});

    Writer(Writer&& other) noexcept = default;
    Writer& operator=(Writer&&) = delete;
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    // close()s the queue, releases the writer claim, unlinks the name if asked — in the process that
    // made this Writer. A copy fork() gave a child is its parent's: destroyed there (the child returns
    // from main, or exits through its destructors) it unmaps and leaves the queue, the claim and the
    // name as they were. In the child every write, reserve, commit, check_liveness, wake_fd and
    // arm_wake_fd of such a copy, and an abort_write of an open message, throws Error(protocol)
    // naming the parent's pid before it touches the ring (an argument error found first — a message
    // too large, a resume that is not its message — is reported as such); its close(), remove_name(),
    // wake_ahead(), cancel() and disarm_wake_fd() do nothing to the queue (the queue, its name and
    // its readers' waits are the parent's; cancel sets this copy's own flag only). A WaitSet refuses
    // such a copy too. A child writes through a Writer of its own.
    ~Writer();

    // Copies `message` into the ring (fragmented when larger than max_reserve()). Blocks for space
    // up to `timeout`. On timed_out/cancelled nothing of a small message is visible; of a fragmented
    // message the fragments already published are withdrawn by an abort record at the next write().
    // Throws Error(peer_dead) for a dead lagging reader (unless evicting). Every write throws
    // Error(message_too_large), publishing nothing, for a message over kMaxMessage (what a reader
    // reassembles), and returns Status::closed after close().
    [[nodiscard]] Status write(std::span<const std::byte> message, std::chrono::nanoseconds timeout = kForever,
                               std::uint64_t tag = 0);

    // Scatter write: the message is the concatenation of `parts` (no copy is made to join them).
    // Without `progress`, as write(). With `progress`, a fragmented message that times out (or is
    // cancelled) stays open: its fragments stay published, `progress` records how far it got, and
    // calling write_parts again with the same parts and progress resumes where it stopped — so a
    // caller waiting in bounded slices (a Python binding checking for Ctrl-C) never restarts a large
    // message. Any other write, reserve or abort_write first withdraws the open message (an abort
    // record: readers drop what they got of it). Returns ok once the whole message is published.
    [[nodiscard]] Status write_parts(std::span<const std::span<const std::byte>> parts,
                                     std::chrono::nanoseconds timeout = kForever, std::uint64_t tag = 0,
                                     WriteProgress* progress = nullptr);
    // Fills `dst` (a reserved record in the ring) with the message bytes [offset, offset + dst.size()).
    // The record is published as soon as it returns, so it returns only once those bytes are in place
    // (a device copy has completed). It may throw: that record is not published (as a timeout there).
    using FillFn = void (*)(void* context, std::span<std::byte> dst, std::uint64_t offset);
    // As write_parts, but the `total` bytes come from `fill`, called once per record in message order
    // (one call for a message up to max_reserve(), one per fragment beyond): a caller whose bytes are
    // not in host memory (GPU interop: one DMA per record) writes them straight into the ring.
    [[nodiscard]] Status write_filled(std::uint64_t total, FillFn fill, void* context,
                                      std::chrono::nanoseconds timeout = kForever, std::uint64_t tag = 0,
                                      WriteProgress* progress = nullptr);
    // Withdraws the open message of `progress` (publishes the abort record now). ok also when nothing
    // of it was out; timed_out/cancelled if the abort record found no space (it stays owed).
    [[nodiscard]] Status abort_write(WriteProgress& progress, std::chrono::nanoseconds timeout = kForever);

    // Zero-copy: a span of n bytes in the ring, published by commit(used <= n). n <= max_reserve()
    // or Error(message_too_large). A second reserve() before commit() replaces the first.
    [[nodiscard]] Reservation reserve(std::size_t n, std::chrono::nanoseconds timeout = kForever);
    void commit(std::size_t used, std::uint64_t tag = 0);
    void commit() { commit(reserved_size_, 0); }

    // A message follows soon: the caller is about to make it (pickle it, copy it from a GPU) and
    // publish it. Readers asleep now are woken, so that their wake-up runs while it is made instead
    // of after its publish; each spins for it (wait.hpp, case 3g) about twice as long as this
    // writer's recent wake-aheads came before their publish, then sleeps again. The publish wakes
    // whoever sleeps then, as always: a wake-ahead not followed by a message costs the woken readers
    // that spin, and loses nothing. Readers that sleep on an eventfd are not woken ahead. After a few
    // wake-aheads in a row whose publish still had to wake readers (the message took longer than
    // they spin), the next ones are skipped for a while (detail/wake_ahead.hpp). Returns true if a
    // wake system call was made; with nobody asleep it is one load of the announcement bits.
    // Thread-safety: any thread (its state is atomic), also while another publishes.
    bool wake_ahead() noexcept;

    // Readers drain what was published, then get Status::closed. Idempotent. Every later write,
    // reserve or abort_write of this Writer returns Status::closed and publishes nothing: a message
    // after the close would reach a reader that is still draining and not one that already got
    // `closed` (reopen with Writer::open and WriterOptions::reopen_closed instead). A reservation
    // open at close() is dropped: its commit() throws Error(protocol) and publishes nothing. A
    // moved-from Writer is closed too (it never touches the ring its successor writes).
    void close() noexcept;
    [[nodiscard]] bool closed() const noexcept;
    // Unlinks the segment's name now if it still leads to this segment (a newer queue created under
    // the name since is left alone), and the destructor no more. Idempotent. Not thread-safe against
    // the destructor (the owner calls both).
    void remove_name() noexcept;

    // Until clear_cancel(): the blocking call in progress and every later call that has to wait
    // return Status::cancelled (a call whose data or space is already there still completes).
    // Safe from any thread.
    void cancel() noexcept;
    void clear_cancel() noexcept { cancelled_.get().store(false, std::memory_order_release); }

    // The liveness check a blocked write() runs every liveness_interval, for callers that wait in
    // their own slices (the Python binding): throws Error(peer_dead) naming a dead lagging reader, or
    // evicts it under evict_dead_readers.
    void check_liveness() { check_lagging_readers(); }
    // The strategy of later blocking calls (e.g. a caller waiting in slices spins only in its first).
    void set_wait(const WaitOptions& wait) noexcept { options_.wait = wait; }
    [[nodiscard]] const WaitOptions& wait_options() const noexcept { return options_.wait; }
    // This Writer is a copy fork() gave a child (the queue is the parent's): what wraps it (the GPU
    // DeviceWriter) refuses before its own work and publishes nothing from its destructor either.
    [[nodiscard]] bool in_forked_child() const noexcept { return made_in_.in_forked_child(); }
    // After every published record (fragments included) also run w2..w3 of wait.hpp on `bell`,
    // counting wakes in `wake_calls` (the gather doorbell). Both must outlive the Writer.
    void set_publish_bell(const SleepSite& bell, std::atomic<std::uint64_t>& wake_calls) noexcept {
        bell_ = bell;
        bell_wake_calls_ = &wake_calls;
    }

    [[nodiscard]] std::size_t max_reserve() const noexcept { return max_payload_; }
    [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] std::uint32_t reader_count() const noexcept { return readers_; }
    [[nodiscard]] const Segment& segment() const noexcept { return segment_; }
    // Diagnostics from the shared counters.
    [[nodiscard]] std::uint64_t wake_calls() const noexcept;
    [[nodiscard]] std::uint64_t space_waits() const noexcept;
    // The ranks a wait for space waits for: those holding the writer back at the least head (none
    // when every one has read everything). A snapshot, for an error message that names who held the
    // ring after a wait for space timed out (readers may move on meanwhile).
    [[nodiscard]] std::vector<std::uint32_t> slowest_readers() const;

    // Event loops (events/eventfd.hpp: semantics and drain rule). The eventfd this writer sleeps on
    // while waiting for space; registered on first call (WaitKind::eventfd: at creation), from then on
    // every wait for space of this Writer sleeps on it. Throws Error(system).
    [[nodiscard]] int wake_fd();
    // Announces a wait for room for a message of `message_bytes` (a larger one: for its next
    // fragment). true: room now, or this Writer is cancelled (cancel()), nothing armed — write (a
    // cancelled write with no room returns Status::cancelled). false: armed; watch wake_fd(), then
    // disarm_wake_fd() and retry the write with a zero timeout. Throws Error(permission_denied) when a
    // reader cannot take the fd. With the `progress` of a resumable write that stopped part way
    // (write_parts), the room is that of its next fragment.
    [[nodiscard]] bool arm_wake_fd(std::size_t message_bytes, const WriteProgress* progress = nullptr);
    void disarm_wake_fd() noexcept;

private:
    friend class WaitSet;            // arms its wait for space among many endpoints (events/waitset.hpp)
    friend class gpu::DeviceWriter;  // refuses a child's copy through made_in_ (gpu/device_writer.hpp)
    Writer(Segment segment, const WriterOptions& options, bool owns_name);
    [[nodiscard]] SleepSite space_site() const noexcept;
    [[nodiscard]] SleepSite data_site() const noexcept;
    [[nodiscard]] std::uint64_t min_reader_head_acquire() const noexcept;
    // Is there room now for the first record the next write of a `message_bytes` message needs (the
    // next fragment when `progress` is the open stream it resumes)? The one room test of
    // arm_wake_fd and of WaitSet's writer member: a looser one reports room the write cannot use
    // and the loop spins. Loads the heads (acquire); refreshes known_free_end_.
    [[nodiscard]] bool has_room_for_next_write(std::size_t message_bytes, const WriteProgress* progress) noexcept;
    // The hot path is inlined into write() (a call's saved registers cost more than its work); the
    // waits behind it are out of line (src/ring.cpp).
    [[nodiscard]] RINGCAST_HOT_INLINE Status wait_for_space(std::uint64_t need, Timeout& timeout);
    [[nodiscard]] Status wait_for_space_blocking(std::uint64_t need, Timeout& timeout);
    [[nodiscard]] RINGCAST_HOT_INLINE Status reserve_record(std::uint64_t payload, Timeout& timeout);
    RINGCAST_HOT_INLINE void commit_record(layout::RecordKind kind, std::uint64_t payload, std::uint64_t tag) noexcept;
    void clear_stamp_ahead(std::uint64_t end) noexcept;
    [[nodiscard]] Status finish_broken_stream(Timeout& timeout);
    [[nodiscard]] Status write_stream(FillFn fill, void* context, std::uint64_t total, Timeout& timeout,
                                      std::uint64_t tag, WriteProgress& progress, bool resumable);
    // The start of write_parts/write_filled: resume `progress` if it is the open stream, else withdraw
    // an open stream first. ok: go on writing.
    [[nodiscard]] Status begin_message(Timeout& timeout, WriteProgress* progress, std::uint64_t total, std::uint64_t tag);
    void check_message_size(std::uint64_t total) const;  // Error(message_too_large) over kMaxMessage
    void check_lagging_readers();
    [[noreturn]] static void moved_from(const char* call);  // Error(protocol) naming the call
    [[noreturn]] void forked_copy(const char* call) const;  // Error(protocol): the parent's copy, in a child
    static void check_lagging_readers_thunk(void* self) { static_cast<Writer*>(self)->check_lagging_readers(); }

    Segment segment_;
    WriterOptions options_;
    SpinHistory space_waits_;  // how long waits for space lasted (adaptive hybrid)
    Deadline last_liveness_check_{};  // across calls (wait.hpp WaitContext::last_check)
    detail::Taken<layout::WriterLine*> line_;  // nullptr: moved from
    std::byte* data_ = nullptr;
    std::uint64_t capacity_ = 0;
    std::uint64_t mask_ = 0;
    unsigned lap_shift_ = 0;  // log2(capacity): a cursor's lap for its stamp
    std::size_t max_payload_ = 0;
    std::uint32_t readers_ = 0;
    std::uint64_t tail_ = 0;             // local copy: only this Writer stores the shared tail
    std::uint64_t known_free_end_ = 0;   // tail may grow up to here without rescanning heads
    std::uint64_t reserved_pos_ = 0;     // where the reserved record's header goes
    std::uint64_t reserved_size_ = 0;    // payload bytes reserved; 0 with !has_reservation_
    detail::Taken<bool> has_reservation_;  // a move leaves none in the source
    bool stream_broken_ = false;         // a fragmented write stopped half way: abort it first
    // close() ran, or this Writer was moved from: every later write returns Status::closed.
    detail::SetOnMove closed_;
    std::uint64_t stream_serial_ = 1;    // numbers fragmented streams, so a stale WriteProgress is not resumed
    detail::Taken<bool> owns_name_;
    std::uint64_t owner_word_ = 0;       // our claim in the header's writer_owner
    detail::MadeInProcess made_in_;      // a fork()ed child's copy releases nothing (~Writer)
    SleepSite bell_{};                   // set_publish_bell(); seq == nullptr: none
    std::atomic<std::uint64_t>* bell_wake_calls_ = nullptr;
    detail::MovableFlag cancelled_;  // set by cancel() from any thread
    detail::AheadClock ahead_;       // wake_ahead(): when it woke readers, how far ahead of a publish
    std::unique_ptr<EventfdSignaller> reader_eventfds_;  // copies of the readers' eventfds (data wakes)
    std::unique_ptr<EventfdWaiter> space_eventfd_;       // ours, once registered (wake_fd)
    detail::PublishedPtr<EventfdWaiter> space_eventfd_seen_;  // the same, for cancel() from another thread
};

// ===================================================================================================
// Reader of one rank. Thread-safety: one thread at a time uses a Reader, except cancel()/clear_cancel().
class GatherCollector;
class WaitSet;

class Reader {
public:
    // The name exists from Writer::create until that Writer is destroyed (WriterOptions::
    // unlink_on_destroy; mappings stay valid after), so a reader may start first (options.
    // create_timeout) but not after a creating writer is gone.
    // Throws Error: rank_in_use when another live process holds the rank; invalid_argument for a rank
    // out of range; peer_dead for an evicted rank; rank_left for a rank released by a clean detach;
    // corrupt for a slot whose head is impossible; everything Segment::open throws.
    [[nodiscard]] static Reader attach(std::string_view name, std::uint32_t rank, const ReaderOptions& options = {});

    Reader(Reader&& other) noexcept = default;
    Reader& operator=(Reader&&) = delete;
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    // detaches: releases the rank, or keeps its place (ReaderOptions::keep_place) — in the process that
    // attached; a copy fork() gave a child leaves the parent's rank alone (as ~Writer). In the child
    // every peek, read, peek_fragment, release, release_fragments, abandon_fragments, wake_fd and
    // arm_wake_fd of such a copy throws Error(protocol) naming the parent's pid, before it reads or
    // waits through the rank (the rank's cursor and wait announcements are the parent's: two
    // processes moving one cursor lose messages); its detach(), cancel() and disarm_wake_fd() do
    // nothing to the rank (cancel sets this copy's own flag only), and a WaitSet refuses it. A child
    // reads through a Reader of its own (a rank of its own).
    ~Reader();

    // Zero-copy: the next message, valid until release(). A fragmented message is reassembled into this
    // reader's own buffer (its fragments are released as they are copied). Calling peek() again before
    // release() returns the same message. Throws Error(corrupt) on an impossible record header and
    // Error(peer_dead) if the writer died.
    [[nodiscard]] Message peek(std::chrono::nanoseconds timeout = kForever);
    void release();
    // Copying read: `into` is resized to the message.
    [[nodiscard]] Status read(std::vector<std::byte>& into, std::chrono::nanoseconds timeout = kForever,
                              std::uint64_t* tag = nullptr);

    // Record-by-record reading, for callers that move each record elsewhere themselves (GPU interop: one
    // DMA per record, no reassembly copy): the next record of the message being read. Nothing is
    // released: its bytes stay valid, and the writer cannot overwrite them, until release_fragments()
    // with its release_mark (or a later one), so several records may be held while their copies run.
    // While any is held it does not wait (as with a zero timeout): a held record may be the very space
    // the writer needs to publish the next one, so waiting while holding could wait forever — release
    // what is done, then wait. withdrawn: the writer gave the message up (an abort record): drop what
    // arrived of it (release its mark too). closed in the middle of a message: it never completes.
    // A new message does not start while records of the previous one are held (Error(protocol)); nor
    // while peek() has a message open, and peek() refuses while a message is open here.
    [[nodiscard]] Fragment peek_fragment(std::chrono::nanoseconds timeout = kForever);
    // Frees the records up to `mark` (a release_mark peek_fragment returned, not below an earlier one).
    void release_fragments(std::uint64_t mark);
    // Hands the message being read back, none of it released yet (Error(protocol) otherwise): the next
    // peek() or peek_fragment() returns it from its start (a caller that found no room for it).
    void rewind_fragments();
    // Gives the message being read up: frees every record handed out; the rest of its records are
    // skipped by the next peek() / peek_fragment() (as by a rank that attached in mid-message).
    void abandon_fragments();

    void cancel() noexcept;
    void clear_cancel() noexcept { cancelled_.get().store(false, std::memory_order_release); }

    // Releases the rank now, as the destructor would (keep_place: the place is kept; else the rank is
    // left and the writer stops waiting for it), for a reader done before its object goes (a Python
    // shutdown()). Afterwards only rank(), segment(), the wait accessors and the destructor may be
    // called: the slot may be another process's by then, and nothing of this Reader writes to it
    // again. Idempotent. Thread-safety: as every call (not while another call is in progress).
    void detach() noexcept;
    [[nodiscard]] bool detached() const noexcept { return owner_word_ == 0; }
    // This Reader is a copy fork() gave a child (its rank is the parent's): what wraps it (the GPU
    // DeviceReader) must not release its records either.
    [[nodiscard]] bool in_forked_child() const noexcept { return attached_in_.in_forked_child(); }

    // The liveness check a blocked peek() runs every liveness_interval: throws Error(peer_dead) if the
    // writer died without closing.
    void check_liveness() const { check_writer(); }
    void set_wait(const WaitOptions& wait) noexcept { options_.wait = wait; }
    [[nodiscard]] const WaitOptions& wait_options() const noexcept { return options_.wait; }

    [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
    [[nodiscard]] const Segment& segment() const noexcept { return segment_; }
    [[nodiscard]] std::uint64_t waits() const noexcept;       // futex_wait calls of this rank
    [[nodiscard]] std::uint64_t wake_calls() const noexcept;  // space wakes this rank made

    // Event loops (events/eventfd.hpp: semantics and drain rule). The eventfd this rank sleeps on
    // while waiting for data; registered on first call (WaitKind::eventfd: at attach), from then on
    // every wait of this Reader sleeps on it. Throws Error(system).
    [[nodiscard]] int wake_fd();
    // Announces a wait for data. true: a message (or the close) is there now, or this Reader is
    // cancelled (cancel()), nothing armed — peek.
    // false: armed; watch wake_fd(), then disarm_wake_fd() and peek with a zero timeout (a wake may
    // find nothing: arm again). Throws Error(permission_denied) when the writer cannot take the fd.
    [[nodiscard]] bool arm_wake_fd();
    void disarm_wake_fd() noexcept;

private:
    friend class GatherCollector;  // waits on many readers at once (gather.hpp)
    friend class WaitSet;          // arms it among many endpoints (events/waitset.hpp)
    friend class gpu::DeviceReader;  // refuses a child's copy through attached_in_ (gpu/device_reader.hpp)
    Reader(Segment segment, std::uint32_t rank, const ReaderOptions& options);
    // One look, no waiting: loads tail and the closed flag. True if peek() would not block.
    [[nodiscard]] bool poll_acquire() noexcept;
    [[nodiscard]] bool stamped_at_head() noexcept;
    [[nodiscard]] std::uint64_t stamped_end_at_head() const noexcept;
    [[nodiscard]] bool stamp_look() noexcept;  // poll_acquire's first part: no tail, no closed flag
    [[nodiscard]] SleepSite data_site() const noexcept;
    [[nodiscard]] SleepSite space_site() const noexcept;
    friend class Writer;  // clears an evicted rank's announcement bit (E1)
    [[nodiscard]] static SleepSite data_site_of(const Segment& segment, std::uint32_t rank) noexcept;
    void release_claim(layout::SlotState to) noexcept;
    [[nodiscard]] RINGCAST_HOT_INLINE Status wait_for_data(Timeout& timeout);  // inline up to the wait:
    [[nodiscard]] Status wait_for_data_blocking(Timeout& timeout);              // out of line (ring.cpp)
    void store_head(std::uint64_t new_head) noexcept;
    void check_writer() const;
    static void check_writer_thunk(void* self) { static_cast<Reader*>(self)->check_writer(); }
    [[noreturn]] void corrupt(const std::string& why) const;
    [[noreturn]] static void moved_from();  // Error(protocol): a read of a moved-from Reader
    [[noreturn]] void forked_copy(const char* call) const;  // Error(protocol): the parent's copy, in a child
    // Whether `mark` is the end of a record of those handed out from `released` on (release_fragments).
    [[nodiscard]] bool ends_a_held_record(std::uint64_t released, std::uint64_t mark) const noexcept;
    // The header of the record at head_ (cached_tail_ > head_), checked against what the writer can have
    // published: a corrupt header must not make us read outside the ring or past the tail.
    struct RecordAt {
        std::uint32_t kind;
        std::uint64_t length;  // payload bytes (padding: to the ring's end)
        std::uint64_t tag;
        const std::byte* payload;
        std::uint64_t end;     // head_ after this record
    };
    [[nodiscard]] RINGCAST_HOT_INLINE RecordAt record_at_head() const;
    [[nodiscard]] Message peek_blocking(std::chrono::nanoseconds timeout);  // peek() past its fast path (ring.cpp)
    [[nodiscard]] Message keep_pending(Message m) noexcept;  // pending_ = m, returned from m
    [[noreturn]] void refuse_fragment_mix(const char* call) const;

    Segment segment_;
    ReaderOptions options_;
    SpinHistory data_waits_;  // how long waits for data lasted (adaptive hybrid)
    Deadline last_liveness_check_{};  // across calls (wait.hpp WaitContext::last_check)
    layout::WriterLine* line_ = nullptr;
    detail::Taken<layout::ReaderSlot*> slot_;  // nullptr: moved from
    std::byte* data_ = nullptr;
    std::uint64_t capacity_ = 0;
    std::uint64_t mask_ = 0;
    unsigned lap_shift_ = 0;  // log2(capacity): the lap a stamp at head_ must carry
    std::uint64_t max_payload_ = 0;
    std::uint32_t rank_ = 0;
    std::uint64_t head_ = 0;         // next record to look at; the shared head lags it until release()
    std::uint64_t cached_tail_ = 0;  // published up to here (the last tail seen, or the end of the record
                                     // stamped at head_): no shared load while head_ < cached_tail_
    std::uint64_t pending_end_ = 0;  // head after release() of the peeked message
    detail::Taken<bool> has_pending_;  // a move leaves none in the source (its release() would use no ring)
    Message pending_{};
    // Reassembly of a fragmented message.
    std::unique_ptr<std::byte[]> assembly_;
    std::uint64_t assembly_capacity_ = 0;  // bytes allocated (kept across messages)
    std::uint64_t assembly_size_ = 0;      // the announced total of the message being assembled
    std::uint64_t assembly_filled_ = 0;    // bytes copied so far
    std::uint64_t assembly_tag_ = 0;
    bool assembling_ = false;
    // Record-by-record reading (peek_fragment). The shared head lags head_ while records are held.
    bool streaming_ = false;              // a fragmented message is open: its first record handed out, not its last
    bool fragments_held_ = false;         // records handed out and not yet released (shared head < head_)
    bool message_partly_released_ = false;  // release_fragments freed part of the open message (no rewind)
    std::uint64_t stream_total_ = 0;
    std::uint64_t stream_offset_ = 0;     // message bytes handed out so far
    std::uint64_t stream_tag_ = 0;
    std::uint64_t message_end_mark_ = 0;  // release_mark of a handed-out last record: its release counts the message
    std::uint64_t owner_word_ = 0;  // our claim in the slot's owner word; 0 once detach() gave it up
    detail::MadeInProcess attached_in_;  // a fork()ed child's copy detaches nothing (detach())
    detail::MovableFlag cancelled_;  // set by cancel() from any thread
    // Case 3g of block_until (Writer::wake_ahead): the spin of a reader woken ahead of a message, from
    // the options it attached with — a hybrid reader's, also while a caller waiting in slices has
    // set_wait() a later slice to sleep at once (the Python binding); zero max: none.
    std::chrono::nanoseconds ahead_min_{0};
    std::chrono::nanoseconds ahead_max_{0};
    std::unique_ptr<EventfdSignaller> writer_eventfd_;  // a copy of the writer's eventfd (space wakes)
    std::unique_ptr<EventfdWaiter> data_eventfd_;       // ours, once registered (wake_fd)
    detail::PublishedPtr<EventfdWaiter> data_eventfd_seen_;  // the same, for cancel() from another thread
};

}  // namespace ringcast

#include "ringcast/detail/ring_inl.hpp"
