// Helpers shared by the microbenchmarks.
#pragma once

#include <atomic>
#include <string>

#include <unistd.h>

#include "ringcast/ring.hpp"

namespace ringcast::bench {

// A segment name unique to this process and call; unlinked at scope exit.
class BenchName {
public:
    explicit BenchName(const char* what) {
        static std::atomic<int> n{0};
        name_ = std::string("rcmicro-") + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    }
    ~BenchName() {
        try {
            Segment::remove(name_);
        } catch (...) {
        }
    }
    operator std::string_view() const noexcept { return name_; }

private:
    std::string name_;
};

inline WriterOptions writer_options(WaitKind k) {
    WriterOptions o;
    o.wait.kind = k;
    return o;
}
inline ReaderOptions reader_options(WaitKind k) {
    ReaderOptions o;
    o.wait.kind = k;
    return o;
}

inline std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
inline std::int64_t mono_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace ringcast::bench
