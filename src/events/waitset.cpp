// WaitSet (include/ringcast/events/waitset.hpp): members, the wait loop, the epoll back end and the
// run-time choice of back end. The io_uring back end is waitset_uring.cpp (built with liburing only).
#include "ringcast/events/waitset.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include <sys/epoll.h>
#include <unistd.h>

#include "ringcast/detail/process.hpp"
#include "ringcast/events/arm.hpp"
#include "waitset_impl.hpp"

namespace ringcast {

const char* to_string(WaitSetBackend b) noexcept {
    switch (b) {
        case WaitSetBackend::automatic: return "automatic";
        case WaitSetBackend::epoll: return "epoll";
        case WaitSetBackend::io_uring: return "io_uring";
    }
    return "?";
}

// ---- members --------------------------------------------------------------------------------------

const void* WaitSet::Member::endpoint() const noexcept {
    switch (kind) {
        case Kind::reader: return reader;
        case Kind::writer_space: return writer;
        case Kind::collector: return collector;
    }
    return nullptr;
}

const detail::MadeInProcess& WaitSet::Member::made_in() const noexcept {
    switch (kind) {
        case Kind::reader: break;
        case Kind::writer_space: return writer->made_in_;
        case Kind::collector: return collector->removes_names_.made_in;
    }
    return reader->attached_in_;
}

SleepSite WaitSet::Member::site() const noexcept {
    switch (kind) {
        case Kind::reader: return reader->data_site();
        case Kind::writer_space: return writer->space_site();
        case Kind::collector: return collector->bell_site();  // the doorbell rings for every reply ring
    }
    return {};
}

EventfdWaiter* WaitSet::Member::eventfd() const noexcept {
    switch (kind) {
        case Kind::reader: return reader->data_eventfd_.get();
        case Kind::writer_space: return writer->space_eventfd_.get();
        case Kind::collector: return collector->eventfd_.get();
    }
    return nullptr;
}

int WaitSet::Member::ensure_eventfd() {
    switch (kind) {
        case Kind::reader: return reader->wake_fd();
        case Kind::writer_space: return writer->wake_fd();
        case Kind::collector: return collector->wake_fd();
    }
    return -1;
}

const std::atomic<bool>& WaitSet::Member::cancelled() const noexcept {
    switch (kind) {
        case Kind::reader: return reader->cancelled_.get();
        case Kind::writer_space: return writer->cancelled_.get();
        case Kind::collector: break;
    }
    return *collector->cancelled_;
}

// A cancelled endpoint is reported ready: its look with a zero timeout returns Status::cancelled, as
// its own blocking call would (cancel() pokes the eventfd and bumps the futex word after storing the
// flag, so a member armed before the cancel is woken, and one armed after sees the flag: arm.hpp).
bool WaitSet::Member::ready() { return cancelled().load(std::memory_order_seq_cst) || condition(); }

bool WaitSet::Member::condition() {
    switch (kind) {
        case Kind::reader: return reader->poll_acquire();
        // Writer::arm_wake_fd's own room test: the next write's first record (a resumed stream's
        // next fragment), so a member reported ready is one whose zero-timeout write gets somewhere.
        case Kind::writer_space: return writer->has_room_for_next_write(message_bytes, progress);
        case Kind::collector: return collector->any_awaited_ready(tag, ranks);
    }
    return false;
}

void WaitSet::Member::check_peer() {
    switch (kind) {
        case Kind::reader: reader->check_liveness(); return;
        case Kind::writer_space: writer->check_liveness(); return;
        case Kind::collector: collector->check_liveness(tag, ranks); return;  // a rank whose reply is kept may exit
    }
}

// 3a..3d with the endpoint's eventfd (events/arm.hpp). true: ready now, nothing armed.
bool WaitSet::Member::arm_with_eventfd() {
    return arm_eventfd(*eventfd(), site(), cancelled(), [this] { return condition(); });
}

// ---- epoll back end ---------------------------------------------------------------------------------

namespace {

class EpollBackend final : public WaitSet::Backend {
public:
    EpollBackend() : epfd_(::epoll_create1(EPOLL_CLOEXEC)) {
        if (epfd_ < 0) throw Error(ErrorCode::system, std::string("epoll_create1 failed: ") + std::strerror(errno));
    }
    ~EpollBackend() override { ::close(epfd_); }
    [[nodiscard]] WaitSetBackend kind() const noexcept override { return WaitSetBackend::epoll; }

    void added(std::size_t id, WaitSet::Member& m) override {
        epoll_event ev{};
        ev.events = EPOLLIN;  // level-triggered: the fd stays readable until the member's next arm drains it
        ev.data.u64 = id;
        if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, m.ensure_eventfd(), &ev) != 0)
            throw Error(ErrorCode::system, std::string("epoll_ctl(ADD) failed: ") + std::strerror(errno));
    }
    void removed(std::size_t, WaitSet::Member& m) noexcept override {
        if (EventfdWaiter* fd = m.eventfd()) ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd->fd(), nullptr);
    }
    [[nodiscard]] bool arm(std::size_t, WaitSet::Member& m) override { return m.arm_with_eventfd(); }
    void disarm(std::size_t, WaitSet::Member& m) noexcept override { retract(m.site()); }
    void abandon(std::size_t, WaitSet::Member& m) noexcept override { retract(m.site()); }  // (a later
    // signal only leaves the fd readable: the next arm drains it)

    void wait(Deadline until, std::vector<std::size_t>& woken) override {
        int timeout_ms = 0;
        if (until == kNoDeadline) {
            timeout_ms = -1;
        } else if (until != kPollOnly) {
            const auto left = until - Clock::now();
            // Rounded up: a wait that returns before `until` would only spin the caller's loop.
            timeout_ms = left.count() <= 0
                             ? 0
                             : static_cast<int>(std::min<std::int64_t>(
                                   std::chrono::ceil<std::chrono::milliseconds>(left).count(), 1 << 30));
        }
        epoll_event events[64];
        const int n = ::epoll_wait(epfd_, events, 64, timeout_ms);
        if (n < 0) {
            if (errno == EINTR) return;  // the caller re-checks and waits again
            throw Error(ErrorCode::system, std::string("epoll_wait failed: ") + std::strerror(errno));
        }
        for (int i = 0; i < n; ++i) woken.push_back(static_cast<std::size_t>(events[i].data.u64));
    }

private:
    int epfd_;
};

// One line on stderr per process: the first WaitSet that falls back says why.
void log_fallback(const std::string& why) {
    static std::atomic<bool> said{false};
    if (said.exchange(true)) return;
    std::fprintf(stderr, "ringcast: WaitSet uses epoll: io_uring futex waits unavailable (%s)\n", why.c_str());
}

}  // namespace

#ifndef RINGCAST_HAVE_IO_URING
std::string io_uring_futex_unavailable_reason() { return "built without liburing"; }
std::unique_ptr<WaitSet::Backend> make_io_uring_backend(std::chrono::nanoseconds, std::string& why) {
    why = io_uring_futex_unavailable_reason();
    return nullptr;
}
#endif

// ---- the set ---------------------------------------------------------------------------------------

// The member's liveness check, once per `recheck`. A peer found dead stays due: every later wait()
// reports it again, as the endpoint's own calls do (wait.hpp LivenessClock). Deadlines, not "now -
// last < recheck": later_by saturates, so recheck = nanoseconds::max() is "never", not an overflow.
void WaitSet::check_peer_if_due(Member& m, std::size_t id, Deadline now) {
    if (now < m.next_check) return;
    m.next_check = later_by(now, recheck_);
    try {
        m.check_peer();
    } catch (const Error& e) {
        m.next_check = now;     // due again at once ...
        next_recheck_ = now;    // ... at the next wait()'s first look (step 4)
        // Which member: the caller removes it (or replaces its endpoint) to stop the reports.
        throw Error(e.code(), std::string(e.what()) + " (WaitSet member " + std::to_string(id) + ")");
    }
}

bool WaitSet::in_forked_child() const noexcept { return made_in_.in_forked_child(); }

void WaitSet::refuse_in_forked_child(const char* what) const {
    if (in_forked_child())
        made_in_.refuse_copy(what, "this WaitSet",
                             "Build a new WaitSet in this process (its epoll instance / io_uring ring is the parent's)");
}

WaitSet::WaitSet(const WaitSetOptions& options) : recheck_(options.recheck) {
    if (recheck_.count() <= 0) throw Error(ErrorCode::invalid_argument, "WaitSetOptions::recheck must be positive");
    WaitSetBackend want = options.backend;
    const char* env = std::getenv("RINGCAST_WAITSET");
    const bool forced_epoll = env != nullptr && std::string(env) == "epoll";
    if (want == WaitSetBackend::automatic && forced_epoll) {
        log_fallback("RINGCAST_WAITSET=epoll");
        want = WaitSetBackend::epoll;
    }
    if (want != WaitSetBackend::epoll) {
        std::string why;
        backend_ = make_io_uring_backend(recheck_, why);
        if (!backend_) {
            if (want == WaitSetBackend::io_uring)
                throw Error(ErrorCode::system, "the io_uring WaitSet back end is unavailable: " + why);
            log_fallback(why);
        }
    }
    if (!backend_) backend_ = std::make_unique<EpollBackend>();
}

WaitSet::~WaitSet() {
    // A forked child's copy leaves the parent's epoll registrations, io_uring waits and announcements
    // alone (waitset.hpp): it frees its own memory and closes its own fds only.
    for (std::size_t id = 0; id < members_.size() && !in_forked_child(); ++id) {
        if (!members_[id]) continue;
        if (members_[id]->armed) backend_->abandon(id, *members_[id]);
        backend_->removed(id, *members_[id]);
    }
    backend_.reset();  // (io_uring: closing the ring cancels its outstanding waits)
}

WaitSetBackend WaitSet::backend() const noexcept { return backend_->kind(); }
std::uint64_t WaitSet::kernel_waits() const noexcept { return kernel_waits_; }
std::size_t WaitSet::size() const noexcept { return by_endpoint_.size(); }

std::size_t WaitSet::add_member(Member member) {
    refuse_in_forked_child("WaitSet::add");
    // An endpoint a fork() copied into this process: arming it would drain the parent's eventfd or
    // announce and then retract the parent's bit (its wake lost while it sleeps), as the endpoint's
    // own calls, which refuse such a copy, would (ring.hpp, ~Writer / ~Reader).
    if (const detail::MadeInProcess& owner = member.made_in(); owner.in_forked_child())
        owner.refuse_copy("WaitSet::add", "this endpoint", "Add endpoints this process made");
    // One member per endpoint: the announcement bit is the endpoint's own, so a second member of it
    // would withdraw the first one's announcement when it is disarmed or removed (a lost wake until
    // the re-check); and the epoll back end cannot watch one fd twice.
    if (const auto it = by_endpoint_.find(member.endpoint()); it != by_endpoint_.end())
        throw Error(ErrorCode::invalid_argument,
                    "this endpoint is already WaitSet member " + std::to_string(it->second) +
                        " (one member per endpoint: remove it first, or change its tag / message size)");
    // A removed member's id first: every loop of wait() walks members_, so add/remove cycles must not
    // grow it. Reusing an id is safe for the back ends: epoll forgot the old fd at remove()
    // (EPOLL_CTL_DEL), and io_uring ignores a late completion of the old member (its generation).
    const bool reuse = !free_ids_.empty();
    const std::size_t id = reuse ? free_ids_.back() : members_.size();
    if (!reuse) members_.emplace_back();
    members_[id] = std::make_unique<Member>(std::move(member));
    try {
        by_endpoint_.emplace(members_[id]->endpoint(), id);
        backend_->added(id, *members_[id]);
    } catch (...) {
        by_endpoint_.erase(members_[id]->endpoint());
        members_[id].reset();
        if (!reuse) members_.pop_back();
        throw;
    }
    if (reuse) free_ids_.pop_back();
    return id;
}

std::size_t WaitSet::add(Reader& reader) {
    Member m;
    m.kind = Member::Kind::reader;
    m.reader = &reader;
    return add_member(std::move(m));
}

std::size_t WaitSet::add_space(Writer& writer, std::size_t message_bytes, const WriteProgress* progress) {
    Member m;
    m.kind = Member::Kind::writer_space;
    m.writer = &writer;
    m.message_bytes = message_bytes;
    m.progress = progress;
    return add_member(std::move(m));
}

std::size_t WaitSet::add(GatherCollector& collector, std::uint64_t tag, std::span<const std::uint32_t> ranks) {
    Member m;
    m.kind = Member::Kind::collector;
    m.collector = &collector;
    m.tag = tag;
    m.ranks.assign(ranks.begin(), ranks.end());
    if (m.ranks.empty())
        for (std::uint32_t r = 0; r < collector.ranks(); ++r) m.ranks.push_back(r);
    for (std::uint32_t r : m.ranks)
        if (r >= collector.ranks()) throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range");
    return add_member(std::move(m));
}

void WaitSet::remove(std::size_t id) {
    if (id >= members_.size() || !members_[id]) throw Error(ErrorCode::invalid_argument, "no WaitSet member " + std::to_string(id));
    if (!in_forked_child()) {  // a child's copy touches nothing of the parent's (waitset.hpp)
        if (members_[id]->armed) backend_->abandon(id, *members_[id]);
        backend_->removed(id, *members_[id]);
    }
    by_endpoint_.erase(members_[id]->endpoint());
    members_[id].reset();
    free_ids_.push_back(id);
}

void WaitSet::set_message_bytes(std::size_t id, std::size_t message_bytes, const WriteProgress* progress) {
    if (id >= members_.size() || !members_[id] || members_[id]->kind != Member::Kind::writer_space)
        throw Error(ErrorCode::invalid_argument, "WaitSet member " + std::to_string(id) + " is not a writer");
    members_[id]->message_bytes = message_bytes;
    members_[id]->progress = progress;
}

void WaitSet::set_tag(std::size_t id, std::uint64_t tag) {
    if (id >= members_.size() || !members_[id] || members_[id]->kind != Member::Kind::collector)
        throw Error(ErrorCode::invalid_argument, "WaitSet member " + std::to_string(id) + " is not a collector");
    members_[id]->tag = tag;
}

std::vector<std::size_t> WaitSet::wait(std::chrono::nanoseconds timeout) {
    refuse_in_forked_child("WaitSet::wait");
    const Deadline deadline = deadline_after(timeout);
    std::vector<std::size_t> ready;
    // (1) Re-announce every armed member (3a, one fence 3b for all, 3d). A member stays armed across
    // wait() calls, and the announcement bit is the endpoint's own: the endpoint's blocking call
    // (read(msg, 20ms) between two waits) announces on it and withdraws it when it returns (3d/3f) —
    // after which a writer's w2 sees no bit and wakes nobody, though our kernel wait is still in
    // place. Setting the bit again (idempotent while it is still set) and re-checking after the fence
    // restores the handshake: a publish before our 3a is seen by the re-check, one after it sees the
    // bit and wakes the kernel wait (the futex word's bump completes an io_uring FUTEX_WAIT of any
    // snapshot; the eventfd write makes the fd readable).
    // A member armed on its futex word whose endpoint registered an eventfd since (its wake_fd(),
    // called between two waits) is woken through that fd from then on: its wakers skip the futex wake
    // when every announced sleeper has one, so the kernel wait in place would never end. Such a member
    // (or one whose eventfd went) is abandoned here and armed again in (2), the way it is woken now.
    for (std::size_t id = 0; id < members_.size(); ++id) {
        Member* m = members_[id].get();
        if (m == nullptr || !m->armed || m->armed_on_eventfd == (m->eventfd() != nullptr)) continue;
        backend_->abandon(id, *m);
        m->armed = false;
    }
    bool any_armed = false;
    for (const auto& m : members_)
        if (m != nullptr && m->armed) {
            announce(m->site());
            any_armed = true;
        }
    if (any_armed) std::atomic_thread_fence(std::memory_order_seq_cst);
    for (std::size_t id = 0; id < members_.size(); ++id) {
        Member* m = members_[id].get();
        if (m == nullptr || !m->armed || !m->ready()) continue;
        backend_->abandon(id, *m);
        m->armed = false;
        ready.push_back(id);
    }
    // (2) Arm every member that is not armed (new, or reported ready last time): 3a'..3d.
    for (std::size_t id = 0; id < members_.size(); ++id) {
        Member* m = members_[id].get();
        if (m == nullptr || m->armed || std::find(ready.begin(), ready.end(), id) != ready.end()) continue;
        if (backend_->arm(id, *m)) {
            ready.push_back(id);
        } else {
            m->armed = true;
            m->armed_on_eventfd = m->eventfd() != nullptr;
        }
    }
    // Some are ready already: one look (no sleep) at what the kernel has for the others too, so a
    // member that is always ready cannot starve the rest.
    const bool look_only = !ready.empty();
    // later_by saturates: a recheck of nanoseconds::max() leaves next_recheck_ at kNoDeadline (never),
    // where a plain sum wrapped to a past deadline and the loop below never slept.
    if (next_recheck_ == Deadline{}) next_recheck_ = later_by(Clock::now(), recheck_);
    std::vector<std::size_t> woken;
    for (;;) {
        const Deadline until = deadline == kPollOnly || look_only ? kPollOnly : std::min(deadline, next_recheck_);
        woken.clear();
        ++kernel_waits_;
        backend_->wait(until, woken);
        const Deadline now = Clock::now();
        // (3) Every woken member's kernel wait has ended (3f): unarmed from here on, whatever follows —
        // so that a peer_dead thrown below, or a failed kernel wait, leaves no member marked armed
        // with nothing in flight (the next wait() arms it again).
        std::erase_if(woken, [&](std::size_t id) {
            Member* m = id < members_.size() ? members_[id].get() : nullptr;
            if (m == nullptr || !m->armed) return true;  // removed, or already handled in this round
            backend_->disarm(id, *m);
            m->armed = false;
            return false;
        });
        backend_->throw_if_failed();
        // (4) No member goes longer than `recheck` without a look, however the caller waits: re-check
        // every armed member (a peer killed between its publish and its wake never wakes us) and,
        // when due, its peer's liveness. A member that is not ready stays armed as it is: no re-arm,
        // no system call for it.
        std::exception_ptr dead;  // the first peer found dead (steps 4, 5): reported after every look
        const auto check = [&](Member& m, std::size_t id) {
            try {
                check_peer_if_due(m, id, now);
                return true;
            } catch (...) {
                if (!dead) dead = std::current_exception();
                return false;
            }
        };
        if (now >= next_recheck_) {
            next_recheck_ = later_by(now, recheck_);
            for (std::size_t id = 0; id < members_.size(); ++id) {
                Member* m = members_[id].get();
                if (m == nullptr || !m->armed) continue;
                if (m->ready()) {
                    backend_->abandon(id, *m);
                    m->armed = false;
                    ready.push_back(id);
                    continue;
                }
                (void)check(*m, id);
            }
        }
        // (5) The woken: ready now, or re-armed (after a liveness check when one is due; one that
        // found its peer dead stays unarmed: the next wait() arms it again).
        for (std::size_t id : woken) {
            Member* m = members_[id].get();
            if (m->ready()) {
                ready.push_back(id);
                continue;
            }
            if (!check(*m, id)) continue;  // a wake without news: is the peer still there?
            if (backend_->arm(id, *m)) ready.push_back(id);
            else m->armed = true;
        }
        // (6) A dead peer is reported by every wait() while its member stays in the set (it is due
        // again at once: check_peer_if_due), but never starves the live members: a wait() that has
        // members ready returns them and leaves the report to the next one, so reports and ready
        // members alternate at worst.
        if (dead) {
            if (ready.empty() || withheld_dead_) {
                withheld_dead_ = false;
                std::rethrow_exception(dead);
            }
            withheld_dead_ = true;
            return ready;
        }
        withheld_dead_ = false;
        if (!ready.empty() || now >= deadline || until == kPollOnly) return ready;
    }
}

}  // namespace ringcast
