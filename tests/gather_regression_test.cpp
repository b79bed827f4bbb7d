// Regression tests for reproduced gather-group bugs. Every worker is a forked process; every wait is
// bounded (collect/reply timeouts, pipe handshakes with poll timeouts, wait_child limits) so a bug
// shows up as a failed assertion, never as a hang. No threads in the test process: children are
// forked from a single-threaded parent.
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ringcast/gather.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast {
// gtest prints a Status by name ("timed out"), not as "1-byte object <01>".
[[maybe_unused]] static void PrintTo(Status s, std::ostream* os) { *os << to_string(s); }
}  // namespace ringcast

namespace ringcast::test {
namespace {

constexpr GatherWait kMethods[] = {GatherWait::doorbell, GatherWait::futex_waitv};

const char* method_name(GatherWait m) { return m == GatherWait::doorbell ? "doorbell" : "futex_waitv"; }

// Children report through exit codes and pipes, never through gtest assertions (a child would
// inherit failures the parent recorded before the fork). die() leaves the child with a message.
[[noreturn]] void die(int code, const std::string& why) {
    std::fprintf(stderr, "child %d: %s\n", ::getpid(), why.c_str());
    std::fflush(nullptr);
    ::_exit(code);
}

pid_t fork_worker(const std::function<void()>& fn) { return fork_child(fn, /*count_gtest_failures=*/false); }

using Children = ChildGuard;  // kills and reaps the children still running when a test leaves early

// Removes the group's names even if the process that owned them died before its destructor ran.
struct GroupNames {
    std::string name;
    std::uint32_t ranks;
    ~GroupNames() {
        for (std::uint32_t r = 0; r < ranks; ++r) {
            try {
                Segment::remove(gather_ring_name(name, r));
            } catch (...) {
            }
        }
        ::shm_unlink(("/" + gather_bell_name(name)).c_str());
    }
};

std::vector<std::byte> pattern(std::uint64_t seq, std::size_t n) {
    std::vector<std::byte> v(n);
    fill_message(v, seq);
    return v;
}

// ---- Bug 1 ----------------------------------------------------------------------------------------
// Pins: with the doorbell, a reply larger than the reply ring never rings the bell. reply() rings only
// after Writer::write() returns, but a fragmented reply fills the 64 KiB ring first and the worker
// sleeps for space while the collector sleeps on the bell until its liveness tick (10 s here). The
// futex_waitv run is the control: its collector sleeps on the ring itself and sees every fragment.
void fragmented_reply_once(GatherWait method, std::size_t reply_size) {
    ScopedName name("greg-frag");
    GroupNames names{name.str(), 1};
    GatherOptions o;
    o.ranks = 1;
    o.capacity = 64 * 1024;
    o.method = method;
    o.wait.kind = WaitKind::futex;  // the collector goes straight to sleep
    o.liveness_interval = 10s;      // longer than the collect timeout: only a wake can save it
    auto c = GatherCollector::create(name, o);
    Children kids;
    const std::uint64_t seq = 4242 + reply_size;
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t worker = kids.add(fork_worker([&] {
        auto w = GatherWorker::attach(name, 0);
        const auto bytes = pattern(seq, reply_size);
        const Status s = w.reply(1, bytes, 8s);
        if (s != Status::ok) die(10 + static_cast<int>(s), std::string("reply: ") + to_string(s));
    }));
    const GatherResult res = c.collect_all(1, 5s);
    const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (res.status != Status::ok) kids.kill_and_wait(worker);  // it is stuck waiting for space
    ASSERT_EQ(res.status, Status::ok)
        << "collect of a " << reply_size << "-byte reply through a 64 KiB ring: " << res.describe() << " after "
        << elapsed << " s (" << method_name(method) << ": the fragmented reply never woke the collector)";
    ASSERT_TRUE(res.replies[0].has_value());
    EXPECT_EQ(check_message(*res.replies[0], seq, reply_size), "");
    EXPECT_LT(elapsed, 2.0) << "the collector slept through the reply's fragments (" << method_name(method) << ")";
    EXPECT_EQ(kids.wait(worker, 10s), 0) << "worker exit code";
}

void fragmented_reply_wakes_the_collector(std::size_t reply_size) {
    for (const GatherWait method : kMethods) {  // an ASSERT failure of one method still runs the other
        SCOPED_TRACE(std::string("method ") + method_name(method) + ", reply of " + std::to_string(reply_size) + " bytes");
        fragmented_reply_once(method, reply_size);
    }
}

TEST(GatherRegression, FragmentedReply300KiBWakesTheCollector) { fragmented_reply_wakes_the_collector(300 * 1024); }

TEST(GatherRegression, FragmentedReply2MiBWakesTheCollector) { fragmented_reply_wakes_the_collector(2 * 1024 * 1024); }

// ---- Bug 2 ----------------------------------------------------------------------------------------
// Pins: a stale reply loses the good replies drained before it. collect() drains ranks in order 0..N-1,
// so with rank 0's tag-7 reply and rank 1's stale tag-6 reply both in their rings, collect(7) stores and
// releases rank 0's reply, then throws for rank 1 — and the next collect(7) used to wait for rank 0.
void stale_reply_once(GatherWait method) {
    ScopedName name("greg-stale");
    GroupNames names{name.str(), 2};
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    o.method = method;
    o.liveness_interval = 10s;
    auto c = GatherCollector::create(name, o);
    const auto a = pattern(7000, 100);  // rank 0, tag 7
    const auto b = pattern(7001, 200);  // rank 1, tag 7 (after the stale one)
    Pipe from0, from1, to0, to1;
    Children kids;
    const pid_t w0 = kids.add(fork_worker([&] {
        auto w = GatherWorker::attach(name, 0);
        const Status s = w.reply(7, a, 2s);
        from0.send(static_cast<char>(s));
        if (to0.recv(15s) != 'x') die(3, "no exit signal");
    }));
    const pid_t w1 = kids.add(fork_worker([&] {
        auto w = GatherWorker::attach(name, 1);
        Status s = w.reply(6, pattern(6001, 50), 2s);  // stale: an answer to the previous request
        from1.send(static_cast<char>(s));
        if (to1.recv(15s) != 'n') die(3, "no go for the second reply");
        s = w.reply(7, b, 2s);
        from1.send(static_cast<char>(s));
        if (to1.recv(15s) != 'x') die(3, "no exit signal");
    }));
    // Both replies are published before the first collect.
    ASSERT_EQ(from0.recv(5s), static_cast<int>(Status::ok)) << "rank 0's reply(7) did not complete";
    ASSERT_EQ(from1.recv(5s), static_cast<int>(Status::ok)) << "rank 1's reply(6) did not complete";
    try {
        const GatherResult r = c.collect_all(7, 2s);
        FAIL() << "rank 1's reply tagged 6 was not refused for request 7: " << r.describe();
    } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::stale_reply) << e.what();
        const std::string what = e.what();
        EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
        EXPECT_NE(what.find("tag 6"), std::string::npos) << what;
        EXPECT_NE(what.find("tag 7"), std::string::npos) << what;
    }
    to1.send('n');
    ASSERT_EQ(from1.recv(5s), static_cast<int>(Status::ok)) << "rank 1's reply(7) did not complete";
    const GatherResult res = c.collect_all(7, 2s);
    ASSERT_EQ(res.status, Status::ok)
        << "collect(7) after the stale reply: " << res.describe()
        << " (rank 0's tag-7 reply, drained by the collect that threw, was lost)";
    ASSERT_TRUE(res.replies[0].has_value());
    ASSERT_TRUE(res.replies[1].has_value());
    EXPECT_EQ(check_message(*res.replies[0], 7000, 100), "") << "rank 0";
    EXPECT_EQ(check_message(*res.replies[1], 7001, 200), "") << "rank 1";
    to0.send('x');
    to1.send('x');
    EXPECT_EQ(kids.wait(w0, 10s), 0);
    EXPECT_EQ(kids.wait(w1, 10s), 0);
}

TEST(GatherRegression, StaleReplyKeepsTheGoodRepliesAlreadyDrained) {
    for (const GatherWait method : kMethods) {
        SCOPED_TRACE(std::string("method ") + method_name(method));
        stale_reply_once(method);
    }
}

// Pins: a collect that does not finish keeps the replies it took. A caller collecting in slices (the
// Python binding waits in 50 ms slices) got rank 1's reply in a timed-out slice, then a stale reply
// from rank 0 threw; the next collect of the tag waited for rank 1's reply that had already come.
TEST(GatherRegression, RepliesTakenBySlicesSurviveAStaleReply) {
    for (const GatherWait method : kMethods) {
        SCOPED_TRACE(std::string("method ") + method_name(method));
        ScopedName name("greg-slices");
        GatherOptions o;
        o.ranks = 2;
        o.method = method;
        auto c = GatherCollector::create(name, o);
        auto w0 = GatherWorker::attach(name, 0);
        auto w1 = GatherWorker::attach(name, 1);
        const auto a = pattern(1, 100), b = pattern(2, 200);
        ASSERT_EQ(w1.reply(42, b, 1s), Status::ok);
        const GatherResult first = c.collect_all(42, 20ms);  // slice 1: rank 1's reply, rank 0 missing
        ASSERT_EQ(first.status, Status::timed_out);
        ASSERT_TRUE(first.replies[1].has_value());
        ASSERT_EQ(w0.reply(41, pattern(3, 10), 1s), Status::ok);  // stale
        const std::uint32_t only0[] = {0};
        try {
            (void)c.collect(42, only0, 1s);  // slice 2: the stale reply
            FAIL() << "no stale_reply";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::stale_reply) << e.what();
        }
        ASSERT_EQ(w0.reply(42, a, 1s), Status::ok);
        const GatherResult r = c.collect_all(42, 1s);
        ASSERT_EQ(r.status, Status::ok) << r.describe();
        EXPECT_EQ(*r.replies[0], a);
        EXPECT_EQ(*r.replies[1], b) << "rank 1's reply, taken by the timed-out slice, was lost";
    }
}

// ---- Bug 3 ----------------------------------------------------------------------------------------
// Pins: a collector that exits cleanly wedges its workers. Its Readers detach keeping their heads, so
// the worker's ring (64 KiB) fills after ~one 60 KiB reply and every further reply waits for space
// that never comes (the liveness check skips a cleanly detached rank). Policy: a clean exit releases it.
void clean_exit_once(GatherWait method) {
    ScopedName name("greg-exit");
    GroupNames names{name.str(), 1};
    Pipe created, attached, go, results;
    Children kids;
    const pid_t collector = kids.add(fork_worker([&] {
        GatherOptions o;
        o.ranks = 1;
        o.capacity = 64 * 1024;
        o.method = method;
        {
            auto c = GatherCollector::create(name, o);
            created.send('c');
            if (attached.recv(10s) != 'a') die(3, "the worker did not attach");
        }  // destroyed cleanly without collecting anything
    }));
    const pid_t worker = kids.add(fork_worker([&] {
        if (created.recv(10s) != 'c') die(3, "the collector did not create the group");
        auto w = GatherWorker::attach(name, 0);
        attached.send('a');
        if (go.recv(15s) != 'g') die(3, "no go");
        const auto bytes = pattern(99, 60 * 1024);
        for (int i = 0; i < 4; ++i) {
            const Status s = w.reply(static_cast<std::uint64_t>(i + 1), bytes, 3s);
            results.send(static_cast<char>(s));
            if (s == Status::timed_out) return;  // wedged: report once, do not wait 3 s more per reply
        }
    }));
    ASSERT_EQ(kids.wait(collector, 15s), 0) << "the collector process did not exit cleanly";
    go.send('g');
    for (int i = 0; i < 4; ++i) {
        const int s = results.recv(8s);
        ASSERT_NE(s, -1) << "reply " << i + 1 << " of 60 KiB hung past its 3 s timeout";
        const auto status = static_cast<Status>(s);
        EXPECT_TRUE(status == Status::ok || status == Status::closed)
            << "reply " << i + 1 << " of 4 x 60 KiB (64 KiB ring, 3 s timeout): " << to_string(status)
            << (status == Status::timed_out ? " -- the collector exited cleanly but its rank still holds the worker"
                                            : "");
        if (status == Status::timed_out) break;
    }
    EXPECT_EQ(kids.wait(worker, 10s), 0) << "worker exit code";
}

TEST(GatherRegression, CleanCollectorExitDoesNotWedgeWorkers) {
    for (const GatherWait method : kMethods) {
        SCOPED_TRACE(std::string("method ") + method_name(method));
        clean_exit_once(method);
    }
}

// ---- Doorbell rings per rank ----------------------------------------------------------------------
// Pins: each rank's reply rings the doorbell while the collector sleeps on it (rings counted per
// group). The collector sleeps (WaitKind::futex, liveness 10 s) before rank 0 replies, and again,
// waiting for rank 1 only, before rank 1 replies: only a ring from each reply can finish the collect.
TEST(GatherRegression, DoorbellRingsForEachRankThatReplies) {
    ScopedName name("greg-bell");
    GroupNames names{name.str(), 2};
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    o.method = GatherWait::doorbell;
    o.wait.kind = WaitKind::futex;
    o.liveness_interval = 10s;
    auto c = GatherCollector::create(name, o);
    auto bell = DoorbellMapping::open(gather_bell_name(name), 2);
    Pipe to0, to1;
    Children kids;
    std::vector<pid_t> workers;
    for (std::uint32_t r = 0; r < 2; ++r) {
        const Pipe& exit_pipe = r == 0 ? to0 : to1;
        workers.push_back(kids.add(fork_worker([&, r] {
            auto w = GatherWorker::attach(name, r);
            // Rank r replies once the collector has gone to sleep r+1 times: asleep on the bell.
            const auto& line = bell.line();
            const auto end = std::chrono::steady_clock::now() + 5s;
            while (line.waits.load(std::memory_order_acquire) < r + 1) {
                if (std::chrono::steady_clock::now() > end)
                    die(4, "rank " + std::to_string(r) + ": the collector never slept " + std::to_string(r + 1) + " times");
                ::usleep(200);
            }
            ::usleep(2000);  // let it reach futex_wait (the ring must work either way)
            const Status s = w.reply(1, pattern(100 + r, 64), 2s);
            if (s != Status::ok) die(10 + static_cast<int>(s), std::string("reply: ") + to_string(s));
            if (w.bell_rings() < r + 1) die(5, "rank " + std::to_string(r) + ": bell_rings " + std::to_string(w.bell_rings()));
            if (exit_pipe.recv(15s) != 'x') die(3, "no exit signal");  // stay open: no close() wake-ups
        })));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const GatherResult res = c.collect_all(1, 5s);
    const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    to0.send('x');
    to1.send('x');
    ASSERT_EQ(res.status, Status::ok) << res.describe() << " after " << elapsed << " s; bell rings "
                                      << bell.line().rings.load() << ", collector waits " << bell.line().waits.load();
    for (std::uint32_t r = 0; r < 2; ++r) {
        ASSERT_TRUE(res.replies[r].has_value()) << "rank " << r;
        EXPECT_EQ(check_message(*res.replies[r], 100 + r, 64), "") << "rank " << r;
    }
    EXPECT_LT(elapsed, 2.0);
    EXPECT_GE(c.kernel_waits(), 2u);
    for (pid_t p : workers) EXPECT_EQ(kids.wait(p, 10s), 0) << "worker exit code";
    // Read after the workers exited: a worker counts its ring after the futex_wake, which may let the
    // collect return first.
    EXPECT_EQ(bell.line().rings.load(), 2u) << "one ring per rank that replied to a sleeping collector";
}

// Pins: the adaptive spin of a collector learns how long a whole collect waits. Each collect here
// waits ~20 ms for the first reply and then ~0.2 ms for the second. Recording every wait of a collect
// (the bug) settles the predictor near (3 x 20 + 4 x 0.2) / 7 ms ~ 0.43 of a collect: the next step's
// first wait outlasts the spin and sleeps, so every all-rank step pays a wake-up (the executor
// showdown's all-rank sync step cost 1.4x its single-rank one). One sample per collect: ~1.0.
TEST(GatherRegression, AdaptiveSpinLearnsTheWholeCollectNotEachOfItsWaits) {
    ScopedName name("greg-hist");
    GroupNames names{name.str(), 2};
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    o.wait.kind = WaitKind::hybrid;
    o.wait.spin_for = 10us;
    o.wait.spin_max = 50ms;  // adaptive; large enough that no sample here is capped
    auto c = GatherCollector::create(name, o);
    constexpr int kSteps = 12;
    Pipe go;
    Children kids;
    const pid_t worker = kids.add(fork_worker([&] {
        auto w0 = GatherWorker::attach(name, 0);
        auto w1 = GatherWorker::attach(name, 1);
        const auto bytes = pattern(7, 64);
        for (int step = 1; step <= kSteps; ++step) {
            if (go.recv(10s) < 0) die(2, "no go");
            ::usleep(20'000);
            if (w0.reply(step, bytes, 5s) != Status::ok) die(3, "reply 0");
            ::usleep(200);
            if (w1.reply(step, bytes, 5s) != Status::ok) die(4, "reply 1");
        }
    }));
    std::vector<double> collect_ns;
    for (int step = 1; step <= kSteps; ++step) {
        go.send('g');
        const auto t0 = std::chrono::steady_clock::now();
        const GatherResult res = c.collect_all(static_cast<std::uint64_t>(step), 10s);
        collect_ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
        ASSERT_EQ(res.status, Status::ok) << res.describe();
    }
    EXPECT_EQ(kids.wait(worker, 10s), 0);
    // The moving average (weight 1/4) follows the last few collects: compare with their mean. One
    // sample per collect gives ~1.0 of it, per-wait samples ~0.43; 0.7 leaves room for noise.
    const double recent = (collect_ns[kSteps - 1] + collect_ns[kSteps - 2] + collect_ns[kSteps - 3] + collect_ns[kSteps - 4]) / 4;
    EXPECT_GE(static_cast<double>(c.typical_collect_wait().count()), 0.7 * recent)
        << "typical " << c.typical_collect_wait().count() / 1000 << " us, the last collects took "
        << recent / 1000 << " us on average: the predictor learned the short waits inside a collect";
}

}  // namespace
}  // namespace ringcast::test
