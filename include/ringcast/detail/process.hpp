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
// every child with a copy of the memory zeroed (madvise MADV_WIPEONFORK, Linux >= 4.14): fork(),
// glibc's _Fork(), a raw clone() without CLONE_VM — so such a child's first look finds 0 and asks the
// kernel. (A child sharing the memory — vfork, posix_spawn, CLONE_VM — is not wiped; it runs nothing
// of ours before exec.) Where that madvise is refused (an older kernel, a sandbox, headers without
// it), a plain static word, refreshed in the child of every fork() by a pthread_atfork handler: then a
// child of _Fork() or of a raw clone(), which runs no handler — and, in the child of a fork(), a fork
// handler registered before ours or a signal handler that runs before it — reads its parent's pid,
// and the fork rule below does not hold there. Points to that static word until process.cpp's dynamic
// initialisation (constinit: never null), to the page after: changed once, and either word holds this
// process's pid. Atomic (relaxed): a second copy of this library in one process whose symbol
// interposes this one's initialises at its load, maybe while threads read. Read via current_pid() only.
extern constinit std::atomic<std::atomic<pid_t>*> g_pid_word;

// Asks getpid() and keeps it in `word`: the slow path of current_pid() (out of line: every fork check
// inlines current_pid()), and how process.cpp's initialiser and atfork handler store the pid too.
[[gnu::cold]] pid_t keep_pid(std::atomic<pid_t>& word) noexcept;

// Whether the pid word is the wiped page (true) or the static fallback (false): tests of the raw
// clone() case skip where it is the fallback.
[[nodiscard]] bool pid_word_wiped_in_fork_children() noexcept;

// The pid of the calling process, without a system call once known. In a fork child (its pid word
// zeroed, above) the first call asks getpid() and keeps the answer; one made by posix_spawn or vfork
// runs nothing of ours before exec. Thread-safe (two threads of a new child may both ask and store the
// same pid); async-signal-safe (getpid and relaxed atomics). Inline: every read and write of a ring
// asks it (the fork rule below), on the hot path: two dependent loads of lines no writer touches.
[[nodiscard]] inline pid_t current_pid() noexcept {
    std::atomic<pid_t>& word = *g_pid_word.load(std::memory_order_relaxed);
    const pid_t pid = word.load(std::memory_order_relaxed);
    // 0: the first look of a fork child (the kernel zeroed the word) or of static initialisation (the
    // static word, before anyone asked).
    return pid != 0 ? pid : keep_pid(word);
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
    // True in a fork()ed child holding the parent's copy (two relaxed loads: see current_pid()).
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
