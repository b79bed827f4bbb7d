// WaitSet's io_uring back end (include/ringcast/events/waitset.hpp): each armed member has one
// IORING_OP_FUTEX_WAIT on its own futex word (or a POLL_ADD on its eventfd, if it registered one),
// linked to an IORING_OP_LINK_TIMEOUT of `recheck`. Built only with liburing.
//
// liburing 2.3 has no futex helpers and no IORING_OP_FUTEX_* constants (they came with 2.6 and Linux
// 6.7): the SQE is io_uring_prep_rw with the kernel's field layout for opcode 51 —
//   fd = futex2 flags (FUTEX2_SIZE_U32; never FUTEX2_PRIVATE: the wakers are other processes),
//   addr = the futex word, off = the expected value (step 3c's snapshot), len = 0,
//   rw_flags (futex_flags) = 0, addr3 = the wake bitset mask (all bits).
// The kernel compares the word with `off` under the futex bucket lock when the SQE is issued, exactly
// as futex_wait does (wait.hpp 3e): a waker that bumped seq after our snapshot makes it complete at
// once (-EAGAIN), one that bumps it later wakes it.
//
// The ring is created with IORING_SETUP_DEFER_TASKRUN (Linux 6.1; needs SINGLE_ISSUER): a futex wake
// completes our FUTEX_WAIT through task work, and deferred task work runs inside our own
// io_uring_enter instead of interrupting the task — measured on the 2-core VM (ringcast-events-bench
// rtt, 2 x 3 runs): io_uring / bare futex ping-pong 1.22, 1.22 without it; 1.16, 1.16 with it. The
// price is SINGLE_ISSUER: one task may submit. The ring starts disabled (IORING_SETUP_R_DISABLED) and
// is enabled by the first thread that submits, so a WaitSet may be built in one thread and used in
// another (its contract: one thread uses it); a second thread gets Error(system) saying so.
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <liburing.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringcast/events/arm.hpp"
#include "waitset_impl.hpp"

namespace ringcast {

namespace {

constexpr std::uint8_t kOpFutexWait = 51;           // IORING_OP_FUTEX_WAIT (Linux 6.7)
constexpr std::uint64_t kFutexBitsetAll = 0xffffffffULL;  // FUTEX_BITSET_MATCH_ANY
constexpr unsigned kEntries = 256;
constexpr std::uint64_t kTimeoutTag = 1;  // user_data bit 0: the linked timeout's completion

[[nodiscard]] std::uint64_t user_data(std::size_t id, std::uint32_t generation, bool timeout) noexcept {
    return (std::uint64_t{generation} << 32) | (std::uint64_t{static_cast<std::uint32_t>(id)} << 1) |
           (timeout ? kTimeoutTag : 0);
}

[[nodiscard]] __kernel_timespec to_kernel_timespec(std::chrono::nanoseconds d) noexcept {
    __kernel_timespec ts{};
    ts.tv_sec = d.count() / 1'000'000'000;
    ts.tv_nsec = d.count() % 1'000'000'000;
    return ts;
}

class UringBackend final : public WaitSet::Backend {
public:
    // The linked timeout is a backstop, kBackstop x recheck: the set's own re-check (waitset.cpp) runs
    // every `recheck` without touching the waits in flight; re-arming 64 waits per interval cost
    // ~0.2 % CPU on the 2-core VM, the backstop ~0.01 %.
    // kBackstop x recheck saturates: a recheck past nanoseconds::max() / 8 (50 years is) wrapped to a
    // negative timeout, every linked timeout failed at once, and each member was re-armed in a loop
    // that never slept. The kernel takes a timeout of ~292 years as "never" (KTIME_MAX).
    static constexpr int kBackstop = 8;
    UringBackend(io_uring ring, std::chrono::nanoseconds recheck)
        : ring_(ring),
          recheck_(to_kernel_timespec(recheck > std::chrono::nanoseconds::max() / kBackstop
                                          ? std::chrono::nanoseconds::max()
                                          : recheck * kBackstop)) {}
    ~UringBackend() override { io_uring_queue_exit(&ring_); }  // cancels the waits still in flight
    [[nodiscard]] WaitSetBackend kind() const noexcept override { return WaitSetBackend::io_uring; }

    void added(std::size_t, WaitSet::Member&) override {}
    void removed(std::size_t id, WaitSet::Member& m) noexcept override { abandon(id, m); }
    void abandon(std::size_t id, WaitSet::Member& m) noexcept override {
        // Cancel its wait, if one is in flight; its completion (of this generation) is ignored.
        if (id < live_.size() && live_[id] != 0) {
            io_uring_sqe* sqe = get_sqe();
            if (sqe != nullptr) {
                io_uring_prep_cancel64(sqe, user_data(id, live_[id], false), 0);
                io_uring_sqe_set_data64(sqe, user_data(id, 0, true));  // its own completion: ignored
                enable();
                io_uring_submit(&ring_);
            }
            live_[id] = 0;  // generation 0 is never armed: whatever completes for it is stale
        }
        retract(m.site());
    }

    [[nodiscard]] bool arm(std::size_t id, WaitSet::Member& m) override {
        if (id >= live_.size()) live_.resize(id + 1, 0);
        live_[id] = 0;
        // Room for the linked pair first, before anything is announced: a pair cut in two would link
        // the wait to whatever SQE comes next, and an announcement left behind would cost wakes.
        reserve_sqes(2);
        io_uring_sqe* sqe = nullptr;
        if (EventfdWaiter* fd = m.eventfd()) {
            // An endpoint with an eventfd is woken through it only (its wakers skip the futex wake).
            if (m.arm_with_eventfd()) return true;
            sqe = get_sqe();
            io_uring_prep_poll_add(sqe, fd->fd(), POLLIN);
        } else {
            const SleepSite site = m.site();
            announce(site);                                       // 3a
            std::atomic_thread_fence(std::memory_order_seq_cst);  // 3b
            const std::uint32_t seen = site.seq->load(std::memory_order_acquire);  // 3c
            if (m.ready()) {                                      // 3d
                retract(site);
                return true;
            }
            sqe = get_sqe();
            io_uring_prep_rw(kOpFutexWait, sqe, static_cast<int>(kFutex2SizeU32), site.seq, 0, seen);  // 3e
            sqe->addr3 = kFutexBitsetAll;
        }
        live_[id] = ++generation_ == 0 ? ++generation_ : generation_;
        io_uring_sqe_set_data64(sqe, user_data(id, live_[id], false));
        sqe->flags |= IOSQE_IO_LINK;
        io_uring_sqe* timeout = get_sqe();  // no kernel wait outlives kBackstop x `recheck`
        io_uring_prep_link_timeout(timeout, &recheck_, 0);
        io_uring_sqe_set_data64(timeout, user_data(id, live_[id], true));
        pending_submit_ = true;
        return false;
    }
    void disarm(std::size_t, WaitSet::Member& m) noexcept override { retract(m.site()); }
    void throw_if_failed() override {
        if (const int res = std::exchange(failed_, 0); res != 0) fail("a member's io_uring wait", res);
    }

    void wait(Deadline until, std::vector<std::size_t>& woken) override {
        enable();
        io_uring_cqe* cqe = nullptr;
        int rc = 0;
        if (until == kPollOnly) {
            if (pending_submit_) {
                pending_submit_ = false;
                rc = io_uring_submit(&ring_);
                if (rc < 0) fail("io_uring_submit", rc);
            }
            // Deferred task work (completions) runs only when we enter the kernel asking for events.
            if ((ring_.flags & IORING_SETUP_DEFER_TASKRUN) != 0 && (rc = io_uring_get_events(&ring_)) < 0)
                fail("io_uring_get_events", rc);
            rc = io_uring_peek_cqe(&ring_, &cqe);
        } else {
            // Submit and wait in one io_uring_enter (the round trip pays one system call, not two).
            __kernel_timespec ts{};
            if (until != kNoDeadline) {
                const auto left = std::max(until - Clock::now(), Clock::duration::zero());
                ts = to_kernel_timespec(std::chrono::duration_cast<std::chrono::nanoseconds>(left));
            }
            pending_submit_ = false;
            rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, until == kNoDeadline ? nullptr : &ts, nullptr);
            if (rc >= 0) rc = 0;
        }
        if (rc == -ETIME || rc == -EAGAIN || rc == -EINTR) return;
        if (rc < 0) fail("io_uring wait", rc);
        unsigned head = 0;
        unsigned seen = 0;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            ++seen;
            const std::uint64_t data = io_uring_cqe_get_data64(cqe);
            if (data == LIBURING_UDATA_TIMEOUT || (data & kTimeoutTag) != 0) continue;  // a timeout's own
            // completion (liburing's wait timeout, or a link timeout: fired or cancelled)
            // -EAGAIN: seq moved before the kernel looked; -ECANCELED: the linked timeout fired;
            // 0 / POLLIN: woken. Every one means "re-check" (waitset.cpp). Anything else is a wait
            // that failed (-EINVAL, -EFAULT, ...): reported (throw_if_failed) rather than re-armed
            // and failing again at once, a loop that would spin without ever sleeping.
            const auto id = static_cast<std::size_t>((data >> 1) & 0x7fffffffu);
            const auto generation = static_cast<std::uint32_t>(data >> 32);
            if (id >= live_.size() || live_[id] != generation) continue;  // an earlier arm's, or removed
            live_[id] = 0;  // completed: nothing of this member is in flight any more
            woken.push_back(id);
            const int res = cqe->res;
            if (res < 0 && res != -EAGAIN && res != -ECANCELED && res != -EINTR && failed_ == 0) failed_ = res;
        }
        io_uring_cq_advance(&ring_, seen);
    }

private:
    // R_DISABLED rings are enabled by their first submitter, which becomes the ring's single issuer.
    void enable() noexcept {
        // liburing 2.3 declares io_uring_enable_rings but does not export it: the raw register call.
        // (A failure shows in the submit that follows.)
        if (!enabled_)
            enabled_ = ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) == 0;
    }
    [[noreturn]] static void fail(const char* what, int rc) {
        std::string why = std::string(what) + " failed: " + std::strerror(-rc);
        if (rc == -EEXIST) why += " (a WaitSet is used by one thread; this one was first used by another)";
        throw Error(ErrorCode::system, why);
    }
    // Makes room for `n` SQEs (submitting what is queued), or throws: the submit fails in a thread
    // other than the ring's first submitter (EEXIST, named by fail()).
    void reserve_sqes(unsigned n) {
        if (io_uring_sq_space_left(&ring_) >= n) return;
        enable();
        const int rc = io_uring_submit(&ring_);
        if (rc < 0) fail("io_uring_submit", rc);
        pending_submit_ = false;
        if (io_uring_sq_space_left(&ring_) < n) fail("io_uring_submit", -EBUSY);
    }
    io_uring_sqe* get_sqe() noexcept {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) {  // the submission queue is full: hand it to the kernel, then take one
            enable();
            io_uring_submit(&ring_);
            sqe = io_uring_get_sqe(&ring_);
        }
        return sqe;
    }

    io_uring ring_;
    __kernel_timespec recheck_;  // read by the kernel when the link timeouts are submitted
    bool pending_submit_ = false;
    bool enabled_ = (ring_.flags & IORING_SETUP_R_DISABLED) == 0;  // else at the first submit (enable())
    int failed_ = 0;                 // the first failed member wait's -errno since throw_if_failed
    std::uint32_t generation_ = 0;   // numbers arms; tags each SQE's user_data
    std::vector<std::uint32_t> live_;  // by member id: the generation of its SQE in flight, 0: none
};

}  // namespace

std::string io_uring_futex_unavailable_reason() {
    io_uring ring{};
    const int rc = io_uring_queue_init(4, &ring, 0);
    if (rc < 0) return std::string("io_uring_setup: ") + std::strerror(-rc);
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    std::string why;
    if (probe == nullptr) why = "io_uring probe failed";
    else if (!io_uring_opcode_supported(probe, kOpFutexWait)) why = "the kernel lacks IORING_OP_FUTEX_WAIT (Linux 6.7)";
    else if (!io_uring_opcode_supported(probe, IORING_OP_LINK_TIMEOUT)) why = "the kernel lacks IORING_OP_LINK_TIMEOUT";
    if (probe != nullptr) io_uring_free_probe(probe);
    io_uring_queue_exit(&ring);
    return why;
}

std::unique_ptr<WaitSet::Backend> make_io_uring_backend(std::chrono::nanoseconds recheck, std::string& why) {
    why = io_uring_futex_unavailable_reason();
    if (!why.empty()) return nullptr;
    io_uring ring{};
    int rc = io_uring_queue_init(kEntries, &ring,
                                 IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED);
    if (rc == -EINVAL) rc = io_uring_queue_init(kEntries, &ring, 0);  // a kernel before 6.1: without them
    if (rc < 0) {
        why = std::string("io_uring_setup: ") + std::strerror(-rc);
        return nullptr;
    }
    return std::make_unique<UringBackend>(ring, recheck);
}

}  // namespace ringcast
