// This process's pid without a system call: the fork checks of every endpoint (a WaitSet's, the Python
// binding's, a remote endpoint's) ask it on each call, and getpid() is a system call since glibc stopped
// caching it (~2 µs on a VM with mitigations; three per message on an asyncio round trip).
#pragma once

#include <atomic>
#include <string>

#include <sys/types.h>
#include <unistd.h>

namespace ringcast::detail {

// This process's pid as process.cpp keeps it: set at its static initialisation (0 before), refreshed
// in the child of every fork() by its pthread_atfork handler. Read through current_pid() only.
extern std::atomic<pid_t> g_cached_pid;

// The pid of the calling process. Refreshed in the child of every fork() by a pthread_atfork handler:
// os.fork(), multiprocessing's fork start method and fork() from C++ all run it. A child made by a raw
// clone() system call or by glibc's _Fork() runs no handler and reads its parent's pid (the fork rule
// below then does not hold there); one made by posix_spawn or vfork runs nothing of ours before exec.
// A fork handler registered before ours, or a signal handler that runs before ours, in the child
// still reads the parent's pid. Thread-safe; async-signal-safe (one relaxed load). Inline: every read
// and write of a ring asks it (the fork rule below), on the hot path.
[[nodiscard]] inline pid_t current_pid() noexcept {
    const pid_t cached = g_cached_pid.load(std::memory_order_relaxed);
    return cached != 0 ? cached : ::getpid();  // 0: asked during static initialisation, before ours ran
}

// The process an object was made in, for the fork rule every endpoint keeps: a copy fork() gave a
// child (its memory, not its threads, kernel registrations or roles) releases nothing of the parent's
// — no close, no rank or claim given back, no name unlinked, no thread joined — and is refused by
// every call that would read, write or wait through the parent's role. Copied by a move (the
// moved-to object was made where the source was). Thread-safe: the pid never changes after construction.
class MadeInProcess {
public:
    MadeInProcess() noexcept : pid_(current_pid()) {}
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    // True in a fork()ed child holding the parent's copy (one relaxed load: see current_pid()).
    [[nodiscard]] bool in_forked_child() const noexcept { return current_pid() != pid_; }
    // The refusal of every endpoint's call through such a copy, in one wording: Error(protocol)
    // "<call>: <what> belongs to pid P; this process (pid C) has a copy of it through fork(). <advice>".
    // Out of line: the callers test in_forked_child() on their hot paths and come here only to throw.
    [[noreturn]] void refuse_copy(const char* call, const std::string& what, const char* advice) const;
    // The same text, for a refusal raised as another type (the Python binding's RingcastError).
    [[nodiscard]] std::string copy_refusal(const char* call, const std::string& what, const char* advice) const;

private:
    pid_t pid_;
};

}  // namespace ringcast::detail
