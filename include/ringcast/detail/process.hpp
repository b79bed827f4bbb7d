// This process's pid without a system call: the fork checks of every endpoint (a WaitSet's, the Python
// binding's, a remote endpoint's) ask it on each call, and getpid() is a system call since glibc stopped
// caching it (~2 µs on a VM with mitigations; three per message on an asyncio round trip).
#pragma once

#include <atomic>
#include <string>

#include <sys/types.h>
#include <unistd.h>

namespace ringcast::detail {

// Where this process's pid is kept (process.cpp): a word in a page of its own that the kernel hands
// every child of a fork zeroed (madvise MADV_WIPEONFORK, Linux >= 4.14) — whatever made the child:
// fork(), glibc's _Fork(), a raw clone() without CLONE_VM — so a child's first look finds 0 and asks
// the kernel. Where that madvise is refused, a plain static word, refreshed in the child of every
// fork() by a pthread_atfork handler (then a child of _Fork() or a raw clone(), which runs no handler,
// reads its parent's pid and the fork rule below does not hold there). Points to that static word
// until process.cpp's dynamic initialisation (a constant initialiser: never null), to the page after:
// changed once, before main(), and either word holds this process's pid. Read through current_pid() only.
extern std::atomic<pid_t>* g_pid_word;

// The pid of the calling process, without a system call once known. In a fork child (its pid word
// zeroed, above) the first call asks getpid() and keeps the answer; one made by posix_spawn or vfork
// runs nothing of ours before exec. Thread-safe (two threads of a new child may both ask and store the
// same pid); async-signal-safe (getpid and relaxed atomics). Inline: every read and write of a ring
// asks it (the fork rule below), on the hot path: two dependent loads of lines no writer touches.
[[nodiscard]] inline pid_t current_pid() noexcept {
    std::atomic<pid_t>* const word = g_pid_word;
    pid_t pid = word->load(std::memory_order_relaxed);
    if (pid == 0) [[unlikely]] {  // the first look of a fork child (the kernel zeroed the word) or of
        pid = ::getpid();         // static initialisation (the static word, before anyone asked)
        word->store(pid, std::memory_order_relaxed);
    }
    return pid;
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
