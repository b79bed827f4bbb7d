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

#include <sys/mman.h>

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
