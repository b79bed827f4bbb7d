#include "ringcast/detail/process.hpp"

#include <atomic>
#include <string>

#include "ringcast/error.hpp"

#include <pthread.h>
#include <unistd.h>

namespace ringcast::detail {

// Relaxed: the handler runs in the forking thread of a child that has no other thread yet, and every
// other store happens before main() (static initialisation) in a process that has not forked.
std::atomic<pid_t> g_cached_pid{::getpid()};
static_assert(std::atomic<pid_t>::is_always_lock_free, "read from signal handlers");

namespace {
[[maybe_unused]] const int g_refresh_after_fork =
    ::pthread_atfork(nullptr, nullptr, [] { g_cached_pid.store(::getpid(), std::memory_order_relaxed); });
}  // namespace

std::string MadeInProcess::copy_refusal(const char* call, const std::string& what, const char* advice) const {
    return std::string(call) + ": " + what + " belongs to pid " + std::to_string(pid_) + "; this process (pid " +
           std::to_string(current_pid()) + ") has a copy of it through fork(). " + advice;
}

void MadeInProcess::refuse_copy(const char* call, const std::string& what, const char* advice) const {
    throw Error(ErrorCode::protocol, copy_refusal(call, what, advice));
}

}  // namespace ringcast::detail
