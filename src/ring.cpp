// The cold parts of Writer and Reader: claiming the writer role or a rank, liveness checks, close,
// cancel, teardown. The hot paths are inline in include/ringcast/detail/ring_inl.hpp; the ownership
// steps C1/C2/E1/D1 are named in the header comment of include/ringcast/ring.hpp.
#include "ringcast/ring.hpp"

#include "ringcast/events/arm.hpp"

#include <algorithm>
#include <bit>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

namespace ringcast {

namespace {

using layout::Owner;
using layout::SlotState;

std::string rank_name(std::uint32_t rank, const Segment& seg) {
    return "rank " + std::to_string(rank) + " of segment '" + seg.name() + "'";
}

}  // namespace

// ---- Writer ---------------------------------------------------------------------------------------

Writer::Writer(Segment segment, const WriterOptions& options, bool owns_name)
    : segment_(std::move(segment)), options_(options), owns_name_(owns_name) {
    auto& h = segment_.header();
    capacity_ = h.capacity;
    mask_ = capacity_ - 1;
    lap_shift_ = static_cast<unsigned>(std::countr_zero(capacity_));
    max_payload_ = layout::max_record_payload(capacity_);
    readers_ = h.reader_count;
    // Claim the writer role: free (pid 0) or held by a dead process → ours, in one CAS of the one
    // owner word (a racing claimant that loses re-reads the winner's whole word, pid and start).
    const std::uint64_t mine = my_owner_word(SlotState::attached);
    std::uint64_t seen = h.writer_owner.load(std::memory_order_acquire);
    for (;;) {
        const Owner holder = layout::unpack_owner(seen);
        if (owner_alive(holder))
            throw Error(ErrorCode::writer_in_use, "segment '" + segment_.name() + "' already has a live writer (pid " +
                                                      std::to_string(holder.pid) + ")");
        if (h.writer_owner.compare_exchange_weak(seen, mine, std::memory_order_acq_rel)) break;
    }
    RINGCAST_CRASH_POINT(writer_claim);  // (the fault tests' crash points, detail/crash_point.hpp)
    owner_word_ = mine;
    line_ = &segment_.writer_line();
    data_ = segment_.data();
    // C2 for the writer role: a predecessor killed while asleep for space left its bit set.
    clear_announcement(space_site());
    // E2 owed by a predecessor killed between E1 and E2: an evicted rank has no owner who could ever
    // clear its bit (and a left one had none asleep), so clear theirs too.
    for (std::uint32_t r = 0; r < readers_; ++r)
        if (!holds_writer(layout::unpack_owner(segment_.reader_slot(r).owner.load(std::memory_order_acquire)).state))
            clear_announcement(Reader::data_site_of(segment_, r));
    RINGCAST_CRASH_POINT(writer_c2);
    tail_ = line_->tail.load(std::memory_order_acquire);  // a previous writer's records stay published
    known_free_end_ = tail_;  // unknown: the first reservation scans the heads
    try {
        // The readers' eventfd registrations, for our data wakes (events/eventfd.hpp).
        reader_eventfds_ = std::make_unique<EventfdSignaller>(&segment_.reader_slot(0).eventfd,
                                                              sizeof(layout::ReaderSlot), readers_);
        if (options_.wait.kind == WaitKind::eventfd) (void)wake_fd();  // eventfd() may fail (EMFILE)
    } catch (...) {
        // No destructor runs for a constructor that throws: give the role back here, or it stays
        // held by this live process (writer_in_use to every retry, ours included) until it exits.
        // Back to the word we replaced (`seen`, as the CAS left it), not to 0: a dead writer's claim
        // stays one (blocked readers still get peer_dead; the segment still had a writer).
        std::uint64_t expected = mine;
        h.writer_owner.compare_exchange_strong(expected, seen, std::memory_order_acq_rel);
        throw;
    }
    // A previous writer that died between its stamps and its tail exchange (publish order 2b..3)
    // left records that caught-up readers may have taken: they are published. Adopt them, so the
    // tail is past every record a reader can have read, and wake whoever sleeps on the old tail.
    if (const std::uint64_t stamped = layout::stamped_end(data_, capacity_, tail_); stamped != tail_) {
        tail_ = stamped;
        (void)publish_and_notify(line_->tail, tail_, data_site(), line_->wake_calls);
    }
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
    Writer w(Segment::open(name), options, false);  // claims the role first: only the writer reopens
    w.segment_.prefault();                          // it will write the ring: its pages, now
    auto& flags = w.segment_.header().flags;
    if ((flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0) {
        if (!options.reopen_closed)
            throw Error(ErrorCode::protocol, "segment '" + w.segment_.name() +
                                                 "' was closed by its writer; a closed queue stays closed "
                                                 "(WriterOptions::reopen_closed reopens it)");
        flags.fetch_and(~layout::kFlagClosed, std::memory_order_acq_rel);
    }
    return w;
}

Writer::~Writer() {
    if (line_ == nullptr) return;  // moved from
    // A fork()ed child's copy (the child returning from main): the queue, the role and the name are
    // the parent's. Its close would end the parent's queue for every reader, its CAS would free the
    // parent's live claim (another writer could take it), its unlink the parent's name; the
    // registration (space_eventfd_'s destructor) is the parent's too (EventfdWaiter checks the same).
    if (made_in_.in_forked_child()) return;
    close();
    space_eventfd_seen_.publish(nullptr);
    space_eventfd_.reset();  // unregister while the role is ours: a successor may register next
    // Release the role only if it is still ours (a CAS: never clear a successor's claim).
    std::uint64_t expected = owner_word_;
    segment_.header().writer_owner.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
    if (owns_name_) remove_name();
}

void Writer::remove_name() noexcept {
    if (made_in_.in_forked_child()) return;  // a fork()ed child's copy: the name is the parent's
    // Only if the name still leads here: a process that shut its queue down may drop the Writer long
    // after another created a queue of the same name, whose segment a removal by name would take.
    (void)unlink_if_still_this(segment_.name(), segment_);
    owns_name_ = false;
}

void Writer::close() noexcept {
    closed_ = true;
    has_reservation_ = false;  // a reservation open now is never published: commit() refuses it
    if (line_ == nullptr) return;  // moved from: the ring is the new owner's
    if (made_in_.in_forked_child()) return;  // a fork()ed child's copy: the queue is the parent's
    auto& h = segment_.header();
    // The final tail was stored (release) before this; readers load flags (acquire) before the tail,
    // so a reader that sees closed also sees every published record (Reader::poll_acquire, ring_inl.hpp).
    if ((h.flags.fetch_or(layout::kFlagClosed, std::memory_order_acq_rel) & layout::kFlagClosed) != 0) return;
    wake_all(data_site());
    if (bell_.seq != nullptr) wake_all(bell_);
}

bool Writer::wake_ahead() noexcept {
    if (line_ == nullptr) return false;  // moved from: its readers are its successor's to wake
    if (made_in_.in_forked_child()) return false;  // a fork()ed child's copy: the parent's readers
    const SleepSite site = data_site();
    // w2 alone: with no cursor moved, this is what any waker may do. A reader whose bit is clear is
    // awake (or past its 3d, about to see the next publish's w1), so nobody is missed here; nobody
    // need be, either: the publish runs w1..w3 itself (wait.hpp, "Waking ahead").
    if (!any_announced(site)) return false;
    if (ahead_.paused()) return false;  // recent wake-aheads did not pay (detail/wake_ahead.hpp)
    // The hint before the wake, which a woken reader loads after its futex_wait returned. Relaxed: a
    // stale value only changes how long that reader spins.
    line_->ahead_us.store(ahead_.started(Clock::now()), std::memory_order_relaxed);
    // w2..w3 for futex sleepers only: an eventfd sleeper's event loop would wake to nothing and re-arm.
    SleepSite futex_sleepers = site;
    futex_sleepers.eventfds = nullptr;
    return notify_sleepers(futex_sleepers, line_->wake_calls);
}

bool Writer::closed() const noexcept { return line_ == nullptr || segment_.closed_acquire(); }

// Cancels the blocking call in progress and every later one until clear_cancel().
void Writer::cancel() noexcept {
    if (line_ == nullptr) return;  // moved from: nothing of it can be waiting
    cancelled_.get().store(true, std::memory_order_seq_cst);
    if (made_in_.in_forked_child()) return;  // a fork()ed child's copy: as Reader::cancel
    wake_all(space_site());  // bumps space_seq: a writer between 3c and 3e cannot go to sleep
    if (EventfdWaiter* e = space_eventfd_seen_.load()) e->poke();  // (flag first: see Reader::cancel)
}

// A moved-from Writer's counters read 0, its waits and checks refuse: its ring is its successor's.
std::uint64_t Writer::wake_calls() const noexcept {
    return line_ == nullptr ? 0 : line_->wake_calls.load(std::memory_order_relaxed);
}
std::uint64_t Writer::space_waits() const noexcept {
    return line_ == nullptr ? 0 : segment_.space_line().writer_waits.load(std::memory_order_relaxed);
}

void Writer::moved_from(const char* call) {
    throw Error(ErrorCode::protocol, std::string(call) + ": this Writer was moved from: use the Writer it was moved into");
}

void Writer::forked_copy(const char* call) const {
    made_in_.refuse_copy(call, "this Writer of '" + segment_.name() + "'",
                         "Write through a Writer this process opens (one writer per queue)");
}

// Runs every liveness_interval while the writer is blocked on space (from block_until's on_idle):
// a lagging rank whose owner process is gone cannot release — fail or evict, never hang.
void Writer::check_lagging_readers() {
    if (line_ == nullptr) moved_from("check_liveness()");
    if (made_in_.in_forked_child()) forked_copy("check_liveness()");  // it may evict: the parent's call
    const std::uint64_t min_head = min_reader_head_acquire();
    for (std::uint32_t r = 0; r < readers_; ++r) {
        auto& slot = segment_.reader_slot(r);
        std::uint64_t word = slot.owner.load(std::memory_order_acquire);
        const Owner owner = layout::unpack_owner(word);
        if (owner.state != SlotState::attached) continue;  // free, kept, evicted or left: nobody to judge
        if (slot.head.load(std::memory_order_acquire) != min_head) continue;
        if (owner_alive(owner)) continue;
        if (options_.evict_dead_readers) {
            // E1: one CAS from exactly the word we judged. If a replacement claimed the rank in
            // between (C1), the CAS fails and the replacement keeps a head we still honour.
            if (slot.owner.compare_exchange_strong(word, layout::pack_owner({SlotState::evicted, 0, 0}),
                                                   std::memory_order_acq_rel)) {
                RINGCAST_CRASH_POINT(evict_e1);
                clear_announcement(Reader::data_site_of(segment_, r));  // E2: the dead owner may have slept
                RINGCAST_CRASH_POINT(evict_e2);
            }
            continue;
        }
        // Only a slot still claimed by that dead process is a death (not one re-claimed or left since).
        if (slot.owner.load(std::memory_order_acquire) != word) continue;
        throw ReaderDiedError(r, owner.pid);
    }
}

std::vector<std::uint32_t> Writer::slowest_readers() const {
    // One pass, each head loaded once (a second pass against min_reader_head_acquire's minimum could
    // miss a rank that moved on in between and name nobody).
    std::vector<std::uint32_t> ranks;
    if (line_ == nullptr) return ranks;  // moved from: it holds nobody up
    std::uint64_t min_head = tail_;
    for (std::uint32_t r = 0; r < readers_; ++r) {
        auto& slot = segment_.reader_slot(r);
        if (!holds_writer(layout::unpack_owner(slot.owner.load(std::memory_order_acquire)).state)) continue;
        const std::uint64_t head = slot.head.load(std::memory_order_acquire);
        if (head > min_head) continue;
        if (head < min_head) ranks.clear();
        min_head = head;
        ranks.push_back(r);
    }
    if (min_head == tail_) ranks.clear();  // every one has read everything
    return ranks;
}

// ---- Reader ---------------------------------------------------------------------------------------

Reader::Reader(Segment segment, std::uint32_t rank, const ReaderOptions& options)
    : segment_(std::move(segment)), options_(options), rank_(rank) {
    if (options.wait.kind == WaitKind::hybrid) {
        ahead_min_ = options.wait.spin_for;
        ahead_max_ = std::max(options.wait.spin_for, options.wait.spin_max);
    }
    auto& h = segment_.header();
    if (rank >= h.reader_count)
        throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + " out of range: segment '" +
                                                     segment_.name() + "' has " + std::to_string(h.reader_count) +
                                                     " reader ranks (0.." + std::to_string(h.reader_count - 1) + ")");
    auto& slot = segment_.reader_slot(rank);
    // C1: claim the rank in one CAS of its owner word, from exactly the word we judged claimable.
    // Evicted and left are final: the writer no longer keeps this rank's messages.
    const std::uint64_t mine = my_owner_word(SlotState::attached);
    std::uint64_t seen = slot.owner.load(std::memory_order_acquire);
    for (;;) {
        const Owner holder = layout::unpack_owner(seen);
        if (holder.state == SlotState::evicted)
            throw Error(ErrorCode::peer_dead, rank_name(rank, segment_) + " was evicted by the writer after its reader died" + kDeadPeerHint);
        if (holder.state == SlotState::left)
            throw Error(ErrorCode::rank_left, rank_name(rank, segment_) +
                                                  " was released by a clean detach: the writer no longer keeps its "
                                                  "messages (a reader that means to come back sets keep_place)");
        if (holder.state == SlotState::attached && owner_alive(holder))
            throw Error(ErrorCode::rank_in_use, rank_name(rank, segment_) + " is already attached by live pid " +
                                                    std::to_string(holder.pid));
        if (slot.owner.compare_exchange_weak(seen, mine, std::memory_order_acq_rel)) break;
    }
    RINGCAST_CRASH_POINT(claim_c1);
    owner_word_ = mine;
    line_ = &segment_.writer_line();
    slot_ = &slot;
    data_ = segment_.data();
    capacity_ = h.capacity;
    mask_ = capacity_ - 1;
    lap_shift_ = static_cast<unsigned>(std::countr_zero(capacity_));
    max_payload_ = layout::max_record_payload(capacity_);
    clear_announcement(data_site());  // C2: a predecessor killed asleep left our bit set
    RINGCAST_CRASH_POINT(claim_c2);
    // The head is ours now and the writer honours it (the slot was never evicted or left, and from
    // C1 on the writer's E1 cannot succeed against our live claim): tail - head <= capacity holds.
    head_ = slot.head.load(std::memory_order_acquire);  // never attached: 0 — nothing is missed
    const std::uint64_t tail = line_->tail.load(std::memory_order_acquire);
    // (A head may lie past the tail by the records a writer stamped and did not yet, or never, pass
    // the tail over: layout::stamped_end.)
    if (!layout::cursor_aligned(head_) || head_ > layout::stamped_end(data_, capacity_, tail) ||
        (tail > head_ && tail - head_ > capacity_)) {
        release_claim(SlotState::detached);
        throw Error(ErrorCode::corrupt, rank_name(rank, segment_) + ": head " + std::to_string(head_) +
                                            " is impossible against tail " + std::to_string(tail));
    }
    cached_tail_ = head_;
    try {
        // The writer's eventfd registration, for our space wakes (events/eventfd.hpp).
        writer_eventfd_ = std::make_unique<EventfdSignaller>(&segment_.space_line().writer_eventfd, 0, 1);
        if (options_.wait.kind == WaitKind::eventfd) (void)wake_fd();  // eventfd() may fail (EMFILE)
    } catch (...) {
        // No destructor runs for a constructor that throws: hand the rank back, or it stays held by
        // this live process — rank_in_use to every retry, and a writer waiting for a reader that
        // never reads, with no peer_dead (its owner lives). Back to the word we replaced (`seen`, as
        // the CAS left it): a dead reader's claim stays one (the writer still evicts it or says
        // peer_dead), a never-attached or kept place stays so. Nobody else changes our live word.
        std::uint64_t expected = mine;
        slot.owner.compare_exchange_strong(expected, seen, std::memory_order_seq_cst);
        throw;
    }
    // The previous holder of this rank may have died mid-way through a record's processing; head_ is
    // always at a record boundary (only whole records are released), so we resume cleanly.
}

namespace {
// A segment left over under its name, for a reader that may wait for its writer (Reader::attach):
// nobody alive uses it, a writer once had it (a segment no writer ever had is a launcher's, waiting
// for its Writer::open), and nothing in it is for `rank`: its writer died without closing it (a
// killed run), or `rank` there can never be claimed again (left, evicted). "A writer once had it":
// Segment::writer_ever_attached.
bool left_over_for(const Segment& segment, std::uint32_t rank) {
    const auto& h = segment.header();
    if (rank >= h.reader_count) return false;  // the constructor's invalid_argument says so at once
    if (!Segment::user_of(segment.base()).empty()) return false;
    if (!segment.closed_acquire()) return segment.writer_ever_attached();  // unclosed: a writer's claim
    const SlotState state = layout::unpack_owner(segment.reader_slot(rank).owner.load(std::memory_order_acquire)).state;
    return state == SlotState::left || state == SlotState::evicted;
}
}  // namespace

Reader Reader::attach(std::string_view name, std::uint32_t rank, const ReaderOptions& options) {
    const Deadline give_up = deadline_after(options.create_timeout);
    const auto waited = [&] { return " (waited " + std::to_string(options.create_timeout.count() / 1'000'000) + " ms"; };
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(2 * pause, std::chrono::milliseconds(50))) {
        const bool may_wait = give_up != kPollOnly && Clock::now() < give_up;
        bool left_over = false;  // this look found the name held by a segment nobody alive uses
        try {
            Segment segment = Segment::open(name);
            // A reader that may start first also waits past a segment left over under this name
            // (left_over_for: nobody alive uses it, its writer died without closing it or our rank
            // there is gone for good). The next writer's create reclaims the name
            // (SegmentOptions::reclaim_abandoned); claiming a rank in the left-over now would attach
            // us to a queue nobody writes and make us the live user that has that create refuse the
            // name. A writer that wrote, closed and exited before we looked is not waited past: its
            // queue is drained (and, while we drain it, a new writer's create of the name is refused
            // as in use). Past the wait we take what is there.
            left_over = give_up != kPollOnly && left_over_for(segment, rank);
            if (!left_over || !may_wait) {
                Reader r(std::move(segment), rank, options);
                r.segment_.prefault();  // once the rank is ours: its first lap needs the pages
                return r;
            }
        } catch (const Error& e) {
            // Waiting for the name covers its creation too: between the creator's shm_open and its
            // header's magic the object exists but is not a ringcast segment yet (not_ringcast). A
            // foreign object stays so: after the wait, its error is the one thrown.
            const bool creating = e.code() == ErrorCode::not_found || e.code() == ErrorCode::not_ringcast;
            if (!creating || !may_wait) {
                if (left_over)  // rank_left, peer_dead, ...: say why it is so
                    throw Error(e.code(), std::string(e.what()) + "; segment '" + std::string(name) +
                                              "' is left over: nobody alive uses it" + waited() +
                                              " for a writer to create it anew; `ringcast gc` or `python3 -m ringcast gc` removes such segments)");
                if (e.code() == ErrorCode::not_found && give_up != kPollOnly)
                    throw Error(ErrorCode::not_found, std::string(e.what()) + waited() + " for its writer to create it)");
                throw;
            }
        }
        std::this_thread::sleep_for(pause);
    }
}

SleepSite Reader::data_site_of(const Segment& segment, std::uint32_t rank) noexcept {
    const std::uint32_t readers = segment.header().reader_count;
    return {&segment.writer_line().notify_seq, segment.reader_sleep_line().sleeping, (readers + 63) / 64, rank,
            &segment.reader_slot(rank).waits};
}

// D1: hand the rank back in one CAS, only if it is still our claim (nobody else changes a live
// owner's word: E1 needs a dead owner, C1 a dead or absent one).
void Reader::release_claim(SlotState to) noexcept {
    std::uint64_t expected = owner_word_;
    const bool released = segment_.reader_slot(rank_).owner.compare_exchange_strong(
        expected, layout::pack_owner({to, 0, 0}), std::memory_order_seq_cst);
    if (released) RINGCAST_CRASH_POINT(detach_d1);
    // A left rank no longer holds the writer: the CAS is w1 of wait.hpp for a writer asleep on space.
    if (released && to == SlotState::left) notify_sleepers(space_site(), segment_.reader_slot(rank_).wake_calls);
}

Reader::~Reader() { detach(); }

void Reader::detach() noexcept {
    if (slot_ == nullptr || owner_word_ == 0) return;  // moved from, or detached already
    // A fork()ed child's copy: the rank is the parent's (releasing it would make the writer stop
    // waiting for a reader that still reads, and overwrite what it has not read).
    if (in_forked_child()) {
        owner_word_ = 0;
        return;
    }
    // Unregister while the rank is ours (a successor may register next); the fd itself stays open
    // until the destructor: an event loop may still watch it (a Python reader's shutdown() pokes it,
    // then detaches — the loop must see that poke, and must not find the number reused by a socket).
    if (data_eventfd_) data_eventfd_->unregister();
    // An announcement left by an event loop's arm() (this endpoint waits in no futex now: detach runs
    // between calls) would make the writer pay a wake syscall for this rank on every publish, and a
    // left rank is never claimed again, so nobody else would clear it. Cleared only while the claim is
    // still ours: until our D1 nobody can claim the rank (a live owner is neither evicted nor
    // replaced), so the bit is ours alone; once the word is another (we were evicted, or this object
    // stands for a killed process in a test), the bit may be a successor's — clearing it could lose
    // that successor's wake.
    if (slot_->owner.load(std::memory_order_acquire) == owner_word_) clear_announcement(data_site());
    release_claim(options_.keep_place ? SlotState::detached : SlotState::left);
    owner_word_ = 0;
}

void Reader::cancel() noexcept {
    if (slot_ == nullptr) return;  // moved from: nothing of it can be waiting
    cancelled_.get().store(true, std::memory_order_seq_cst);
    // A fork()ed child's copy: no wait of it can be in progress (every one is refused), and the
    // wakes below would be of the parent's waits, the poke on the parent's eventfd.
    if (attached_in_.in_forked_child()) return;
    wake_all(data_site());  // other ranks wake too, re-check and sleep again: cancel is rare
    // An eventfd sleeper: the flag is stored (seq_cst) before the poke, and the waiter drains (3a')
    // before it checks the flag, so the poke is seen or the flag is.
    // The pointer is published (seq_cst) by wake_fd(): read as null here, it was published after
    // this load, so after the flag's store — and the arm that follows wake_fd() sees the flag.
    if (EventfdWaiter* e = data_eventfd_seen_.load()) e->poke();
}

// A moved-from Reader's counters read 0; everything else of it refuses (moved_from()).
std::uint64_t Reader::waits() const noexcept { return slot_ == nullptr ? 0 : slot_->waits.load(std::memory_order_relaxed); }
std::uint64_t Reader::wake_calls() const noexcept {
    return slot_ == nullptr ? 0 : slot_->wake_calls.load(std::memory_order_relaxed);
}

// Runs every liveness_interval while blocked for data: a dead writer will never publish.
void Reader::check_writer() const {
    if (slot_ == nullptr) moved_from();
    auto& h = segment_.header();
    const std::uint64_t word = h.writer_owner.load(std::memory_order_acquire);
    const Owner writer = layout::unpack_owner(word);
    if (writer.pid == 0) return;  // no writer right now (not yet, or between writers): not a death
    if (owner_alive(writer)) return;
    // The writer may have closed the queue and exited between our load and the probe: its destructor
    // stores closed, then releases the role, before exiting. Only a claim still held by a dead
    // process, on a queue that is not closed, is a death (a close lets us drain, then `closed`).
    if ((h.flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0) return;
    if (h.writer_owner.load(std::memory_order_acquire) != word) return;
    // A writer that published and then died did not leave us waiting for nothing: what it published
    // is ours to read first (the wait's next look takes it; a gather's reply is an answer). The check
    // runs between a wait's looks, so the publish may have landed after the last one: look again, at
    // the tail and at the stamp at head_ (a writer killed between stamping and the tail's exchange
    // left a record whole, publish_2_stamped). Final, not a race: the stores came before the writer's
    // exit, and the probe above saw that exit through the kernel, so these loads, after it, see them.
    // Once every record is taken, the next check finds none and reports the death.
    if (has_pending_ || head_ < cached_tail_ || line_->tail.load(std::memory_order_acquire) > head_ ||
        stamped_end_at_head() != head_)
        return;
    throw Error(ErrorCode::peer_dead, "the writer of segment '" + segment_.name() + "' (pid " +
                                          std::to_string(writer.pid) + ") died without closing the queue" + kDeadPeerHint);
}

// ---- the waits behind the hot path (ring_inl.hpp) ---------------------------------------------------

// Writer::wait_for_space past its fast path (ring_inl.hpp).
Status Writer::wait_for_space_blocking(std::uint64_t need, Timeout& timeout) {
    const auto has_room = [&] {
        known_free_end_ = min_reader_head_acquire() + capacity_;
        return tail_ + need <= known_free_end_;
    };
    if (has_room()) return Status::ok;  // readers moved on: still no clock read
    const SleepSite site = space_site();
    const WaitContext ctx{{&site, 1},       timeout.deadline(), &cancelled_.get(), options_.wait.before_sleep,
                          options_.liveness_interval, &Writer::check_lagging_readers_thunk, this, &space_waits_,
                          nullptr,          &last_liveness_check_, space_eventfd_.get()};
    switch (block_until(options_.wait, ctx, has_room)) {
        case WaitOutcome::ready: return Status::ok;
        case WaitOutcome::cancelled: return Status::cancelled;
        case WaitOutcome::timed_out: break;
    }
    return Status::timed_out;
}

// Reader::wait_for_data past its fast path (ring_inl.hpp).
Status Reader::wait_for_data_blocking(Timeout& timeout) {
    // poll_acquire reads closed before tail: the writer stores its final tail before the closed flag,
    // so closed + (tail == head_) means drained. A spin step looks at the stamp alone (SpinLook in
    // wait.hpp): the tail's line is not loaded on every step while the writer stores it on every publish.
    struct HasData {
        static void spin_look_tag() noexcept {}  // opts in to SpinLook (wait.hpp)
        Reader& r;
        bool operator()() const { return r.poll_acquire(); }
        bool operator()(SpinLook) const { return r.stamp_look(); }
    } has_data{*this};
    const SleepSite site = data_site();
    WaitContext ctx{{&site, 1},       timeout.deadline(), &cancelled_.get(), options_.wait.before_sleep,
                    options_.liveness_interval, &Reader::check_writer_thunk, this, &data_waits_,
                    nullptr,          &last_liveness_check_, data_eventfd_.get()};
    // Case 3g of block_until: a hybrid reader woken ahead of a message (Writer::wake_ahead) spins
    // for it as long as the writer said, within its own spin bounds. (An eventfd sleeper is never
    // woken ahead; a spinning one never sleeps.)
    if (ahead_max_.count() > 0 && ctx.eventfd == nullptr) {
        ctx.ahead_us = &line_->ahead_us;
        ctx.ahead_min = ahead_min_;
        ctx.ahead_max = ahead_max_;
    }
    switch (block_until(options_.wait, ctx, has_data)) {
        case WaitOutcome::ready: break;
        case WaitOutcome::cancelled: return Status::cancelled;
        case WaitOutcome::timed_out: return Status::timed_out;
    }
    if (head_ < cached_tail_) return Status::ok;
    return Status::closed;
}

// ---- peek() past its fast path (ring_inl.hpp) -----------------------------------------------------

// peek() past its common case (the same checks done again: a stamp seen there is still current).
Message Reader::peek_blocking(std::chrono::nanoseconds timeout_ns) {
    Timeout timeout(timeout_ns);
    for (;;) {
        const Status s = wait_for_data(timeout);
        if (s != Status::ok) {
            if (s == Status::closed) assembling_ = false;  // an unfinished stream never completes
            return {s, {}, 0};
        }
        const RecordAt rec = record_at_head();
        const std::uint64_t length = rec.length;
        const std::uint32_t kind = rec.kind;
        const std::uint64_t tag = rec.tag;
        const std::byte* payload = rec.payload;
        const std::uint64_t end = rec.end;
        if (kind == static_cast<std::uint32_t>(layout::RecordKind::padding)) {
            head_ = end;  // released together with the next record
            continue;
        }
        switch (static_cast<layout::RecordKind>(kind)) {
            case layout::RecordKind::message:
                if (assembling_) corrupt("a whole message inside a fragmented one");
                has_pending_ = true;
                pending_end_ = end;
                return keep_pending({Status::ok, {payload, length}, tag});
            case layout::RecordKind::fragment_first: {
                if (assembling_) corrupt("a new fragmented message before the last one ended");
                if (length < layout::kFragmentPrefix) corrupt("first fragment shorter than its prefix");
                std::uint64_t total = 0;
                std::memcpy(&total, payload, sizeof total);
                const std::uint64_t chunk = length - layout::kFragmentPrefix;
                if (total <= chunk) corrupt("fragmented message total " + std::to_string(total) + " too small");
                if (total > kMaxMessage) corrupt("fragmented message total " + std::to_string(total) + " is absurd");
                assembly_size_ = total;
                detail::grow_assembly(assembly_, assembly_capacity_, 0, chunk, total);
                std::memcpy(assembly_.get(), payload + layout::kFragmentPrefix, chunk);
                assembly_filled_ = chunk;
                assembly_tag_ = tag;
                assembling_ = true;
                break;
            }
            case layout::RecordKind::fragment_middle:
            case layout::RecordKind::fragment_last: {
                if (!assembling_) {  // joined mid-stream (re-attached rank): skip the orphan fragment
                    break;
                }
                if (tag != assembly_tag_) corrupt("fragment tag changed within a message");
                if (assembly_filled_ + length > assembly_size_) corrupt("fragments exceed the announced total");
                detail::grow_assembly(assembly_, assembly_capacity_, assembly_filled_, assembly_filled_ + length,
                                      assembly_size_);
                std::memcpy(assembly_.get() + assembly_filled_, payload, length);
                assembly_filled_ += length;
                if (kind == static_cast<std::uint32_t>(layout::RecordKind::fragment_last)) {
                    if (assembly_filled_ != assembly_size_) corrupt("last fragment ends before the announced total");
                    assembling_ = false;
                    head_ = end;
                    store_head(head_);  // the ring bytes are copied out: release them now
                    has_pending_ = true;
                    pending_end_ = head_;
                    return keep_pending({Status::ok, {assembly_.get(), assembly_size_}, assembly_tag_});
                }
                break;
            }
            case layout::RecordKind::fragment_abort:
                assembling_ = false;
                break;
            default: corrupt("unknown record kind " + std::to_string(kind));
        }
        // A fragment (or abort) was consumed into our own buffer: release it so the writer can go on.
        head_ = end;
        store_head(head_);
    }
}

// ---- record-by-record reading (ring.hpp: peek_fragment) -------------------------------------------
// The release rule is the one of peek()/release(): a record's space goes back to the writer only by
// store_head (ring.hpp release order), here only in release_fragments / abandon_fragments / skipping
// a record nobody needs. The caller decides when: after it is done with the bytes (the GPU reader:
// after the completion event of the DMA that read them). Until then the writer cannot overwrite them:
// it never writes past min(head) + capacity, and our shared head stays below them.

void Reader::refuse_fragment_mix(const char* call) const {
    if (streaming_ || fragments_held_)
        throw Error(ErrorCode::protocol, std::string(call) + ": a message is being read record by record "
                                                             "(peek_fragment): release_fragments or abandon_fragments it first");
    throw Error(ErrorCode::protocol, std::string(call) + ": peek() has a message open" +
                                         (assembling_ ? " (reassembling its fragments)" : "") +
                                         ": release() it, or let peek() finish it, first");
}

Fragment Reader::peek_fragment(std::chrono::nanoseconds timeout_ns) {
    if (attached_in_.in_forked_child()) [[unlikely]] forked_copy("peek_fragment()");  // the parent's rank
    if (has_pending_ || assembling_) refuse_fragment_mix("peek_fragment()");
    if (!streaming_ && fragments_held_)
        throw Error(ErrorCode::protocol, "peek_fragment(): the records of the previous message are still held: "
                                         "release_fragments them before the next message");
    // No wait while holding records: the one we would wait for may need their space (ring.hpp).
    Timeout timeout(fragments_held_ ? std::chrono::nanoseconds::zero() : timeout_ns);
    const auto hand_out = [&](const std::byte* bytes, std::uint64_t n, std::uint64_t offset, std::uint64_t total,
                              std::uint64_t tag, std::uint64_t end) {
        head_ = end;  // past it locally; the shared head stays until release_fragments
        fragments_held_ = true;
        if (offset == 0) message_partly_released_ = false;
        stream_offset_ = offset + n;
        const bool last = stream_offset_ == total;
        if (last) {
            streaming_ = false;
            message_end_mark_ = end;
        }
        return Fragment{Status::ok, {bytes, static_cast<std::size_t>(n)}, offset, total, tag, end, false};
    };
    for (;;) {
        const Status s = wait_for_data(timeout);
        if (s != Status::ok) {
            if (s == Status::closed) streaming_ = false;  // an unfinished message never completes
            return {s};
        }
        const RecordAt rec = record_at_head();
        // A record that carries nothing for the caller is consumed here: freed at once when nothing is
        // held (so a wait that follows holds nothing), else by the next release_fragments, whose mark
        // lies beyond it (a padding record inside a message; orphans come only when nothing is held).
        const auto skip = [&] {
            head_ = rec.end;
            if (!fragments_held_) store_head(head_);
        };
        switch (static_cast<layout::RecordKind>(rec.kind)) {
            case layout::RecordKind::padding: skip(); continue;
            case layout::RecordKind::message:
                if (streaming_) corrupt("a whole message inside a fragmented one");
                return hand_out(rec.payload, rec.length, 0, rec.length, rec.tag, rec.end);
            case layout::RecordKind::fragment_first: {
                if (streaming_) corrupt("a new fragmented message before the last one ended");
                if (rec.length < layout::kFragmentPrefix) corrupt("first fragment shorter than its prefix");
                std::uint64_t total = 0;
                std::memcpy(&total, rec.payload, sizeof total);
                const std::uint64_t chunk = rec.length - layout::kFragmentPrefix;
                if (total <= chunk) corrupt("fragmented message total " + std::to_string(total) + " too small");
                if (total > kMaxMessage) corrupt("fragmented message total " + std::to_string(total) + " is absurd");
                streaming_ = true;
                stream_total_ = total;
                stream_tag_ = rec.tag;
                return hand_out(rec.payload + layout::kFragmentPrefix, chunk, 0, total, rec.tag, rec.end);
            }
            case layout::RecordKind::fragment_middle:
            case layout::RecordKind::fragment_last: {
                if (!streaming_) {  // attached mid-message, or the message was abandoned: not ours to deliver
                    skip();
                    continue;
                }
                const bool last = rec.kind == static_cast<std::uint32_t>(layout::RecordKind::fragment_last);
                if (rec.tag != stream_tag_) corrupt("fragment tag changed within a message");
                if (stream_offset_ + rec.length > stream_total_) corrupt("fragments exceed the announced total");
                if (last && stream_offset_ + rec.length != stream_total_) corrupt("last fragment ends before the announced total");
                if (!last && stream_offset_ + rec.length == stream_total_) corrupt("a middle fragment reaches the announced total");
                return hand_out(rec.payload, rec.length, stream_offset_, stream_total_, rec.tag, rec.end);
            }
            case layout::RecordKind::fragment_abort:
                if (!streaming_) {
                    skip();
                    continue;
                }
                streaming_ = false;  // the writer withdrew it: the caller drops what it got
                head_ = rec.end;
                fragments_held_ = true;  // the abort record goes with the caller's release of this mark
                return Fragment{Status::ok, {}, stream_offset_, stream_total_, stream_tag_, rec.end, true};
            default: corrupt("unknown record kind " + std::to_string(rec.kind));
        }
    }
}

void Reader::release_fragments(std::uint64_t mark) {
    if (slot_ == nullptr) moved_from();
    if (attached_in_.in_forked_child()) forked_copy("release_fragments()");
    if (has_pending_ || assembling_) refuse_fragment_mix("release_fragments()");
    const std::uint64_t released = slot_->head.load(std::memory_order_relaxed);  // we are its only storer
    // A mark inside a record would leave the head there: the next look (ours, or a re-attach's) would
    // parse payload bytes as a record header — a message the writer never wrote, or corrupt for good.
    if (mark < released || mark > head_ || !layout::cursor_aligned(mark) || !ends_a_held_record(released, mark))
        throw Error(ErrorCode::protocol, "release_fragments(" + std::to_string(mark) +
                                             "): not a release_mark of peek_fragment (released up to " +
                                             std::to_string(released) + ", handed out up to " + std::to_string(head_) + ")");
    if (mark == released) return;
    // Part of the open message released: while it streams, or once its last fragment was handed out
    // but the mark stops short of its end (rewind_fragments could no longer hand it back whole).
    if (streaming_ || (message_end_mark_ != 0 && mark < message_end_mark_)) message_partly_released_ = true;
    store_head(mark);  // the caller is done with every byte below mark (ring.hpp release order)
    if (mark == head_) fragments_held_ = false;
    if (message_end_mark_ != 0 && mark >= message_end_mark_) {
        message_end_mark_ = 0;
        bump_counter(slot_->messages);
    }
}

bool Reader::ends_a_held_record(std::uint64_t released, std::uint64_t mark) const noexcept {
    // The records from `released` on were handed out and not released: the writer cannot rewrite
    // them, so their stamps are still current and their lengths the writer's (acquire: the stamp's
    // release store). At most (mark - released) / kRecordAlign steps.
    std::uint64_t pos = released;
    while (pos < mark) {
        const layout::RecordHeader& h = layout::record_at(data_, pos & mask_);
        const std::uint32_t stamp = h.stamp.load(std::memory_order_acquire);
        if (!layout::stamp_current(stamp, pos, lap_shift_)) return false;
        const std::uint64_t end = layout::stamped_record_end(h, stamp, pos, capacity_);
        if (end == pos) return false;
        pos = end;
    }
    return pos == mark;
}

void Reader::rewind_fragments() {
    if (slot_ == nullptr) moved_from();
    if (!streaming_ && !fragments_held_) return;  // nothing handed out
    if (message_partly_released_)
        throw Error(ErrorCode::protocol, "rewind_fragments(): part of the message was released already and cannot be "
                                         "handed back (abandon_fragments gives it up)");
    // Nothing of it was released: its records are still ours (the writer cannot have reused them).
    head_ = slot_->head.load(std::memory_order_relaxed);
    streaming_ = false;
    fragments_held_ = false;
    message_end_mark_ = 0;
    stream_offset_ = 0;
}

void Reader::abandon_fragments() {
    if (slot_ == nullptr) moved_from();
    if (attached_in_.in_forked_child()) forked_copy("abandon_fragments()");
    if (has_pending_ || assembling_) refuse_fragment_mix("abandon_fragments()");
    streaming_ = false;  // its remaining records are orphans now: peek() / peek_fragment() skip them
    message_end_mark_ = 0;
    if (fragments_held_) {
        fragments_held_ = false;
        store_head(head_);
    }
}

void Reader::moved_from() {
    throw Error(ErrorCode::protocol, "this Reader was moved from: read through the Reader it was moved into");
}

void Reader::forked_copy(const char* call) const {
    attached_in_.refuse_copy(call, "this Reader of '" + segment_.name() + "', rank " + std::to_string(rank_) + ",",
                             "Read through a Reader this process attaches, with a rank of its own");
}

void Reader::corrupt(const std::string& why) const {
    throw Error(ErrorCode::corrupt, "segment '" + segment_.name() + "', rank " + std::to_string(rank_) +
                                        ", record at " + std::to_string(head_) + ": " + why);
}

// ---- event loops (events/eventfd.hpp) -------------------------------------------------------------


int Writer::wake_fd() {
    if (line_ == nullptr) moved_from("wake_fd()");
    if (made_in_.in_forked_child()) forked_copy("wake_fd()");  // the registration is the parent's
    if (!space_eventfd_) {
        space_eventfd_ = std::make_unique<EventfdWaiter>(segment_.space_line().writer_eventfd);
        space_eventfd_seen_.publish(space_eventfd_.get());
    }
    return space_eventfd_->fd();
}

bool Writer::has_room_for_next_write(std::size_t message_bytes, const WriteProgress* progress) noexcept {
    // The first record the next write needs: the next fragment of the open stream it resumes
    // (write_stream: no prefix after the first), else an owed abort record, or the message's first
    // (only) record — after a padding record if it would cross the ring's end (reserve_record).
    const bool resume = progress != nullptr && progress->started() && progress->stream == stream_serial_ && stream_broken_;
    const std::uint64_t payload =
        resume ? std::min<std::uint64_t>(message_bytes - std::min<std::uint64_t>(progress->written, message_bytes), max_payload_)
               : (stream_broken_ ? 0 : std::min<std::uint64_t>(message_bytes, max_payload_));
    const std::uint64_t rec = layout::record_size(payload);
    const std::uint64_t to_end = capacity_ - (tail_ & mask_);
    const std::uint64_t need = rec > to_end ? to_end + rec : rec;
    known_free_end_ = min_reader_head_acquire() + capacity_;
    return tail_ + need <= known_free_end_;
}

bool Writer::arm_wake_fd(std::size_t message_bytes, const WriteProgress* progress) {
    (void)wake_fd();
    return arm_eventfd(*space_eventfd_, space_site(), cancelled_.get(),
                       [&] { return has_room_for_next_write(message_bytes, progress); });
}

void Writer::disarm_wake_fd() noexcept {
    // (moved from: nothing of it armed; a fork()ed child's copy: the announcement is the parent's)
    if (line_ != nullptr && !made_in_.in_forked_child()) retract(space_site());
}

int Reader::wake_fd() {
    if (slot_ == nullptr) moved_from();
    if (attached_in_.in_forked_child()) forked_copy("wake_fd()");  // the registration is the parent's
    if (!data_eventfd_) {
        data_eventfd_ = std::make_unique<EventfdWaiter>(slot_->eventfd);
        data_eventfd_seen_.publish(data_eventfd_.get());
    }
    return data_eventfd_->fd();
}

bool Reader::arm_wake_fd() {
    (void)wake_fd();
    return arm_eventfd(*data_eventfd_, data_site(), cancelled_.get(), [&] { return poll_acquire(); });
}

void Reader::disarm_wake_fd() noexcept {
    // (moved from: nothing of it armed; a fork()ed child's copy: the announcement is the parent's)
    if (slot_ != nullptr && !attached_in_.in_forked_child()) retract(data_site());
}

}  // namespace ringcast
