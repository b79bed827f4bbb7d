// Fault injection with real processes: SIGKILL a reader or the writer at randomized points (blocked,
// holding a peeked record, in the middle of a fragmented message, anywhere), SIGSTOP a peer. Every
// trial is hard-timed (a hung process fails the trial and is killed); every message a survivor
// receives is checked (sequence number + checksum, tests/test_util.hpp).
//
// Liveness intervals are short (50 ms) so that 200+ trials per case fit in seconds. The bound checked
// is the issue's: a survivor reports the death (or, evicting, goes on) within 2 x its liveness
// interval, counted from the later of the kill and the moment the survivor had nothing left to do
// (its last successful call returned) — before both, it could not know.
//
// RINGCAST_FAULT_TRIALS (default 200) and RINGCAST_FAULT_SEED (default: the clock; printed) repeat a run.
// The trial count scales, the classes never do: trials take the kill points in turn (rounded up to a
// whole number of rounds), the stop tests their cases in turn, so a run of 20 still has every one.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "fault_util.hpp"
#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

constexpr auto kInterval = 50ms;
constexpr std::int64_t kBoundNs = 2 * std::chrono::duration_cast<std::chrono::nanoseconds>(kInterval).count();

// A dead peer that was detected, but later than kBoundNs, is a timing miss ("late: ..."), not a wrong
// outcome: on a loaded 2-core machine under ThreadSanitizer one trial in hundreds is descheduled past
// the bound (one CI run: 135 ms, where 2,800 trials of these suites under the same build, two suites
// at a time, stayed below 70 ms). Such a trial is run once more at the same point, and only a second
// miss fails. A detection that is late every time still fails, and one that never comes is a HANG or
// a give-up, never "late".
constexpr std::string_view kLate = "late: ";
constexpr std::uint64_t kCapacity = 64 << 10;  // the smallest ring: max record 16 KiB, much is fragmented
constexpr auto kCallTimeout = 10s;            // no call of a trial may block longer (a hang → failure)
constexpr auto kChildLimit = std::chrono::seconds(8);  // hard limit per process of a trial

enum class Point : int { blocked, holding, mid_fragment, anywhere };
const char* point_name(Point p) {
    switch (p) {
        case Point::blocked: return "blocked";
        case Point::holding: return "holding a peeked record";
        case Point::mid_fragment: return "mid fragmented message";
        case Point::anywhere: return "anywhere";
    }
    return "?";
}

// Message sizes of a trial: log-uniform 0..64 KiB (a share of them fragmented through the 64 KiB ring),
// or, to kill inside a fragmented message, 40..200 KB (3..13 fragments each).
std::size_t trial_size(std::uint64_t seq, Point p) {
    if (p == Point::mid_fragment) return 40'000 + static_cast<std::size_t>(mix(seq ^ 0xabc) % 160'000);
    return message_size(seq);
}

// Where the random-time kills landed: the victim traces every named step it passes
// (include/ringcast/detail/crash_point.hpp) into shared memory; after the kill the last one is where
// the kill landed ("after step X, before the next named step").
struct Landings {
    int n[static_cast<int>(detail::CrashPoint::count_)]{};
    void add(std::uint32_t p) { ++n[p < static_cast<std::uint32_t>(detail::CrashPoint::count_) ? p : 0]; }
    std::string summary() const {
        std::string out;
        for (int i = 0; i < static_cast<int>(detail::CrashPoint::count_); ++i)
            if (n[i] != 0)
                out += std::string(out.empty() ? "" : ", ") +
                       (i == 0 ? "before any step" : detail::crash_point_name(static_cast<detail::CrashPoint>(i))) + " " +
                       std::to_string(n[i]);
        return out;
    }
};

struct Stats {
    std::vector<double> ms;
    void add(std::int64_t ns) { ms.push_back(double(ns) / 1e6); }
    std::string summary() {
        if (ms.empty()) return "no samples";
        std::sort(ms.begin(), ms.end());
        char buf[160];
        std::snprintf(buf, sizeof buf, "n=%zu p50=%.1f ms p99=%.1f ms max=%.1f ms", ms.size(), ms[ms.size() / 2],
                      ms[std::min(ms.size() - 1, ms.size() * 99 / 100)], ms.back());
        return buf;
    }
};

// Reads and checks every message until closed; records how far it got. Used by surviving readers.
struct ReaderReport {
    std::atomic<std::uint64_t> received{0};
    std::atomic<std::int64_t> last_ok_ns{0};
    std::atomic<std::int64_t> error_ns{0};
    std::atomic<int> result{0};  // 1 closed after draining, 2 peer_dead, <0 failure
    Text text;
};

void survive_and_check(std::string_view name, std::uint32_t rank, Point point, ReaderReport& rep,
                       const std::atomic<int>* hold_until = nullptr) {
    ReaderOptions ro;
    ro.liveness_interval = kInterval;
    auto r = Reader::attach(name, rank, ro);
    for (std::uint64_t seq = 0;; ++seq) {
        if (hold_until != nullptr)  // stop reading until told: keeps the writer blocked on space
            while (hold_until->load() == 0) ::usleep(500);
        Message m{};
        try {
            m = r.peek(kCallTimeout);
        } catch (const Error& e) {
            rep.error_ns = now_ns();
            rep.text.set(e.what());
            rep.result = e.code() == ErrorCode::peer_dead ? 2 : -1;
            return;
        }
        if (m.status == Status::closed) {
            rep.result = 1;
            return;
        }
        if (m.status != Status::ok) {
            rep.text.set(std::string("peek returned ") + to_string(m.status) + " at seq " + std::to_string(seq));
            rep.result = -2;
            return;
        }
        std::string err = check_message(m.bytes, seq, trial_size(seq, point));
        if (err.empty() && m.tag != seq) err = "tag " + std::to_string(m.tag) + " at seq " + std::to_string(seq);
        if (!err.empty()) {
            rep.text.set("CORRUPT/LOST message delivered: " + err);
            rep.result = -3;
            return;
        }
        r.release();
        rep.received = seq + 1;
        rep.last_ok_ns = now_ns();
    }
}

// ---- a reader dies ------------------------------------------------------------------------------

struct ReaderKillTrial {
    std::atomic<std::uint32_t> landed{0};  // the victim's last named step
    std::atomic<std::uint64_t> victim_released{0};
    std::atomic<int> victim_holding{0};
    std::atomic<int> go{0};
    std::atomic<std::int64_t> kill_ns{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::int64_t> last_ok_ns{0};
    std::atomic<std::int64_t> error_ns{0};
    std::atomic<std::int64_t> max_stall_ns{0};
    std::atomic<int> writer_result{0};  // 1 peer_dead thrown, 2 evicted and finished, <0 failure
    Text writer_text;
    std::atomic<int> victim_bad{0};
    Text victim_text;
    ReaderReport survivor;
};

constexpr std::uint64_t kBlockAfter = 20;  // Point::blocked: messages before the writer pauses

void reader_kill_writer(std::string_view name, Point point, bool evict, ReaderKillTrial& t) {
    WriterOptions wo;
    wo.liveness_interval = kInterval;
    wo.evict_dead_readers = evict;
    wo.unlink_on_destroy = false;
    auto w = Writer::open(name, wo);
    std::vector<std::byte> msg;
    std::uint64_t bytes_after_kill = 0;
    const std::int64_t give_up = now_ns() + 6'000'000'000;
    for (std::uint64_t seq = 0; now_ns() < give_up; ++seq) {
        if (point == Point::blocked && seq == kBlockAfter)
            while (t.go.load() == 0 && now_ns() < give_up) ::usleep(200);
        if (evict && bytes_after_kill > 3 * kCapacity) {  // the dead rank's head was passed: it was evicted
            const auto state = static_cast<std::uint32_t>(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state);
            if (state != static_cast<std::uint32_t>(layout::SlotState::evicted)) {
                t.writer_text.set("went past the dead rank but its slot is not evicted (state " + std::to_string(state) + ")");
                t.writer_result = -5;
            } else {
                t.writer_result = 2;
            }
            return;  // ~Writer closes: the survivor drains and sees closed
        }
        msg.resize(trial_size(seq, point));
        fill_message(msg, seq);
        const bool after_kill = t.kill_ns.load() != 0;
        const std::int64_t start = now_ns();
        Status s{};
        try {
            s = w.write(msg, kCallTimeout, seq);
        } catch (const Error& e) {
            t.error_ns = now_ns();
            t.writer_text.set(e.what());
            t.writer_result = e.code() == ErrorCode::peer_dead && !evict ? 1 : -2;
            return;
        }
        const std::int64_t end = now_ns();
        if (s != Status::ok) {
            t.writer_text.set(std::string("write returned ") + to_string(s) + " at seq " + std::to_string(seq));
            t.writer_result = -1;
            return;
        }
        t.published = seq + 1;
        t.last_ok_ns = end;
        if (const std::int64_t k = t.kill_ns.load(); k != 0) {
            const std::int64_t stall = end - std::max(start, k);
            if (stall > t.max_stall_ns.load()) t.max_stall_ns = stall;
        }
        if (after_kill) bytes_after_kill += msg.size() + 16;
    }
    t.writer_text.set("never noticed the dead reader in 6 s");
    t.writer_result = -4;
}

void reader_kill_victim(std::string_view name, Point point, std::uint64_t hold_at, ReaderKillTrial& t) {
    ReaderOptions ro;
    ro.liveness_interval = kInterval;
    auto r = Reader::attach(name, 0, ro);
    for (std::uint64_t seq = 0;; ++seq) {
        Message m{};
        try {
            m = r.peek(kCallTimeout);
        } catch (const Error& e) {
            t.victim_text.set(e.what());
            t.victim_bad = 1;
            return;
        }
        if (m.status != Status::ok) {
            t.victim_text.set(std::string("peek returned ") + to_string(m.status));
            t.victim_bad = 1;
            return;
        }
        if (std::string err = check_message(m.bytes, seq, trial_size(seq, point)); !err.empty()) {
            t.victim_text.set("CORRUPT message delivered: " + err);
            t.victim_bad = 1;
            return;
        }
        if (point == Point::holding && seq == hold_at) {
            t.victim_holding = 1;
            for (;;) ::pause();  // holds the peeked record until SIGKILL
        }
        r.release();
        t.victim_released = seq + 1;
    }
}


constexpr int kPoints = 4;
// Every point the same number of times: the trial count rounded up to whole rounds.
int trials_per_point_round() { return (fault_trials() + kPoints - 1) / kPoints * kPoints; }

// The kill suites' loop: trial i kills at point i % kPoints; a failure is reported with the seed (at
// most 5); a timing miss (kLate) is run once more at the same point and fails only if late again. The
// misses that passed when run again are printed after the suite's summary, by print_late.
template <class Trial>
std::vector<std::string> run_kill_trials(int trials, std::uint64_t seed, Trial&& trial) {
    std::vector<std::string> late_then_passed;
    int failures = 0;
    for (int i = 0; i < trials; ++i) {
        const Point point = static_cast<Point>(i % kPoints);
        std::string err = trial(point);
        if (err.rfind(kLate, 0) == 0) {
            std::string again = trial(point);
            if (again.empty()) late_then_passed.push_back(err);
            err = again.empty() ? std::string{} : err + "; run again: " + again;
        }
        if (!err.empty()) {
            ADD_FAILURE() << "trial " << i << " (RINGCAST_FAULT_SEED=" << seed << "): " << err;
            if (++failures >= 5) break;
        }
    }
    return late_then_passed;
}

void print_late(const std::vector<std::string>& late_then_passed) {
    for (const std::string& l : late_then_passed) std::printf("  a timing miss that passed when run again: %s\n", l.c_str());
}

std::string run_reader_kill_trial(Rng& rng, Point point, bool evict, Stats& stats, int counts[4], Landings& landings) {
    ScopedName name(evict ? "fk-rev" : "fk-r");
    auto seg = Segment::create(name, SegmentOptions{.readers = 2, .capacity = kCapacity});
    SharedBlock<ReaderKillTrial> t;
    counts[static_cast<int>(point)]++;
    const std::uint64_t hold_at = rng.below(30);
    const pid_t victim = spawn([&] {
        detail::trace_crash_points(&t->landed);
        reader_kill_victim(name, point, hold_at, *t);
    });
    const pid_t survivor = spawn([&] { survive_and_check(name, 1, point, t->survivor); });
    const pid_t writer = spawn([&] { reader_kill_writer(name, point, evict, *t); });

    // A rank that never attached holds the writer by design (a late reader misses nothing): kill the
    // victim only once it owns its rank.
    bool reached = wait_until([&] { return layout::unpack_owner(seg.reader_slot(0).owner.load()).pid == std::uint32_t(victim); }, 5000ms);
    switch (point) {
        case Point::blocked:  // victim caught up and asleep in peek: the writer paused after kBlockAfter
            reached = reached && wait_until([&] { return t->victim_released.load() == kBlockAfter; }, 5000ms);
            ::usleep(static_cast<useconds_t>(1000 + rng.below(9000)));
            break;
        case Point::holding:
            reached = reached && wait_until([&] { return t->victim_holding.load() != 0; }, 5000ms);
            ::usleep(static_cast<useconds_t>(rng.below(20000)));
            break;
        case Point::mid_fragment:
        case Point::anywhere: ::usleep(static_cast<useconds_t>(rng.below(30000))); break;
    }
    t->kill_ns = now_ns();
    ::kill(victim, SIGKILL);
    t->go = 1;
    const int victim_rc = wait_child(victim, kChildLimit);
    landings.add(t->landed.load());
    const int writer_rc = wait_child(writer, kChildLimit);
    const int survivor_rc = wait_child(survivor, kChildLimit);

    std::string where = std::string(" [point: ") + point_name(point) + ", evict " + (evict ? "on" : "off") + "]";
    if (!reached) return "the victim never reached its kill point" + where;
    if (t->victim_bad) return "victim saw: " + t->victim_text.str() + where;
    if (victim_rc != -SIGKILL) return "victim exited " + std::to_string(victim_rc) + " before the kill" + where;
    if (writer_rc == -1000 || survivor_rc == -1000)
        return std::string("HANG: ") + (writer_rc == -1000 ? "the writer" : "the surviving reader") +
               " was still running after 8 s (writer: " + t->writer_text.str() + "; reader: " + t->survivor.text.str() +
               ")" + where;
    if (writer_rc != 0 || survivor_rc != 0) return "a survivor crashed" + where;
    if (t->survivor.result != 1)
        return "surviving reader: " + t->survivor.text.str() + " (result " + std::to_string(t->survivor.result) + ")" + where;
    if (t->survivor.received != t->published)
        return "surviving reader got " + std::to_string(t->survivor.received) + " messages, writer published " +
               std::to_string(t->published) + where;
    if (!evict) {
        if (t->writer_result != 1) return "writer: " + t->writer_text.str() + where;
        const std::string what = t->writer_text.str();
        if (what.find("rank 0") == std::string::npos || what.find("pid " + std::to_string(victim)) == std::string::npos)
            return "the error does not name rank 0 / pid " + std::to_string(victim) + ": " + what + where;
        if (t->error_ns < t->kill_ns) return "the writer declared a live reader dead" + where;
        const std::int64_t latency = t->error_ns - std::max(t->kill_ns.load(), t->last_ok_ns.load());
        stats.add(latency);
        if (latency > kBoundNs)
            return std::string(kLate) + "the writer took " + std::to_string(latency / 1000000) + " ms (> 2 x liveness interval)" + where;
    } else {
        if (t->writer_result != 2) return "writer: " + t->writer_text.str() + where;
        stats.add(t->max_stall_ns);
        if (t->max_stall_ns > kBoundNs)
            return std::string(kLate) + "a write stalled " + std::to_string(t->max_stall_ns / 1000000) + " ms after the kill (> 2 x interval)" + where;
        try {
            (void)Reader::attach(name, 0);
            return "a reader could attach to the evicted rank" + where;
        } catch (const Error& e) {
            if (e.code() != ErrorCode::peer_dead) return std::string("attach to the evicted rank: ") + e.what() + where;
        }
    }
    return {};
}

void reader_kill_suite(bool evict) {
    const int trials = trials_per_point_round();
    const std::uint64_t seed = fault_seed();
    Rng rng{seed};
    Stats stats;
    int counts[4]{};
    Landings landings;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> late = run_kill_trials(
        trials, seed, [&](Point point) { return run_reader_kill_trial(rng, point, evict, stats, counts, landings); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("reader SIGKILL, evict %s: %d trials (blocked %d, holding %d, mid-fragment %d, anywhere %d) in %.1f s, "
                "seed %llu; %s: %s\n",
                evict ? "on" : "off", trials, counts[0], counts[1], counts[2], counts[3], secs,
                static_cast<unsigned long long>(seed), evict ? "longest write stall after the kill" : "detection",
                stats.summary().c_str());
    std::printf("  where the kills landed (last named step passed): %s\n", landings.summary().c_str());
    print_late(late);
}

TEST(ReaderKilled, WriterFailsNamingTheDeadRankWithinTwoIntervals) { reader_kill_suite(false); }
TEST(ReaderKilled, EvictingWriterGoesOnWithinTwoIntervals) { reader_kill_suite(true); }

// ---- the writer dies ----------------------------------------------------------------------------

struct WriterKillTrial {
    std::atomic<std::uint32_t> landed{0};  // the victim's last named step
    std::atomic<std::int64_t> kill_ns{0};
    std::atomic<int> release_readers{0};  // Point::blocked: rank 1 stops reading until the kill
    std::atomic<std::uint64_t> published{0};
    std::atomic<int> writer_idle{0};
    std::atomic<int> writer_bad{0};
    Text writer_text;
    ReaderReport readers[2];
};

void writer_kill_writer(std::string_view name, Point point, WriterKillTrial& t) {
    WriterOptions wo;
    wo.liveness_interval = kInterval;
    wo.unlink_on_destroy = false;
    auto w = Writer::open(name, wo);
    std::vector<std::byte> msg;
    for (std::uint64_t seq = 0;; ++seq) {
        if (point == Point::holding && seq == kBlockAfter) {  // "holding" for the writer: idle, readers asleep
            t.writer_idle = 1;
            for (;;) ::pause();
        }
        msg.resize(trial_size(seq, point));
        fill_message(msg, seq);
        Status s{};
        try {
            s = w.write(msg, kCallTimeout, seq);
        } catch (const Error& e) {
            t.writer_text.set(e.what());
            t.writer_bad = 1;
            for (;;) ::pause();
        }
        if (s != Status::ok) {
            t.writer_text.set(std::string("write returned ") + to_string(s));
            t.writer_bad = 1;
            for (;;) ::pause();
        }
        t.published = seq + 1;
    }
}

std::string run_writer_kill_trial(Rng& rng, Point point, Stats& stats, int counts[4], Landings& landings) {
    ScopedName name("fk-w");
    auto seg = Segment::create(name, SegmentOptions{.readers = 2, .capacity = kCapacity});
    SharedBlock<WriterKillTrial> t;
    // Points for the writer: blocked on space (rank 1 stops reading), idle between messages (readers
    // asleep on data), in the middle of a fragmented message, anywhere.
    counts[static_cast<int>(point)]++;
    if (point != Point::blocked) t->release_readers = 1;
    const pid_t r0 = spawn([&] { survive_and_check(name, 0, point, t->readers[0]); });
    const pid_t r1 = spawn([&] { survive_and_check(name, 1, point, t->readers[1], &t->release_readers); });
    const pid_t writer = spawn([&] {
        detail::trace_crash_points(&t->landed);
        writer_kill_writer(name, point, *t);
    });
    // Readers treat "no writer yet" as not a death: kill the writer only once it holds the segment.
    bool reached = wait_until([&] { return layout::unpack_owner(seg.header().writer_owner.load()).pid == std::uint32_t(writer); }, 5000ms);
    switch (point) {
        case Point::blocked:
            reached = reached && wait_until([&] { return seg.space_line().writer_sleeping.load() != 0; }, 5000ms);
            ::usleep(static_cast<useconds_t>(rng.below(10000)));
            break;
        case Point::holding:
            reached = reached && wait_until([&] { return t->writer_idle.load() != 0; }, 5000ms);
            ::usleep(static_cast<useconds_t>(rng.below(20000)));
            break;
        case Point::mid_fragment:
        case Point::anywhere: ::usleep(static_cast<useconds_t>(rng.below(30000))); break;
    }
    t->kill_ns = now_ns();
    ::kill(writer, SIGKILL);
    t->release_readers = 1;
    const int writer_rc = wait_child(writer, kChildLimit);
    landings.add(t->landed.load());
    const int rc0 = wait_child(r0, kChildLimit);
    const int rc1 = wait_child(r1, kChildLimit);

    const std::string where = std::string(" [point: ") + (point == Point::holding ? "idle" : point_name(point)) + "]";
    if (!reached) return "the writer never reached its kill point" + where;
    if (t->writer_bad) return "writer: " + t->writer_text.str() + where;
    if (writer_rc != -SIGKILL) return "writer exited " + std::to_string(writer_rc) + where;
    if (rc0 == -1000 || rc1 == -1000)
        return "HANG: reader " + std::string(rc0 == -1000 ? "0" : "1") + " was still running after 8 s (" +
               t->readers[rc0 == -1000 ? 0 : 1].text.str() + ")" + where;
    if (rc0 != 0 || rc1 != 0) return "a reader crashed" + where;
    const std::uint64_t published = t->published;
    for (int r = 0; r < 2; ++r) {
        auto& rep = t->readers[r];
        const std::string who = "reader " + std::to_string(r) + ": ";
        if (rep.result != 2) return who + "expected a peer_dead error, got: " + rep.text.str() + " (result " + std::to_string(rep.result) + ")" + where;
        if (rep.text.str().find("pid " + std::to_string(writer)) == std::string::npos)
            return who + "the error does not name the writer's pid: " + rep.text.str() + where;
        // Everything the writer saw published was delivered; at most the one message whose write had not
        // returned when the kill came may have been delivered too — never a torn one (checked above).
        if (rep.received < published || rep.received > published + 1)
            return who + "received " + std::to_string(rep.received) + ", writer published " + std::to_string(published) + where;
        if (rep.error_ns < t->kill_ns) return who + "declared a live writer dead" + where;
        const std::int64_t latency = rep.error_ns - std::max(t->kill_ns.load(), rep.last_ok_ns.load());
        stats.add(latency);
        if (latency > kBoundNs)
            return std::string(kLate) + who + "took " + std::to_string(latency / 1000000) + " ms (> 2 x liveness interval)" + where;
    }
    return {};
}

TEST(WriterKilled, ReadersFailWithinTwoIntervalsAndNeverSeeATornMessage) {
    const int trials = trials_per_point_round();
    const std::uint64_t seed = fault_seed();
    Rng rng{seed};
    Stats stats;
    int counts[4]{};
    Landings landings;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> late = run_kill_trials(
        trials, seed, [&](Point point) { return run_writer_kill_trial(rng, point, stats, counts, landings); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("writer SIGKILL: %d trials (blocked on space %d, idle %d, mid-fragment %d, anywhere %d) in %.1f s, seed %llu; "
                "reader detection %s\n",
                trials, counts[0], counts[1], counts[2], counts[3], secs, static_cast<unsigned long long>(seed),
                stats.summary().c_str());
    std::printf("  where the kills landed (last named step passed): %s\n", landings.summary().c_str());
    print_late(late);
}

// ---- a peer is stopped (alive but stuck): time out, never declare it dead -------------------------

constexpr auto kShortInterval = 20ms;
constexpr auto kStopTimeout = 100ms;  // 5 liveness checks see the stopped peer alive

bool stop_and_wait(pid_t pid) {
    ::kill(pid, SIGSTOP);
    int st = 0;
    return ::waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st);
}

// Cases, in turn: evicting writer or not x the reader stopped early (at message 0..49) or late
// (50..99, the ring wrapped); RINGCAST_FAULT_TRIALS / 4 trials, rounded to whole rounds, at least one.
constexpr int kStopCases = 4;
int stop_trials() { return std::max(kStopCases, fault_trials() / 4 / kStopCases * kStopCases); }

TEST(PeerStopped, WriterTimesOutOnAStoppedReaderAndDoesNotDeclareItDead) {
    const int trials = stop_trials();
    const std::uint64_t seed = fault_seed();
    Rng rng{seed};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < trials; ++i) {
        SCOPED_TRACE("trial " + std::to_string(i) + " RINGCAST_FAULT_SEED=" + std::to_string(seed));
        const bool evict = (i & 1) != 0;  // even an evicting writer must not evict a live process
        ScopedName name("fk-stop-r");
        WriterOptions wo;
        wo.liveness_interval = kShortInterval;
        wo.evict_dead_readers = evict;
        auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = kCapacity}, wo);
        const std::uint64_t total = 200;
        SharedBlock<ReaderReport> rep;
        const pid_t reader = fork_child([&] { survive_and_check(name, 0, Point::anywhere, *rep); });
        ASSERT_TRUE(wait_until([&] { return layout::unpack_owner(w.segment().reader_slot(0).owner.load()).pid == std::uint32_t(reader); }, 5000ms));
        const bool late = (i & 2) != 0;
        const std::uint64_t stop_at = (late ? 50 : 0) + rng.below(50);
        std::vector<std::byte> msg;
        bool timed_out_once = false;
        for (std::uint64_t seq = 0; seq < total; ++seq) {
            if (seq == stop_at) {
                ASSERT_TRUE(stop_and_wait(reader));
            }
            msg.resize(trial_size(seq, Point::anywhere));
            fill_message(msg, seq);
            for (;;) {
                const auto start = std::chrono::steady_clock::now();
                Status s{};
                ASSERT_NO_THROW(s = w.write(msg, seq >= stop_at && !timed_out_once ? kStopTimeout : kCallTimeout, seq))
                    << "a stopped reader was declared dead";
                if (s == Status::ok) break;
                ASSERT_EQ(s, Status::timed_out);
                ASSERT_FALSE(timed_out_once);
                EXPECT_GE(std::chrono::steady_clock::now() - start, kStopTimeout);
                EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state, layout::SlotState::attached);
                timed_out_once = true;
                ::kill(reader, SIGCONT);  // the same message is written again, now with room
            }
        }
        EXPECT_TRUE(timed_out_once) << "the writer never blocked on the stopped reader";
        if (!timed_out_once) ::kill(reader, SIGCONT);
        w.close();
        ASSERT_EQ(wait_child(reader, kChildLimit), 0);
        EXPECT_EQ(rep->result.load(), 1) << rep->text.str();
        EXPECT_EQ(rep->received.load(), total) << rep->text.str();
    }
    std::printf("reader SIGSTOP: %d trials in %.1f s\n", trials,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// Cases, in turn: the writer stopped in each quarter of its 100 messages (the first: before the ring
// filled; the last: possibly after it wrote everything and idles).
TEST(PeerStopped, ReaderTimesOutOnAStoppedWriterAndDoesNotDeclareItDead) {
    const int trials = stop_trials();
    const std::uint64_t seed = fault_seed();
    Rng rng{seed};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < trials; ++i) {
        SCOPED_TRACE("trial " + std::to_string(i) + " RINGCAST_FAULT_SEED=" + std::to_string(seed));
        ScopedName name("fk-stop-w");
        auto seg = Segment::create(name, SegmentOptions{.readers = 1, .capacity = kCapacity});
        ReaderOptions ro;
        ro.liveness_interval = kShortInterval;
        auto r = Reader::attach(name, 0, ro);
        const std::uint64_t total = 100;
        const std::uint64_t stop_after = (i % kStopCases) * (total / kStopCases) + rng.below(total / kStopCases);
        SharedBlock<std::atomic<std::uint64_t>> published;
        SharedBlock<std::atomic<int>> may_exit;
        const pid_t writer = fork_child([&] {
            WriterOptions wo;
            wo.unlink_on_destroy = false;
            auto w = Writer::open(name, wo);
            std::vector<std::byte> msg;
            for (std::uint64_t seq = 0; seq < total; ++seq) {
                msg.resize(trial_size(seq, Point::anywhere));
                fill_message(msg, seq);
                ASSERT_EQ(w.write(msg, kCallTimeout, seq), Status::ok);
                published->store(seq + 1);
            }
            while (may_exit->load() == 0) ::usleep(200);  // alive when stopped, even with all written
        });
        std::uint64_t seq = 0;
        std::vector<std::byte> buf;
        for (; seq < stop_after; ++seq) {  // the writer runs ahead by up to a ring's worth
            std::uint64_t tag = 0;
            ASSERT_EQ(r.read(buf, kCallTimeout, &tag), Status::ok);
            ASSERT_EQ(check_message(buf, seq, trial_size(seq, Point::anywhere)), "");
        }
        ASSERT_TRUE(stop_and_wait(writer));
        const std::uint64_t published_at_stop = published->load();
        // Drain what the stopped writer had published (a fragmented message may be half out: its
        // fragments wait in the reader's buffer, never delivered), then time out: no error.
        Status s{};
        auto start = std::chrono::steady_clock::now();
        for (;;) {
            start = std::chrono::steady_clock::now();
            ASSERT_NO_THROW(s = r.read(buf, kStopTimeout)) << "a stopped writer was declared dead";
            if (s != Status::ok) break;
            ASSERT_EQ(check_message(buf, seq, trial_size(seq, Point::anywhere)), "");
            ++seq;
        }
        EXPECT_GE(seq, published_at_stop);
        EXPECT_EQ(s, Status::timed_out);  // never closed: the writer closes only after SIGCONT
        EXPECT_GE(std::chrono::steady_clock::now() - start, kStopTimeout);
        ::kill(writer, SIGCONT);
        may_exit->store(1);
        for (; seq < total; ++seq) {
            std::uint64_t tag = 0;
            ASSERT_EQ(r.read(buf, kCallTimeout, &tag), Status::ok) << "seq " << seq;
            ASSERT_EQ(check_message(buf, seq, trial_size(seq, Point::anywhere)), "");
        }
        ASSERT_EQ(wait_child(writer, kChildLimit), 0);
        EXPECT_EQ(r.read(buf, kCallTimeout), Status::closed);
    }
    std::printf("writer SIGSTOP: %d trials in %.1f s\n", trials,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace
}  // namespace ringcast::test
