// When the adaptive hybrid spin gives its CPU away (wait.hpp, AdaptiveHybridStrategy): a wait that its
// history expects to be long yields before its first spin step — a peer queued behind it on its CPU
// runs at once —, a wait expected to be short not before its first checkpoint (its first
// kSpinStepsPerClockRead steps stay free of system calls).
//
// This executable defines sched_yield itself, in front of the C library's: it counts this thread's
// calls and notes how many looks at the waited condition came before the first, then yields as the
// C library's does. block_until is a template: its calls bind to this definition.
#include <ringcast/wait.hpp>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

thread_local int looks = 0;              // the condition's looks in this thread's current wait
thread_local int looks_at_first_yield = -1;  // -1: no yield yet
thread_local std::chrono::nanoseconds first_yield_lasts{0};  // stands for a peer running meanwhile

}  // namespace

extern "C" int sched_yield() noexcept {
    if (looks_at_first_yield < 0) {
        looks_at_first_yield = looks;
        if (first_yield_lasts > std::chrono::nanoseconds::zero()) std::this_thread::sleep_for(first_yield_lasts);
    }
    return static_cast<int>(::syscall(SYS_sched_yield));
}

namespace ringcast {
namespace {

using namespace std::chrono_literals;

// One adaptive wait (the default hybrid options: spin_for 10 us, spin_max 2 ms) with `history`; its
// condition turns true two looks after the first yield, so the wait ends in its spin whatever the
// yield costs. Returns the look count at the first yield.
int looks_before_the_first_yield(SpinHistory& history) {
    std::atomic<std::uint32_t> seq{0};
    std::atomic<std::uint64_t> sleeping{0};
    const SleepSite site{&seq, &sleeping};
    const WaitOptions options;
    EXPECT_TRUE(options.adaptive());
    WaitContext ctx{{&site, 1}, Clock::now() + 10s};
    ctx.history = &history;
    looks = 0;
    looks_at_first_yield = -1;
    const WaitOutcome outcome = block_until(options, ctx, [] {
        ++looks;
        return looks_at_first_yield >= 0 && looks > looks_at_first_yield + 2;
    });
    EXPECT_EQ(outcome, WaitOutcome::ready);
    return looks_at_first_yield;
}

// The same with a history of eight waits of `typical` (none for zero).
int looks_before_the_first_yield(std::chrono::nanoseconds typical) {
    SpinHistory history;
    for (int i = 0; i < 8 && typical > 0ns; ++i) history.record(typical, WaitOptions{}.spin_max);
    return looks_before_the_first_yield(history);
}

TEST(SpinHistory, ExpectsALongWaitOnceItsWaitsOutlastSpinFor) {
    SpinHistory history;
    EXPECT_FALSE(history.expects_long(10us)) << "no history: nothing expected";
    for (int i = 0; i < 8; ++i) history.record(1ms, 2ms);
    EXPECT_TRUE(history.expects_long(10us));
    for (int i = 0; i < 40; ++i) history.record(2us, 2ms);
    EXPECT_FALSE(history.expects_long(10us)) << "short waits again: the long ones are forgotten";
}

TEST(AdaptiveWait, AWaitExpectedLongYieldsBeforeItsFirstSpinStep) {
    // Two looks before any spin step: the adaptive wrapper's and block_until's case 1.
    EXPECT_EQ(looks_before_the_first_yield(1ms), 2);
}

// The early yield may last the whole wait (the peer it let run published meanwhile): the wait is
// learned as that long, not as one over within its first 64 steps (recorded as zero, which would
// soon turn the early yield off).
TEST(AdaptiveWait, AWaitThatEndsDuringItsEarlyYieldIsLearnedAsThatLong) {
    SpinHistory history;
    for (int i = 0; i < 8; ++i) history.record(1ms, WaitOptions{}.spin_max);
    const auto before = history.typical();
    first_yield_lasts = 3ms;
    EXPECT_EQ(looks_before_the_first_yield(history), 2);
    first_yield_lasts = 0ns;
    EXPECT_GT(history.typical(), before) << "a 3 ms wait after waits of 1 ms";
}

TEST(AdaptiveWait, AWaitExpectedShortSpinsItsFirstCheckpointBeforeItYields) {
    EXPECT_GT(looks_before_the_first_yield(2us), static_cast<int>(kSpinStepsPerClockRead));
    EXPECT_GT(looks_before_the_first_yield(0ns), static_cast<int>(kSpinStepsPerClockRead)) << "no history";
}

// A gather collect's later waits (its copy after stop_predicting_from, as gather.cpp makes it:
// spinning the whole cap while every recent spread fits in it) yield at once only where the spreads
// themselves are long — not because their budget is the cap, nor because whole collects are long.
TEST(AdaptiveWait, ACollectsLaterWaitYieldsAtOnceOnlyWhereItsSpreadsAreLong) {
    const WaitOptions options;
    SpinHistory whole;  // whole collects of 1 ms: their first wait yields at once
    for (int i = 0; i < 8; ++i) whole.record(1ms, options.spin_max);
    SpinHistory short_spread;  // the replies' spread: 2 us
    for (int i = 0; i < 8; ++i) short_spread.record(2us, options.spin_max);
    SpinHistory later(whole);
    later.stop_predicting_from(short_spread, options.spin_for, options.spin_max);
    ASSERT_EQ(later.budget(options.spin_for, options.spin_max), options.spin_max) << "the whole cap";
    EXPECT_GT(looks_before_the_first_yield(later), static_cast<int>(kSpinStepsPerClockRead));
    SpinHistory long_spread;  // 100 us
    for (int i = 0; i < 8; ++i) long_spread.record(100us, options.spin_max);
    SpinHistory later_long(whole);
    later_long.stop_predicting_from(long_spread, options.spin_for, options.spin_max);
    EXPECT_EQ(looks_before_the_first_yield(later_long), 2);
}

}  // namespace
}  // namespace ringcast
