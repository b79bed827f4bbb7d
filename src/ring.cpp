// The cold parts of Writer and Reader: claiming the writer role or a rank, liveness checks, close,
// cancel, teardown. The hot paths are inline in include/ringcast/detail/ring_inl.hpp.
#include "ringcast/ring.hpp"

#include <string>
#include <utility>

#include <unistd.h>

namespace ringcast {

namespace {

using layout::SlotState;

constexpr std::uint32_t state_value(SlotState s) noexcept { return static_cast<std::uint32_t>(s); }

// Claims a (pid, start time) owner word pair: free (0) or held by a dead process → ours.
// Returns the live holder's pid on failure, 0 on success.
//
// The pid is the claim (one CAS decides between racing claimants); the start time follows it. A
// claimant that loses the CAS to another one therefore may read the winner's pid with the *old*
// holder's start time: it judges that fresh winner by its pid alone (alive and not a zombie), or it
// would take it for dead and both would own the rank.
std::uint32_t claim_owner(std::atomic<std::uint32_t>& owner_pid, std::atomic<std::uint64_t>& owner_start) {
    const auto me = static_cast<std::uint32_t>(::getpid());
    const std::uint64_t my_start = process_start_time(::getpid());
    std::uint32_t holder = owner_pid.load(std::memory_order_acquire);
    for (bool fresh_winner = false;; fresh_winner = true) {
        if (holder != 0) {
            const std::uint64_t start = fresh_winner ? 0 : owner_start.load(std::memory_order_acquire);
            if (process_alive(static_cast<pid_t>(holder), start)) return holder;
        }
        // Free or dead holder. The CAS makes exactly one claimant win; on failure `holder` is the winner.
        if (owner_pid.compare_exchange_strong(holder, me, std::memory_order_acq_rel)) {
            owner_start.store(my_start, std::memory_order_release);
            return 0;
        }
    }
}

}  // namespace

// ---- Writer ---------------------------------------------------------------------------------------

Writer::Writer(Segment segment, const WriterOptions& options, bool owns_name)
    : segment_(std::move(segment)), options_(options), owns_name_(owns_name) {
    auto& h = segment_.header();
    line_ = &segment_.writer_line();
    data_ = segment_.data();
    capacity_ = h.capacity;
    mask_ = capacity_ - 1;
    max_payload_ = layout::max_record_payload(capacity_);
    readers_ = h.reader_count;
    if (const std::uint32_t holder = claim_owner(h.writer_pid, h.writer_start_time); holder != 0)
        throw Error(ErrorCode::writer_in_use, "segment '" + segment_.name() + "' already has a live writer (pid " +
                                                  std::to_string(holder) + ")");
    tail_ = line_->tail.load(std::memory_order_acquire);  // a previous writer's records stay published
    known_free_end_ = tail_;  // unknown: the first reservation scans the heads
    // A previous writer may have died in the middle of a fragmented message, its first fragments
    // held by readers: owe them an abort record (a reader that is not mid-stream ignores it).
    stream_broken_ = tail_ != 0;
}

Writer Writer::create(std::string_view name, const SegmentOptions& segment_options, const WriterOptions& options) {
    Segment seg = Segment::create(name, segment_options);
    try {
        return Writer(std::move(seg), options, options.unlink_on_destroy);
    } catch (...) {
        Segment::remove(name);
        throw;
    }
}

Writer Writer::open(std::string_view name, const WriterOptions& options) {
    return Writer(Segment::open(name), options, false);
}

Writer::Writer(Writer&& other) noexcept
    : segment_(std::move(other.segment_)),
      options_(other.options_),
      line_(std::exchange(other.line_, nullptr)),
      data_(other.data_),
      capacity_(other.capacity_),
      mask_(other.mask_),
      max_payload_(other.max_payload_),
      readers_(other.readers_),
      tail_(other.tail_),
      known_free_end_(other.known_free_end_),
      reserved_pos_(other.reserved_pos_),
      reserved_size_(other.reserved_size_),
      has_reservation_(other.has_reservation_),
      stream_broken_(other.stream_broken_),
      owns_name_(std::exchange(other.owns_name_, false)),
      cancelled_(other.cancelled_.load()) {}

Writer::~Writer() {
    if (line_ == nullptr) return;  // moved from
    close();
    segment_.header().writer_pid.store(0, std::memory_order_release);
    if (owns_name_) {
        try {
            Segment::remove(segment_.name());
        } catch (...) {  // a destructor does not throw; the name may already be gone
        }
    }
}

void Writer::close() noexcept {
    auto& h = segment_.header();
    // The final tail was stored (release) before this; readers load flags (acquire) before the tail,
    // so a reader that sees closed also sees every published record (ring_inl.hpp wait_for_data).
    if ((h.flags.fetch_or(layout::kFlagClosed, std::memory_order_acq_rel) & layout::kFlagClosed) != 0) return;
    wake_all(data_site());
}

bool Writer::closed() const noexcept {
    return (segment_.header().flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0;
}

void Writer::cancel() noexcept {
    cancelled_.store(true, std::memory_order_seq_cst);
    wake_all(space_site());  // bumps space_seq: a writer between 3c and 3e cannot go to sleep
}

std::uint64_t Writer::wake_calls() const noexcept { return line_->wake_calls.load(std::memory_order_relaxed); }
std::uint64_t Writer::space_waits() const noexcept {
    return segment_.space_line().writer_waits.load(std::memory_order_relaxed);
}

// Runs every liveness_interval while the writer is blocked on space (from block_until's on_idle):
// a lagging rank whose owner process is gone cannot release — fail or evict, never hang.
void Writer::check_lagging_readers() {
    const std::uint64_t min_head = min_reader_head_acquire();
    for (std::uint32_t r = 0; r < readers_; ++r) {
        auto& slot = segment_.reader_slot(r);
        if (slot.state.load(std::memory_order_acquire) == state_value(SlotState::evicted)) continue;
        if (slot.head.load(std::memory_order_acquire) != min_head) continue;
        const std::uint32_t pid = slot.owner_pid.load(std::memory_order_acquire);
        if (pid == 0) continue;  // never attached, or detached cleanly: it may still come
        if (process_alive(static_cast<pid_t>(pid), slot.owner_start_time.load(std::memory_order_acquire))) continue;
        // It may have detached cleanly (owner cleared) and exited between our load and the probe, or
        // been replaced by a new owner: only a slot still claimed by the dead process is a death.
        if (slot.owner_pid.load(std::memory_order_acquire) != pid) continue;
        if (options_.evict_dead_readers) {
            slot.state.store(state_value(SlotState::evicted), std::memory_order_release);
            continue;
        }
        throw Error(ErrorCode::peer_dead, "reader rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                                              ") died without releasing; the writer cannot make progress");
    }
}

// ---- Reader ---------------------------------------------------------------------------------------

Reader::Reader(Segment segment, std::uint32_t rank, const ReaderOptions& options)
    : segment_(std::move(segment)), options_(options), rank_(rank) {
    auto& h = segment_.header();
    if (rank >= h.reader_count)
        throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + " out of range: segment '" +
                                                     segment_.name() + "' has " + std::to_string(h.reader_count) +
                                                     " reader ranks (0.." + std::to_string(h.reader_count - 1) + ")");
    line_ = &segment_.writer_line();
    slot_ = &segment_.reader_slot(rank);
    data_ = segment_.data();
    capacity_ = h.capacity;
    mask_ = capacity_ - 1;
    max_payload_ = layout::max_record_payload(capacity_);
    if (slot_->state.load(std::memory_order_acquire) == state_value(SlotState::evicted))
        throw Error(ErrorCode::peer_dead, "rank " + std::to_string(rank) + " of segment '" + segment_.name() +
                                              "' was evicted by the writer after its reader died");
    if (const std::uint32_t holder = claim_owner(slot_->owner_pid, slot_->owner_start_time); holder != 0)
        throw Error(ErrorCode::rank_in_use, "rank " + std::to_string(rank) + " of segment '" + segment_.name() +
                                                "' is already attached by live pid " + std::to_string(holder));
    slot_->state.store(state_value(SlotState::attached), std::memory_order_release);
    head_ = slot_->head.load(std::memory_order_acquire);  // never attached: 0 — nothing is missed
    cached_tail_ = head_;
    // The previous holder of this rank may have died mid-way through a record's processing; head_ is
    // always at a record boundary (only whole records are released), so we resume cleanly.
}

Reader Reader::attach(std::string_view name, std::uint32_t rank, const ReaderOptions& options) {
    return Reader(Segment::open(name), rank, options);
}

Reader::Reader(Reader&& other) noexcept
    : segment_(std::move(other.segment_)),
      options_(other.options_),
      line_(std::exchange(other.line_, nullptr)),
      slot_(std::exchange(other.slot_, nullptr)),
      data_(other.data_),
      capacity_(other.capacity_),
      mask_(other.mask_),
      max_payload_(other.max_payload_),
      rank_(other.rank_),
      head_(other.head_),
      cached_tail_(other.cached_tail_),
      pending_end_(other.pending_end_),
      has_pending_(other.has_pending_),
      pending_(other.pending_),
      assembly_(std::move(other.assembly_)),
      assembly_capacity_(other.assembly_capacity_),
      assembly_size_(other.assembly_size_),
      assembly_filled_(other.assembly_filled_),
      assembly_tag_(other.assembly_tag_),
      assembling_(other.assembling_),
      cancelled_(other.cancelled_.load()) {}

Reader::~Reader() {
    if (slot_ == nullptr) return;  // moved from
    if (slot_->state.load(std::memory_order_acquire) == state_value(SlotState::attached))
        slot_->state.store(state_value(SlotState::detached), std::memory_order_release);
    slot_->owner_pid.store(0, std::memory_order_release);
}

void Reader::cancel() noexcept {
    cancelled_.store(true, std::memory_order_seq_cst);
    wake_all(data_site());  // other ranks wake too, re-check and sleep again: cancel is rare
}

std::uint64_t Reader::waits() const noexcept { return slot_->waits.load(std::memory_order_relaxed); }
std::uint64_t Reader::wake_calls() const noexcept { return slot_->wake_calls.load(std::memory_order_relaxed); }

// Runs every liveness_interval while blocked for data: a dead writer will never publish.
void Reader::check_writer() const {
    auto& h = segment_.header();
    const std::uint32_t pid = h.writer_pid.load(std::memory_order_acquire);
    if (pid == 0) return;  // no writer right now (not yet, or between writers): not a death
    if (process_alive(static_cast<pid_t>(pid), h.writer_start_time.load(std::memory_order_acquire))) return;
    // The writer may have closed the queue and exited between our load of its pid and the probe: its
    // destructor stores closed, then clears writer_pid, before exiting. Only a claim still held by a
    // dead process, on a queue that is not closed, is a death (a close lets us drain, then `closed`).
    if ((h.flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0) return;
    if (h.writer_pid.load(std::memory_order_acquire) != pid) return;
    throw Error(ErrorCode::peer_dead, "the writer of segment '" + segment_.name() + "' (pid " + std::to_string(pid) +
                                          ") died without closing the queue");
}

void Reader::corrupt(const std::string& why) const {
    throw Error(ErrorCode::corrupt, "segment '" + segment_.name() + "', rank " + std::to_string(rank_) +
                                        ", record at " + std::to_string(head_) + ": " + why);
}

}  // namespace ringcast
