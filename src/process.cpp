#include "ringcast/detail/process.hpp"

#include <atomic>
#include <cstddef>
#include <new>
#include <string>

#include "ringcast/error.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

namespace ringcast::detail {

static_assert(std::atomic<pid_t>::is_always_lock_free, "read from signal handlers");

namespace {

// The fallback word where the kernel refuses MADV_WIPEONFORK (older than 4.14, or a sandbox).
std::atomic<pid_t> g_static_pid_word{0};

// One private anonymous page (MADV_WIPEONFORK takes nothing else) holding the pid word, zeroed in every
// fork child; nullptr where it cannot be had. Never unmapped: the word is read until the process ends.
std::atomic<pid_t>* wipe_on_fork_word() noexcept {
#ifdef MADV_WIPEONFORK
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page <= 0) return nullptr;
    void* at = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return nullptr;
    if (::madvise(at, static_cast<std::size_t>(page), MADV_WIPEONFORK) == 0) return new (at) std::atomic<pid_t>{0};
    ::munmap(at, static_cast<std::size_t>(page));
#endif
    return nullptr;  // headers without the advice: no page is mapped only to be given back
}

}  // namespace

// Relaxed everywhere: a process (the parent, each child with its own copy of the memory) writes only
// its own pid into its copy of the word, every thread that stores there stores that same value, and
// the pointer is only ever repointed between two words that both hold it. Constant-initialised to the
// static word (a static initialiser of another file that asks before ours ran finds a word), repointed
// to the wiped page by the dynamic initialiser below, at this library's initialisation (before main(),
// or when a module that links it is loaded).
constinit std::atomic<std::atomic<pid_t>*> g_pid_word{&g_static_pid_word};

pid_t keep_pid(std::atomic<pid_t>& word) noexcept {
    const pid_t pid = ::getpid();
    word.store(pid, std::memory_order_relaxed);
    return pid;
}

bool pid_word_wiped_in_fork_children() noexcept {
    return g_pid_word.load(std::memory_order_relaxed) != &g_static_pid_word;
}

namespace {
[[maybe_unused]] const bool g_pid_word_placed = [] {
    if (std::atomic<pid_t>* page_word = wipe_on_fork_word()) {
        keep_pid(*page_word);
        g_pid_word.store(page_word, std::memory_order_relaxed);
    }
    return true;
}();
// Refreshes the static fallback in a fork()ed child. Where the word is the wiped page the child's
// first look would ask getpid() anyway; kept there as well, for a kernel that accepts the madvise
// and ignores it (an emulator).
[[maybe_unused]] const int g_refresh_after_fork = ::pthread_atfork(
    nullptr, nullptr, [] { keep_pid(*g_pid_word.load(std::memory_order_relaxed)); });
}  // namespace

std::string MadeInProcess::copy_refusal(const char* call, const std::string& what, const char* advice) const {
    return std::string(call) + ": " + what + " belongs to pid " + std::to_string(pid_) + "; this process (pid " +
           std::to_string(current_pid()) + ") has a copy of it through fork(). " + advice;
}

void MadeInProcess::refuse_copy(const char* call, const std::string& what, const char* advice) const {
    throw Error(ErrorCode::protocol, copy_refusal(call, what, advice));
}

}  // namespace ringcast::detail
