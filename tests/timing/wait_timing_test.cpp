// Waits whose point is timing: what a wait does when the machine is not busy with anything else. This
// suite runs alone (RUN_SERIAL): beside other tests on a 2-core machine a polite spin rightly gives its
// CPU away and sleeps, which is what these tests must not see.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/ring.hpp"
#include "test_util.hpp"

namespace ringcast::test {
namespace {

using namespace std::chrono_literals;

// One run: a reader process fed every 20 ms by this (writer) process; how many of the counted
// publishes found the reader asleep (the writer's wake calls). Both ends keep the default wait
// options: the prediction is what a user who sets nothing gets.
std::uint64_t publishes_that_found_the_reader_asleep(int learn, int counted) {
    ScopedName name("predict");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    int attached[2];
    if (::pipe(attached) != 0) ADD_FAILURE() << "pipe";
    const pid_t child = fork_child([&] {
        auto r = Reader::attach(name, 0);
        const char one = 1;
        ASSERT_EQ(::write(attached[1], &one, 1), 1);
        std::vector<std::byte> into;
        for (int i = 0; i < learn + counted; ++i) ASSERT_EQ(r.read(into, 10s), Status::ok) << i;
    });
    char got = 0;
    EXPECT_EQ(::read(attached[0], &got, 1), 1) << "the reader never attached";
    ::close(attached[0]);
    ::close(attached[1]);
    const std::byte msg[64]{};
    auto next = Clock::now() + 20ms;
    std::uint64_t wakes_before = 0;
    for (int i = 0; i < learn + counted; ++i) {
        std::this_thread::sleep_until(next);
        next += 20ms;
        if (i == learn) wakes_before = w.wake_calls();
        EXPECT_EQ(w.write(msg, 10s), Status::ok);
    }
    const std::uint64_t wakes = w.wake_calls() - wakes_before;
    EXPECT_EQ(wait_child(child), 0);
    return wakes;
}

// With the prediction the reader is spinning, not asleep, when most messages come, so the writer's
// publishes need no wake call; without it every publish finds the reader asleep (30 of 30). Behaviour,
// not speed: the bound is loose (two thirds of the messages), and a run may be repeated twice — a
// machine busy with something else, or whose timers fire late, delays the alarm past the window
// (16-20 of 30 in full ctest runs on the 2-core VM before a late event stopped pausing the prediction;
// 0-2 of 30 alone); a prediction that does not work fails all three.
TEST(AdaptiveWait, RegularLongWaitsEndInASpinNotAWakeUp) {
    constexpr int kLearn = 10, kCounted = 30;
    std::vector<std::uint64_t> runs;
    for (int attempt = 0; attempt < 3; ++attempt) {
        runs.push_back(publishes_that_found_the_reader_asleep(kLearn, kCounted));
        if (runs.back() <= 2 * kCounted / 3) break;
    }
    std::string seen;
    for (auto v : runs) seen += (seen.empty() ? "" : ", ") + std::to_string(v);
    EXPECT_LE(runs.back(), static_cast<std::uint64_t>(2 * kCounted / 3))
        << "publishes (of " << kCounted << ") that found the reader asleep, per run: " << seen
        << " — the predicted wake-up did not happen";
}

}  // namespace
}  // namespace ringcast::test
