// ringcast/gather.hpp — N→1 replies: one reply ring per worker rank, collected with ONE wait.
//
//   worker 0 ──reply ring "G.r0"──┐
//   worker 1 ──reply ring "G.r1"──┼──► collector: collect(tag, ranks, timeout)
//   worker N ──reply ring "G.rN"──┘          ▲
//                   └──── doorbell "G.bell" ──┘  (rung only while the collector sleeps)
//
// Each reply ring is an ordinary one-reader broadcast ring (ring.hpp): the worker is its writer, the
// collector its reader rank 0. Every reply carries the request's tag in its record header; collect()
// refuses a reply with another tag (Error stale_reply naming the rank and both tags).
//
// Two ways to wait for "any of the pending ranks has a reply", selectable and benchmarked:
//  * doorbell: the collector announces itself on one shared line (collector_sleeping, layout.hpp
//    DoorbellLine) and sleeps on doorbell_seq. Every reply ring's Writer has the bell as its publish
//    bell (Writer::set_publish_bell): after EVERY record it publishes — each fragment of a reply
//    larger than its ring included — the tail exchange is w1 and the bell's w2..w3 follow, the same
//    handshake as wait.hpp (3a..3f / w1..w3) with "condition" = any pending ring's tail moved.
//  * futex_waitv: the collector announces itself as reader rank 0 on every pending ring (bit 0 of
//    each ring's sleeping bits), snapshots each ring's notify_seq, re-checks all tails, then sleeps in
//    one futex_waitv over all notify_seq words — wait.hpp's block_until over several sites. The
//    workers' ordinary publish path wakes it: no doorbell needed. At most 128 ranks (FUTEX_WAITV_MAX).
// Both are the one sleep mechanism of wait.hpp, with the same spin, liveness, cancel and timeout rules.
//
// Replies a collect() took without finishing — it failed with an exception (a stale reply, a dead
// worker, a corrupt record) or returned timed_out / cancelled / closed (its result carries them too) —
// are kept: the next collect() of the same tag returns them, so a retry, or a caller collecting in
// slices, never waits for a reply that already came; a collect of another tag drops them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringcast/detail/gather_names.hpp"  // gather_ring_name, gather_bell_name
#include "ringcast/detail/process.hpp"       // MadeInProcess: the fork rule of the names
#include "ringcast/ring.hpp"

namespace ringcast {

enum class GatherWait : std::uint8_t { doorbell, futex_waitv };

// The collect's cap on the adaptive spin (GatherOptions::wait.spin_max), 5x a reader's 2 ms
// (WaitOptions). A collect waits for a step its executor has issued and whose end is near; a reader
// may wait for a step that never comes. Sleeping through a step is not free: the Python that runs
// after the wake-up — the next request's pickling, on the step's critical path — ran 8-30 us slower
// after a 0.5-2 ms time.sleep than after a Python busy loop of the same length on the 16-core VM
// (after ringcast's own futex sleep against its own spin: +0.7 to +16 us; docs/benchmarks.md, "The
// collect's spin cap: 10 ms"), on top of the wake-up itself; a 2 ms cap slept through every step of
// the showdown's calibrated 1 ms of work whenever the VM ran it at half speed. Up to 10 ms the collect
// spins (~0.3 % of a step or more to save); longer steps are predicted (wait.hpp, SpinHistory: sleep,
// then spin a window around the expected end), and the replies that trail the first keep a reader's
// 2 ms (GatherCollector::straggler_spin_max). Its CPU: the executor's thread, busy through steps of
// up to 10 ms while a step is in flight; none once idle (the spin follows the recent collects — a
// collect that timed out after its spin counts too — and stops after one more).
inline constexpr std::chrono::nanoseconds kCollectSpinMax{10'000'000};

struct GatherOptions {
    std::uint32_t ranks = 1;                // worker ranks 0..ranks-1
    std::uint64_t capacity = 1ULL << 20;    // bytes per reply ring (replies of any size still work)
    mode_t mode = 0600;
    WaitOptions wait{.spin_max = kCollectSpinMax};  // the collect's wait: spin phase, then the kernel
    GatherWait method = GatherWait::doorbell;
    // A blocked collect checks the pending workers this often. Zero turns the check off: a dead
    // worker is then never reported (collect waits out its timeout; forever without one).
    std::chrono::nanoseconds liveness_interval = std::chrono::seconds(1);
};


struct GatherResult {
    Status status = Status::timed_out;             // ok: every requested rank answered
    std::vector<std::optional<std::vector<std::byte>>> replies;  // indexed by rank; set for answers
    std::vector<std::uint32_t> missing;            // requested ranks without an answer (status != ok)
    // "timed out after 2.0 s waiting for ranks 1, 3" — for exceptions and logs.
    [[nodiscard]] std::string describe() const;
};

// Shared mapping of the doorbell object.
class DoorbellMapping {
public:
    static DoorbellMapping create(const std::string& name, std::uint32_t ranks, mode_t mode);
    static DoorbellMapping open(const std::string& name, std::uint32_t ranks);
    DoorbellMapping(DoorbellMapping&& o) noexcept : line_(std::exchange(o.line_, nullptr)), identity_(o.identity_) {}
    DoorbellMapping& operator=(DoorbellMapping&&) = delete;
    DoorbellMapping(const DoorbellMapping&) = delete;
    DoorbellMapping& operator=(const DoorbellMapping&) = delete;
    ~DoorbellMapping();
    [[nodiscard]] layout::DoorbellLine& line() const noexcept { return *line_; }
    [[nodiscard]] bool mapped() const noexcept { return line_ != nullptr; }  // false once moved from
    // The object mapped (segment.hpp): its creator removes the name only while it still leads here.
    [[nodiscard]] ObjectIdentity identity() const noexcept { return identity_; }

private:
    DoorbellMapping(layout::DoorbellLine* line, ObjectIdentity identity) noexcept : line_(line), identity_(identity) {}
    layout::DoorbellLine* line_ = nullptr;
    ObjectIdentity identity_{};
};

// The executor side. Thread-safety: one thread at a time (cancel() from any thread).
class GatherCollector {
public:
    // Creates "<name>.r<rank>" reply rings, then "<name>.bell"; removes them when destroyed (the bell
    // only while its name still leads to it). A create that throws (a name in use: Error
    // already_exists naming it) leaves nothing it made behind. A killed collector's group is
    // reclaimed on the way: its rings as Segment::create reclaims any abandoned segment, then its
    // bell, once every ring of the group is this create's (make_bell in gather.cpp says why that
    // proves the bell a dead group's).
    [[nodiscard]] static GatherCollector create(std::string_view name, const GatherOptions& options);
    GatherCollector(GatherCollector&&) noexcept = default;
    GatherCollector& operator=(GatherCollector&&) = delete;
    // Removes the names (remove_names). A fork()ed child's copy leaves them (as ~Writer); in the child
    // its collect, wake_fd and arm_wake_fd throw Error(protocol) naming the parent's pid, before
    // they take a reply or wait, its cancel and disarm_wake_fd do nothing to the group (the replies
    // and the doorbell's announcements are the parent's), and a WaitSet refuses it. (A GatherWorker
    // is its Writer's: in a child holding the parent's, reply, reserve, commit_reply, wake_fd,
    // arm_wake_fd, check_liveness and an abort_reply of an open reply throw as the Writer's calls do.)
    ~GatherCollector();

    // Waits ONCE for replies tagged `tag` from `ranks` (empty: all ranks), draining whichever is ready
    // in any order. Throws Error(stale_reply) for a reply with another tag (it is consumed; the good
    // replies taken before it are kept for the next collect of `tag`), Error(peer_dead) when a
    // pending worker died. A worker that closed its ring while a reply from it
    // is pending gives status closed, with that rank in `missing`; the replies taken are kept for the
    // next collect of `tag` too, as after a timeout (a worker restarted in the closed rank's place may
    // answer the same tag, and the retry must not wait for replies this call already consumed).
    // A collect that completes (Status::ok) ends the tag's collect: the replies kept for it are
    // dropped, those of ranks it did not ask for too (a caller that collects the rest asks only
    // for `missing`; it has the others from the earlier result), so that a reused tag's next
    // collect returns its ranks' new replies.
    //
    // `on_early_reply`, if set, is called once for each reply this call takes from its ring while
    // other replies of the collect are still awaited (not for the last ones, which end it, nor for
    // replies kept from an earlier call), between two waits: the caller may work on the early
    // replies (the Python binding unpickles them) while the later workers still work — as reading
    // rank by rank would, but with one wait. It runs with nothing of any ring held (the record is
    // copied and released first); a reply published meanwhile is found by the next wait, which
    // checks before it waits (wait.hpp block_until), so none is missed. It must not call this
    // collector. What it throws ends the collect, the replies taken kept as for any other exception.
    using EarlyReply = std::function<void(std::uint32_t rank, std::span<const std::byte> reply)>;
    [[nodiscard]] GatherResult collect(std::uint64_t tag, std::span<const std::uint32_t> ranks,
                                       std::chrono::nanoseconds timeout = kForever,
                                       const EarlyReply& on_early_reply = {});
    [[nodiscard]] GatherResult collect_all(std::uint64_t tag, std::chrono::nanoseconds timeout = kForever) {
        return collect(tag, {}, timeout);
    }
    void cancel() noexcept;
    void clear_cancel() noexcept { cancelled_->store(false, std::memory_order_release); }
    // Removes the group's names now (its doorbell, then its reply rings: the destructor's order),
    // and the destructor no more; what is mapped stays usable. Workers attached keep their rings;
    // a later attach finds no group. Idempotent; not thread-safe against the destructor.
    void remove_names() noexcept;
    // Gives every reply ring back now, as the destructor does: a worker replying afterwards never
    // waits for this collector (its ring has no reader left to wait for). For an executor done
    // before its object goes (the Python binding's close()). Afterwards only cancel(),
    // remove_names(), check_liveness(), name(), ranks() and the destructor may be called: collect
    // would release records of rings it no longer reads. Idempotent; as every call, not while
    // another call is in progress.
    void detach_readers() noexcept {
        for (auto& rd : readers_) rd.detach();
    }
    // Those of `ranks` (empty: all) whose worker never attached: no writer ever claimed the reply
    // ring (one that attached and then closed, or died, did). A start-up waits for none to be left
    // (the Python executor's wait_until_ready): a worker that failed before it attached would
    // otherwise be waited for by every collect. One acquire load per ring.
    [[nodiscard]] std::vector<std::uint32_t> never_attached(std::span<const std::uint32_t> ranks) const;
    // The check collect() runs every liveness_interval, for callers that wait in their own slices:
    // throws Error(peer_dead) naming a dead worker among `ranks` (empty: all).
    void check_liveness(std::span<const std::uint32_t> ranks);
    // The same for a collect of `tag` that is waited for in slices (an event loop polling with timeout
    // 0): ranks whose reply an earlier slice of that tag took are left out (a worker may exit once it
    // replied).
    void check_liveness(std::uint64_t tag, std::span<const std::uint32_t> ranks);
    // Whether a collect of `tag` from `ranks` (empty: all) would take something now: a reply that an
    // unfinished collect of that tag keeps, a record in a pending ring, a ring closed (or a rank out
    // of range, which the collect reports). One acquire look per ring, no clock read, nothing taken:
    // a caller's test before it polls with the GIL held or goes straight to a wait (the Python binding).
    [[nodiscard]] bool has_ready(std::uint64_t tag, std::span<const std::uint32_t> ranks) noexcept;
    void set_wait(const WaitOptions& wait) noexcept { options_.wait = wait; }
    [[nodiscard]] const WaitOptions& wait_options() const noexcept { return options_.wait; }

    [[nodiscard]] std::uint32_t ranks() const noexcept { return static_cast<std::uint32_t>(readers_.size()); }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] std::uint64_t kernel_waits() const noexcept { return kernel_waits_; }
    // The adaptive spin's predictor: how long a whole collect typically waited (one sample per
    // collect that waited at all, from its first wait until every reply was in).
    [[nodiscard]] std::chrono::nanoseconds typical_collect_wait() const noexcept { return reply_waits_.typical(); }
    [[nodiscard]] GatherWait method() const noexcept { return options_.method; }

    // Event loops (events/eventfd.hpp: semantics and drain rule). The eventfd this collector sleeps on
    // (via the doorbell, whatever `method`); registered on first call (WaitKind::eventfd: at create),
    // from then on every collect() wait sleeps on it. Throws Error(system).
    [[nodiscard]] int wake_fd();
    // Announces a wait for a reply from any of `ranks` (empty: all) that the next collect of `tag`
    // still needs (a rank whose reply an unfinished collect of `tag` keeps is not waited for; one kept
    // for another tag is, as that collect drops it). true: one is there (or a ring closed, or this
    // collector is cancelled, or every rank's reply is kept for `tag`) — collect with a zero timeout.
    // false: armed; watch wake_fd(), then disarm_wake_fd() and collect `tag` with a zero timeout;
    // replies it takes are kept for the next one.
    [[nodiscard]] bool arm_wake_fd(std::uint64_t tag, std::span<const std::uint32_t> ranks);
    void disarm_wake_fd() noexcept;

private:
    friend class WaitSet;  // arms its wait among many endpoints (events/waitset.hpp)
    GatherCollector(std::string name, const GatherOptions& options, DoorbellMapping bell)
        : name_(std::move(name)), options_(options), bell_(std::move(bell)) {}
    // Waits until a pending rank has a record (or closed) — the one wait of collect().
    [[nodiscard]] WaitOutcome wait_any(const std::vector<std::uint32_t>& pending, Deadline deadline,
                                       SpinHistory& history);
    [[nodiscard]] SleepSite bell_site() const noexcept;
    void check_pending_alive(const std::vector<std::uint32_t>& pending);
    [[nodiscard]] Error worker_died(std::uint32_t rank, const Error& core) const;  // peer_dead: the worker's rank, pid
    void refuse_moved_or_forked(const char* call) const;  // Error(protocol): moved from, or a fork()ed child's copy
    [[nodiscard]] std::vector<std::uint32_t> ranks_or_all(std::span<const std::uint32_t> ranks) const;
    // Drains every pending rank that has a reply (no waiting) into `result`; removes them from
    // `pending`, closed ones into `closed_ranks`.
    void drain_ready(std::uint64_t tag, std::vector<std::uint32_t>& pending, std::vector<std::uint32_t>& closed_ranks,
                     GatherResult& result);
    [[nodiscard]] bool any_pending_ready(const std::vector<std::uint32_t>& pending) noexcept;
    // An event loop's condition for a collect of `tag`: a reply it still needs is there — as
    // any_pending_ready, skipping ranks whose reply an unfinished collect of `tag` keeps (their rings
    // are empty until the next step; a reply kept for another tag is dropped by that collect, so its
    // rank is awaited) — or nothing is left to await (every rank's reply kept: collect now).
    [[nodiscard]] bool any_awaited_ready(std::uint64_t tag, const std::vector<std::uint32_t>& ranks) noexcept;
    // Whether rank r's reply to `tag` was taken already and is kept for a collect of `tag`: by an
    // unfinished collect of `tag`, or taken as another tag's reply (other_tag_).
    [[nodiscard]] bool kept_for(std::uint64_t tag, std::uint32_t r) const noexcept {
        if (kept_tag_ == tag && r < kept_.size() && kept_[r].has_value()) return true;
        if (r >= other_tag_.size()) return false;
        return std::any_of(other_tag_[r].begin(), other_tag_[r].end(), [&](const TaggedReply& t) { return t.tag == tag; });
    }
    // Moves rank r's reply to `tag` out of other_tag_ into `out`; false if none is kept there.
    bool take_other_tag(std::uint64_t tag, std::uint32_t r, std::optional<std::vector<std::byte>>& out);

    // Whether this object removes the group's names when it dies: a move hands that over (the
    // defaulted move of GatherCollector moves this member with it), so a moved-from collector — every
    // create() moves one — never unlinks a live group's names. (A moved-from std::string is only
    // "valid but unspecified": the name cannot be the flag.)
    // Made by this process only: a copy fork() gave a child never removes its parent's names.
    struct NamesOwner {
        bool owns = true;
        detail::MadeInProcess made_in;
        NamesOwner() = default;
        NamesOwner(NamesOwner&& o) noexcept : owns(std::exchange(o.owns, false)), made_in(o.made_in) {}
        NamesOwner& operator=(NamesOwner&&) = delete;
    };
    NamesOwner removes_names_;
    std::string name_;
    GatherOptions options_;
    DoorbellMapping bell_;
    std::vector<Reader> readers_;  // reader rank 0 of each worker's reply ring
    std::uint64_t kernel_waits_ = 0;
    // Replies taken by a collect() that did not finish (and returned by it): returned again by the
    // next collect(kept_tag_) that asks for their ranks, until a collect of kept_tag_ completes
    // (Status::ok), which ends that tag's collect and drops them all: a reused tag's next collect
    // then takes its ranks' new replies from the rings.
    std::vector<std::optional<std::vector<std::byte>>> kept_;
    std::uint64_t kept_tag_ = 0;
    // Replies a collect found with another tag than its own (Error stale_reply), by rank, oldest first:
    // released from the ring (a stale one would otherwise stop every later collect of the rank) and
    // kept for a collect of their own tag — a worker that went on to a later request (a replacement
    // that never got the earlier one) has its answer taken by that request's collect, not lost. At
    // most kOtherTagKept a rank (the oldest goes), dropped as their rank's collects pass their tag
    // never: a reply to a request nobody collects again stays until it is pushed out.
    struct TaggedReply {
        std::uint64_t tag;
        std::vector<std::byte> bytes;
    };
    static constexpr std::size_t kOtherTagKept = 4;
    std::vector<std::vector<TaggedReply>> other_tag_;
    SpinHistory reply_waits_;   // how long whole collects waited (adaptive hybrid)
    SpinHistory reply_spread_;  // how far a collect's last reply trailed its first: the later waits' spin
    // The later waits' cap (the stragglers behind a collect's first reply): a reader's (WaitOptions,
    // 2 ms) or less. The collect's own longer cap (kCollectSpinMax) is for the step, whose end is
    // near once it was issued; a rank that trails the others by more is in a slow stretch of its own,
    // and spinning up to 10 ms of every collect for it would keep a long step's executor busy for
    // what a predicted window catches (SpinHistory::stop_predicting).
    [[nodiscard]] std::chrono::nanoseconds straggler_spin_max() const noexcept {
        return std::min(options_.wait.spin_max, WaitOptions{}.spin_max);
    }
    Deadline last_liveness_check_{};  // across calls (wait.hpp WaitContext::last_check)
    std::unique_ptr<std::atomic<bool>> cancelled_ = std::make_unique<std::atomic<bool>>(false);
    std::unique_ptr<EventfdWaiter> eventfd_;  // ours, once registered (wake_fd); destroyed (unregistered)
    detail::PublishedPtr<EventfdWaiter> eventfd_seen_;  // eventfd_, for cancel() from another thread
                                              // before bell_ is unmapped
};

// The worker side: the writer of its rank's reply ring. Thread-safety: one thread at a time.
class GatherWorker {
public:
    [[nodiscard]] static GatherWorker attach(std::string_view name, std::uint32_t rank,
                                             const WriterOptions& options = {});
    // Publishes one reply for request `tag` (any size); the doorbell rings after each of its records
    // while the collector sleeps.
    [[nodiscard]] Status reply(std::uint64_t tag, std::span<const std::byte> bytes,
                               std::chrono::nanoseconds timeout = kForever);
    // Resumable, as Writer::write_parts with `progress`: a reply larger than the ring that times out
    // stays open, and the same call with the same bytes and progress goes on where it stopped (a
    // relay that serves several rings in bounded slices: the remote reply bridge). Any other reply
    // first withdraws the open one.
    [[nodiscard]] Status reply(std::uint64_t tag, std::span<const std::byte> bytes, std::chrono::nanoseconds timeout,
                               WriteProgress& progress);
    // Withdraws the open reply of `progress` (Writer::abort_write): ok also when none is open;
    // timed_out/cancelled when its abort record found no room — the next reply then publishes it
    // first, so the collector never takes the withdrawn fragments as a reply.
    [[nodiscard]] Status abort_reply(WriteProgress& progress, std::chrono::nanoseconds timeout = kForever) {
        return writer_.abort_write(progress, timeout);
    }
    // Zero-copy: reserve on the reply ring, then commit_reply(used, tag).
    [[nodiscard]] Reservation reserve(std::size_t n, std::chrono::nanoseconds timeout = kForever) {
        return writer_.reserve(n, timeout);
    }
    void commit_reply(std::size_t used, std::uint64_t tag);
    void close() noexcept { writer_.close(); }  // wakes the collector on the bell too
    // A reply blocked for room in another thread returns Status::cancelled now, as every later one
    // that has to wait (Writer::cancel). Safe from any thread.
    void cancel() noexcept { writer_.cancel(); }
    // Event loops: the reply ring's wait for room on an eventfd, as Writer's (wake_fd, arm_wake_fd,
    // disarm_wake_fd: events/eventfd.hpp) — a relay waiting for room in several rings and on its
    // sockets in one poll (the remote reply bridge).
    [[nodiscard]] int wake_fd() { return writer_.wake_fd(); }
    [[nodiscard]] bool arm_wake_fd(std::size_t reply_bytes, const WriteProgress* progress = nullptr) {
        return writer_.arm_wake_fd(reply_bytes, progress);
    }
    void disarm_wake_fd() noexcept { writer_.disarm_wake_fd(); }
    // Throws Error(peer_dead) if the collector (the reply ring's reader) died.
    void check_liveness() { writer_.check_liveness(); }
    void set_wait(const WaitOptions& wait) noexcept { writer_.set_wait(wait); }
    [[nodiscard]] const WaitOptions& wait_options() const noexcept { return writer_.wait_options(); }
    [[nodiscard]] std::size_t max_reserve() const noexcept { return writer_.max_reserve(); }
    GatherWorker(GatherWorker&& o) noexcept = default;
    GatherWorker& operator=(GatherWorker&&) = delete;
    ~GatherWorker() = default;  // the Writer closes the reply ring: the collector sees closed
    [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
    [[nodiscard]] std::uint64_t bell_rings() const noexcept {
        return bell_.mapped() ? bell_.line().rings.load(std::memory_order_relaxed) : 0;  // 0: moved from
    }

private:
    GatherWorker(DoorbellMapping bell, Writer writer, std::uint32_t rank);
    DoorbellMapping bell_;  // before writer_: the Writer's destructor (close) still rings it; mapped
                            // once, so the publish bell's pointers stay valid across moves
    std::unique_ptr<EventfdSignaller> bell_eventfds_;  // before writer_, for the same reason: a copy of
                                                       // the collector's eventfd (bell wakes)
    Writer writer_;
    std::uint32_t rank_;
};

}  // namespace ringcast
