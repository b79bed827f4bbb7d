// One loop over two queues and a gather group with ringcast::WaitSet (docs/events.md).
//   events_waitset [epoll|io_uring]      (default: io_uring when the kernel has futex waits, else epoll)
// A child process writes both queues and answers as the group's two workers; the loop takes
// everything through one wait and prints what it got.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "ringcast/events/waitset.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    ringcast::WaitSetOptions options;
    if (argc > 1) options.backend = std::strcmp(argv[1], "epoll") == 0 ? ringcast::WaitSetBackend::epoll
                                                                        : ringcast::WaitSetBackend::io_uring;
    const std::string base = "example-ws-" + std::to_string(::getpid());
    const std::string jobs = base + "-jobs", logs = base + "-logs", group = base + "-step";
    constexpr int kMessages = 100;
    constexpr std::uint64_t kSteps = 10;

    // The gather group is created here (the collector owns it); the child creates the two queues.
    auto replies = ringcast::GatherCollector::create(group, {.ranks = 2});
    const pid_t child = ::fork();
    if (child == 0) {
        // The writers and workers are destroyed before _exit: a Writer's destructor closes its queue
        // and removes the name (the loop's mappings stay valid and it drains what is left).
        const auto run = [&]() -> int {
            auto wa = ringcast::Writer::create(jobs, {.readers = 1, .capacity = 1 << 16});
            auto wb = ringcast::Writer::create(logs, {.readers = 1, .capacity = 1 << 16});
            auto w0 = ringcast::GatherWorker::attach(group, 0), w1 = ringcast::GatherWorker::attach(group, 1);
            // The names go with the writers: publish once the loop's readers are attached.
            const auto attached = [](const ringcast::Writer& w) {
                return ringcast::layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state ==
                       ringcast::layout::SlotState::attached;
            };
            for (int t = 0; !(attached(wa) && attached(wb)); ++t) {
                if (t > 10000) return 1;
                std::this_thread::sleep_for(1ms);
            }
            for (int i = 0; i < kMessages; ++i) {
                const std::string m = "message " + std::to_string(i);
                const auto bytes = std::as_bytes(std::span(m));
                if ((wa.write(bytes, 5s) != ringcast::Status::ok) || (wb.write(bytes, 5s) != ringcast::Status::ok)) return 1;
                if (i % 10 == 9) {
                    const std::uint64_t step = static_cast<std::uint64_t>(i / 10);
                    if (w0.reply(step, bytes, 5s) != ringcast::Status::ok || w1.reply(step, bytes, 5s) != ringcast::Status::ok)
                        return 1;
                    std::this_thread::sleep_for(2ms);  // the loop falls asleep in between
                }
            }
            return 0;  // destroying wa and wb closes both queues: the loop drains, then sees `closed`
        };
        int rc = 1;
        try {
            rc = run();
        } catch (const ringcast::Error& e) {
            std::fprintf(stderr, "child: %s\n", e.what());
        }
        ::_exit(rc);  // not the parent's atexit work or destructors
    }

    // Everything below may throw (a dead peer, a queue that never came): catch it here, so that
    // `replies` is destroyed and its names removed (an exception out of main destroys nothing).
    try {
        // Rank 0 of each queue, attached while the child may still be creating them (create_timeout);
        // a reader that never attached still holds the writer back, so nothing is missed.
        const auto attach = [](const std::string& name) {
            return ringcast::Reader::attach(name, 0, {.create_timeout = 10s});
        };
        auto a = attach(jobs);
        auto b = attach(logs);
        ringcast::WaitSet set(options);
        std::printf("WaitSet back end: %s\n", ringcast::to_string(set.backend()));
        std::uint64_t step = 0;  // the request whose replies the group member waits for
        const std::size_t ia = set.add(a), ib = set.add(b), ig = set.add(replies, step);
        int got_a = 0, got_b = 0, closed = 0;
        std::vector<std::byte> msg;
        while (closed < 2 || step < kSteps) {
            const auto ready = set.wait(5s);
            if (ready.empty()) {
                std::fprintf(stderr, "nothing for 5 s\n");
                return 1;
            }
            for (std::size_t id : ready) {
                if (id == ig) {  // take every finished step; a half-finished one is kept for the next look
                    for (; step < kSteps; ++step) {
                        const ringcast::GatherResult got = replies.collect_all(step, 0s);
                        if (got.status == ringcast::Status::timed_out) break;
                        if (got.status != ringcast::Status::ok) {  // closed: a worker exited mid-way
                            std::fprintf(stderr, "step %llu: %s\n", static_cast<unsigned long long>(step),
                                         got.describe().c_str());
                            return 1;
                        }
                    }
                    // Done with the group: a worker that exits closes its reply ring, and a closed
                    // ring stays ready (like a closed socket) — a member kept past its last step
                    // would spin this loop.
                    if (step == kSteps) set.remove(ig);
                    else set.set_tag(ig, step);  // this step: a rank whose reply to it is kept is not awaited
                    continue;
                }
                ringcast::Reader& r = id == ia ? a : b;
                for (;;) {  // drain it; the next wait() re-arms it
                    const ringcast::Status s = r.read(msg, 0s);
                    if (s == ringcast::Status::timed_out) break;
                    if (s == ringcast::Status::closed) {
                        ++closed;
                        set.remove(id);
                        break;
                    }
                    ++(id == ia ? got_a : got_b);
                }
            }
        }
        int status = 0;
        ::waitpid(child, &status, 0);
        std::printf("jobs: %d messages, logs: %d messages, %llu gather steps, %llu kernel waits\n", got_a, got_b,
                    static_cast<unsigned long long>(step), static_cast<unsigned long long>(set.kernel_waits()));
        (void)ib;
        return got_a == kMessages && got_b == kMessages && step == kSteps && WIFEXITED(status) &&
                       WEXITSTATUS(status) == 0
                   ? 0
                   : 1;
    } catch (const ringcast::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
