// ringcast-neighbour: a process that waits the way one of the showdown's waiters does, for as long as
// it is told, so that bench/showdown/neighbour_probe.py can time the showdown's worker loop beside it.
// The question it serves: a waiter spinning on one vCPU may slow the Python work on another (host
// cores shared in ways the guest cannot see); which way of waiting does, by how much, on this machine?
//
//   ringcast-neighbour MODE SECONDS
//     pause   cpu_relax() in a loop (a spin that never enters the kernel)
//     polite  the library's adaptive spin: kSpinStepsPerClockRead cpu_relax steps, then its checkpoint
//             (a clock read, then AdaptiveHybridStrategy::keep_spinning: a sched_yield and a clock
//             read), as block_until spins — but over and over: the library's spin ends at its budget
//             (at most its cap, 2-10 ms) or once others took its CPU, and sleeps; this one never
//             does, so what it costs a neighbour is an upper bound of what such a spin costs
//     yield   sched_yield() in a loop (the system call alone; a Python poller adds its interpreter)
//     busy    integer work in a loop (no pause)
//   It prints one line once it waits (the probe starts the work only then) and exits after SECONDS.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include <sched.h>

#include "ringcast/wait.hpp"

namespace {

using ringcast::Clock;
using ringcast::Deadline;

// `step` every step; every kSpinStepsPerClockRead steps one clock read, handed to `checkpoint` (the
// polite mode's keep_spinning), as block_until's spin checkpoints do.
template <class Step, class Checkpoint>
void run_until(Deadline end, Step step, Checkpoint checkpoint) {
    for (std::uint32_t i = 1;; ++i) {
        step(i);
        if (i % ringcast::kSpinStepsPerClockRead != 0) continue;
        Deadline now = Clock::now();
        if (now >= end) return;
        checkpoint(now);
    }
}
constexpr auto kNoCheckpoint = [](Deadline&) {};

// Each mode's waiting loop, named once: the usage line, the check and the dispatch all read this table.
struct Mode {
    std::string_view name;
    void (*wait_until)(Deadline start, Deadline end);
};
constexpr Mode kModes[] = {
    {"pause", [](Deadline, Deadline end) { run_until(end, [](std::uint32_t) { ringcast::cpu_relax(); }, kNoCheckpoint); }},
    {"polite",
     [](Deadline start, Deadline end) {
         // The library's default spin_for, a budget it never reaches; its verdict is not obeyed (above).
         const ringcast::AdaptiveHybridStrategy spin{ringcast::WaitOptions{}.spin_for, std::chrono::hours{1}};
         run_until(end, [&](std::uint32_t i) { spin.relax(i); },
                   [&](Deadline& now) { (void)spin.keep_spinning(now - start, now); });
     }},
    {"yield", [](Deadline, Deadline end) { run_until(end, [](std::uint32_t) { ::sched_yield(); }, kNoCheckpoint); }},
    {"busy",
     [](Deadline, Deadline end) {
         volatile std::uint64_t sink = 0;
         run_until(end, [&](std::uint32_t i) { sink = sink + i; }, kNoCheckpoint);
     }},
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "ringcast-neighbour: %s\nusage: ringcast-neighbour ", why);
    for (const Mode& mode : kModes)
        std::fprintf(stderr, "%s%.*s", &mode == kModes ? "" : "|", int(mode.name.size()), mode.name.data());
    std::fprintf(stderr, " SECONDS\n");
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) usage("two arguments expected");
    const std::string_view name = argv[1];
    char* rest = nullptr;
    const double seconds = std::strtod(argv[2], &rest);
    if (rest == argv[2] || *rest != '\0' || !(seconds > 0 && seconds <= 3600)) usage("SECONDS: a number in (0, 3600]");
    const Mode* mode = std::find_if(std::begin(kModes), std::end(kModes), [&](const Mode& m) { return m.name == name; });
    if (mode == std::end(kModes)) usage("unknown MODE");
    // One line on stdout once it waits: neighbour_probe.py starts the work only then.
    std::printf("%.*s for %g s\n", int(name.size()), name.data(), seconds);
    std::fflush(stdout);
    const Deadline start = Clock::now();
    mode->wait_until(start, start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
    return 0;
}
