// This process's pid without a system call: the fork checks of every endpoint (a WaitSet's, the Python
// binding's, a remote endpoint's) ask it on each call, and getpid() is a system call since glibc stopped
// caching it (~2 µs on a VM with mitigations; three per message on an asyncio round trip).
#pragma once

#include <sys/types.h>

namespace ringcast::detail {

// The pid of the calling process. Refreshed in the child of every fork() by a pthread_atfork handler:
// os.fork(), multiprocessing's fork start method and fork() from C++ all run it. A child made by a raw
// clone() system call runs no handler and reads its parent's pid; one made by posix_spawn or vfork runs
// nothing of ours before exec. Thread-safe; async-signal-safe (one relaxed load).
[[nodiscard]] pid_t current_pid() noexcept;

// The process an object was made in, for the fork rule every endpoint keeps: a copy fork() gave a
// child (its memory, not its threads, kernel registrations or roles) releases nothing of the parent's
// — no close, no rank or claim given back, no name unlinked, no thread joined. Copied by a move (the
// moved-to object was made where the source was). Thread-safe: the pid never changes after construction.
class MadeInProcess {
public:
    MadeInProcess() noexcept : pid_(current_pid()) {}
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    // True in a fork()ed child holding the parent's copy (one relaxed load: see current_pid()).
    [[nodiscard]] bool in_forked_child() const noexcept { return current_pid() != pid_; }

private:
    pid_t pid_;
};

}  // namespace ringcast::detail
