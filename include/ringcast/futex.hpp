// ringcast/futex.hpp — shared (cross-process) futex wait/wake on 32-bit words in shared memory.
//
// Never FUTEX_PRIVATE_FLAG: the waiters live in other processes, and a private wake only finds
// waiters of the caller's own mm (docs/platform.md). glibc has no wrapper, so these are raw syscalls.
// Timeouts are absolute CLOCK_MONOTONIC deadlines (FUTEX_WAIT_BITSET), so a wait that is woken
// spuriously and retried never stretches the caller's timeout.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringcast/error.hpp"

namespace ringcast {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux, the clock futex deadlines use
using Deadline = Clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();
// A zero (or negative) timeout: look once, never spin, never sleep. The clock is read only when the
// look found nothing and a liveness check may be due (wait.hpp, WaitContext::last_check).
inline constexpr Deadline kPollOnly = Deadline::min();

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "a futex word must be a plain 32-bit word");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "a lock-based atomic cannot be shared between processes");

enum class FutexWaitResult : std::uint8_t { woken, value_changed, timed_out, interrupted, unsupported };

// Sleeps while *word == expected, until a wake, the deadline, or a signal.
// Thread-safety: any thread, any process mapping the word.
inline FutexWaitResult futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                                  Deadline deadline) noexcept {
    timespec ts{};
    const timespec* tsp = nullptr;
    if (deadline == kPollOnly) return FutexWaitResult::timed_out;
    if (deadline != kNoDeadline) {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
        if (ns <= 0) return FutexWaitResult::timed_out;
        ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        tsp = &ts;
    }
    // FUTEX_WAIT_BITSET takes an absolute timeout on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME).
    const long rc = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_BITSET,
                              expected, tsp, nullptr, FUTEX_BITSET_MATCH_ANY);
    if (rc == 0) return FutexWaitResult::woken;
    switch (errno) {
        case EAGAIN: return FutexWaitResult::value_changed;
        case ETIMEDOUT: return FutexWaitResult::timed_out;
        case EINTR: return FutexWaitResult::interrupted;  // a signal handler ran (always EINTR here:
                                                          // the wait has a timeout, so no restart)
        default: return FutexWaitResult::woken;  // EFAULT/EINVAL cannot happen on a mapped word: a
                                                 // spurious return, the caller re-checks its condition
    }
}

// Wakes up to `count` waiters (INT_MAX: all). Returns how many were woken.
inline int futex_wake(std::atomic<std::uint32_t>* word, int count = INT_MAX) noexcept {
    const long rc = ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, count,
                              nullptr, nullptr, 0);
    return rc < 0 ? 0 : static_cast<int>(rc);
}

// futex_waitv (Linux 5.16, syscall 449): sleep until any of up to 128 words is woken or differs from
// its expected value. glibc has no wrapper and linux-libc-dev 6.1 lacks FUTEX2_SIZE_U32 (docs/platform.md).
inline constexpr unsigned kFutex2SizeU32 = 0x02;  // FUTEX2_SIZE_U32; FUTEX2_PRIVATE (128) never: shared
inline constexpr std::size_t kFutexWaitvMax = 128;
inline constexpr long kSysFutexWaitv = 449;

struct FutexWaitvEntry {  // struct futex_waitv of <linux/futex.h>
    std::uint64_t val;
    std::uint64_t uaddr;
    std::uint32_t flags;
    std::uint32_t reserved;
};
static_assert(sizeof(FutexWaitvEntry) == 24);

inline FutexWaitResult futex_waitv(FutexWaitvEntry* entries, unsigned count, Deadline deadline) noexcept {
    if (deadline == kPollOnly) return FutexWaitResult::timed_out;
    timespec ts{};
    const timespec* tsp = nullptr;
    if (deadline != kNoDeadline) {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
        ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
        tsp = &ts;
    }
    const long rc = ::syscall(kSysFutexWaitv, entries, count, 0, tsp, CLOCK_MONOTONIC);
    if (rc >= 0) return FutexWaitResult::woken;
    switch (errno) {
        case EAGAIN: return FutexWaitResult::value_changed;
        case ETIMEDOUT: return FutexWaitResult::timed_out;
        case ENOSYS: return FutexWaitResult::unsupported;
        case EINTR: return FutexWaitResult::interrupted;  // a handler installed with SA_RESTART restarts
                                                          // this call instead (Python's are not)
        default: return FutexWaitResult::woken;  // a spurious return: the caller re-checks
    }
}

// `at` + `step`, kNoDeadline where it would overflow (an interval of nanoseconds::max() is "never").
[[nodiscard]] inline Deadline later_by(Deadline at, std::chrono::nanoseconds step) noexcept {
    if (step > std::chrono::nanoseconds::zero() && step >= Deadline::max() - at) return kNoDeadline;
    return at + step;
}

[[nodiscard]] inline Deadline deadline_after(std::chrono::nanoseconds timeout) noexcept {
    if (timeout <= std::chrono::nanoseconds::zero()) return kPollOnly;
    const auto now = Clock::now();
    if (timeout >= Deadline::max() - now) return kNoDeadline;
    return now + timeout;
}

// A relative timeout that becomes an absolute deadline on first use: a call that never has to wait
// never reads the clock.
class Timeout {
public:
    explicit Timeout(std::chrono::nanoseconds timeout) noexcept : timeout_(timeout) {}
    [[nodiscard]] Deadline deadline() noexcept {
        if (!resolved_) {
            deadline_ = deadline_after(timeout_);
            resolved_ = true;
        }
        return deadline_;
    }

private:
    std::chrono::nanoseconds timeout_;
    Deadline deadline_{};
    bool resolved_ = false;
};

}  // namespace ringcast
