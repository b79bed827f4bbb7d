// The eventfd wake mode (include/ringcast/events/eventfd.hpp): registration, the waker's fd copies.
#include "ringcast/events/eventfd.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringcast/error.hpp"
#include "ringcast/segment.hpp"

namespace ringcast {

namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

[[nodiscard]] std::string errno_text(int e) { return std::string(std::strerror(e)); }

// Is `fd` an eventfd? A waker writes 8 bytes into what it took: never into a file or a socket.
[[nodiscard]] bool is_eventfd(int fd) noexcept {
    char path[64];
    char target[64] = {};
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(path, target, sizeof target - 1);
    constexpr std::string_view kEventfd = "anon_inode:[eventfd]";  // the whole target (a prefix of it passed)
    return n == static_cast<ssize_t>(kEventfd.size()) && std::string_view(target, kEventfd.size()) == kEventfd;
}

}  // namespace

int take_fd_of(std::uint32_t pid, std::uint64_t start_time, int fd) noexcept {
    const auto self = static_cast<std::uint32_t>(::getpid());
    if (pid == self) return ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // our own endpoint (threads): a plain dup
    const long pidfd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
    if (pidfd < 0) return -1;
    // The pidfd names whichever process had `pid` when it was opened. If that pid still has the
    // registrant's start time now, it had it then too (a dead process's pid cannot come back to it).
    if (!process_alive(static_cast<pid_t>(pid), start_time)) {
        ::close(static_cast<int>(pidfd));
        errno = ESRCH;
        return -1;
    }
    const long copy = ::syscall(SYS_pidfd_getfd, static_cast<int>(pidfd), fd, 0);  // O_CLOEXEC is implied
    const int saved = errno;
    ::close(static_cast<int>(pidfd));
    errno = saved;
    return copy < 0 ? -1 : static_cast<int>(copy);
}

// ---- waiter ---------------------------------------------------------------------------------------

// Registration R1..R4 (unregistration U1..U4 in the destructor), each store seq_cst:
//   R1 gen = odd (changing)   R2 fd, refused = 0   R3 holder = our owner word   R4 gen = even
// Our eventfd stays open from before R1 until after U4, so any (holder, fd) a waker reads between two
// equal even gens names this open eventfd. Only the endpoint's role holder registers (a rank, the
// writer, the collector: one object), so plain stores suffice; a predecessor killed mid-way left gen
// odd or a stale holder, which R1..R4 overwrite (a waker meanwhile sees "changing" or a dead holder).
EventfdWaiter::EventfdWaiter(layout::EventfdSlot& slot) : slot_(slot) {
    fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd_ < 0) throw Error(ErrorCode::system, "eventfd() failed: " + errno_text(errno));
    const std::uint32_t odd = slot_.gen.load(std::memory_order_relaxed) | 1u;
    slot_.gen.store(odd, std::memory_order_seq_cst);  // R1
    slot_.fd.store(static_cast<std::uint32_t>(fd_), std::memory_order_seq_cst);  // R2
    slot_.refused.store(0, std::memory_order_seq_cst);
    slot_.refused_by.store(0, std::memory_order_seq_cst);
    slot_.holder.store(my_owner_word(layout::SlotState::attached), std::memory_order_seq_cst);  // R3
    slot_.gen.store(odd + 1, std::memory_order_seq_cst);  // R4
}

EventfdWaiter::~EventfdWaiter() {
    unregister();
    ::close(fd_);  // only now: see the registration comment
}

void EventfdWaiter::unregister() noexcept {
    if (!registered_) return;
    registered_ = false;
    // A fork()ed child's copy of an endpoint: the registration names the parent's eventfd, in use.
    if (registered_in_.in_forked_child()) return;
    const std::uint32_t even = slot_.gen.load(std::memory_order_relaxed);
    slot_.gen.store(even + 1, std::memory_order_seq_cst);  // U1
    slot_.holder.store(0, std::memory_order_seq_cst);      // U2: futex mode again
    slot_.fd.store(0, std::memory_order_seq_cst);          // U3
    slot_.gen.store(even + 2, std::memory_order_seq_cst);  // U4
}

void EventfdWaiter::drain() noexcept {
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &count, sizeof count);  // EAGAIN: nothing to drain
}

FutexWaitResult EventfdWaiter::sleep(Deadline wake_by) noexcept {
    if (wake_by == kPollOnly) return FutexWaitResult::timed_out;
    timespec rel{};
    const timespec* tsp = nullptr;
    if (wake_by != kNoDeadline) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(wake_by - Clock::now()).count();
        if (left <= 0) return FutexWaitResult::timed_out;
        rel.tv_sec = static_cast<time_t>(left / 1'000'000'000);
        rel.tv_nsec = static_cast<long>(left % 1'000'000'000);
        tsp = &rel;
    }
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::ppoll(&p, 1, tsp, nullptr);
    if (rc > 0) return FutexWaitResult::woken;
    if (rc == 0) return FutexWaitResult::timed_out;
    return errno == EINTR ? FutexWaitResult::interrupted : FutexWaitResult::woken;  // else spurious: re-check
}

void EventfdWaiter::poke() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof one);
}

void EventfdWaiter::check_refused() const {
    const std::uint32_t e = slot_.refused.load(std::memory_order_acquire);
    if (e == 0) return;
    const std::uint32_t by = slot_.refused_by.load(std::memory_order_relaxed);
    const std::string why = e == ENOSYS ? " (the kernel lacks pidfd_getfd: Linux 5.6 or later is needed)"
                                        : " (it needs ptrace access to this process: same user, and Yama "
                                          "ptrace_scope 0 or CAP_SYS_PTRACE)";
    throw Error(e == EPERM ? ErrorCode::permission_denied : ErrorCode::system,
                "the waker (pid " + std::to_string(by) + ") cannot take this endpoint's eventfd: pidfd_getfd: " +
                    errno_text(static_cast<int>(e)) + why + "; use a futex wait mode instead");
}

// ---- waker ----------------------------------------------------------------------------------------

EventfdSignaller::EventfdSignaller(layout::EventfdSlot* first, std::size_t stride_bytes, std::uint32_t count)
    : first_(reinterpret_cast<std::byte*>(first)), stride_(stride_bytes), copies_(count) {}

EventfdSignaller::~EventfdSignaller() {
    for (const Copy& c : copies_)
        if (c.fd >= 0) ::close(c.fd);
}

namespace {

// Did taking a registration's fd fail for good (as long as that registration lasts), or only for now?
// For good: the registrant is gone (ESRCH), its fd is (EBADF: it is open from R1 to U4, so the process
// holding that pid is not our registrant), the fd is no eventfd, or the kernel will not let us (EPERM:
// no ptrace access; ENOSYS: no pidfd_getfd) — asking again would cost a system call per wake for the
// same answer. Anything else is the waker's own state (EMFILE, ENFILE, ENOMEM: its fd table, the
// system's, memory) and passes: remembering it stopped every later wake of that eventfd, and the
// waiter then woke only at its liveness tick, for as long as it stayed registered.
[[nodiscard]] bool fails_for_good(int err) noexcept {
    return err == ESRCH || err == EBADF || err == EPERM || err == ENOSYS;
}

// Records in the slot that this waker cannot take the fd of registration `gen` (check_refused() throws
// it in the waiter) — for that registration only. The store of `refused` and the load of gen after it
// are seq_cst: if the load sees `gen`, the store comes before the next registration's R1 in their one
// order, so that registration's R2 (refused = 0, after its R1) overwrites it. If gen moved, our store
// may have landed after R2, on a registration that nobody refused: withdrawn, by CAS so that another
// value stays (the new registration's waiter may have seen it in between: a window of a few
// instructions, which the layout cannot close without the generation in the same word). A refusal of
// that next registration withdrawn with it (the same errno from another waker) is stored again by that
// waker's next signal (fetch re-asserts a refusal it remembers).
void record_refusal(layout::EventfdSlot& s, std::uint32_t gen, std::uint32_t err) noexcept {
    if (s.refused.load(std::memory_order_relaxed) != 0) return;  // recorded already (one waker's is enough)
    if (s.gen.load(std::memory_order_seq_cst) != gen) return;    // re-registered: not the one that refused us
    s.refused_by.store(static_cast<std::uint32_t>(::getpid()), std::memory_order_relaxed);  // published by:
    s.refused.store(err, std::memory_order_seq_cst);  // (check_refused loads it with acquire)
    if (s.gen.load(std::memory_order_seq_cst) != gen) {
        std::uint32_t ours = err;
        s.refused.compare_exchange_strong(ours, 0, std::memory_order_seq_cst);
    }
}

}  // namespace

EventfdSignaller::Fetch EventfdSignaller::fetch(std::uint32_t index) noexcept {
    layout::EventfdSlot& s = slot(index);
    Copy& c = copies_[index];
    const std::uint32_t gen = s.gen.load(std::memory_order_seq_cst);
    const std::uint64_t holder = s.holder.load(std::memory_order_seq_cst);
    const std::uint32_t fd = s.fd.load(std::memory_order_seq_cst);
    if ((gen & 1u) != 0 || s.gen.load(std::memory_order_seq_cst) != gen) return Fetch::unavailable;  // changing
    if (holder == 0) {  // none registered now: a copy of an earlier registration goes (it kept that eventfd open)
        if (c.fd >= 0) ::close(c.fd);
        c = {};
        return Fetch::futex_mode;
    }
    if (c.holder == holder && c.gen == gen) {
        if (c.fd >= 0) return Fetch::copied;
        if (c.refused != 0) record_refusal(s, gen, c.refused);  // still there (record_refusal may have withdrawn it)
        return Fetch::unavailable;  // failed for good (fails_for_good)
    }
    if (c.fd >= 0) ::close(c.fd);  // a copy of an earlier registration
    c = {};  // nothing remembered until the outcome is known: a transient failure leaves it so
    const layout::Owner who = layout::unpack_owner(holder);
    int copy = take_fd_of(who.pid, who.start_time, static_cast<int>(fd));
    int err = copy < 0 ? errno : 0;
    // The seqlock: the same even gen after the copy means the fd was still the registered eventfd
    // when we took it (it is closed only after U1).
    if (s.gen.load(std::memory_order_seq_cst) != gen) {
        if (copy >= 0) ::close(copy);
        return Fetch::unavailable;  // try again next time
    }
    if (copy >= 0 && !is_eventfd(copy)) {
        ::close(copy);
        copy = -1;
        err = EBADF;  // not the registered eventfd: as good as closed (for good)
    }
    if (copy < 0) {
        ++failures_;
        if (!fails_for_good(err)) return Fetch::unavailable;  // c stays empty: the next signal tries again
        c = {holder, gen, -1, 0};
        if (err == EPERM || err == ENOSYS) {  // a live waiter we cannot reach: tell it (check_refused)
            c.refused = static_cast<std::uint32_t>(err);
            record_refusal(s, gen, c.refused);
        }
        return Fetch::unavailable;
    }
    c = {holder, gen, copy, 0};
    return Fetch::copied;
}

bool EventfdSignaller::signal(const std::atomic<std::uint64_t>* bits, std::uint32_t words) noexcept {
    bool all_served = true;
    for (std::uint32_t w = 0; w < words; ++w) {
        std::uint64_t set = bits[w].load(std::memory_order_seq_cst);  // (re-loaded after w2: a bit
        // cleared since was retracted by its own waiter, which is awake; see wait.hpp notify_sleepers)
        while (set != 0) {
            const std::uint32_t index = w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(set));
            set &= set - 1;
            if (index >= copies_.size()) {
                all_served = false;
                continue;
            }
            if (fetch(index) != Fetch::copied) {
                all_served = false;  // a futex sleeper, or an eventfd we could not reach: futex_wake too
                continue;
            }
            const std::uint64_t one = 1;
            if (::write(copies_[index].fd, &one, sizeof one) != sizeof one) all_served = false;
        }
    }
    return all_served;
}

}  // namespace ringcast
