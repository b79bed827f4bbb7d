// Liveness across calls: a peer's death is noticed within two liveness intervals whatever timeouts the
// survivor polls with — zero, a fifth of the interval, or the interval — on every blocking path
// (reader, writer, gather collector, gather worker). The check is counted per endpoint across calls
// (wait.hpp WaitContext::last_check): executors poll with short timeouts to stay responsive, and a
// check that only ran inside one wait longer than the interval never ran for them.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "fault/fault_util.hpp"
#include "ringcast/gather.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

constexpr auto kInterval = std::chrono::milliseconds(200);
// The bound of the guarantee, measured from the moment the victim is reaped (certainly dead).
constexpr auto kBound = 2 * kInterval;

struct Pattern {
    const char* name;
    std::chrono::nanoseconds timeout;
};
const Pattern kPatterns[] = {{"zero", 0ns}, {"interval/5", kInterval / 5}, {"interval", kInterval}};

// A child that does `setup`, raises `ready`, then sleeps until killed.
pid_t park_child(std::atomic<int>& ready, const std::function<void()>& setup) {
    return fork_child(
        [&] {
            setup();
            ready.store(1);
            for (;;) ::pause();
        },
        /*count_gtest_failures=*/false);
}



// Calls `poll` (one call with the pattern's timeout; returns normally when nothing happened) until it
// throws; checks it threw peer_dead within kBound of `dead_at`.
template <class Poll>
void expect_peer_dead_within_bound(const char* what, const Pattern& p, Clock::time_point dead_at, Poll&& poll) {
    const auto give_up = dead_at + 10 * kBound;
    for (;;) {
        try {
            poll(p.timeout);
        } catch (const Error& e) {
            const auto after = Clock::now() - dead_at;
            EXPECT_EQ(e.code(), ErrorCode::peer_dead) << what << " / " << p.name << ": " << e.what();
            EXPECT_LE(after, kBound) << what << " polling with timeout " << p.name << " learned of the death after "
                                     << std::chrono::duration<double, std::milli>(after).count() << " ms";
            return;
        }
        if (Clock::now() > give_up) {
            ADD_FAILURE() << what << " polling with timeout " << p.name << " never learned that its peer died";
            return;
        }
    }
}

TEST(LivenessAcrossCalls, ReaderPollingLearnsTheWriterDied) {
    for (const Pattern& p : kPatterns) {
        ScopedName name("live-r");
        { auto seg = Segment::create(name, SegmentOptions{.readers = 1}); }
        ReaderOptions ro;
        ro.liveness_interval = kInterval;
        auto r = Reader::attach(name, 0, ro);
        SharedBlock<std::atomic<int>> ready;
        ChildGuard kids;
        const pid_t writer = kids.add(park_child(*ready, [&] {
            WriterOptions wo;
            wo.unlink_on_destroy = false;
            static std::optional<Writer> w;  // lives until the kill
            w.emplace(Writer::open(name, wo));
        }));
        ASSERT_TRUE(wait_until([&] { return ready->load() != 0; }, 5000ms)) << "the writer child never opened the queue";
        for (int i = 0; i < 3; ++i) ASSERT_EQ(r.peek(p.timeout).status, Status::timed_out);  // polling before the death
        kids.kill_and_wait(writer);
        expect_peer_dead_within_bound("reader", p, Clock::now(), [&](std::chrono::nanoseconds t) {
            ASSERT_EQ(r.peek(t).status, Status::timed_out);
        });
    }
}

// A writer that published and then died left its message to be read: the liveness check (which a
// wait runs between its looks, so the publish may land after the last look) reports the death only
// once nothing it published is left — killed after the whole publish, and after the stamp but before
// the tail's exchange (a record whole by its stamp alone). A gather's collect runs the same check on a
// worker's reply ring: a worker that replied and died answered.
TEST(LivenessAcrossCalls, AWriterThatPublishedThenDiedIsReadBeforeItIsReportedDead) {
    for (const detail::CrashPoint killed_after : {detail::CrashPoint::none, detail::CrashPoint::publish_2_stamped}) {
        SCOPED_TRACE(killed_after == detail::CrashPoint::none ? "killed after the publish" : "killed after the stamp");
        ScopedName name("live-pd");
        { auto seg = Segment::create(name, SegmentOptions{.readers = 1}); }
        ReaderOptions ro;
        ro.liveness_interval = kInterval;
        auto r = Reader::attach(name, 0, ro);
        const std::vector<std::byte> msg(100, std::byte{0x5a});
        const pid_t writer = fork_child(
            [&] {
                WriterOptions wo;
                wo.unlink_on_destroy = false;
                auto w = Writer::open(name, wo);
                if (killed_after != detail::CrashPoint::none) detail::arm_crash_point(killed_after, 1);
                if (w.write(msg, 1s, 9) != Status::ok) ::_exit(2);
                ::raise(SIGKILL);  // dies with the queue open
            },
            /*count_gtest_failures=*/false);
        ASSERT_EQ(wait_child(writer, 30s), -SIGKILL) << "the writer child did not die where it was meant to";
        EXPECT_NO_THROW(r.check_liveness()) << "its message is in the ring";
        const Message m = r.peek(0ns);
        ASSERT_EQ(m.status, Status::ok);
        EXPECT_EQ(m.tag, 9u);
        EXPECT_TRUE(std::equal(m.bytes.begin(), m.bytes.end(), msg.begin(), msg.end()));
        r.release();
        try {
            r.check_liveness();
            ADD_FAILURE() << "the ring is empty now and its writer dead: the next wait would hang";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
        }
        expect_peer_dead_within_bound("reader after the last message", kPatterns[0], Clock::now(),
                                      [&](std::chrono::nanoseconds t) { ASSERT_EQ(r.peek(t).status, Status::timed_out); });
    }
}

TEST(LivenessAcrossCalls, WriterPollingLearnsTheLaggingReaderDied) {
    for (const Pattern& p : kPatterns) {
        ScopedName name("live-w");
        WriterOptions wo;
        wo.liveness_interval = kInterval;
        auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16}, wo);
        SharedBlock<std::atomic<int>> ready;
        ChildGuard kids;
        const pid_t reader = kids.add(park_child(*ready, [&] {
            static std::optional<Reader> r;
            r.emplace(Reader::attach(name, 0));
        }));
        ASSERT_TRUE(wait_until([&] { return ready->load() != 0; }, 5000ms)) << "the reader child never attached";
        std::vector<std::byte> msg(4000);
        while (w.write(msg, 0ns) == Status::ok) {
        }
        kids.kill_and_wait(reader);
        expect_peer_dead_within_bound("writer", p, Clock::now(), [&](std::chrono::nanoseconds t) {
            ASSERT_EQ(w.write(msg, t), Status::timed_out);
        });
    }
}

TEST(LivenessAcrossCalls, GatherCollectorPollingLearnsAWorkerDied) {
    for (const Pattern& p : kPatterns) {
        ScopedName name("live-c");
        GatherOptions go;
        go.ranks = 1;
        go.liveness_interval = kInterval;
        auto c = GatherCollector::create(name, go);
        SharedBlock<std::atomic<int>> ready;
        ChildGuard kids;
        const pid_t worker = kids.add(park_child(*ready, [&] {
            static std::optional<GatherWorker> g;
            g.emplace(GatherWorker::attach(name, 0));
        }));
        ASSERT_TRUE(wait_until([&] { return ready->load() != 0; }, 5000ms)) << "the worker child never attached";
        kids.kill_and_wait(worker);
        expect_peer_dead_within_bound("collector", p, Clock::now(), [&](std::chrono::nanoseconds t) {
            ASSERT_EQ(c.collect_all(1, t).status, Status::timed_out);
        });
    }
}

TEST(LivenessAcrossCalls, GatherWorkerPollingLearnsTheCollectorDied) {
    for (const Pattern& p : kPatterns) {
        ScopedName name("live-g");
        SharedBlock<std::atomic<int>> ready;
        ChildGuard kids;
        const pid_t collector = kids.add(park_child(*ready, [&] {
            GatherOptions go;
            go.ranks = 1;
            go.capacity = 1 << 16;
            static std::optional<GatherCollector> c;
            c.emplace(GatherCollector::create(name, go));
        }));
        ASSERT_TRUE(wait_until([&] { return ready->load() != 0; }, 5000ms)) << "the collector child never created the group";
        WriterOptions wo;
        wo.liveness_interval = kInterval;
        auto g = GatherWorker::attach(name, 0, wo);
        std::vector<std::byte> msg(4000);
        while (g.reply(1, msg, 0ns) == Status::ok) {
        }
        kids.kill_and_wait(collector);  // killed: its destructor never removes the names
        Segment::remove(gather_ring_name(name, 0));
        Segment::remove(gather_bell_name(name));
        expect_peer_dead_within_bound("worker", p, Clock::now(), [&](std::chrono::nanoseconds t) {
            ASSERT_EQ(g.reply(1, msg, t), Status::timed_out);
        });
    }
}

// A killed collector leaves the group's names with its claim on every reply ring: a worker attaching
// afterwards is refused at attach (replies would only fill a ring nobody reads).
TEST(LivenessAcrossCalls, GatherWorkerAttachingAfterTheCollectorDiedIsRefused) {
    ScopedName name("live-ga");
    SharedBlock<std::atomic<int>> ready;
    ChildGuard kids;
    const pid_t collector = kids.add(park_child(*ready, [&] {
        GatherOptions go;
        go.ranks = 2;
        go.capacity = 1 << 16;
        static std::optional<GatherCollector> c;
        c.emplace(GatherCollector::create(name, go));
    }));
    ASSERT_TRUE(wait_until([&] { return ready->load() != 0; }, 5000ms)) << "the collector child never created the group";
    (void)GatherWorker::attach(name, 0, {});  // while it lives, attaching works
    kids.kill_and_wait(collector);
    try {
        (void)GatherWorker::attach(name, 1, {});
        ADD_FAILURE() << "a worker attached to a group whose collector is dead";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
        EXPECT_NE(std::string(e.what()).find("(pid " + std::to_string(collector) + ") is dead"), std::string::npos)
            << e.what();
    }
    for (std::uint32_t r = 0; r < 2; ++r) Segment::remove(gather_ring_name(name, r));
    Segment::remove(gather_bell_name(name));
}

}  // namespace
}  // namespace ringcast::test
