// The gather group (include/ringcast/gather.hpp): doorbell object, collector and worker.
#include "ringcast/gather.hpp"

#include "ringcast/events/arm.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ringcast {

std::string GatherResult::describe() const {
    std::string s = to_string(status);
    if (!missing.empty()) {
        s += missing.size() == 1 ? " waiting for rank " : " waiting for ranks ";
        for (std::size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + std::to_string(missing[i]);
    }
    return s;
}

// ---- doorbell object ------------------------------------------------------------------------------

DoorbellMapping DoorbellMapping::create(const std::string& name, std::uint32_t ranks, mode_t mode) {
    ShmObject obj = ShmObject::create(name, sizeof(layout::DoorbellLine), mode);
    auto* line = static_cast<layout::DoorbellLine*>(obj.map());
    line->ranks.store(ranks, std::memory_order_relaxed);
    line->abi_version = layout::kAbiVersion;
    line->layout_hash = layout::kLayoutHash;
    line->magic.store(layout::kDoorbellMagic, std::memory_order_release);  // publishes the fields above
    return DoorbellMapping(line, obj.identity());
}

DoorbellMapping DoorbellMapping::open(const std::string& name, std::uint32_t ranks) {
    ShmObject obj = ShmObject::open(name);
    if (obj.size() != sizeof(layout::DoorbellLine))
        throw Error(ErrorCode::not_ringcast, "'" + name + "' is not a ringcast doorbell (wrong size)");
    DoorbellMapping m(static_cast<layout::DoorbellLine*>(obj.map()), obj.identity());
    if (m.line_->magic.load(std::memory_order_acquire) != layout::kDoorbellMagic)
        throw Error(ErrorCode::not_ringcast, "'" + name + "' is not a ringcast doorbell (magic)");
    if (m.line_->abi_version != layout::kAbiVersion || m.line_->layout_hash != layout::kLayoutHash)
        throw Error(ErrorCode::version_mismatch, "doorbell '" + name + "' was made by another ringcast version (ABI " +
                                                     std::to_string(m.line_->abi_version) + ", this library speaks " +
                                                     std::to_string(layout::kAbiVersion) + ")");
    if (ranks != 0 && m.line_->ranks.load(std::memory_order_relaxed) != ranks)
        throw Error(ErrorCode::corrupt, "doorbell '" + name + "' belongs to a group of " +
                                            std::to_string(m.line_->ranks.load()) + " ranks");
    return m;
}

DoorbellMapping::~DoorbellMapping() {
    if (line_ != nullptr) ::munmap(line_, sizeof(layout::DoorbellLine));
}

// ---- collector ------------------------------------------------------------------------------------

namespace {
// Removes the names of a group this process made: the bell it made (if any), then reply rings
// 0..rings-1. The bell first: a successor under this name can make its ring 0 only once ours is gone
// (ours is in use until then), so by the time it reaches make_bell ours is gone too, and it never
// finds our bell nor we remove its own. (The other order let our last unlink, by name, remove a bell
// the successor had just made in place of ours.) The bell only while its name leads to it all the
// same. The one cleanup of a failed create() and of the collector's destructor; never throws (the
// error that made a create fail is the one to report; a destructor has no one to report to).
void remove_group_names(std::string_view name, std::uint32_t rings, std::optional<ObjectIdentity> bell) noexcept {
    try {
        if (bell) (void)unlink_bell_if_still(gather_bell_name(name), JudgedBell{*bell, 0});
    } catch (...) {
    }
    for (std::uint32_t r = 0; r < rings; ++r) {
        try {
            (void)Segment::remove(gather_ring_name(name, r));
        } catch (...) {
        }
    }
}

// The group's bell, made after every reply ring of the group was made by this call. A bell already
// under the name is a dead group's: a live group of this name keeps its ring 0 in use (its collector
// reads it; its creator lives while it makes the rest), so making our ring 0 would have failed
// (Segment::create reclaims only an abandoned ring). A collector killed before it removed its names
// leaves its bell behind; without this, the name could not be used again until `ringcast gc`. Only a
// ringcast doorbell of this user and this version is reclaimed, and only the one judged: anything
// else keeps the name, saying what it is.
DoorbellMapping make_bell(std::string_view group, const GatherOptions& options) {
    const std::string name = gather_bell_name(group);
    try {
        return DoorbellMapping::create(name, options.ranks, options.mode);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::already_exists) throw;
    }
    const std::optional<JudgedBell> judged = read_bell(name);  // judge_bell, read once to say why not
    if (!judged || !ours_to_reclaim(*judged)) {
        // A queue's segment under the bell's name (a MessageQueue named "<group>.bell") is ringcast's
        // own object: said so, not passed off as another program's.
        bool queue_segment = false;
        if (!judged) {
            try {
                (void)Segment::open(name);
                queue_segment = true;
            } catch (const Error&) {
            }
        }
        const std::string what =
            queue_segment ? "is a ringcast queue's segment (a MessageQueue or Writer of that name), not a doorbell: a "
                            "gather group takes '<name>.bell' for its doorbell, so one of the two needs another name"
            : !judged ? "is not a ringcast doorbell (another program's object, or one we cannot read)"
            : judged->owner_uid != ::geteuid()
                ? "is another user's doorbell (uid " + std::to_string(judged->owner_uid) + ")"
                : "is the doorbell of another ringcast version (ABI " + std::to_string(judged->abi_version) +
                      ", this library speaks " + std::to_string(layout::kAbiVersion) +
                      "): `ringcast rm " + name + "` removes it once that version's group is gone";
        throw Error(ErrorCode::already_exists,
                    "gather '" + std::string(group) + "': '" + name + "' already exists and " + what + "; the name stays taken");
    }
    if (!unlink_bell_if_still(name, *judged))
        throw Error(ErrorCode::already_exists, "gather '" + std::string(group) + "': '" + name +
                                                   "' was re-created by another process just now");
    return DoorbellMapping::create(name, options.ranks, options.mode);  // a racing creator may win: already_exists
}

}  // namespace

GatherCollector GatherCollector::create(std::string_view name, const GatherOptions& options) {
    if (options.ranks < 1 || options.ranks > layout::kMaxReaders)
        throw Error(ErrorCode::invalid_argument, "a gather group needs 1.." + std::to_string(layout::kMaxReaders) +
                                                     " ranks, got " + std::to_string(options.ranks));
    if (options.method == GatherWait::futex_waitv && options.ranks > kFutexWaitvMax)
        throw Error(ErrorCode::invalid_argument, "futex_waitv gathers at most 128 ranks; use the doorbell");
    Segment::validate_name(name);
    // The derived names must be valid too; a name short enough alone but not with its suffix is refused
    // in the group's terms (the bare check named only the derived name's length).
    const std::size_t longest = std::max(gather_bell_name(name).size(), gather_ring_name(name, options.ranks - 1).size());
    if (longest > Segment::kMaxNameLength)
        throw Error(ErrorCode::invalid_argument,
                    "gather name of " + std::to_string(name.size()) + " characters is too long for " +
                        std::to_string(options.ranks) + " ranks: its bell and reply rings are named '<name>" +
                        std::string(kGatherBellSuffix) + "' and '" + gather_ring_prefix("<name>") + "0'..'" +
                        gather_ring_name("<name>", options.ranks - 1) + "', and a segment name has at most " +
                        std::to_string(Segment::kMaxNameLength) + " characters: use at most " +
                        std::to_string(Segment::kMaxNameLength - (longest - name.size())) + " characters");
    // The reply rings first, the bell last: a bell then always names a group whose rings exist, which
    // is how `ringcast gc` and the sweeps of Python's queues tell a live group's bell from an
    // abandoned one (sweep_abandoned). A bell made before its rings could be swept by a sweep that
    // listed /dev/shm in between, and the group's workers would find no bell. Whatever this call made
    // is removed if a later step throws; nothing it did not make, but for a dead group's bell
    // (make_bell) that it replaced.
    std::uint32_t made = 0;
    std::optional<ObjectIdentity> bell_made;
    std::optional<GatherCollector> collector;
    try {
        for (; made < options.ranks; ++made) {
            auto seg = Segment::create(gather_ring_name(name, made),
                                       SegmentOptions{.readers = 1, .capacity = options.capacity, .mode = options.mode});
        }
        DoorbellMapping bell = make_bell(name, options);
        bell_made = bell.identity();
        collector.emplace(GatherCollector(std::string(name), options, std::move(bell)));  // may throw bad_alloc
    } catch (...) {
        remove_group_names(name, made, bell_made);
        throw;
    }
    GatherCollector& c = *collector;
    // From here on its destructor removes the rings and the bell if a later step throws.
    ReaderOptions ro;
    ro.wait = options.wait;
    // An eventfd collector sleeps on the doorbell's eventfd (wake_fd); its rank-0 readers only poll.
    if (ro.wait.kind == WaitKind::eventfd) ro.wait.kind = WaitKind::futex;
    ro.liveness_interval = options.liveness_interval;
    c.readers_.reserve(options.ranks);
    for (std::uint32_t r = 0; r < options.ranks; ++r) c.readers_.push_back(Reader::attach(gather_ring_name(name, r), 0, ro));
    if (options.wait.kind == WaitKind::eventfd) (void)c.wake_fd();
    return std::move(c);
}

void GatherCollector::remove_names() noexcept {
    if (!std::exchange(removes_names_.owns, false)) return;
    if (removes_names_.made_in.in_forked_child()) return;  // a fork()ed child's copy: the parent's names
    remove_group_names(name_, options_.ranks, bell_.identity());
}

GatherCollector::~GatherCollector() { remove_names(); }  // (not when moved from, nor after remove_names())

// The collector sleeps on doorbell_seq, announced by bit 0 of collector_sleeping (one collector).
SleepSite GatherCollector::bell_site() const noexcept {
    auto& b = bell_.line();
    return {&b.doorbell_seq, &b.collector_sleeping, 1, 0, &b.waits};
}

void GatherCollector::cancel() noexcept {
    if (!cancelled_) return;  // moved from: nothing of it can be waiting
    cancelled_->store(true, std::memory_order_seq_cst);
    if (removes_names_.made_in.in_forked_child()) return;  // a fork()ed child's copy: as Reader::cancel
    wake_all(bell_site());
    for (auto& rd : readers_) wake_all(rd.data_site());  // the futex_waitv path sleeps on these
    if (EventfdWaiter* e = eventfd_seen_.load()) e->poke();  // flag first, then the poke: see Reader::cancel
}

// `ranks` checked against the group, or every rank for none.
std::vector<std::uint32_t> GatherCollector::ranks_or_all(std::span<const std::uint32_t> ranks) const {
    std::vector<std::uint32_t> which(ranks.begin(), ranks.end());
    if (which.empty())
        for (std::uint32_t r = 0; r < readers_.size(); ++r) which.push_back(r);
    for (std::uint32_t r : which)
        if (r >= readers_.size()) throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range");
    return which;
}

void GatherCollector::check_liveness(std::span<const std::uint32_t> ranks) { check_pending_alive(ranks_or_all(ranks)); }

// A worker's GatherWorker::attach claims the ring's writer role (Writer::open): a ring no writer
// ever had (Segment::writer_ever_attached) is a rank whose worker never attached.
std::vector<std::uint32_t> GatherCollector::never_attached(std::span<const std::uint32_t> ranks) const {
    std::vector<std::uint32_t> missing;
    for (std::uint32_t r : ranks_or_all(ranks))
        if (!readers_[r].segment().writer_ever_attached()) missing.push_back(r);
    return missing;
}

void GatherCollector::check_liveness(std::uint64_t tag, std::span<const std::uint32_t> ranks) {
    std::vector<std::uint32_t> which = ranks_or_all(ranks);
    std::erase_if(which, [&](std::uint32_t r) { return kept_for(tag, r); });
    check_pending_alive(which);
}

// A worker's death (`core`: the reply ring's reader's peer_dead) as its executor knows it: the rank
// and pid of the worker, not the reply ring's "writer" and "queue" of the core's words. The dead
// claim is still in the ring's header — unless a replacement worker claimed the rank since: then the
// core's words, which name the dead one.
Error GatherCollector::worker_died(std::uint32_t rank, const Error& core) const {
    const layout::Owner worker =
        layout::unpack_owner(readers_[rank].segment().header().writer_owner.load(std::memory_order_acquire));
    const std::string who = "gather '" + name_ + "': worker rank " + std::to_string(rank);
    if (worker.pid == 0 || owner_alive(worker)) return Error(ErrorCode::peer_dead, who + ": " + core.what());
    return Error(ErrorCode::peer_dead, who + " (pid " + std::to_string(worker.pid) + ") died without closing its reply "
                                           "ring '" + readers_[rank].segment().name() + "'" + kDeadPeerHint);
}

// A pending rank whose worker died will never answer: fail naming it (runs every liveness_interval).
// A worker that published its reply and then died did answer: its ring has a record (or says closed),
// which the wait's next look takes. The check may run between that publish and the look — or the
// publish may land after the poll below and the worker die before check_writer's probe: check_writer
// looks at the ring again once it saw the death (src/ring.cpp), so neither is reported as a death.
// (The poll spares a rank whose reply is there the probe's system calls.)
void GatherCollector::check_pending_alive(const std::vector<std::uint32_t>& pending) {
    for (std::uint32_t r : pending) {
        if (readers_[r].poll_acquire()) continue;
        try {
            readers_[r].check_writer();
        } catch (const Error& e) {
            if (e.code() != ErrorCode::peer_dead) throw;
            throw worker_died(r, e);
        }
    }
}

// One look at every pending ring (tail and closed flag, acquire): true if one has a record or closed.
bool GatherCollector::any_pending_ready(const std::vector<std::uint32_t>& pending) noexcept {
    for (std::uint32_t r : pending)
        if (readers_[r].poll_acquire()) return true;
    return false;
}

bool GatherCollector::any_awaited_ready(std::uint64_t tag, const std::vector<std::uint32_t>& ranks) noexcept {
    bool awaits_any = false;
    for (std::uint32_t r : ranks) {
        if (kept_for(tag, r)) continue;  // taken already, kept for this collect
        awaits_any = true;
        if (readers_[r].poll_acquire()) return true;
    }
    return !awaits_any;
}

bool GatherCollector::has_ready(std::uint64_t tag, std::span<const std::uint32_t> ranks) noexcept {
    const auto ready = [&](std::uint32_t r) {
        return r >= readers_.size() || kept_for(tag, r) || readers_[r].poll_acquire();
    };
    if (ranks.empty()) {
        for (std::uint32_t r = 0; r < readers_.size(); ++r)
            if (ready(r)) return true;
        return false;
    }
    return std::any_of(ranks.begin(), ranks.end(), ready);
}

// The one wait of collect(): wait.hpp's block_until over the doorbell, or over every pending ring.
WaitOutcome GatherCollector::wait_any(const std::vector<std::uint32_t>& pending, Deadline deadline,
                                      SpinHistory& history) {
    std::vector<SleepSite> sites;
    if (options_.method == GatherWait::futex_waitv && !eventfd_) {  // an eventfd sleeps on the doorbell
        sites.reserve(pending.size());
        for (std::uint32_t r : pending) sites.push_back(readers_[r].data_site());  // our bit: reader rank 0
    } else {
        sites.push_back(bell_site());
    }
    struct IdleCheck {
        GatherCollector* self;
        const std::vector<std::uint32_t>* pending;
    } idle{this, &pending};
    const auto on_idle = [](void* c) {
        auto* ic = static_cast<IdleCheck*>(c);
        ic->self->check_pending_alive(*ic->pending);
    };
    const WaitContext ctx{sites,    deadline, cancelled_.get(), options_.wait.before_sleep, options_.liveness_interval,
                          on_idle,  &idle,    &history,         &kernel_waits_,
                          &last_liveness_check_, eventfd_.get()};
    // A spin step looks at each pending ring's record stamp only (SpinLook, wait.hpp): the workers'
    // tail lines stay where their reply publishes store them; every checkpoint and re-check takes
    // the full look (tails and closed flags).
    struct AnyReady {
        static void spin_look_tag() noexcept {}  // opts in to SpinLook (wait.hpp)
        GatherCollector& self;
        const std::vector<std::uint32_t>& pending;
        bool operator()() const { return self.any_pending_ready(pending); }
        bool operator()(SpinLook) const {
            return std::any_of(pending.begin(), pending.end(), [&](std::uint32_t r) { return self.readers_[r].stamp_look(); });
        }
    } any_ready{*this, pending};
    return block_until(options_.wait, ctx, any_ready);
}

bool GatherCollector::take_other_tag(std::uint64_t tag, std::uint32_t r, std::optional<std::vector<std::byte>>& out) {
    if (r >= other_tag_.size()) return false;
    auto& kept = other_tag_[r];
    const auto found = std::find_if(kept.begin(), kept.end(), [&](const TaggedReply& t) { return t.tag == tag; });
    if (found == kept.end()) return false;
    out = std::move(found->bytes);
    kept.erase(found);
    return true;
}

void GatherCollector::drain_ready(std::uint64_t tag, std::vector<std::uint32_t>& pending,
                                  std::vector<std::uint32_t>& closed_ranks, GatherResult& result) {
    for (auto it = pending.begin(); it != pending.end();) {
        Reader& rd = readers_[*it];
        // Nothing there and not closed: no peek. A peek that finds nothing would read the clock for
        // its worker's liveness (two thirds of a 2-rank poll's clock reads, on the way to the wait);
        // the collect's wait checks every pending worker on the collector's own schedule
        // (check_pending_alive from wait_any's on_idle, a poll's too), so a dead worker is still
        // reported within two liveness intervals, whether the caller waits or polls.
        if (!rd.poll_acquire()) {
            ++it;
            continue;
        }
        Message m;
        try {
            m = rd.peek(std::chrono::nanoseconds::zero());  // a due liveness check of its worker runs here too
        } catch (const Error& e) {
            if (e.code() != ErrorCode::peer_dead) throw;
            throw worker_died(*it, e);
        }
        if (m.status == Status::closed) {
            closed_ranks.push_back(*it);
            it = pending.erase(it);
            continue;
        }
        if (m.status != Status::ok) {
            ++it;
            continue;
        }
        if (m.tag != tag) {
            const std::uint64_t got = m.tag;
            // Out of the ring (the next collect() starts clean) and kept for a collect of its own tag.
            if (other_tag_.empty()) other_tag_.resize(readers_.size());
            auto& kept = other_tag_[*it];
            if (kept.size() == kOtherTagKept) kept.erase(kept.begin());
            kept.push_back({got, std::vector<std::byte>(m.bytes.begin(), m.bytes.end())});
            rd.release();
            throw Error(ErrorCode::stale_reply, "gather '" + name_ + "': rank " + std::to_string(*it) +
                                                    " replied with tag " + std::to_string(got) +
                                                    " while collecting tag " + std::to_string(tag) +
                                                    " (that reply is kept: a collect of tag " + std::to_string(got) +
                                                    " returns it)");
        }
        result.replies[*it].emplace(m.bytes.begin(), m.bytes.end());
        rd.release();
        it = pending.erase(it);
    }
}

// Moved from: its rings are the new owner's (a collect would report ok with no replies). A fork()ed
// child's copy: the replies in the rings and the announcements on the doorbell are the parent's.
void GatherCollector::refuse_moved_or_forked(const char* call) const {
    if (!cancelled_)
        throw Error(ErrorCode::protocol, std::string(call) + ": this GatherCollector was moved from: use the one it was moved into");
    if (removes_names_.made_in.in_forked_child())
        removes_names_.made_in.refuse_copy(call, "this GatherCollector of '" + name_ + "'",
                                           "Collect in the process that created it");
}

GatherResult GatherCollector::collect(std::uint64_t tag, std::span<const std::uint32_t> ranks,
                                      std::chrono::nanoseconds timeout, const EarlyReply& on_early_reply) {
    refuse_moved_or_forked("collect()");
    Timeout lazy_deadline(timeout);
    GatherResult result;
    result.replies.resize(readers_.size());
    std::vector<std::uint32_t> pending;
    if (ranks.empty()) {
        for (std::uint32_t r = 0; r < readers_.size(); ++r) pending.push_back(r);
    } else {
        for (std::uint32_t r : ranks) {
            if (r >= readers_.size())
                throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range (group of " +
                                                             std::to_string(readers_.size()) + ")");
            if (std::find(pending.begin(), pending.end(), r) == pending.end()) pending.push_back(r);
        }
    }
    // Replies an earlier, unfinished collect of this tag took come first.
    if (!kept_.empty()) {
        if (kept_tag_ == tag) {
            for (auto it = pending.begin(); it != pending.end();) {
                if (kept_[*it]) {
                    result.replies[*it] = std::move(kept_[*it]);
                    kept_[*it].reset();
                    it = pending.erase(it);
                } else {
                    ++it;
                }
            }
        } else {
            kept_.clear();  // another tag's: its collect did not finish and the caller moved on
        }
    }
    // Replies to this tag that an earlier collect found while collecting another.
    if (!other_tag_.empty()) {
        for (auto it = pending.begin(); it != pending.end();) {
            if (take_other_tag(tag, *it, result.replies[*it])) it = pending.erase(it);
            else ++it;
        }
    }
    // An unfinished collect keeps what it took (released from the rings: nobody else has it any
    // more), so that a retry of the tag — or a caller collecting in slices, as the Python binding
    // does — never waits for a reply that already came.
    const auto keep_taken = [&](bool copy) {
        if (kept_.empty() || kept_tag_ != tag) kept_.assign(readers_.size(), std::nullopt);
        kept_tag_ = tag;
        for (std::uint32_t r = 0; r < readers_.size(); ++r) {
            if (!result.replies[r]) continue;
            if (copy) kept_[r] = result.replies[r];
            else kept_[r] = std::move(result.replies[r]);
        }
    };
    // Replies already handed to on_early_reply (or kept from an earlier call): handed at most once.
    std::vector<bool> handed;
    if (on_early_reply) {
        handed.resize(readers_.size());
        for (std::uint32_t r = 0; r < readers_.size(); ++r) handed[r] = result.replies[r].has_value();
    }
    std::vector<std::uint32_t> closed_ranks;
    // The adaptive spin learns how long a whole collect waits, not each of its waits: after the first
    // reply of a step the others follow within the workers' spread, and recording those short waits would
    // teach the collector that waits are short, so that the next step's first wait (the workers'
    // whole work) outlasts its spin and sleeps. The waits inside this collect use a copy; the
    // endpoint's history gets one sample: from the first wait until every reply is in. After the
    // first wait the copy stops predicting and spins the later waits for the budget learned from the
    // spread of earlier collects (reply_spread_, one sample: from the end of the first wait, which
    // brought a reply, until every reply is in; SpinHistory::stop_predicting) — or, for a spread
    // longer than the spin, sleeps until the window predicted for the last reply and spins that.
    SpinHistory this_collect(reply_waits_);
    const bool awaited_several = pending.size() >= 2;  // this call's ranks, less the replies kept for it
    Deadline first_wait{};
    Deadline first_reply{};
    try {
        for (;;) {
            drain_ready(tag, pending, closed_ranks, result);  // whatever is there, in any order, no wait
            if (pending.empty()) break;
            if (on_early_reply) {
                // Between waits, nothing held: the next wait_any checks every pending ring before it
                // waits at all (block_until's first ready()), so a reply published while this runs is
                // found there, whether or not its publisher rang (it rings only for a sleeper). Its
                // time counts as wall time in both lengths the adaptive spin learns (the whole
                // collect's and the spread).
                for (std::uint32_t r = 0; r < readers_.size(); ++r) {
                    if (handed[r] || !result.replies[r]) continue;
                    handed[r] = true;
                    on_early_reply(r, *result.replies[r]);
                }
            }
            const bool first = first_wait == Deadline{};
            if (first) first_wait = Clock::now();
            // ONE wait for the whole pending set.
            this_collect.note_before_window(false);  // it says what the last wait saw
            const WaitOutcome o = wait_any(pending, lazy_deadline.deadline(), this_collect);
            if (first && options_.wait.adaptive()) {
                // Only the first wait is predicted (the history is of whole collects); what it
                // learned (alarm lateness, a missed window) goes back now, whatever ends this collect:
                // a caller collecting in slices must see a missed window in its next slice.
                reply_waits_.take_prediction_state(this_collect);
                // The last reply, predicted from the spread when that is typically longer than the
                // spin (only then: a spread within it is spun through, as before): a window on the
                // clock, counted from this first reply (SpinHistory::stop_predicting).
                SpinHistory::Window last_reply{};
                if (o == WaitOutcome::ready) {
                    first_reply = Clock::now();
                    reply_spread_.take_alarm_late(reply_waits_);
                    if (reply_spread_.typical() > straggler_spin_max())
                        if (const SpinHistory::Prediction p = reply_spread_.predicted(straggler_spin_max());
                            p.wake_after.count() > 0)
                            last_reply = reply_spread_.on_the_clock(p, first_reply);
                } else if (o == WaitOutcome::timed_out) {
                    // A first wait that timed out after its spin (waited past spin_for) counts as a
                    // collect that long: a caller that collects with short timeouts while a step is
                    // stuck (20 ms slices, say) then spins its budget in the first few calls only, as
                    // the history moves past the cap, not in every call (up to 10 ms of each 20). A
                    // poll (timeout 0) is not a wait and teaches nothing.
                    const auto waited = Clock::now() - first_wait;
                    if (waited > options_.wait.spin_for) reply_waits_.record(waited, options_.wait.spin_max);
                }
                this_collect.stop_predicting_from(reply_spread_, options_.wait.spin_for, straggler_spin_max(),
                                                  last_reply);
            }
            if (o == WaitOutcome::ready) continue;
            result.status = o == WaitOutcome::cancelled ? Status::cancelled : Status::timed_out;
            result.missing = pending;
            result.missing.insert(result.missing.end(), closed_ranks.begin(), closed_ranks.end());
            std::sort(result.missing.begin(), result.missing.end());
            keep_taken(/*copy=*/true);  // the caller gets them too
            return result;
        }
    } catch (...) {
        keep_taken(/*copy=*/false);
        throw;
    }
    if (first_wait != Deadline{} && options_.wait.adaptive()) {
        const Deadline all_in = Clock::now();
        reply_waits_.record(all_in - first_wait, options_.wait.spin_max);
        // The spread: only of collects that awaited several replies (a single-rank collect's "spread"
        // of zero would teach an all-rank collect of the same executor that its replies come
        // together). A last reply that woke the sleep before its window counts as at the alarm when
        // the window was near (the wake-up's latency would teach a window that opens after the
        // replies), and as when it was collected when the window was far off (a spread that an
        // outlier stretched comes back in a few collects instead of a lead per collect).
        const SpinHistory::Window w = this_collect.later_window();
        const bool near_window = w.alarm - all_in <= w.end - w.alarm;
        const Deadline last = this_collect.ended_before_window() && near_window ? w.alarm : all_in;
        if (first_reply != Deadline{} && awaited_several) reply_spread_.record(last - first_reply, straggler_spin_max());
    }
    result.status = closed_ranks.empty() ? Status::ok : Status::closed;
    result.missing = closed_ranks;
    if (!closed_ranks.empty()) {
        keep_taken(/*copy=*/true);  // as after a timeout: a retry of the tag gets them
    } else {
        // Complete: the tag's collect is over, and every reply still kept for it was handed to the
        // caller — by this call, or by the unfinished one whose result carried it (a caller that
        // collects the rest asks only for result.missing, as the Python binding's slices do, so
        // this call never moved those out). Kept on, such a reply would be returned again by the
        // next collect of a reused tag, in place of the new one left in the ring (and every later
        // step would trail by one).
        kept_.clear();
    }
    std::sort(result.missing.begin(), result.missing.end());
    return result;
}

int GatherCollector::wake_fd() {
    refuse_moved_or_forked("wake_fd()");
    if (!eventfd_) {
        eventfd_ = std::make_unique<EventfdWaiter>(bell_.line().collector_eventfd);
        eventfd_seen_.publish(eventfd_.get());
    }
    return eventfd_->fd();
}

bool GatherCollector::arm_wake_fd(std::uint64_t tag, std::span<const std::uint32_t> ranks) {
    (void)wake_fd();
    std::vector<std::uint32_t> pending(ranks.begin(), ranks.end());
    if (pending.empty())
        for (std::uint32_t r = 0; r < readers_.size(); ++r) pending.push_back(r);
    for (std::uint32_t r : pending)
        if (r >= readers_.size()) throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range");
    // The doorbell rings after every record of every reply ring while we announce on it (ring.hpp,
    // publish order step 5), so any pending ring's new record wakes us.
    return arm_eventfd(*eventfd_, bell_site(), *cancelled_, [&] { return any_awaited_ready(tag, pending); });
}

void GatherCollector::disarm_wake_fd() noexcept {
    // (moved from: nothing of it armed; a fork()ed child's copy: the announcement is the parent's)
    if (cancelled_ && !removes_names_.made_in.in_forked_child()) retract(bell_site());
}

// ---- worker ---------------------------------------------------------------------------------------

GatherWorker GatherWorker::attach(std::string_view name, std::uint32_t rank, const WriterOptions& options) {
    WriterOptions wo = options;
    wo.unlink_on_destroy = false;  // the collector owns the names
    wo.reopen_closed = true;       // a worker restarted after its predecessor exited cleanly
    DoorbellMapping bell = [&] {
        try {
            return DoorbellMapping::open(gather_bell_name(name), 0);
        } catch (const Error& e) {
            if (e.code() != ErrorCode::not_found) throw;
            // In the gather's terms (the bell's name alone read as an internal object): no group of the name.
            throw Error(ErrorCode::not_found, "gather '" + std::string(name) + "' does not exist (no doorbell '" +
                                                  gather_bell_name(name) + "'): its executor has not created it yet, "
                                                  "or has removed it");
        }
    }();
    const std::uint32_t ranks = bell.line().ranks.load(std::memory_order_relaxed);
    if (rank >= ranks)
        throw Error(ErrorCode::invalid_argument, "worker rank " + std::to_string(rank) + " out of range: gather '" +
                                                     std::string(name) + "' has " + std::to_string(ranks) + " ranks");
    Writer writer = Writer::open(gather_ring_name(name, rank), wo);
    // The reply ring's one reader is the executor's collector (rank 0, attached by create() and held
    // until its destructor removes the names). A killed executor leaves the names with its claim in
    // place: replies would fill the ring and only then fail, so a worker joining such a group is told
    // now. (One that dies later is caught by the blocked reply's liveness check, as before.)
    const layout::Owner collector =
        layout::unpack_owner(writer.segment().reader_slot(0).owner.load(std::memory_order_acquire));
    if (collector.state == layout::SlotState::attached && !owner_alive(collector))
        throw Error(ErrorCode::peer_dead, "worker rank " + std::to_string(rank) + " of gather '" + std::string(name) +
                                              "': the executor that collects its replies (pid " +
                                              std::to_string(collector.pid) + ") is dead" + kDeadPeerHint);
    return GatherWorker(std::move(bell), std::move(writer), rank);
}

GatherWorker::GatherWorker(DoorbellMapping bell, Writer writer, std::uint32_t rank)
    : bell_(std::move(bell)), writer_(std::move(writer)), rank_(rank) {
    auto& b = bell_.line();
    bell_eventfds_ = std::make_unique<EventfdSignaller>(&b.collector_eventfd, 0, 1);
    // Every record of the reply ring — each fragment of a large reply too — rings the bell while the
    // collector sleeps on it (ring.hpp publish order, step 5).
    writer_.set_publish_bell({&b.doorbell_seq, &b.collector_sleeping, 1, 0, &b.waits, bell_eventfds_.get()}, b.rings);
}

Status GatherWorker::reply(std::uint64_t tag, std::span<const std::byte> bytes, std::chrono::nanoseconds timeout) {
    return writer_.write(bytes, timeout, tag);
}

Status GatherWorker::reply(std::uint64_t tag, std::span<const std::byte> bytes, std::chrono::nanoseconds timeout,
                           WriteProgress& progress) {
    const std::span<const std::byte> parts[1] = {bytes};
    return writer_.write_parts(parts, timeout, tag, &progress);
}

void GatherWorker::commit_reply(std::size_t used, std::uint64_t tag) { writer_.commit(used, tag); }

}  // namespace ringcast
