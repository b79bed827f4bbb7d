// ringcast-neighbour: a process that waits the way one of the showdown's waiters does, for as long as
// it is told, so that bench/showdown/neighbour_probe.py can time the showdown's worker loop beside it.
// The question it serves: a waiter spinning on one vCPU may slow the Python work on another (host
// cores shared in ways the guest cannot see); which way of waiting does, by how much, on this machine?
//
//   ringcast-neighbour MODE SECONDS
//     pause   cpu_relax() in a loop (a spin that never enters the kernel)
//     polite  the library's adaptive spin: kSpinStepsPerClockRead cpu_relax steps, then its checkpoint
//             (AdaptiveHybridStrategy::keep_spinning: a sched_yield and a clock read), over and over
//             (it never stops to sleep here, where the library's would once others took its CPU)
//     yield   sched_yield() in a loop (the system call alone; a Python poller adds its interpreter)
//     busy    integer work in a loop (no pause)
//   It prints one line once it waits (the probe starts the work only then) and exits after SECONDS.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <sched.h>

#include "ringcast/wait.hpp"

namespace {

using ringcast::Clock;
using ringcast::Deadline;

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "ringcast-neighbour: %s\nusage: ringcast-neighbour pause|polite|yield|busy SECONDS\n", why);
    std::exit(2);
}

// Each loop checks the clock once per kSpinStepsPerClockRead steps (the polite one at its checkpoint).
template <class Step>
void run_until(Deadline end, Step step) {
    for (std::uint32_t i = 1;; ++i) {
        step(i);
        if (i % ringcast::kSpinStepsPerClockRead == 0 && Clock::now() >= end) return;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) usage("two arguments expected");
    const std::string_view mode = argv[1];
    char* rest = nullptr;
    const double seconds = std::strtod(argv[2], &rest);
    if (rest == argv[2] || *rest != '\0' || !(seconds > 0 && seconds <= 3600)) usage("SECONDS: a number in (0, 3600]");
    if (mode != "pause" && mode != "polite" && mode != "yield" && mode != "busy") usage("unknown MODE");
    // One line on stdout once it waits: neighbour_probe.py starts the work only then.
    std::printf("%.*s for %g s\n", int(mode.size()), mode.data(), seconds);
    std::fflush(stdout);
    const Deadline start = Clock::now();
    const Deadline end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    if (mode == "pause") {
        run_until(end, [](std::uint32_t) { ringcast::cpu_relax(); });
    } else if (mode == "polite") {
        const ringcast::AdaptiveHybridStrategy spin{std::chrono::nanoseconds{10'000}, std::chrono::hours{1}};
        Deadline now = start;
        run_until(end, [&](std::uint32_t i) {
            spin.relax(i);
            if (i % ringcast::kSpinStepsPerClockRead == 0) (void)spin.keep_spinning(now - start, now);
        });
    } else if (mode == "yield") {
        run_until(end, [](std::uint32_t) { ::sched_yield(); });
    } else if (mode == "busy") {
        volatile std::uint64_t sink = 0;
        run_until(end, [&](std::uint32_t i) { sink = sink + i; });
    }
    return 0;
}
