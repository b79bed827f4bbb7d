// ringcast/events/eventfd.hpp — the eventfd wake mode: a sleeper's doorbell that is a file descriptor.
//
// An endpoint (a reader waiting for data, the writer waiting for space, a gather collector) may sleep
// on an eventfd of its own instead of its futex word, so that an event loop (epoll, io_uring, asyncio)
// can watch it among other fds. It is the same handshake as wait.hpp (3a..3f / w1..w3) with another
// doorbell; only the sleep (3e) and the wake (w3) change, and one step is added:
//
//   waiter (block_until case 3, or arm() of an event loop)   waker (notify_sleepers / wake_all)
//   3a' drain: read the eventfd (counter -> 0)                w1 cursor.exchange (seq_cst)
//   3a  set own bit (seq_cst RMW)                             w2 any bit set? (seq_cst loads)
//   3b  fence(seq_cst)                                        w3 seq += 1; for every bit set whose
//   3d  if condition: retract, done                              endpoint registered an eventfd:
//   3e  poll(eventfd) (or: the loop watches it)                  write(its fd, 1); futex_wake only
//   3f  retract, back to 3a'                                     if some announced endpoint has none
//
// Why no wake is lost: as in wait.hpp, either the re-check 3d sees w1, or w2 sees the bit of 3a and
// the waker writes the eventfd after that load. The write lands after the drain 3a': the drain is
// sequenced before 3a, which the waker's load read from, and the kernel orders the counter's read and
// write under its lock. So the counter is non-zero when the waiter polls, or the waiter did not sleep.
// The drain must come BEFORE the re-check: a drain after 3d could eat a signal sent between 3d and
// the drain, and the waiter would sleep on an empty fd with a message waiting
// (tests/model/ring.pml -DEVENTFD, must-fail variant BUG_DRAIN_AFTER_RECHECK).
// The futex wake may be skipped only when EVERY announced endpoint was signalled through its eventfd:
// a futex sleeper among them needs it (must-fail variant BUG_SKIP_FUTEX_WAKE).
//
// Semantics for event loops: level-triggered per arm. After arm() returned "not ready", the fd becomes
// readable once something happened (data, space, a close, a cancel) and stays readable until the next
// arm() drains it; it is a "look now" hint, never a count of messages (a wake may find nothing: the
// message was consumed already, or it was a close). Rule: on readiness, disarm(), consume until the
// endpoint says it would block, then arm() again; never read the fd yourself. arm() returns "ready"
// instead of arming when something is already there, so a message that came while you were busy is
// never left behind a non-readable fd. Edge-triggered epoll (EPOLLET) works too: each arm() resets the
// counter, so each later signal is a new edge.
//
// Passing the fd to the waker: pidfd_getfd, pulled by the waker the first time it finds the endpoint
// announced (EventfdSignaller::fetch), chosen over SCM_RIGHTS because
//   * it needs no cooperation from the waiter: the waiter is asleep (or busy in its loop) exactly when
//     the waker needs the fd, so a push over a socket would need an accept loop or a thread per
//     endpoint, and a waker that restarts (a new writer) would need the fd pushed again;
//   * there is no handshake to hang in: pidfd_open / pidfd_getfd either succeed or fail at once. A
//     waiter that died (ESRCH, or its pid now belongs to another process: start time differs), or that
//     closed its fd (EBADF), is "gone": the waker skips it (its liveness handling reports the death);
//     a waiter that unregistered meanwhile is caught by the seqlock (layout.hpp EventfdSlot). Only such
//     answers (and EPERM / ENOSYS below) are remembered for the registration: a failure of the waker's
//     own (EMFILE, ENFILE, ENOMEM) is tried again at the next wake, which then reaches the eventfd;
//   * cost: it needs ptrace access to the waiter (same uid; Yama ptrace_scope 0, or an ancestor, or
//     CAP_SYS_PTRACE). A waker refused (EPERM) records it in the slot and the waiter's next check
//     throws Error(permission_denied) naming the waker: an error, never a silent hang.
// glibc 2.36's <sys/pidfd.h> lacks extern "C" guards; the raw syscalls avoid the header entirely.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringcast/detail/process.hpp"
#include "ringcast/futex.hpp"
#include "ringcast/layout.hpp"

namespace ringcast {

// The waiter's eventfd, registered in its endpoint's EventfdSlot for as long as this object lives.
// Thread-safety: drain/sleep/arm by the endpoint's one waiting thread; poke() from any thread.
class EventfdWaiter {
public:
    // Creates the eventfd (non-blocking, close-on-exec) and registers it. Throws Error(system).
    explicit EventfdWaiter(layout::EventfdSlot& slot);
    EventfdWaiter(const EventfdWaiter&) = delete;
    EventfdWaiter& operator=(const EventfdWaiter&) = delete;
    ~EventfdWaiter();  // unregisters (the seqlock bump comes before the close: see EventfdSlot)
    // Withdraws the registration and keeps the fd open (until destruction): an endpoint giving its role
    // up while an event loop still watches the fd (a reader's shutdown) — closing it there would leave
    // the loop watching a number the next socket may get. Idempotent.
    void unregister() noexcept;

    [[nodiscard]] int fd() const noexcept { return fd_; }
    // 3a': one non-blocking read resets the counter (EAGAIN when it was 0 already).
    void drain() noexcept;
    // 3e: waits until the fd is readable or `wake_by` (ppoll; a signal returns `interrupted`).
    [[nodiscard]] FutexWaitResult sleep(Deadline wake_by) noexcept;
    // Makes the fd readable from this process (cancel() from another thread; a loop's own wake-up).
    void poke() noexcept;
    // Throws Error(permission_denied) when a waker recorded that it cannot take this fd.
    void check_refused() const;

private:
    layout::EventfdSlot& slot_;
    int fd_ = -1;
    bool registered_ = true;
    detail::MadeInProcess registered_in_;  // a fork()ed child's copy leaves the registration alone
};

// The waker's copies of the eventfds of the endpoints of one sleep site (bit b's endpoint registers
// in the slot at first + b * stride). Thread-safety: one waking thread at a time (the endpoint's).
class EventfdSignaller {
public:
    EventfdSignaller(layout::EventfdSlot* first, std::size_t stride_bytes, std::uint32_t count);
    EventfdSignaller(const EventfdSignaller&) = delete;
    EventfdSignaller& operator=(const EventfdSignaller&) = delete;
    ~EventfdSignaller();  // closes the copies

    // w3 for eventfd sleepers: writes 1 to the eventfd of every endpoint whose bit is set in
    // `bits[0..words)` and that registered one (taking a copy first if needed). True when every set
    // bit was served that way, so nobody announced sleeps on the futex word.
    [[nodiscard]] bool signal(const std::atomic<std::uint64_t>* bits, std::uint32_t words) noexcept;
    // Endpoints whose fd could not be taken (gone or refused), for diagnostics.
    [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }

private:
    struct Copy {
        std::uint64_t holder = 0;  // the registration this copy belongs to: holder word ...
        std::uint32_t gen = 0;     // ... and seqlock generation
        int fd = -1;               // our copy; -1 with holder != 0: that registration failed for good
        std::uint32_t refused = 0; // ... refused us (EPERM / ENOSYS), recorded in its slot
    };
    enum class Fetch : std::uint8_t { copied, futex_mode, unavailable };
    [[nodiscard]] Fetch fetch(std::uint32_t index) noexcept;
    [[nodiscard]] layout::EventfdSlot& slot(std::uint32_t index) const noexcept {
        return *reinterpret_cast<layout::EventfdSlot*>(first_ + std::size_t{index} * stride_);
    }

    std::byte* first_;
    std::size_t stride_;
    std::vector<Copy> copies_;  // one per endpoint, sized up front: signal() never allocates
    std::uint64_t failures_ = 0;
};

// Takes a copy of fd `fd` of process `pid` (pidfd_open + pidfd_getfd), checking that the pid still
// names the process that started at `start_time` (pid reuse). Returns the new fd, or -1 with errno
// (ESRCH: that process is gone; EPERM: no ptrace access; EBADF: no such fd there; ENOSYS: kernel).
[[nodiscard]] int take_fd_of(std::uint32_t pid, std::uint64_t start_time, int fd) noexcept;

}  // namespace ringcast
