// Helpers of the remote suites: a pipe to pass a publisher's endpoint from the writer process to the
// test, and a run-in-a-child wrapper (ZeroMQ contexts are made only after fork, never inherited).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "test_util.hpp"

namespace ringcast::test {

// One line from child to parent: the endpoint the child's publisher bound.
class LinePipe {
public:
    LinePipe() {
        if (::pipe(fds_) != 0) std::abort();
    }
    ~LinePipe() {
        for (int fd : fds_)
            if (fd >= 0) ::close(fd);
    }
    LinePipe(const LinePipe&) = delete;
    LinePipe& operator=(const LinePipe&) = delete;
    void send(const std::string& line) const {
        const std::string s = line + "\n";
        [[maybe_unused]] auto n = ::write(fds_[1], s.data(), s.size());
    }
    // Empty on EOF (the child died before sending) or after `limit`.
    [[nodiscard]] std::string receive(std::chrono::seconds limit = std::chrono::seconds(30)) const {
        std::string s;
        const auto end = std::chrono::steady_clock::now() + limit;
        char c = 0;
        while (std::chrono::steady_clock::now() < end) {
            fd_set set;
            FD_ZERO(&set);
            FD_SET(fds_[0], &set);
            timeval tv{0, 100000};
            if (::select(fds_[0] + 1, &set, nullptr, nullptr, &tv) <= 0) continue;
            if (::read(fds_[0], &c, 1) != 1) return {};
            if (c == '\n') return s;
            s.push_back(c);
        }
        return {};
    }

private:
    int fds_[2] = {-1, -1};
};

// Runs `fn` in a forked child and expects it to exit 0 within `limit` (gtest failures in the child
// make it exit 1; the child's output says which).
inline void run_in_child(const std::function<void()>& fn, std::chrono::seconds limit = std::chrono::seconds(60)) {
    ChildGuard guard;
    const pid_t pid = guard.add(fork_child(fn));
    EXPECT_EQ(guard.wait(pid, limit), 0);
}

}  // namespace ringcast::test
