// Runs the `ringcast` command (or any program) as a child process and captures its output.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ringcast::test {

struct RunResult {
    int exit_code = -1;  // -signal if killed
    std::string out, err;
};

struct RunOptions {
    std::string stdout_path;  // non-empty: stdout goes to this file (e.g. /dev/full), not captured
    uid_t uid = 0;            // non-zero: the program runs as this user (and its group of the same number)
};

// argv[0] is the program path. stdout and stderr are captured separately.
inline RunResult run_program(const std::vector<std::string>& argv, const RunOptions& options = {}) {
    int out_pipe[2], err_pipe[2];
    if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) return {};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
        ::close(out_pipe[0]);
        ::close(err_pipe[0]);
        if (!options.stdout_path.empty()) {
            const int fd = ::open(options.stdout_path.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ::dup2(fd, 1) < 0) {
                std::perror(options.stdout_path.c_str());
                ::_exit(127);
            }
        }
        if (options.uid != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(options.uid) != 0 || ::setuid(options.uid) != 0)) {
            std::perror("setuid");
            ::_exit(127);
        }
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execv(args[0], args.data());
        std::perror("execv");
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    RunResult r;
    // Both pipes are drained alternately: outputs here are small (< 64 KiB), so no deadlock.
    char buf[4096];
    for (int fd : {out_pipe[0], err_pipe[0]}) {
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) (fd == out_pipe[0] ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
        ::close(fd);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return r;
}

}  // namespace ringcast::test
