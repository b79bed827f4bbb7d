// ringcast/wait.hpp — wait strategies and the one blocking loop they plug into.
//
// A waiter waits for a condition on shared memory (data published, space released) that another
// process makes true. The strategies differ only in what they do between checks:
//
//   Spin       pause instruction in a loop; never sleeps (lowest latency with a core to spare,
//              a whole timeslice per message when oversubscribed)
//   SpinYield  sched_yield in a loop; never sleeps: today's common design, kept as the baseline
//   Futex      no spinning: announce, re-check, sleep in the kernel
//   Hybrid     spin for a bounded time, then Futex (the default). With spin_max > spin_for (the
//              default: 2 ms, in C++ as in Python; a gather collect's 10 ms, gather.hpp) it is adaptive: the spin budget follows how long this endpoint's recent waits lasted
//              (SpinHistory), and the spin yields at each checkpoint and gives up when the CPU is mostly wanted;
//              waits at a steady rhythm that would often outlast spin_max are predicted (sleep, then spin a window
//              around the expected end: SpinHistory::predicted)
//   Eventfd    no spinning: announce, re-check, sleep on the endpoint's own eventfd, which an event
//              loop can watch too (events/eventfd.hpp: the drain step, fd passing, semantics)
//
// The sleeping protocol (model: tests/model/ring.pml). One mechanism for every sleeper: a reader
// waiting for data, the writer waiting for space, the gather collector waiting on its doorbell or on
// many reply rings at once (futex_waitv). A sleep site is a futex word `seq` plus announcement bits,
// one bit per endpoint that may sleep there; a waiter may sleep on several sites at once.
//
//   waiter (block_until, case 3)                    waker (publish_and_notify)
//   3a set own bit on every site   (seq_cst RMW)    w1 make the condition true: cursor.exchange (seq_cst)
//   3b fence(seq_cst)                               w2 if any bit of the site (seq_cst loads):
//   3c s[i] = seq of every site                     w3     seq += 1; futex_wake(seq, all)
//   3d if condition: clear own bits, done
//   3e futex_wait(seq, s) / futex_waitv(all seq[i], s[i])   (sleeps only if every seq still equals
//                                                            its snapshot, atomically in the kernel)
//   3f clear own bits, back to the top
//
// Why no wake can be lost. All of 3a, 3b, w1 and w2 are seq_cst, so they sit in the one total order
// S, each thread's in program order. If w1 precedes 3b in S, the re-check 3d (a load after the
// seq_cst fence 3b) must see w1's cursor or a later one: the waiter does not sleep. Otherwise
// 3a < 3b < w1 < w2 in S, so the seq_cst load w2 sees the bit set by 3a and the waker bumps seq
// (w3). Either 3c read a seq older than w3's: then the kernel's value check in 3e fails, or the
// wake finds the sleeper. Or 3c read w3's value (or a later one): 3c is an acquire load and w3 a
// release RMW after w1, so w1 happens-before 3d and the re-check sees the cursor: no sleep at all.
// With several sites the argument holds per site: a waker of any one site either is seen by 3d or
// bumps that site's word.
// When nobody sleeps the waker's hot path is one exchange (xchg on x86: cheaper than a store +
// mfence) and one seq_cst load (a plain mov on x86) per 64 endpoints.
//
// Waking ahead (Writer::wake_ahead). A writer about to make a message (pickle it, copy it from a
// GPU) runs w2..w3 alone first, with no cursor moved: the sleepers' wake-up — a futex wake and a
// scheduler hop, tens of microseconds where a halted vCPU must be woken — then runs while the message
// is made. For the sleeper it is a wake-up that finds nothing: after 3f it spins (case 3g of
// block_until) for as long as the writer said its messages take from that call to their publish,
// and sleeps again (3a) if none came. It adds no step to the protocol above: w2..w3 without w1 is
// what any waker may do (a sleeper's condition is re-checked at 3d after every wake-up), and the
// publish runs its own w1..w3 as always, so a sleeper that went back to sleep before it is woken
// by it (tests/model/ring.pml -DAHEAD; its must-fail partner lets the publish skip its wake).
//
// Announcements. A bit, not a shared count: an endpoint owns its bit, sets and clears it only
// itself (one waiting thread per endpoint, so the bit is never set twice), and whoever claims the
// endpoint's role next — a replacement reader of a dead rank, a writer taking over, an eviction —
// clears it (clear_announcement). So a process killed asleep leaks no announcement past its
// successor's claim; with a count, one death made every later publish pay a wake syscall forever.
// Spin explores sequentially consistent interleavings, which is what the seq_cst operations above
// guarantee; tests/model/ring.pml models these steps by name.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sched.h>

#include "ringcast/detail/crash_point.hpp"
#include "ringcast/events/eventfd.hpp"
#include "ringcast/futex.hpp"

namespace ringcast {

inline constexpr std::chrono::nanoseconds kForever = std::chrono::nanoseconds::max();

enum class WaitKind : std::uint8_t { spin, spin_yield, futex, hybrid, eventfd };

[[nodiscard]] constexpr std::string_view to_string(WaitKind k) noexcept {
    switch (k) {
        case WaitKind::spin: return "spin";
        case WaitKind::spin_yield: return "spin_yield";
        case WaitKind::futex: return "futex";
        case WaitKind::hybrid: return "hybrid";
        case WaitKind::eventfd: return "eventfd";
    }
    return "?";
}

// Called right before a waiter enters the kernel wait (after the last re-check). The Python binding
// uses it to prove the GIL is not held while blocked. Runs in the waiting thread.
struct SleepHook {
    void (*fn)(void* context) = nullptr;
    void* context = nullptr;
};

struct WaitOptions {
    WaitKind kind = WaitKind::hybrid;
    std::chrono::nanoseconds spin_for{10'000};  // hybrid: spin this long before sleeping. ~ one
                                                // cross-core futex wake (docs/platform.md: 11-14 us), the
                                                // classic 2-competitive bound for spin-then-block.
    // hybrid: > spin_for makes the spin adaptive, up to this (SpinHistory). The default spins through
    // the short waits of a busy pipeline (a round trip without a futex wake) and costs no CPU once
    // the endpoint idles; 0 gives the fixed spin_for, then sleep (the least CPU for a rare message).
    std::chrono::nanoseconds spin_max{2'000'000};
    SleepHook before_sleep{};
    // A kernel wait that a signal handler interrupted (EINTR) ends the blocking call as timed out
    // before its deadline, so that the caller can act on the signal at once (Python's main thread
    // raises KeyboardInterrupt). A signal that comes while the waiter spins ends nothing (there is no
    // kernel wait to interrupt); nor does one whose handler was installed with SA_RESTART while the
    // waiter sleeps on several sites (futex_waitv is restarted). Off: the wait re-checks its
    // condition and sleeps on, as after any early futex return.
    bool end_on_signal = false;

    [[nodiscard]] bool adaptive() const noexcept { return kind == WaitKind::hybrid && spin_max > spin_for; }
};

// How long an endpoint's recent waits lasted (the ones that had to wait: a condition already true is
// not a wait), as exponential moving averages — the adaptive hybrid's predictor. A wait that is
// expected to end soon is worth spinning through: it saves the sleeper's wake-up (a futex wake plus a
// scheduler hop, 10-50 us; more in a VM whose idle vCPU halted), and a spin that ends when the wait
// does costs only the wait. A wait expected to be long is slept through — but not to its end: the
// sleeper sets its own alarm shortly before the expected end and spins from there, so a regular long
// wait (an executor collecting a 20 ms model step) ends in a spin, without the wake-up, for a spin of
// 2 x lead per wait instead of the whole wait.
//
//   typical + 2 x deviation <= spin_max (else predicted(), below, when its window holds the waits)
//     and every recent wait <= spin_max (the recent longest, decaying 1/32 a wait, within it)
//                         spin spin_max: a wait at a rhythm that fits in the spin is spun to its end,
//                         even one later than the rest (a late reply, a step behind a preempted peer)
//     otherwise (a pause past spin_max among them)
//                         spin 2 x typical, within [spin_for, spin_max]: covers most waits of that length
//   otherwise             predicted(): sleep until `expected - lead - late` (an alarm goes off about
//                         `late` late), spin up to 2 x lead, then sleep
//                         (block_until with adaptive options; lead = 2 x (the waits' mean deviation
//                         + how late the alarm goes off), within [kMinLead, min(spin_max / 4, kMaxLead)])
//   a gather collect's copy after its first wait (stop_predicting)
//                         no prediction of its own; spin the budget the collector learned from its
//                         collects' spread (the later replies), then sleep — or, once that spread is
//                         longer than the spin, sleep until the window the collector predicted for its
//                         last reply (on the clock, from the first reply), spin it, then sleep
//
// Thread-safety: any thread; relaxed atomics — it is a hint, a lost update only skews one budget.
// (The plain members below — stopped_, later_budget_, later_long_, later_window_, before_window_ — are
// set only on a collect's own copy, local to that call: by the collect, and by block_until in that
// call's thread.)
class SpinHistory {
public:
    // The prediction of a long wait: sleep until `wake_after` from the wait's start, then spin for at
    // most `spin`. Zero: no prediction (waits are short, unknown or longer than kLongestPredicted).
    struct Prediction {
        std::chrono::nanoseconds wake_after{0};
        std::chrono::nanoseconds spin{0};
    };
    // A prediction placed on the clock: sleep until `alarm`, then spin until `end` (the alarm goes off
    // about `late` after it: the window is `end` - `alarm` - late long). A gather collect's later waits
    // share one (stop_predicting): it counts from the collect's first reply, not from each wait's
    // start. end == alarm: none.
    struct Window {
        Deadline alarm{};
        Deadline end{};
    };
    // The shortest lead: a timer's slack (50 us by default) plus a wake-up of a halted vCPU.
    static constexpr std::chrono::nanoseconds kMinLead{100'000};
    // The longest lead: a window of at most 1 ms around a long wait's expected end, whatever the
    // spin's cap (a reader's 2 ms gives spin_max / 4 = this; a gather collect's 10 ms would give 2.5 ms,
    // a 5 ms window of spin per long step for waits that stray by milliseconds).
    static constexpr std::chrono::nanoseconds kMaxLead{500'000};
    // Longer waits are not predicted (an idle queue is not a step, and a wake-up is noise next to
    // half a second); waits are recorded up to twice this, so a run of idle waits reads as "too long".
    static constexpr std::chrono::nanoseconds kLongestPredicted{500'000'000};

    SpinHistory() = default;
    SpinHistory(const SpinHistory& other) noexcept
        : typical_ns_(other.typical_ns_.load(std::memory_order_relaxed)),
          long_ns_(other.long_ns_.load(std::memory_order_relaxed)),
          long_dev_ns_(other.long_dev_ns_.load(std::memory_order_relaxed)),
          alarm_late_ns_(other.alarm_late_ns_.load(std::memory_order_relaxed)),
          missed_(other.missed_.load(std::memory_order_relaxed)),
          recent_longest_ns_(other.recent_longest_ns_.load(std::memory_order_relaxed)) {}
    SpinHistory& operator=(const SpinHistory&) = delete;
    [[nodiscard]] std::chrono::nanoseconds budget(std::chrono::nanoseconds spin_for,
                                                  std::chrono::nanoseconds spin_max) const noexcept {
        // A collect's later waits (stop_predicting): the budget its collector learned for them.
        if (stopped_) return later_budget_;
        const std::int64_t typical = typical_ns_.load(std::memory_order_relaxed);
        if (typical > spin_max.count()) return spin_for;  // such waits sleep, or are predicted
        // (1) Every recent wait fit in the cap (and there was one: no history spins the floor): spin the
        //     whole cap. A wait that runs past twice the typical one at a steady rhythm is most often a
        //     reply or a request a little late, not a pause — sleeping there cost a wake-up on the
        //     step's critical path (on the 2-core VM, at 2 x typical, the workers slept in 3-6 % of sync
        //     steps and the sync step met the spinner's in 6 of 20 cells; with this rule 16 of 20, the
        //     sleeps gone: docs/benchmarks.md, "The spin's budget, a late reply told from a pause"). A
        //     pause longer than the cap ends the rule for up to ~44 waits (4 x spin_max decays to
        //     spin_max at 1/32 a wait; a pause of 1.8 x spin_max in ~19): a reader whose pauses pass the
        //     cap by far spins about as before (a wait past the cap costs the whole cap once, then the
        //     rule below); pauses within the cap are spun through, and one a little past it is soon
        //     forgotten, which costs a bursty reader CPU (+10-14 points of a core in that section's probe).
        const std::int64_t longest = recent_longest_ns_.load(std::memory_order_relaxed);
        if (longest > 0 && longest <= spin_max.count()) return std::max(spin_for, spin_max);
        // (2) Otherwise about twice the typical wait.
        return twice_typical(typical, spin_for, spin_max);
    }
    // Whether waits here typically outlast spin_for: AdaptiveHybridStrategy::yield_at_once. A
    // collect's later waits: the verdict the collector passed with their budget (stop_predicting),
    // taken from the spread's own history, not from that budget — which is the whole cap while every
    // recent spread fits in it, however short the spreads are.
    [[nodiscard]] bool expects_long(std::chrono::nanoseconds spin_for) const noexcept {
        if (stopped_) return later_long_;
        return typical_ns_.load(std::memory_order_relaxed) > spin_for.count();
    }
    // The verdict for a collect's later waits, read from the history of the spread (the collector's
    // reply_spread_): their budget by budget()'s rule (2) alone (twice_typical) runs past spin_for,
    // i.e. a typical spread of more than half of spin_for, and no more than spin_max (a longer one is
    // slept through or predicted, not spun). The rule the later
    // waits kept until budget() gave them the whole cap; from then until this verdict was passed on
    // they yielded once before their first spin step after every first reply (docs/benchmarks.md,
    // "The collect's later waits yield only where their spreads are long").
    // (A cap at or under spin_for — a collect whose spin_for passes its stragglers' 2 ms — leaves
    // no adaptive budget to run past spin_for: not long either.)
    [[nodiscard]] bool later_waits_long(std::chrono::nanoseconds spin_for,
                                        std::chrono::nanoseconds spin_max) const noexcept {
        return twice_typical(typical_ns_.load(std::memory_order_relaxed), spin_for, spin_max) > spin_for;
    }
    [[nodiscard]] Prediction predicted(std::chrono::nanoseconds spin_max) const noexcept {
        const std::int64_t typical = typical_ns_.load(std::memory_order_relaxed);
        const std::int64_t dev = long_dev_ns_.load(std::memory_order_relaxed);
        // (1) The spin covers waits whose typical length plus twice their deviation stays within
        //     spin_max.
        if (typical + 2 * dev <= spin_max.count()) return {};
        if (missed_.load(std::memory_order_relaxed) || stopped_) return {};  // paused / stopped: see below
        const std::int64_t expected = long_ns_.load(std::memory_order_relaxed);
        const std::int64_t late = alarm_late_ns_.load(std::memory_order_relaxed);
        // The lead keeps room for the alarm's lateness as well as the waits' deviation: it varies
        // from alarm to alarm by about its own size (48-165 us around ~115 us on the 2-core VM).
        const std::int64_t lead = std::clamp<std::int64_t>(
            2 * (dev + late), kMinLead.count(),
            std::max(kMinLead.count(), std::min(spin_max.count() / 4, kMaxLead.count())));
        // (2) Waits within the spin's reach whose typical length + 2 x deviation passes it (a 1 ms
        //     step that takes 1.5-2.5 ms on a slow machine) ended in a sleep about as often as not:
        //     predicted when the window (expected +- lead) holds their spread. Not when it does not:
        //     two kinds of wait (0.5 and 2.5 ms: the spin catches the short ones, a window neither), or
        //     one idle wait among short ones (its deviation lasts ~20 waits; the spin still catches them).
        if (typical <= spin_max.count() && dev > lead) return {};
        // (3) Longer waits: predicted unless too long (an idle queue) or too short for a window.
        if (expected >= kLongestPredicted.count() || expected <= 2 * lead + late) return {};
        // The alarm is set `late` earlier than the window's start: it goes off about that late, and
        // the window then spans expected +- lead, as meant (with the lead capped, an alarm 250 us late
        // left a window that opened 250 us after its start and missed the early waits).
        return {std::chrono::nanoseconds{expected - lead - late}, std::chrono::nanoseconds{2 * lead}};
    }
    void record(std::chrono::nanoseconds waited, std::chrono::nanoseconds spin_max) noexcept {
        // Capped, so that one idle minute is forgotten after a few short waits.
        // (A wait over before its loop read the clock comes as zero: as 1 ns it still seeds long_ns_.)
        waited = std::max(waited, std::chrono::nanoseconds{1});
        // 4 x spin_max, spin_max taken as at most 1 s here: a spin_max near nanoseconds::max() must not
        // overflow the product, nor make `typical` so large that predicted()'s 2 x typical does.
        const std::int64_t cap = 4 * std::min<std::int64_t>(spin_max.count(), 1'000'000'000);
        const std::int64_t w = std::min<std::int64_t>(waited.count(), cap);
        const std::int64_t t = typical_ns_.load(std::memory_order_relaxed);
        typical_ns_.store(t + (w - t) / 4, std::memory_order_relaxed);  // weight 1/4: ~4 waits of memory
        // The recent longest: a wait raises it at once, and it decays by 1/32 a wait (w >= 1 ns, so a
        // recorded history always reads > 0 here).
        const std::int64_t r = recent_longest_ns_.load(std::memory_order_relaxed);
        recent_longest_ns_.store(std::max(w, r - r / 32), std::memory_order_relaxed);
        // The long-wait predictor and how far waits stray from it (capped at 2 x kLongestPredicted: after an
        // idle minute the prediction is off for a few waits, which then sleep as they would without it).
        const std::int64_t l = std::min<std::int64_t>(waited.count(), 2 * kLongestPredicted.count());
        const std::int64_t m0 = long_ns_.load(std::memory_order_relaxed);
        const std::int64_t m = m0 == 0 ? l : m0;  // the first wait seeds it: no ramp up from zero
        const std::int64_t d = long_dev_ns_.load(std::memory_order_relaxed);
        long_dev_ns_.store(d + ((l > m ? l - m : m - l) - d) / 4, std::memory_order_relaxed);
        long_ns_.store(m + (l - m) / 4, std::memory_order_relaxed);
    }
    // How late the alarm of a predicted wait went off (timer slack, a halted vCPU's wake-up): the alarm
    // is set that much earlier, so that the window opens where it is meant to, and the lead keeps
    // room for it, since it varies about as much as its size.
    void record_alarm_late(std::chrono::nanoseconds late) noexcept {
        const std::int64_t v = std::clamp<std::int64_t>(late.count(), 0, kLongestPredicted.count());
        const std::int64_t a = alarm_late_ns_.load(std::memory_order_relaxed);
        alarm_late_ns_.store(a + (v - a) / 4, std::memory_order_relaxed);
    }
    // A predicted wait ended without its event: the call timed out or was cancelled after its window
    // (a caller waiting in slices, as Python's main thread does: 250 ms; an idle peer polled with
    // timeouts). Predictions pause until a wait ends by its event again, so such a caller spins one
    // window, not one per slice. An event that merely came after the window does not pause them: the
    // history learns from it, and pausing would cost the next wait a wake-up too (measured: on a
    // machine whose alarms fire late, 17-20 of 30 publishes found the reader asleep with the pause,
    // against a miss's one wake-up without it).
    void prediction_missed() noexcept { missed_.store(true, std::memory_order_relaxed); }
    void event_came() noexcept { missed_.store(false, std::memory_order_relaxed); }
    // A gather collect predicts its first wait only (the whole collect's length is what the history
    // holds): its copy stops predicting after that wait, and its later waits — for the replies still
    // missing once one is in — spin for `later_budget`, which the collector learns from how far its
    // collects' last replies trailed their first (GatherCollector::reply_spread_'s budget(): the cap
    // while every recent spread fits in it, else 2 x the typical spread, within [spin_for, spin_max];
    // spin_for once spreads pass spin_max, so a rank that is always far behind costs a sleep, not
    // spin_max of CPU, per collect). Not from this history: it
    // holds whole collects, so for a step longer than spin_max it gave spin_for, and every later
    // reply more than 10 us behind the first needed a futex wake (10 ms steps on the 16-core
    // machine: the executor slept 2.0 times per all-rank step at W=2, 6.6 at W=8; reply -> collected
    // 81 us against a spinner's 39). Not copied, not handed back.
    //
    // Once the spread itself is longer than spin_max (steps of ~10 ms whose workers finish ms apart),
    // sleeping through every later reply left the collector asleep when the last one came, and that
    // wake-up on the step's critical path (10 ms steps on the 16-core machine, landed form above: 6.2
    // sleeps per all-rank step at W=8, reply -> collected 65 us against the spinner's 29). So the
    // collector predicts the last reply as a long wait is predicted — the spread's history, from the
    // first reply — and passes that window: the later waits sleep until it opens (an earlier reply
    // wakes the sleep as any reply does; the collect drains it and sleeps again until the same alarm),
    // then spin it, then sleep as usual. The same sleep, alarm and spin as a predicted wait's: no new
    // wake path.
    //
    // `later_long`: whether those later waits yield once before they spin (expects_long; the
    // collector's stop_predicting_from below passes reply_spread_.later_waits_long(): a typical spread
    // of more than half of spin_for).
    void stop_predicting(std::chrono::nanoseconds later_budget, bool later_long, Window later_window) noexcept {
        stopped_ = true;
        later_budget_ = later_budget;
        later_long_ = later_long;
        later_window_ = later_window;
    }
    // What a collect calls (gather.cpp): the budget and the verdict both read from `spread`, the
    // history of its replies' spread (budget() and later_waits_long()), in one call that the tests of
    // the later waits' budget and yield call too (they do not see which call gather.cpp makes).
    void stop_predicting_from(const SpinHistory& spread, std::chrono::nanoseconds spin_for,
                              std::chrono::nanoseconds spin_max, Window later_window) noexcept {
        stop_predicting(spread.budget(spin_for, spin_max), spread.later_waits_long(spin_for, spin_max), later_window);
    }
    void stop_predicting_from(const SpinHistory& spread, std::chrono::nanoseconds spin_for,
                              std::chrono::nanoseconds spin_max) noexcept {
        stop_predicting_from(spread, spin_for, spin_max, Window{});
    }
    // The window of a collect's later waits (stop_predicting); none before that, or none predicted.
    [[nodiscard]] Window later_window() const noexcept { return stopped_ ? later_window_ : Window{}; }
    // Whether the last of those waits found its event when its sleep until the window's alarm ended
    // (the event came before the window, or while the alarm's wake-up ran). A reply that wakes the
    // sleep is collected a wake-up after it came (~200 us on the 2-core VM): learning the spread from
    // that moment taught a window later than the replies, which missed them the same way again (15-20
    // of 20 stragglers found the collector asleep in a timing test). The collector counts such a
    // collect at the alarm instead when the window was near (gather.cpp) — the reply came before it,
    // how long before is unknown — so that a window that opens too late moves earlier until it holds
    // the reply, and a reply caught there is timed exactly. The collect resets it before each wait.
    void note_before_window(bool before) noexcept { before_window_ = before; }
    [[nodiscard]] bool ended_before_window() const noexcept { return before_window_; }
    // `prediction` placed on the clock from `origin`: its alarm, and the end of its spin window.
    [[nodiscard]] Window on_the_clock(Prediction prediction, Deadline origin) const noexcept {
        const Deadline alarm = origin + prediction.wake_after;
        return {alarm, alarm + std::chrono::nanoseconds{alarm_late_ns_.load(std::memory_order_relaxed)} + prediction.spin};
    }
    // How late alarms go off is the machine's, not the waits': a history that predicts from another
    // kind of wait (the replies' spread) starts from what this one measured.
    void take_alarm_late(const SpinHistory& other) noexcept {
        alarm_late_ns_.store(other.alarm_late_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    // What a copy (the one a gather collect waits with) learned about this machine's alarms and
    // whether its prediction missed.
    void take_prediction_state(const SpinHistory& copy) noexcept {
        alarm_late_ns_.store(copy.alarm_late_ns_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        missed_.store(copy.missed_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    [[nodiscard]] std::chrono::nanoseconds typical() const noexcept {
        return std::chrono::nanoseconds{typical_ns_.load(std::memory_order_relaxed)};
    }

private:
    // budget()'s rule (2): about twice the typical wait, within [spin_for, spin_max]; spin_for once
    // the typical wait is past spin_max (such waits sleep, or are predicted).
    [[nodiscard]] static std::chrono::nanoseconds twice_typical(std::int64_t typical, std::chrono::nanoseconds spin_for,
                                                                std::chrono::nanoseconds spin_max) noexcept {
        if (typical > spin_max.count()) return spin_for;
        return std::clamp(std::chrono::nanoseconds{2 * typical}, spin_for, std::max(spin_for, spin_max));
    }

    std::atomic<std::int64_t> typical_ns_{0};   // capped at 4 x spin_max: decides spin or sleep
    std::atomic<std::int64_t> long_ns_{0};      // capped at 2 x kLongestPredicted: when a long wait ends
    std::atomic<std::int64_t> long_dev_ns_{0};  // mean absolute deviation of waits from long_ns_
    std::atomic<std::int64_t> alarm_late_ns_{0};  // how late predicted alarms went off
    std::atomic<bool> missed_{false};              // a predicted wait ended without its event
    std::atomic<std::int64_t> recent_longest_ns_{0};  // capped as typical_ns_; decays 1/32 a wait: budget() (1)
    // Plain members: only a collect's own copy, local to that call, sets them (stop_predicting).
    bool stopped_ = false;                         // a collect's copy, after its first wait
    std::chrono::nanoseconds later_budget_{0};     // that copy's spin budget from then on
    bool later_long_ = false;                      // and whether its later waits yield once first
    Window later_window_{};                        // and its window for the last reply, if predicted
    bool before_window_ = false;                   // its last wait ended by its event before the window
};

// A spin longer than one futex wake must not take a CPU that another thread needs (the spinner's
// own peer, on a machine with fewer cores than busy threads). The adaptive spin calls sched_yield at
// each checkpoint (every kSpinStepsPerClockRead steps); a yield that returns this late ran someone
// else (or the hypervisor took the vCPU).
inline constexpr std::chrono::nanoseconds kSpinGaveAwayCpu{20'000};

// The polite spin's account of the CPU its yields gave away. It stops the spin once late yields took
// more than half the time spun: the CPU is mostly someone else's (a busy thread beside it gets a
// timeslice of ~1 ms at the first yield, so that spin stops at once). Brief runs of other threads —
// kernel threads of a VM, 20-160 us about once per ms of spin (measured on the 2-core CI VM) — do
// not stop it: stopping at the first one sent many 1-2 ms waits there to sleep, and their writers to
// a wake call (6-19 of 30 publishes of a 20 ms rhythm in 6 runs before this rule and the earlier alarm
// of SpinHistory::predicted; 0-4 in 8 runs with both).
class GivenAwayCpu {
public:
    // After a yield that took `yield_took`, `spun` after the spin began (that yield included).
    [[nodiscard]] bool keep_spinning(std::chrono::nanoseconds yield_took, std::chrono::nanoseconds spun) noexcept {
        if (yield_took >= kSpinGaveAwayCpu) given_away_ += yield_took;
        return 2 * given_away_ <= spun - excused_;
    }
    // A yield that is left out of the account altogether: out of the time given away and out of the
    // time spun (AdaptiveHybridStrategy: the yields begun within spin_for).
    void excuse(std::chrono::nanoseconds yield_took) noexcept { excused_ += yield_took; }

private:
    std::chrono::nanoseconds given_away_{0};
    std::chrono::nanoseconds excused_{0};
};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// The futex handshake's shared words for one direction (readers waiting for data, the writer waiting
// for space, the collector waiting for replies).
struct SleepSite {
    std::atomic<std::uint32_t>* seq = nullptr;       // futex word; bumped by wakers that saw a bit
    std::atomic<std::uint64_t>* sleeping = nullptr;  // announcement bits, one per endpoint (bit 0 only,
                                                     // for a site with one waiter)
    std::uint32_t words = 1;                         // waker: how many 64-bit words of bits to look at
    std::uint32_t bit = 0;                           // waiter: its own bit
    std::atomic<std::uint64_t>* waits = nullptr;     // futex_wait calls (diagnostics; relaxed); may be null
    EventfdSignaller* eventfds = nullptr;            // waker: its copies of the eventfds of endpoints that
                                                     // sleep on one (events/eventfd.hpp); null: none can

    [[nodiscard]] std::atomic<std::uint64_t>& own_word() const noexcept { return sleeping[bit / 64]; }
    [[nodiscard]] std::uint64_t own_mask() const noexcept { return std::uint64_t{1} << (bit % 64); }
};

// 3a: the waiter's announcement (seq_cst RMW; the fence 3b follows).
inline void announce(const SleepSite& site) noexcept { site.own_word().fetch_or(site.own_mask(), std::memory_order_seq_cst); }
// 3d/3f: the waiter retracts it. relaxed: a late retract only costs a waker one needless wake.
inline void retract(const SleepSite& site) noexcept { site.own_word().fetch_and(~site.own_mask(), std::memory_order_relaxed); }
// A new holder of the endpoint's role clears the bit a dead predecessor may have left set: nobody
// sleeps under it (the role is ours now, and we are not asleep), so clearing loses no wake.
inline void clear_announcement(const SleepSite& site) noexcept {
    site.own_word().fetch_and(~site.own_mask(), std::memory_order_seq_cst);
}
// w2: does anyone announce? One seq_cst load per 64 endpoints.
[[nodiscard]] inline bool any_announced(const SleepSite& site) noexcept {
    for (std::uint32_t i = 0; i < site.words; ++i)
        if (site.sleeping[i].load(std::memory_order_seq_cst) != 0) return true;
    return false;
}

// Steps w2..w3 alone, for a waker whose condition was made true by a seq_cst RMW just before (the
// gather doorbell is checked right after the reply ring's publish_and_notify).
inline bool notify_sleepers(const SleepSite& site, std::atomic<std::uint64_t>& wake_calls) noexcept {
    if (!any_announced(site)) return false;           // w2: the fast path
    site.seq->fetch_add(1, std::memory_order_release);  // w3
    RINGCAST_CRASH_POINT(wake_w3_seq);  // (detail/crash_point.hpp: nothing outside the fault tests)
    // w3 for eventfd sleepers (events/eventfd.hpp); the futex wake only if a futex sleeper may be
    // among the announced (the signaller re-loads the bits: one cleared since w2 was retracted by its
    // own, awake, waiter; one set since w2 belongs to a waiter whose re-check sees w1).
    if (site.eventfds == nullptr || !site.eventfds->signal(site.sleeping, site.words)) futex_wake(site.seq);
    wake_calls.fetch_add(1, std::memory_order_relaxed);  // slow path (a syscall follows); may have many storers
    return true;
}

// Waker side, steps w1..w3 above: publishes `value` into `cursor` and wakes sleepers if any.
// Returns true if a wake system call was made. `after_w1` names the caller's step for the fault
// tests' crash points (detail/crash_point.hpp); it compiles to nothing elsewhere.
inline bool publish_and_notify(std::atomic<std::uint64_t>& cursor, std::uint64_t value, const SleepSite& site,
                               std::atomic<std::uint64_t>& wake_calls,
                               [[maybe_unused]] detail::CrashPoint after_w1 = detail::CrashPoint::none) noexcept {
    cursor.exchange(value, std::memory_order_seq_cst);  // w1 (also a release: publishes the bytes)
    RINGCAST_CRASH_POINT_VAR(after_w1);
    return notify_sleepers(site, wake_calls);
}

// Unconditional wake (close, cancel, a departing peer): bump seq so a waiter between 3c and 3e
// cannot sleep.
// Eventfd sleepers: the bits are loaded after the fence, so a waiter whose re-check (after its own
// fence 3b) missed the caller's store announced before that load, and its eventfd is written.
inline void wake_all(const SleepSite& site) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    site.seq->fetch_add(1, std::memory_order_release);
    if (site.eventfds != nullptr) (void)site.eventfds->signal(site.sleeping, site.words);
    futex_wake(site.seq);
}

enum class WaitOutcome : std::uint8_t { ready, timed_out, cancelled };

// ---- strategies ---------------------------------------------------------------------------------
// A strategy says how long to spin and what to do per spin step; whether it ever sleeps; whether
// a spin step gives the CPU away (steps_yield: then every step takes the full look, see SpinLook).
template <class S>
concept WaitStrategy = requires(const S& s, std::uint32_t i) {
    { S::kind } -> std::convertible_to<WaitKind>;
    { S::sleeps } -> std::convertible_to<bool>;
    { S::steps_yield } -> std::convertible_to<bool>;
    { s.spin_budget() } -> std::convertible_to<std::chrono::nanoseconds>;
    s.relax(i);
};

struct SpinStrategy {
    static constexpr WaitKind kind = WaitKind::spin;
    static constexpr bool sleeps = false;
    static constexpr bool steps_yield = false;
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return kForever; }
    void relax(std::uint32_t) const noexcept { cpu_relax(); }
};
struct SpinYieldStrategy {
    static constexpr WaitKind kind = WaitKind::spin_yield;
    static constexpr bool sleeps = false;
    static constexpr bool steps_yield = true;
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return kForever; }
    void relax(std::uint32_t) const noexcept { ::sched_yield(); }
};
// Sleeps at once, like Futex; the kernel sleep is on the endpoint's eventfd (WaitContext::eventfd).
struct EventfdStrategy {
    static constexpr WaitKind kind = WaitKind::eventfd;
    static constexpr bool sleeps = true;
    static constexpr bool steps_yield = false;
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return std::chrono::nanoseconds::zero(); }
    void relax(std::uint32_t) const noexcept {}
};
struct FutexStrategy {
    static constexpr WaitKind kind = WaitKind::futex;
    static constexpr bool sleeps = true;
    static constexpr bool steps_yield = false;
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return std::chrono::nanoseconds::zero(); }
    void relax(std::uint32_t) const noexcept {}
};
struct HybridStrategy {
    static constexpr WaitKind kind = WaitKind::hybrid;
    static constexpr bool sleeps = true;
    static constexpr bool steps_yield = false;
    std::chrono::nanoseconds spin_for{10'000};
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return spin_for; }
    void relax(std::uint32_t) const noexcept { cpu_relax(); }
};
// Hybrid with the budget from SpinHistory, polite from its first checkpoint (see GivenAwayCpu). One
// object per wait (its account of given-away time is the wait's).
// Why from the first checkpoint, not after spin_for: where the peer it waits for shares its CPU (more
// busy processes than cores), the peer — just woken, or yielding itself — runs only when this spin
// yields. A spin that yielded only after spin_for held the CPU that long at every hand-off, and its
// first yield, late, often ended it: on the 2-core VM (showdown W=2, 3 rounds against the build
// before) the executor's collect slept in 0.05-0.07 sync steps instead of 0.22-0.60, reply ->
// collected took 11-25 us instead of 22-58, and (c)'s sync overhead fell from 58-116 to 37-56 us.
// With a CPU to itself the yield returns at once (~0.5 us of syscall every 64 steps of the spin), and
// a wait over within those first 64 steps never yields.
// A yield begun within spin_for is a courtesy, never the spin's end: a wait of a few microseconds
// does not sleep because someone else ran once on its CPU. Its time is left out of the account
// altogether (out of what was spun too), so a busy neighbour still stops the spin at the first late
// yield past spin_for, as GivenAwayCpu intends.
//
// A wait that its history expects to outlast spin_for (SpinHistory::expects_long: an executor's collect
// of a model step, a worker's receive of the next one) yields once more, at once, before its first
// spin step: where the peer it waits for — or the next peer of the one it just served — is queued
// behind it on this CPU, that peer runs now and not after 64 spin steps. On the 2-core VM (3 processes,
// showdown W=2, sync) the executor's collect reached its first yield 6.5 us after the request went out
// (p50, perf sched over 300 steps; the spin-and-yield baseline's poll loop: 0.9 us), and the worker
// queued behind it received the request that much later. A wait expected to be short (a hop in a busy
// pipeline) keeps its first 64 steps free of system calls. The expectation is the history's moving
// average: after one idle wait (counted as at most 4 x spin_max) the next ~20 short waits still expect
// a long one and pay a yield each (~0.4 us where nothing else is runnable; measured 0.38 us on the
// 2-core VM). Like every yield of the spin it changes nothing the wake protocol relies on: the spin's
// looks are only ever a faster way to see the condition.
struct AdaptiveHybridStrategy {
    static constexpr WaitKind kind = WaitKind::hybrid;
    static constexpr bool sleeps = true;
    static constexpr bool steps_yield = false;
    std::chrono::nanoseconds spin_for;
    std::chrono::nanoseconds budget;  // from SpinHistory, taken once per wait
    bool yield_at_once = false;       // SpinHistory::expects_long, taken once per wait
    mutable GivenAwayCpu given_away{};
    [[nodiscard]] std::chrono::nanoseconds spin_budget() const noexcept { return budget; }
    void relax(std::uint32_t) const noexcept { cpu_relax(); }
    // At a spin checkpoint (`now`, `spun` since the spin began): false = stop spinning, sleep. `now`
    // becomes the time after the yield.
    [[nodiscard]] bool keep_spinning(std::chrono::nanoseconds spun, Deadline& now) const noexcept {
        ::sched_yield();
        const Deadline after = Clock::now();
        const auto took = after - now;
        now = after;
        if (spun < spin_for) {
            given_away.excuse(took);
            return true;
        }
        return given_away.keep_spinning(took, spun + took);
    }
};
static_assert(WaitStrategy<SpinStrategy> && WaitStrategy<SpinYieldStrategy> &&
              WaitStrategy<FutexStrategy> && WaitStrategy<HybridStrategy> && WaitStrategy<EventfdStrategy> &&
              WaitStrategy<AdaptiveHybridStrategy>);

// Everything a blocking loop needs besides the strategy.
struct WaitContext {
    std::span<const SleepSite> sites;  // one (futex_wait) or several (futex_waitv, <= kFutexWaitvMax)
    Deadline deadline = kNoDeadline;
    const std::atomic<bool>* cancel = nullptr;  // cancel flag of the endpoint
    SleepHook before_sleep{};
    // Liveness: `on_idle(context)` runs (it may throw, e.g. a dead peer) whenever `check_every` has
    // passed since the endpoint's last check — counted ACROSS calls through `last_check`, so a caller
    // that polls with zero or short timeouts learns of a dead peer as soon as one that waits long
    // (within two intervals of the death, if it keeps calling). Zero disables it, on every path. The
    // kernel wait's timeout is cut to the next check: no busy polling.
    std::chrono::nanoseconds check_every{0};
    void (*on_idle)(void* context) = nullptr;
    void* idle_context = nullptr;
    SpinHistory* history = nullptr;       // the endpoint's; used when the options are adaptive
    std::uint64_t* kernel_waits = nullptr;  // the endpoint's private count of kernel waits, if wanted
    Deadline* last_check = nullptr;  // the endpoint's: when its peer was last checked (Deadline{}:
                                     // never — the first unsuccessful look starts the clock)
    EventfdWaiter* eventfd = nullptr;  // the endpoint's registered eventfd: every kernel sleep of an
                                       // endpoint that has one is on it (its wakers skip the futex
                                       // wake when all announced sleepers have one); one site only
    bool end_on_signal = false;        // WaitOptions::end_on_signal (block_until with options sets it)
    // Case 3g: a futex wake-up that finds nothing spins for the waker's word (microseconds; its
    // Writer::wake_ahead hint), within [ahead_min, ahead_max], before sleeping again. Null: sleep
    // again at once (set only by a reader whose wait is hybrid and does not sleep on an eventfd).
    const std::atomic<std::uint32_t>* ahead_us = nullptr;
    std::chrono::nanoseconds ahead_min{0};
    std::chrono::nanoseconds ahead_max{0};
};

// A peer killed between its cursor exchange (w1) and its wake (w2..w3) never runs the wake. So no
// kernel wait is longer than the liveness interval — or this, when liveness checks are off — after
// which the waiter re-checks its condition: such a death costs at most one interval, never a hang
// (tests/model/ring.pml, ghost orphan_rel).
inline constexpr std::chrono::nanoseconds kUnwatchedRecheck = std::chrono::seconds(1);

// The liveness schedule of one blocking call, carried across calls by WaitContext::last_check.
class LivenessClock {
public:
    LivenessClock(const WaitContext& ctx, Deadline now) noexcept
        : ctx_(ctx), enabled_(ctx.check_every.count() > 0 && ctx.on_idle != nullptr) {
        if (!enabled_) {
            next_ = now + kUnwatchedRecheck;
            return;
        }
        Deadline last = now;
        if (ctx.last_check != nullptr) {
            if (*ctx.last_check == Deadline{}) *ctx.last_check = now;
            last = *ctx.last_check;
        }
        next_ = later_by(last, ctx.check_every);  // saturates: a huge interval is "never", not an overflow
    }
    // When the kernel wait must end at the latest (the next check, or the next re-check).
    [[nodiscard]] Deadline next() const noexcept { return next_; }
    // Runs the check if it is due at `now` (may throw).
    void tick(Deadline now) {
        if (now < next_) return;
        if (!enabled_) {
            next_ = now + kUnwatchedRecheck;
            return;
        }
        if (ctx_.last_check != nullptr) *ctx_.last_check = now;
        next_ = later_by(now, ctx_.check_every);
        try {
            ctx_.on_idle(ctx_.idle_context);
        } catch (...) {
            // A peer found dead stays dead: the check is due again at once, so every later call that
            // finds nothing reports it too (it said timed_out until the next interval, and a caller
            // that retries on a timeout read a dead writer as an idle queue).
            if (ctx_.last_check != nullptr) *ctx_.last_check = now - ctx_.check_every;
            throw;
        }
    }

private:
    const WaitContext& ctx_;
    bool enabled_;
    Deadline next_ = kNoDeadline;
};

// Steps 3c + 3e over the context's sites: snapshot every futex word, then one kernel wait on all.
// (3a/3b are the caller's, 3d is the caller's re-check between snapshot() and sleep().)
class SleepSnapshot {
public:
    explicit SleepSnapshot(std::span<const SleepSite> sites) : sites_(sites) {
        if (sites.size() > 1) entries_.resize(sites.size());
    }
    void snapshot() noexcept {  // 3c
        if (sites_.size() == 1) {
            seen_ = sites_[0].seq->load(std::memory_order_acquire);
            return;
        }
        for (std::size_t i = 0; i < sites_.size(); ++i)
            entries_[i] = {sites_[i].seq->load(std::memory_order_acquire),
                           reinterpret_cast<std::uintptr_t>(sites_[i].seq), kFutex2SizeU32, 0};
    }
    [[nodiscard]] FutexWaitResult sleep(Deadline wake_by) noexcept {  // 3e
        if (sites_.size() == 1) return futex_wait(sites_[0].seq, seen_, wake_by);
        return futex_waitv(entries_.data(), static_cast<unsigned>(entries_.size()), wake_by);
    }

private:
    std::span<const SleepSite> sites_;
    std::uint32_t seen_ = 0;
    std::vector<FutexWaitvEntry> entries_;  // only with several sites
};

// What block_until tells the adaptive wrapper about one wait: when its loop first read the clock.
// Deadline{}: never — the condition came within the first kSpinStepsPerClockRead spin steps.
struct WaitTiming {
    Deadline first_read{};
};

// The spin phase reads the clock once per this many steps: a vDSO read costs ~20-40 ns in a VM, a
// pause ~10-60 ns. The first read too comes only after this many steps, so a wait that ends within
// them — a busy pipeline's usual wait, a fraction of a microsecond — reads no clock at all; the spin
// budget and the liveness schedule start at that first read, and the deadline is first checked there:
// ~1-4 us late for one ring (well under the default spin_for of 10 us), 64 readiness checks of a
// gather's pending rings in general. (A wait that yields before its first step reads it before that
// yield: AdaptiveHybridStrategy::yield_at_once.)
inline constexpr std::uint32_t kSpinStepsPerClockRead = 64;

// A spin step's look. A condition may offer a cheaper one for spinning, ready(SpinLook{}), by declaring
// a static member function spin_look_tag(): true only where ready() is true at that instant, changing
// no state but what ready() would change in returning true; allowed to miss what ready() finds. (A caught-up
// reader looks at the record's stamp and not at the tail's line, which the writer stores on every
// publish; docs/benchmarks.md.) It is never the re-check before a sleep (3d): every re-check, the
// deadline's and the full look at each checkpoint of the spin (every kSpinStepsPerClockRead steps)
// call ready(), and so does case 1 where no spin follows, so what only ready() finds is found at
// most kSpinStepsPerClockRead steps later (~1-4 us of pause steps), and the wake argument above is
// untouched. Not for a strategy whose steps yield (SpinYield: a sched_yield each): 63 of them beside a busy thread
// take tens of ms, against the ~0.04 us a look at the tail costs.
struct SpinLook {};
template <class Ready>
[[nodiscard]] bool spin_look(Ready& ready) {
    if constexpr (requires { std::remove_cvref_t<Ready>::spin_look_tag(); }) {
        return ready(SpinLook{});
    } else {
        return ready();
    }
}

// Waits until `ready()` returns true. `ready` must only read shared state (it may be called many
// times) and must load the shared words it depends on itself (the fence in 3b orders those loads).
// `timing`, if given, learns when the loop first read the clock (the adaptive wrapper's wait start).
//
// Thread-safety: any thread, but one waiting thread per endpoint (its announcement bit) at a time.
template <WaitStrategy S, class Ready>
[[nodiscard]] WaitOutcome block_until(const S& strategy, const WaitContext& ctx, Ready&& ready,
                                      WaitTiming* timing = nullptr) {
    static_assert((kSpinStepsPerClockRead & (kSpinStepsPerClockRead - 1)) == 0, "a power of two: a mask test");
    const auto is_cancelled = [&] { return ctx.cancel && ctx.cancel->load(std::memory_order_acquire); };
    // Case 1: the condition already holds — the fast path: no clock read, no fence. A wait that
    // spins next takes the spin look here (SpinLook): what only the full look finds (a close, a
    // record the stamp cannot tell) its first checkpoint finds, before any sleep. A poll takes the
    // full look: it has no checkpoint.
    const auto budget = strategy.spin_budget();
    const bool spins_next = budget.count() > 0 && !S::steps_yield && ctx.deadline != kPollOnly;
    if (spins_next ? spin_look(ready) : ready()) return WaitOutcome::ready;
    // Cancelled: a call whose data or space is already there still completes (ring.hpp, cancel), so
    // the full look decides — a close, or a record only the tail shows, is not reported as a cancel.
    if (is_cancelled()) return spins_next && ready() ? WaitOutcome::ready : WaitOutcome::cancelled;
    if (ctx.deadline == kPollOnly) {
        // A poll that found nothing: the liveness check is due here too if its interval passed
        // (one clock read; the ready fast path above stays clock-free).
        if (ctx.check_every.count() > 0 && ctx.on_idle != nullptr && ctx.last_check != nullptr) {
            const Deadline t = Clock::now();
            LivenessClock(ctx, t).tick(t);
        }
        return WaitOutcome::timed_out;
    }

    // The clock, the liveness schedule and the spin's end start together, at the first clock read:
    // at once for a strategy that does not spin, after kSpinStepsPerClockRead steps for one that does.
    Deadline now{};
    std::optional<LivenessClock> liveness;
    const auto start_clock = [&] {
        now = Clock::now();
        liveness.emplace(ctx, now);
        if (timing != nullptr) timing->first_read = now;
    };

    // Case 2: the spin phase (all of Spin/SpinYield, the first spin_budget of Hybrid).
    if (budget.count() > 0) {
        Deadline spin_start{};
        Deadline spin_end{};
        const auto start_spin_clock = [&] {  // the clock, and the spin's budget counted from it
            start_clock();
            spin_start = now;
            spin_end = budget >= Deadline::max() - now ? kNoDeadline : now + budget;
        };
        // (2-) A wait expected to be long gives its CPU to whoever is queued on it, once, before it
        //      spins (AdaptiveHybridStrategy::yield_at_once). The clock starts first: that yield may
        //      last the whole wait (the peer ran meanwhile and published), which the adaptive history
        //      must learn as the wait's length, not as a wait over within 64 steps. A courtesy: not in
        //      the account of given-away time.
        if constexpr (requires { strategy.yield_at_once; }) {
            if (strategy.yield_at_once) {
                start_spin_clock();
                ::sched_yield();
            }
        }
        for (std::uint32_t i = 1;; ++i) {
            strategy.relax(i);
            if (S::steps_yield ? ready() : spin_look(ready)) return WaitOutcome::ready;
            if ((i & (kSpinStepsPerClockRead - 1)) == 0) {
                if (ready()) return WaitOutcome::ready;  // the full look (see SpinLook), once per checkpoint
                if (is_cancelled()) return WaitOutcome::cancelled;
                if (!liveness) {  // (2a) the first read: the spin's budget counts from here
                    start_spin_clock();
                } else {          // (2b) every later checkpoint
                    now = Clock::now();
                }
                if (now >= ctx.deadline) return ready() ? WaitOutcome::ready : WaitOutcome::timed_out;
                liveness->tick(now);
                if (now >= spin_end) break;
                if constexpr (requires(std::chrono::nanoseconds d, Deadline& t) { strategy.keep_spinning(d, t); }) {
                    if (!strategy.keep_spinning(now - spin_start, now)) break;
                }
            }
        }
    } else {
        start_clock();
    }
    const auto idle_tick = [&](Deadline t) { liveness->tick(t); };
    if constexpr (!S::sleeps) {
        return WaitOutcome::timed_out;  // unreachable: a non-sleeping strategy spins until the deadline
    } else {
        // Case 3: the sleep phase (steps 3a..3f above), over one site or several.
        SleepSnapshot snap(ctx.sites);
        const auto retract_all = [&] {
            for (const SleepSite& site : ctx.sites) retract(site);
        };
        EventfdWaiter* const efd = ctx.eventfd;
        for (;;) {
            if (efd != nullptr) efd->drain();  // 3a': before the announcement, never after 3d (eventfd.hpp)
            for (const SleepSite& site : ctx.sites) announce(site);  // 3a
            RINGCAST_CRASH_POINT(sleep_3a);  // (the fault tests' crash points: nothing elsewhere)
            std::atomic_thread_fence(std::memory_order_seq_cst);     // 3b: see the argument above
            RINGCAST_CRASH_POINT(sleep_3b);
            if (efd == nullptr) snap.snapshot();                     // 3c (an eventfd needs no snapshot)
            RINGCAST_CRASH_POINT(sleep_3c);
            if (ready()) {                                           // 3d re-check
                retract_all();
                return WaitOutcome::ready;
            }
            if (is_cancelled()) {  // cancel() stores the flag before bumping seq: same argument as 3d
                retract_all();
                return WaitOutcome::cancelled;
            }
            if (ctx.before_sleep.fn) ctx.before_sleep.fn(ctx.before_sleep.context);
            if (ctx.sites[0].waits) ctx.sites[0].waits->fetch_add(1, std::memory_order_relaxed);
            if (ctx.kernel_waits) ++*ctx.kernel_waits;
            const Deadline wake_by = liveness->next() < ctx.deadline ? liveness->next() : ctx.deadline;
            RINGCAST_CRASH_POINT(sleep_3d);
            const FutexWaitResult r = efd != nullptr ? efd->sleep(wake_by) : snap.sleep(wake_by);  // 3e, at most
                                                                                                      // until the next check
            RINGCAST_CRASH_POINT(sleep_3e);
            retract_all();                                  // 3f
            RINGCAST_CRASH_POINT(sleep_3f);
            if (r == FutexWaitResult::unsupported)
                throw Error(ErrorCode::system, "futex_waitv is not supported by this kernel (needs Linux 5.16)");
            if (efd != nullptr) efd->check_refused();  // a waker that cannot take our fd: an error, not a hang
            if (ready()) return WaitOutcome::ready;
            if (is_cancelled()) return WaitOutcome::cancelled;
            // A signal handler ran in this thread during the sleep: end the call early, as a timeout
            // (the announcement is retracted, 3f). Nothing can be lost: leaving is what a timed-out
            // waiter does, and a caller that waits again starts over at case 1.
            if (r == FutexWaitResult::interrupted && ctx.end_on_signal) return WaitOutcome::timed_out;
            now = Clock::now();  // (a futex wake is microseconds; one vDSO read more is noise)
            if (now >= ctx.deadline) return WaitOutcome::timed_out;
            idle_tick(now);
            // 3g: woken, and nothing there. The waker may have woken us ahead of a message it is
            // still making (Writer::wake_ahead): spin for as long as it said that takes, politely
            // (the CPU may be the writer's), then sleep again from 3a. Spinning re-checks the full
            // ready() on every step: no wake depends on it.
            if (ctx.ahead_us != nullptr && (r == FutexWaitResult::woken || r == FutexWaitResult::value_changed)) {
                const auto said = std::chrono::microseconds{ctx.ahead_us->load(std::memory_order_relaxed)};
                const auto spin = std::clamp<std::chrono::nanoseconds>(said, ctx.ahead_min,
                                                                       std::max(ctx.ahead_min, ctx.ahead_max));
                const Deadline spin_start = now;
                const Deadline spin_end =
                    spin >= ctx.deadline - spin_start ? ctx.deadline : spin_start + spin;  // (no overflow)
                AdaptiveHybridStrategy polite{ctx.ahead_min, spin};
                for (std::uint32_t i = 1;; ++i) {
                    cpu_relax();
                    if (ready()) return WaitOutcome::ready;
                    if ((i & (kSpinStepsPerClockRead - 1)) != 0) continue;
                    if (is_cancelled()) return WaitOutcome::cancelled;
                    now = Clock::now();
                    if (now >= spin_end || !polite.keep_spinning(now - spin_start, now)) break;
                }
                if (now >= ctx.deadline) return ready() ? WaitOutcome::ready : WaitOutcome::timed_out;
                // A signal that came during the spin interrupted no kernel wait, and the sleep below
                // would not see it: a caller that asked to hear of signals (Python's main thread)
                // gets the call back now, as after an interrupted sleep, and waits again.
                if (ctx.end_on_signal) return WaitOutcome::timed_out;
                idle_tick(now);
            }
        }
    }
}

// Run-time choice of strategy: one switch per blocking call, outside the hot loop.
template <class Ready>
[[nodiscard]] WaitOutcome block_until(const WaitOptions& options, const WaitContext& ctx, Ready&& ready) {
    if (options.end_on_signal && !ctx.end_on_signal) {  // one place carries the option into the loop
        WaitContext with_signals = ctx;
        with_signals.end_on_signal = true;
        return block_until(options, with_signals, ready);
    }
    switch (options.kind) {
        case WaitKind::spin: return block_until(SpinStrategy{}, ctx, ready);
        case WaitKind::spin_yield: return block_until(SpinYieldStrategy{}, ctx, ready);
        case WaitKind::futex: return block_until(FutexStrategy{}, ctx, ready);
        case WaitKind::eventfd: return block_until(EventfdStrategy{}, ctx, ready);
        case WaitKind::hybrid: break;
    }
    if (!options.adaptive() || ctx.history == nullptr || ctx.deadline == kPollOnly)
        return block_until(HybridStrategy{options.spin_for}, ctx, ready);
    // Adaptive: only waits that happen are timed and recorded (the fast path stays clock-free). The
    // spin look, as case 1 of block_until where a spin follows: every wait below either spins (its
    // first checkpoint takes the full look) or sleeps (its case 1 and re-checks take it).
    if (spin_look(ready)) return WaitOutcome::ready;
    // When the wait began: read here for a prediction; otherwise the spin's first clock read, which
    // comes after kSpinStepsPerClockRead steps — a wait over sooner reads no clock (below).
    Deadline start{};
    WaitOutcome outcome = WaitOutcome::timed_out;
    bool done = false;  // by the predicted path
    // A long wait that is predictable (SpinHistory::predicted): first an ordinary sleep — announced,
    // so an early event wakes it as any sleep — whose deadline is the waiter's own alarm, then the spin
    // window, then (the prediction missed) the usual spin_for + sleep. No new wake path: the alarm is
    // a sleep that returns by its timeout before the event, then the usual re-check. The model checks
    // it: ring.pml's -DSPURIOUS checks let any futex wait return early; gather.pml's -DALARM ends two
    // of a collect's sleeps (this one's and the later waits' window's, below) at any moment, with
    // must-fail partners (tests/model/check.sh).
    if (const SpinHistory::Prediction p = ctx.history->predicted(options.spin_max); p.wake_after.count() > 0) {
        start = Clock::now();
        const Deadline alarm = start + p.wake_after;
        if (alarm < ctx.deadline) {
            WaitContext until_alarm = ctx;
            until_alarm.deadline = alarm;
            outcome = block_until(FutexStrategy{}, until_alarm, ready);
            done = outcome != WaitOutcome::timed_out;
            if (!done) {
                const Deadline window = Clock::now();
                // Timed out before its alarm: only a signal ends it so (end_on_signal), and the
                // caller must hear of it now, not after the spin window and another sleep.
                if (ctx.end_on_signal && window < alarm) return outcome;
                ctx.history->record_alarm_late(window - alarm);
                outcome = block_until(AdaptiveHybridStrategy{options.spin_for, p.spin}, ctx, ready);
                if (outcome != WaitOutcome::ready) ctx.history->prediction_missed();
                done = true;
            }
        }
    }
    // A gather collect's later waits, when the collector predicted its last reply (SpinHistory::
    // stop_predicting): the same sleep until an alarm, then the spin window, at a time on the clock
    // that all of that collect's later waits share. Before the alarm, a reply ends the sleep as any
    // wake does (the collect drains it and comes back here); past the window, the usual budget.
    if (const SpinHistory::Window w = ctx.history->later_window(); !done && w.end > w.alarm) {
        start = Clock::now();
        if (start < w.end && w.alarm < ctx.deadline) {
            if (start < w.alarm) {
                WaitContext until_alarm = ctx;
                until_alarm.deadline = w.alarm;
                outcome = block_until(FutexStrategy{}, until_alarm, ready);
                done = outcome != WaitOutcome::timed_out;
                ctx.history->note_before_window(outcome == WaitOutcome::ready);
                if (!done && ctx.end_on_signal && Clock::now() < w.alarm) return outcome;  // as above
            }
            if (!done) {
                const std::chrono::nanoseconds left = w.end - Clock::now();  // what is left of the window
                outcome = block_until(AdaptiveHybridStrategy{options.spin_for, std::max(left, options.spin_for)}, ctx, ready);
                done = true;
            }
        }
    }
    if (!done) {
        WaitTiming timing;
        outcome = block_until(AdaptiveHybridStrategy{options.spin_for, ctx.history->budget(options.spin_for, options.spin_max),
                                                     ctx.history->expects_long(options.spin_for)},
                              ctx, ready, &timing);
        if (start == Deadline{}) start = timing.first_read;
    }
    // A wait over before its loop read the clock lasted under kSpinStepsPerClockRead spin steps (a
    // few us): it is recorded as zero, at most ~4 us off, which no budget (>= spin_for) or lead
    // (>= kMinLead) can tell apart. It ended ready: a timeout is only seen at a clock read, and a
    // cancelled wait is not recorded.
    std::chrono::nanoseconds waited{0};
    bool cut_by_signal = false;
    if (start != Deadline{}) {
        const Deadline end = Clock::now();
        waited = end - start;
        // A wait a signal cut short (timed out before its deadline: only end_on_signal does that)
        // says nothing about how long waits last.
        cut_by_signal = outcome == WaitOutcome::timed_out && ctx.end_on_signal && end < ctx.deadline;
    }
    if (outcome != WaitOutcome::cancelled && !cut_by_signal) ctx.history->record(waited, options.spin_max);
    if (!done && outcome == WaitOutcome::ready) ctx.history->event_came();  // predictions resume
    return outcome;
}

}  // namespace ringcast
