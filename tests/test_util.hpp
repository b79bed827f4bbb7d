// Helpers shared by the GoogleTest suites: unique segment names, message patterns, child processes.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/ring.hpp"

// Which sanitizer this binary was built with, for the tests that cannot run under one or need more
// time there: GCC defines __SANITIZE_*__, clang answers __has_feature instead.
#if defined(__SANITIZE_THREAD__)
#define RINGCAST_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGCAST_TEST_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RINGCAST_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RINGCAST_TEST_UNDER_ASAN 1
#endif
#endif

namespace ringcast::test {

// A name no other test (or concurrent test binary) uses; removed at scope exit.
class ScopedName {
public:
    explicit ScopedName(const std::string& what) {
        static std::atomic<int> counter{0};
        name_ = "rc-test-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    }
    ~ScopedName() {
        try {
            Segment::remove(name_);
        } catch (...) {
        }
    }
    [[nodiscard]] const std::string& str() const noexcept { return name_; }
    operator std::string_view() const noexcept { return name_; }

private:
    std::string name_;
};

// splitmix64: fast deterministic content so writer and readers agree without sharing buffers.
inline std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Message format: [u64 seq][payload][u64 checksum of seq+payload] — at least 16 bytes; shorter
// messages (0..15 bytes) carry bytes derived from their sequence number only.
inline std::uint64_t checksum(std::span<const std::byte> bytes) noexcept {
    std::uint64_t h = 0x84222325cbf29ce4ULL;
    std::size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, bytes.data() + i, 8);
        h = mix(h ^ w);
    }
    for (; i < bytes.size(); ++i) h = mix(h ^ static_cast<std::uint8_t>(bytes[i]));
    return h;
}

inline void fill_message(std::span<std::byte> out, std::uint64_t seq) noexcept {
    if (out.size() < 16) {
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(mix(seq + i));
        return;
    }
    std::memcpy(out.data(), &seq, 8);
    const std::size_t body = out.size() - 16;
    std::uint64_t x = seq;
    std::size_t i = 0;
    for (; i + 8 <= body; i += 8) {
        x = mix(x);
        std::memcpy(out.data() + 8 + i, &x, 8);
    }
    for (; i < body; ++i) out[8 + i] = static_cast<std::byte>(mix(x + i));
    const std::uint64_t sum = checksum(out.first(out.size() - 8));
    std::memcpy(out.data() + out.size() - 8, &sum, 8);
}

// Returns an empty string when the message is the expected one, else what is wrong.
inline std::string check_message(std::span<const std::byte> in, std::uint64_t seq, std::size_t expected_size) {
    if (in.size() != expected_size)
        return "seq " + std::to_string(seq) + ": size " + std::to_string(in.size()) + " != " + std::to_string(expected_size);
    if (in.size() < 16) {
        for (std::size_t i = 0; i < in.size(); ++i)
            if (in[i] != static_cast<std::byte>(mix(seq + i))) return "seq " + std::to_string(seq) + ": short body differs";
        return {};
    }
    std::uint64_t got_seq, sum;
    std::memcpy(&got_seq, in.data(), 8);
    std::memcpy(&sum, in.data() + in.size() - 8, 8);
    if (got_seq != seq) return "expected seq " + std::to_string(seq) + ", got " + std::to_string(got_seq);
    if (sum != checksum(in.first(in.size() - 8))) return "seq " + std::to_string(seq) + ": checksum mismatch";
    return {};
}

// Message sizes: log-uniform over 0..64 KiB (small messages dominate as in real traffic), and every
// `big_every`-th message several MiB (fragmented through any ring < 16 MiB).
inline std::size_t message_size(std::uint64_t seq, std::uint64_t big_every = 0) noexcept {
    const std::uint64_t r = mix(seq * 7919 + 17);
    if (big_every != 0 && seq % big_every == big_every - 1) return (2u << 20) + (r % (3u << 20));
    const unsigned bits = static_cast<unsigned>(r % 17);  // 0..16 → sizes up to 64 KiB
    return bits == 0 ? 0 : static_cast<std::size_t>((r >> 8) % (std::uint64_t{1} << bits));
}

// Runs fn in a forked child; the child exits 0 on success, 1 on a failed gtest expectation (unless
// `count_gtest_failures` is false: children that report through shared memory must not inherit a
// failure the parent recorded before the fork), 2 on an exception (printed). Never returns in the child.
inline pid_t fork_child(const std::function<void()>& fn, bool count_gtest_failures = true) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    int code = 0;
    try {
        fn();
        if (count_gtest_failures && ::testing::Test::HasFailure()) code = 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: exception: %s\n", ::getpid(), e.what());
        code = 2;
    }
    std::fflush(nullptr);
    ::_exit(code);
}

// Waits for a child with a hard timeout (kills it on expiry). Returns its exit code, or -signal.
// Reaps `pid`: its exit code, -signal, or -1000 after `limit` (it is then killed). Polls every `poll`.
inline int wait_child(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(300),
                      std::chrono::microseconds poll = std::chrono::microseconds(2000)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    int status = 0;
    for (;;) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (std::chrono::steady_clock::now() > end) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1000;
        }
        ::usleep(static_cast<useconds_t>(poll.count()));
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return -WTERMSIG(status);
}

// Waits for `cond` up to `limit`, polling every `poll`; false on expiry.
template <class F>
bool wait_until(F&& cond, std::chrono::milliseconds limit,
                std::chrono::microseconds poll = std::chrono::microseconds(200)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!cond()) {
        if (std::chrono::steady_clock::now() > end) return false;
        ::usleep(static_cast<useconds_t>(poll.count()));
    }
    return true;
}

// A pipe used for one-byte handshakes between the test process and its children.
class Pipe {
public:
    Pipe() {
        if (::pipe(fd_) != 0) throw std::runtime_error("pipe() failed");
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    ~Pipe() {
        ::close(fd_[0]);
        ::close(fd_[1]);
    }
    void send(char c) const {
        while (::write(fd_[1], &c, 1) != 1) {
            if (errno != EINTR) break;
        }
    }
    // The next byte, or -1 if none arrived within `limit`.
    [[nodiscard]] int recv(std::chrono::milliseconds limit) const {
        const auto end = std::chrono::steady_clock::now() + limit;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) return -1;
            pollfd p{fd_[0], POLLIN, 0};
            const int r = ::poll(&p, 1, static_cast<int>(left.count()));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return -1;
            char c = 0;
            if (::read(fd_[0], &c, 1) == 1) return static_cast<unsigned char>(c);
            return -1;
        }
    }

private:
    int fd_[2]{-1, -1};
};

// The child processes of one test: whatever was not reaped by wait() is SIGKILLed and reaped at scope
// exit, so a failed ASSERT never leaves a process behind (or a parked one holding a rank).
class ChildGuard {
public:
    ChildGuard() = default;
    ChildGuard(const ChildGuard&) = delete;
    ChildGuard& operator=(const ChildGuard&) = delete;
    ~ChildGuard() {
        for (const pid_t p : pids_) {
            ::kill(p, SIGKILL);
            ::waitpid(p, nullptr, 0);
        }
    }
    pid_t add(pid_t p) {
        pids_.push_back(p);
        return p;
    }
    // wait_child (bounded, polling every 200 us), then forget the pid.
    int wait(pid_t p, std::chrono::seconds limit) {
        std::erase(pids_, p);
        return wait_child(p, limit, std::chrono::microseconds(200));
    }
    int kill_and_wait(pid_t p) {
        ::kill(p, SIGKILL);
        return wait(p, std::chrono::seconds(10));
    }

private:
    std::vector<pid_t> pids_;
};

// steady_clock is CLOCK_MONOTONIC: one time base for every process of a test (fault trials, wake bounds).
inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Scale for long tests: RINGCAST_TEST_SCALE=0.1 in sanitizer builds.
inline double test_scale() {
    const char* s = std::getenv("RINGCAST_TEST_SCALE");
    return s ? std::atof(s) : 1.0;
}

}  // namespace ringcast::test
