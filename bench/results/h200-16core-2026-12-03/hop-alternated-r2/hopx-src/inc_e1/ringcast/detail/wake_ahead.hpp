// ringcast/detail/wake_ahead.hpp — the writer's account of its wake-aheads (Writer::wake_ahead).
//
// A writer that wakes its sleeping readers before it makes a message tells them how long to spin
// for it: twice the time its recent wake-aheads preceded the publish of the next record (a message's
// pickling, a device copy), as an exponential moving average. The readers read that word only after
// such a wake-up (wait.hpp, case 3g); it is a hint: a stale or torn value only changes how long a
// woken reader spins before it sleeps again, never whether it is woken by the publish.
//
// Waking ahead pays only while the woken readers are still spinning when the message is published.
// When it is made for longer than they spin (their spin_max: 2 ms by default), or they sleep on an
// eventfd (not woken ahead), every wake-ahead costs a wake call, their spin, and the publish's wake
// all the same. So the publish tells the clock whether it still had to wake someone: after
// kMissesToPause such publishes in a row the next kPauseFor wake-aheads are skipped, then it tries
// again.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "ringcast/futex.hpp"

namespace ringcast::detail {

class AheadClock {
public:
    // The spin asked of readers before any lead was measured: a 2 KB request pickles in 10-45 us
    // (docs/benchmarks.md); the readers clamp it to their own spin bounds.
    static constexpr std::chrono::nanoseconds kFirstGuess{100'000};
    // A publish later than this after its wake-ahead is not learned from: the message was given up
    // (its pickling failed) or the caller woke ahead of something else than making it.
    static constexpr std::chrono::nanoseconds kLongestLead{50'000'000};
    static constexpr std::int32_t kMissesToPause = 4;
    static constexpr std::int32_t kPauseFor = 64;

    AheadClock() = default;
    // Writer is movable; the clock moves with it (no other thread can use a Writer being moved).
    AheadClock(const AheadClock& other) noexcept
        : since_ns_(other.since_ns_.load(std::memory_order_relaxed)),
          lead_ns_(other.lead_ns_.load(std::memory_order_relaxed)),
          misses_(other.misses_.load(std::memory_order_relaxed)),
          pause_left_(other.pause_left_.load(std::memory_order_relaxed)) {}
    AheadClock& operator=(const AheadClock&) = delete;

    // Asked by a wake-ahead that found sleepers: true = skip it (paused after misses; counts down).
    [[nodiscard]] bool paused() noexcept {
        const std::int32_t left = pause_left_.load(std::memory_order_relaxed);
        if (left <= 0) return false;
        pause_left_.store(left - 1, std::memory_order_relaxed);
        return true;
    }
    // A wake-ahead woke someone at `now`. Returns the spin to ask of them, in microseconds.
    [[nodiscard]] std::uint32_t started(Deadline now) noexcept {
        since_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
        const std::int64_t lead = lead_ns_.load(std::memory_order_relaxed);
        const std::int64_t spin_ns = lead == 0 ? kFirstGuess.count() : 2 * lead;
        return static_cast<std::uint32_t>(std::clamp<std::int64_t>(spin_ns / 1000, 1, UINT32_MAX));
    }
    // A record was published; `woke_sleepers`: its publish still found readers asleep and woke them.
    // Hot path (every record): one relaxed load when no wake-ahead is open.
    void published(bool woke_sleepers) noexcept {
        const std::int64_t since = since_ns_.load(std::memory_order_relaxed);
        if (since == 0) [[likely]]
            return;
        since_ns_.store(0, std::memory_order_relaxed);
        std::int32_t misses = woke_sleepers ? misses_.load(std::memory_order_relaxed) + 1 : 0;
        if (misses >= kMissesToPause) {
            pause_left_.store(kPauseFor, std::memory_order_relaxed);
            misses = 0;
        }
        misses_.store(misses, std::memory_order_relaxed);
        const std::int64_t lead = Clock::now().time_since_epoch().count() - since;
        if (lead < 0 || lead > kLongestLead.count()) return;
        const std::int64_t l = lead_ns_.load(std::memory_order_relaxed);
        lead_ns_.store(l == 0 ? lead : l + (lead - l) / 4, std::memory_order_relaxed);  // ~4 messages of memory
    }

private:
    // Atomics: a binding may call wake_ahead before its one-thread check, on a thread other than
    // the one publishing; a lost update skews one hint.
    std::atomic<std::int64_t> since_ns_{0};  // steady clock of the open wake-ahead; 0: none open
    std::atomic<std::int64_t> lead_ns_{0};   // typical wake-ahead -> publish; 0: none measured yet
    std::atomic<std::int32_t> misses_{0};    // publishes in a row that still woke sleepers after a wake-ahead
    std::atomic<std::int32_t> pause_left_{0};  // wake-aheads still to skip
};

}  // namespace ringcast::detail
