// Helpers for the fault-injection suites: shared anonymous memory for results that survive a
// SIGKILL, a monotonic clock comparable across processes, a seeded RNG, trial counts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.hpp"

namespace ringcast::test {

// An object in MAP_SHARED|MAP_ANONYMOUS memory made before fork(): every process of the trial sees it,
// and what a process stored before it was killed is still there.
template <class T>
class SharedBlock {
public:
    SharedBlock() {
        void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) std::abort();
        ptr_ = new (p) T{};
    }
    ~SharedBlock() {
        ptr_->~T();
        ::munmap(ptr_, sizeof(T));
    }
    SharedBlock(const SharedBlock&) = delete;
    SharedBlock& operator=(const SharedBlock&) = delete;
    T* operator->() const noexcept { return ptr_; }
    T& operator*() const noexcept { return *ptr_; }

private:
    T* ptr_ = nullptr;
};

// A fixed-size message slot for a child's failure text (no heap across processes).
struct Text {
    char buf[512]{};
    void set(const std::string& s) noexcept {
        const std::size_t n = std::min(s.size(), sizeof buf - 1);
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    [[nodiscard]] std::string str() const { return buf; }
};

// How long the calling thread has waited on a run queue, runnable but without a CPU (the second field
// of /proc/thread-self/schedstat, kept by the kernel's sched_info accounting); -1 where it is not kept.
// A wake-latency check subtracts it: a waiter whose wake came in time but who then found both CPUs
// busy (a compile beside the test on a 2-core machine) did not lose a wake — a lost wake sleeps, and
// sleeping is not runnable.
inline std::int64_t run_queue_wait_ns() noexcept {
    const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[96];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    unsigned long long on_cpu = 0, queued = 0;
    if (std::sscanf(buf, "%llu %llu", &on_cpu, &queued) != 2) return -1;
    return static_cast<std::int64_t>(queued);
}

struct Rng {
    std::uint64_t state;
    std::uint64_t next() noexcept { return state = mix(state); }
    std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }
};

// The fault suites' children report through shared memory: their exit status must not carry a
// gtest failure the parent recorded before the fork.
inline pid_t spawn(const std::function<void()>& fn) { return fork_child(fn, /*count_gtest_failures=*/false); }

inline int fault_trials() {
    if (const char* s = std::getenv("RINGCAST_FAULT_TRIALS")) return std::max(1, std::atoi(s));
    return 200;
}
inline std::uint64_t fault_seed() {
    if (const char* s = std::getenv("RINGCAST_FAULT_SEED")) return std::strtoull(s, nullptr, 0);
    return static_cast<std::uint64_t>(now_ns());
}

}  // namespace ringcast::test
