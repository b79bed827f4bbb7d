// Waits whose point is timing: what a wait does when the machine is not busy with anything else. This
// suite runs alone (RUN_SERIAL): beside other tests on a 2-core machine a polite spin rightly gives its
// CPU away and sleeps, which is what these tests must not see.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/ring.hpp"
#include "test_util.hpp"

namespace ringcast::test {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::nanoseconds kMax = 2ms;

// A reader process whose writer publishes every 20 ms: with the prediction it is spinning, not
// asleep, when most messages come, so the writer's publishes need no wake call. Without it every
// publish finds the reader asleep (one wake call each). Behaviour, not speed: the bound is loose
// (half the messages) because a loaded machine delays timers.
TEST(AdaptiveWait, RegularLongWaitsEndInASpinNotAWakeUp) {
    ScopedName name("predict");
    WriterOptions wo;
    wo.wait.spin_max = kMax;
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16}, wo);
    constexpr int kLearn = 10, kCounted = 30;
    int attached[2];
    ASSERT_EQ(::pipe(attached), 0);
    const pid_t child = fork_child([&] {
        ReaderOptions ro;
        ro.wait.spin_max = kMax;
        auto r = Reader::attach(name, 0, ro);
        const char one = 1;
        ASSERT_EQ(::write(attached[1], &one, 1), 1);
        std::vector<std::byte> into;
        for (int i = 0; i < kLearn + kCounted; ++i) ASSERT_EQ(r.read(into, 10s), Status::ok) << i;
    });
    char got = 0;
    ASSERT_EQ(::read(attached[0], &got, 1), 1) << "the reader never attached";
    ::close(attached[0]);
    ::close(attached[1]);
    const std::byte msg[64]{};
    auto next = Clock::now() + 20ms;
    std::uint64_t wakes_before = 0;
    for (int i = 0; i < kLearn + kCounted; ++i) {
        std::this_thread::sleep_until(next);
        next += 20ms;
        if (i == kLearn) wakes_before = w.wake_calls();
        ASSERT_EQ(w.write(msg, 10s), Status::ok);
    }
    const std::uint64_t wakes = w.wake_calls() - wakes_before;
    EXPECT_EQ(wait_child(child), 0);
    EXPECT_LE(wakes, static_cast<std::uint64_t>(kCounted / 2))
        << wakes << " of " << kCounted << " publishes found the reader asleep: the predicted wake-up did not happen";
}

}  // namespace
}  // namespace ringcast::test
