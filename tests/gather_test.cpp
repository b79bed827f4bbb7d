// The gather group: one wait for all replies, tags, timeouts, dead workers — both wait methods.
#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/gather.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

class Gather : public ::testing::TestWithParam<GatherWait> {
protected:
    GatherOptions options(std::uint32_t ranks, WaitKind kind = WaitKind::hybrid) const {
        GatherOptions o;
        o.ranks = ranks;
        o.capacity = 64 * 1024;
        o.method = GetParam();
        o.wait.kind = kind;
        o.liveness_interval = 50ms;
        return o;
    }
};

// Blocks (bounded, failing fast) until the collector of `group` announced its sleep (3a of wait.hpp):
// doorbell — its bit on the bell line; futex_waitv — its bit (reader rank 0) on the reply ring of
// `pending_rank`, one of the ranks it waits for.
void await_collector_sleep(const std::string& group, GatherWait method, std::uint32_t pending_rank) {
    std::function<bool()> announced;
    std::optional<DoorbellMapping> bell;
    std::optional<Segment> ring;
    if (method == GatherWait::doorbell) {
        bell.emplace(DoorbellMapping::open(group + ".bell", 0));
        announced = [&] { return bell->line().collector_sleeping.load() != 0; };
    } else {
        ring.emplace(Segment::open(group + ".r" + std::to_string(pending_rank)));
        announced = [&] { return (ring->reader_sleep_line().sleeping[0].load() & 1) != 0; };
    }
    ASSERT_TRUE(wait_until(announced, 10000ms)) << "the collector did not go to sleep within 10 s";
}

std::vector<std::byte> reply_bytes(std::uint32_t rank, std::uint64_t tag, std::size_t n = 24) {
    std::vector<std::byte> v(n);
    fill_message(v, tag * 1000 + rank);
    return v;
}

TEST_P(Gather, CollectsEveryRankInAnyOrderWithOneCall) {
    ScopedName name("g");
    auto c = GatherCollector::create(name, options(4, WaitKind::futex));
    std::vector<std::thread> workers;
    for (std::uint32_t r = 0; r < 4; ++r) {
        workers.emplace_back([&, r] {
            auto w = GatherWorker::attach(name, r);
            std::mt19937 rng(r);
            for (std::uint64_t tag = 1; tag <= 200; ++tag) {
                if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
                // Rank 2's replies are sometimes larger than the ring: fragmented replies work too.
                const std::size_t n = (r == 2 && tag % 50 == 0) ? 200'000 : 24 + r;
                EXPECT_EQ(w.reply(tag, reply_bytes(r, tag, n), 10s), Status::ok);
            }
        });
    }
    for (std::uint64_t tag = 1; tag <= 200; ++tag) {
        const GatherResult res = c.collect_all(tag, 10s);
        ASSERT_EQ(res.status, Status::ok) << res.describe();
        for (std::uint32_t r = 0; r < 4; ++r) {
            ASSERT_TRUE(res.replies[r].has_value());
            const std::size_t n = (r == 2 && tag % 50 == 0) ? 200'000 : 24 + r;
            ASSERT_EQ(check_message(*res.replies[r], tag * 1000 + r, n), "");
        }
    }
    for (auto& t : workers) t.join();
}

TEST_P(Gather, SingleRankRoutingLeavesOtherRanksAlone) {
    ScopedName name("g1");
    auto c = GatherCollector::create(name, options(3));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    ASSERT_EQ(w1.reply(7, reply_bytes(1, 7)), Status::ok);
    const std::uint32_t only[] = {1};
    const GatherResult res = c.collect(7, only, 1s);
    ASSERT_EQ(res.status, Status::ok);
    EXPECT_FALSE(res.replies[0].has_value());
    EXPECT_EQ(check_message(*res.replies[1], 7000 + 1, 24), "");
    EXPECT_FALSE(res.replies[2].has_value());
}

// has_ready: what a collect of the tag would take now — a record in an asked rank's ring, a reply an
// unfinished collect of the same tag keeps, a closed ring — and nothing else; it takes nothing.
TEST_P(Gather, HasReadySaysWhatACollectWouldTakeNow) {
    ScopedName name("gh");
    auto c = GatherCollector::create(name, options(3));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    auto w2 = GatherWorker::attach(name, 2);
    const std::uint32_t rank0[] = {0}, rank1[] = {1}, ranks01[] = {0, 1};
    EXPECT_FALSE(c.has_ready(5, {}));
    ASSERT_EQ(w1.reply(5, reply_bytes(1, 5)), Status::ok);
    EXPECT_TRUE(c.has_ready(5, {})) << "every rank asked: rank 1 has a record";
    EXPECT_TRUE(c.has_ready(5, rank1));
    EXPECT_FALSE(c.has_ready(5, rank0)) << "rank 0 has nothing";
    EXPECT_TRUE(c.has_ready(5, rank1)) << "it took nothing";
    // A collect that times out keeps rank 1's reply for the next collect of tag 5, not of another tag.
    EXPECT_EQ(c.collect(5, ranks01, 1ms).status, Status::timed_out);
    EXPECT_TRUE(c.has_ready(5, rank1)) << "kept for tag 5";
    EXPECT_FALSE(c.has_ready(6, rank1)) << "a collect of tag 6 drops it";
    EXPECT_FALSE(c.has_ready(5, rank0));
    w2.close();
    const std::uint32_t rank2[] = {2}, out_of_range[] = {7};
    EXPECT_TRUE(c.has_ready(5, rank2)) << "a closed ring: the collect reports it";
    EXPECT_TRUE(c.has_ready(5, out_of_range)) << "the collect reports the bad rank";
    const GatherResult res = c.collect(5, rank1, 0ns);
    ASSERT_EQ(res.status, Status::ok);
    EXPECT_EQ(check_message(*res.replies[1], 5000 + 1, 24), "");
}

TEST_P(Gather, StaleReplyIsAnErrorNamingRankAndBothTags) {
    ScopedName name("gs");
    auto c = GatherCollector::create(name, options(2));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    ASSERT_EQ(w0.reply(5, reply_bytes(0, 5)), Status::ok);  // a late answer to an old request
    ASSERT_EQ(w1.reply(6, reply_bytes(1, 6)), Status::ok);
    try {
        (void)c.collect_all(6, 1s);
        FAIL() << "a reply tagged 5 was accepted for request 6";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::stale_reply);
        const std::string what = e.what();
        EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
        EXPECT_NE(what.find("tag 5"), std::string::npos) << what;
        EXPECT_NE(what.find("tag 6"), std::string::npos) << what;
    }
    // The stale reply left its ring; rank 0 answers request 6 now and the collect completes.
    ASSERT_EQ(w0.reply(6, reply_bytes(0, 6)), Status::ok);
    const GatherResult res = c.collect_all(6, 1s);
    ASSERT_EQ(res.status, Status::ok) << res.describe();
    // It was kept for a collect of its own tag.
    const std::uint32_t rank0[] = {0};
    const GatherResult late = c.collect(5, rank0, 0ns);
    ASSERT_EQ(late.status, Status::ok) << late.describe();
    EXPECT_EQ(*late.replies[0], reply_bytes(0, 5));
}

// A worker that went on to a later request (a replacement that never got the earlier one): the collect
// of the earlier request finds its reply to the later one and says so, and the collect of the later
// request gets it — it was lost, and that collect waited for it forever.
TEST_P(Gather, AReplyToALaterRequestIsKeptForThatRequestsCollect) {
    ScopedName name("gl");
    auto c = GatherCollector::create(name, options(2));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    ASSERT_EQ(w0.reply(4, reply_bytes(0, 4)), Status::ok);
    ASSERT_EQ(w1.reply(5, reply_bytes(1, 5)), Status::ok);  // rank 1 never answered request 4
    ASSERT_EQ(w0.reply(5, reply_bytes(0, 5)), Status::ok);
    try {
        (void)c.collect_all(4, 1s);
        FAIL() << "rank 1's reply to request 5 was accepted for request 4";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::stale_reply);
        EXPECT_NE(std::string(e.what()).find("a collect of tag 5 returns it"), std::string::npos) << e.what();
    }
    const GatherResult res = c.collect_all(5, 0ns);
    ASSERT_EQ(res.status, Status::ok) << res.describe();
    EXPECT_EQ(*res.replies[0], reply_bytes(0, 5));
    EXPECT_EQ(*res.replies[1], reply_bytes(1, 5));
    // Kept a few a rank: the oldest goes first.
    for (std::uint64_t t = 10; t < 16; ++t) ASSERT_EQ(w1.reply(t, reply_bytes(1, t)), Status::ok);
    const std::uint32_t rank1[] = {1};
    for (int i = 0; i < 6; ++i) EXPECT_THROW((void)c.collect(9, rank1, 0ns), Error);
    EXPECT_EQ(c.collect(10, rank1, 0ns).status, Status::timed_out) << "the oldest of more than it keeps was dropped";
    for (std::uint64_t t = 12; t < 16; ++t) {
        const GatherResult r = c.collect(t, rank1, 0ns);
        ASSERT_EQ(r.status, Status::ok) << t << ": " << r.describe();
        EXPECT_EQ(*r.replies[1], reply_bytes(1, t));
    }
}

TEST_P(Gather, TimeoutNamesExactlyTheRanksThatDidNotAnswer) {
    ScopedName name("gt");
    auto c = GatherCollector::create(name, options(4));
    std::vector<GatherWorker> workers;
    for (std::uint32_t r = 0; r < 4; ++r) workers.push_back(GatherWorker::attach(name, r));
    ASSERT_EQ(workers[0].reply(1, reply_bytes(0, 1)), Status::ok);
    ASSERT_EQ(workers[2].reply(1, reply_bytes(2, 1)), Status::ok);
    const auto t0 = std::chrono::steady_clock::now();
    const GatherResult res = c.collect_all(1, 50ms);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
    EXPECT_EQ(res.status, Status::timed_out);
    EXPECT_EQ(res.missing, (std::vector<std::uint32_t>{1, 3}));
    EXPECT_NE(res.describe().find("ranks 1, 3"), std::string::npos) << res.describe();
    EXPECT_TRUE(res.replies[0].has_value());
    EXPECT_TRUE(res.replies[2].has_value());
}

// A collect finished in several calls, each asking only for what the last one missed (as the Python
// binding's sliced wait does): once it completes, the replies kept from its unfinished calls are
// not returned again — the next collect of the same tag (a tag reused every step) gets the new ones.
TEST_P(Gather, ACompletedCollectDropsTheRepliesItKeptForItsTag) {
    ScopedName name("gk");
    auto c = GatherCollector::create(name, options(2));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    const auto step_reply = [](std::uint32_t step, std::uint32_t rank) {
        std::vector<std::byte> v(24);
        fill_message(v, step * 100 + rank);
        return v;
    };
    constexpr std::uint64_t kTag = 7;
    for (std::uint32_t step = 1; step <= 3; ++step) {
        ASSERT_EQ(w0.reply(kTag, step_reply(step, 0)), Status::ok);
        GatherResult first = c.collect_all(kTag, 0ns);
        ASSERT_EQ(first.status, Status::timed_out) << "step " << step;
        ASSERT_EQ(first.missing, (std::vector<std::uint32_t>{1}));
        ASSERT_TRUE(first.replies[0].has_value());
        EXPECT_EQ(*first.replies[0], step_reply(step, 0)) << "step " << step << ": an earlier step's reply";
        ASSERT_EQ(w1.reply(kTag, step_reply(step, 1)), Status::ok);
        const GatherResult rest = c.collect(kTag, first.missing, 1s);
        ASSERT_EQ(rest.status, Status::ok) << rest.describe();
        EXPECT_FALSE(rest.replies[0].has_value()) << "not asked for";
        EXPECT_EQ(*rest.replies[1], step_reply(step, 1));
    }
    // Nothing is left for the tag: rank 0's last reply was handed over once, and its ring is empty.
    const std::uint32_t rank0[] = {0};
    EXPECT_FALSE(c.has_ready(kTag, rank0));
    EXPECT_EQ(c.collect(kTag, rank0, 0ns).status, Status::timed_out);
}

TEST_P(Gather, AWorkerThatDiedIsNamed) {
    ScopedName name("gd");
    auto c = GatherCollector::create(name, options(2));
    auto alive = GatherWorker::attach(name, 0);
    const pid_t doomed = fork_child([&] {
        auto w = GatherWorker::attach(name, 1);
        ::raise(SIGKILL);
    });
    ASSERT_EQ(wait_child(doomed, 30s), -SIGKILL);
    ASSERT_EQ(alive.reply(3, reply_bytes(0, 3)), Status::ok);
    try {
        (void)c.collect_all(3, 10s);
        FAIL() << "collect did not notice the dead worker";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::peer_dead);
        // In the executor's words: the worker's rank and pid, not the reply ring's "writer".
        EXPECT_NE(std::string(e.what()).find("worker rank 1 (pid " + std::to_string(doomed) + ") died"), std::string::npos)
            << e.what();
        EXPECT_EQ(std::string(e.what()).find("writer"), std::string::npos) << e.what();
    }
}

// A worker that published its reply and then died did answer: the dead-worker check (which a wait
// runs between its looks, and an event loop calls itself) leaves a rank whose ring holds a record to
// the next look, which takes the reply.
TEST_P(Gather, AWorkerThatRepliedBeforeItDiedIsNotReportedDead) {
    ScopedName name("gr");
    auto c = GatherCollector::create(name, options(1));
    const pid_t replied = fork_child([&] {
        auto w = GatherWorker::attach(name, 0);
        if (w.reply(6, reply_bytes(0, 6)) != Status::ok) ::_exit(2);
        ::raise(SIGKILL);  // dies with its ring open
    });
    ASSERT_EQ(wait_child(replied, 30s), -SIGKILL);
    const std::uint32_t rank0[] = {0};
    EXPECT_NO_THROW(c.check_liveness(6, rank0)) << "its reply is in the ring";
    const GatherResult res = c.collect(6, rank0, 0ns);
    ASSERT_EQ(res.status, Status::ok) << res.describe();
    EXPECT_EQ(*res.replies[0], reply_bytes(0, 6));
    EXPECT_THROW(c.check_liveness(7, rank0), Error) << "its ring is empty now: the next tag's wait would hang";
}

TEST_P(Gather, AWorkerThatClosedIsReportedAsClosed) {
    ScopedName name("gc");
    auto c = GatherCollector::create(name, options(2, WaitKind::futex));
    auto w0 = GatherWorker::attach(name, 0);
    std::atomic<std::int64_t> closed_at{0};
    std::thread t([&] {
        await_collector_sleep(name.str(), GetParam(), 1);  // the close below must wake a sleeper
        auto w1 = GatherWorker::attach(name, 1);
        closed_at = now_ns();
        w1.close();
    });
    ASSERT_EQ(w0.reply(4, reply_bytes(0, 4)), Status::ok);
    const GatherResult res = c.collect_all(4, 10s);
    const std::int64_t woke_after = now_ns() - closed_at.load();
    t.join();
    EXPECT_EQ(res.status, Status::closed);
    EXPECT_LT(woke_after, 500'000'000) << "the close's wake was lost (" << woke_after / 1'000'000 << " ms)";
    EXPECT_EQ(res.missing, (std::vector<std::uint32_t>{1}));
}

TEST_P(Gather, CancelWakesABlockedCollect) {
    ScopedName name("gx");
    auto c = GatherCollector::create(name, options(2, WaitKind::futex));
    std::atomic<std::int64_t> cancelled_at{0};
    std::thread t([&] {
        await_collector_sleep(name.str(), GetParam(), 0);
        cancelled_at = now_ns();
        c.cancel();
    });
    const GatherResult res = c.collect_all(1, 20s);
    const std::int64_t woke_after = now_ns() - cancelled_at.load();
    t.join();
    EXPECT_EQ(res.status, Status::cancelled);
    EXPECT_LT(woke_after, 500'000'000) << "the cancel's wake was lost (" << woke_after / 1'000'000 << " ms)";
}

// The early-reply hook: each reply taken while others are awaited is handed over once, between
// waits; the replies that end the collect are not, nor are replies kept from an earlier call; a
// reply the hook itself causes (published while it runs) is found by the next wait.
TEST_P(Gather, EarlyRepliesAreHandedOverOnceWhileOthersAreAwaited) {
    ScopedName name("ge");
    auto c = GatherCollector::create(name, options(3));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    auto w2 = GatherWorker::attach(name, 2);
    std::vector<std::uint32_t> handed;
    // Rank 0 first; its hand-over makes rank 1 answer, whose hand-over makes rank 2 answer: the
    // collect can only end if each early reply is handed over during the collect.
    ASSERT_EQ(w0.reply(1, reply_bytes(0, 1)), Status::ok);
    const GatherResult res = c.collect(1, {}, 2s, [&](std::uint32_t rank, std::span<const std::byte> reply) {
        handed.push_back(rank);
        EXPECT_EQ(check_message(reply, 1000 + rank, 24), "");
        if (rank == 0) {
            EXPECT_EQ(w1.reply(1, reply_bytes(1, 1)), Status::ok);
        } else if (rank == 1) {
            EXPECT_EQ(w2.reply(1, reply_bytes(2, 1)), Status::ok);
        }
    });
    ASSERT_EQ(res.status, Status::ok) << res.describe();
    EXPECT_EQ(handed, (std::vector<std::uint32_t>{0, 1}));  // not rank 2: its reply ended the collect
    for (std::uint32_t r = 0; r < 3; ++r) EXPECT_EQ(check_message(*res.replies[r], 1000 + r, 24), "");

    // A collect that times out keeps what it took; the retry gets it without a second hand-over.
    handed.clear();
    const auto note = [&](std::uint32_t rank, std::span<const std::byte>) { handed.push_back(rank); };
    ASSERT_EQ(w1.reply(2, reply_bytes(1, 2)), Status::ok);
    EXPECT_EQ(c.collect(2, {}, 20ms, note).status, Status::timed_out);
    EXPECT_EQ(handed, (std::vector<std::uint32_t>{1}));
    ASSERT_EQ(w0.reply(2, reply_bytes(0, 2)), Status::ok);
    EXPECT_EQ(c.collect(2, {}, 20ms, note).status, Status::timed_out);
    EXPECT_EQ(handed, (std::vector<std::uint32_t>{1, 0}));
    ASSERT_EQ(w2.reply(2, reply_bytes(2, 2)), Status::ok);
    const GatherResult second = c.collect(2, {}, 2s, note);
    ASSERT_EQ(second.status, Status::ok) << second.describe();
    EXPECT_EQ(handed, (std::vector<std::uint32_t>{1, 0}));
    for (std::uint32_t r = 0; r < 3; ++r) EXPECT_EQ(check_message(*second.replies[r], 2000 + r, 24), "");
}

TEST_P(Gather, WhatTheEarlyReplyHookThrowsEndsTheCollectAndKeepsTheReplies) {
    ScopedName name("gx");
    auto c = GatherCollector::create(name, options(2));
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    ASSERT_EQ(w0.reply(1, reply_bytes(0, 1)), Status::ok);
    EXPECT_THROW((void)c.collect(1, {}, 2s, [](std::uint32_t, std::span<const std::byte>) { throw std::runtime_error("stop"); }),
                 std::runtime_error);
    ASSERT_EQ(w1.reply(1, reply_bytes(1, 1)), Status::ok);
    const GatherResult res = c.collect_all(1, 2s);
    ASSERT_EQ(res.status, Status::ok) << res.describe();
    for (std::uint32_t r = 0; r < 2; ++r) EXPECT_EQ(check_message(*res.replies[r], 1000 + r, 24), "");
}

TEST_P(Gather, WorkersInOtherProcesses) {
    ScopedName name("gp");
    auto c = GatherCollector::create(name, options(3, WaitKind::hybrid));
    constexpr std::uint64_t kSteps = 2000;
    std::vector<pid_t> kids;
    for (std::uint32_t r = 0; r < 3; ++r) {
        kids.push_back(fork_child([&, r] {
            auto w = GatherWorker::attach(name, r);
            for (std::uint64_t tag = 1; tag <= kSteps; ++tag) ASSERT_EQ(w.reply(tag, reply_bytes(r, tag), 30s), Status::ok);
        }));
    }
    for (std::uint64_t tag = 1; tag <= kSteps; ++tag) {
        const GatherResult res = c.collect_all(tag, 30s);
        ASSERT_EQ(res.status, Status::ok) << "tag " << tag << ": " << res.describe();
        for (std::uint32_t r = 0; r < 3; ++r) ASSERT_EQ(check_message(*res.replies[r], tag * 1000 + r, 24), "");
    }
    for (pid_t k : kids) EXPECT_EQ(wait_child(k), 0);
}

INSTANTIATE_TEST_SUITE_P(Methods, Gather, ::testing::Values(GatherWait::doorbell, GatherWait::futex_waitv),
                         [](const auto& info) { return info.param == GatherWait::doorbell ? "doorbell" : "futex_waitv"; });

// A collector process creates the group `name` and is killed before it removes its names: its reply
// rings and its bell are left behind.
void create_in_a_killed_collector(std::string_view name, const GatherOptions& o) {
    ChildGuard kids;
    Pipe ready;
    const pid_t collector = kids.add(fork_child([&] {
        auto c = GatherCollector::create(name, o);
        ready.send('r');
        ::pause();
    }));
    ASSERT_EQ(ready.recv(10000ms), 'r');
    kids.kill_and_wait(collector);
}

// A collector killed before it removed its names leaves its rings and its bell; a collector made
// under the same name later reclaims both (the rings as any abandoned segment, the bell because every
// ring of the group is then its own) and serves its workers.
TEST(GatherDoorbell, AKilledCollectorsNameCanBeUsedAgain) {
    ScopedName name("gk");
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    ASSERT_NO_FATAL_FAILURE(create_in_a_killed_collector(name, o));
    ASSERT_TRUE(judge_bell(gather_bell_name(name)).has_value()) << "the killed collector's bell is left";
    auto c = GatherCollector::create(name, o);
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    ASSERT_EQ(w0.reply(7, reply_bytes(0, 7)), Status::ok);
    ASSERT_EQ(w1.reply(7, reply_bytes(1, 7)), Status::ok);
    EXPECT_EQ(c.collect_all(7, 5s).status, Status::ok);
}

// Under the bell's name, anything but a ringcast doorbell of this user keeps the name taken, saying
// so; the rings the failed create made are removed.
// A worker attaching to a gather that does not exist is told so in the gather's terms: the refusal named
// only "ringcast segment '<name>.bell' does not exist", an object the caller never made.
TEST(GatherDoorbell, AWorkerOfAMissingGatherIsToldTheGatherDoesNotExist) {
    ScopedName name("gmissing");
    try {
        (void)GatherWorker::attach(name, 0);
        ADD_FAILURE() << "attached to a gather that does not exist";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::not_found) << e.what();
        EXPECT_NE(std::string(e.what()).find("gather '" + name.str() + "' does not exist"), std::string::npos) << e.what();
    }
}

TEST(GatherDoorbell, AForeignObjectUnderTheBellNameKeepsTheNameTaken) {
    ScopedName name("gf");
    const std::string bell = gather_bell_name(name);
    const int fd = ::shm_open(("/" + bell).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 4096), 0);
    ::close(fd);
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    try {
        (void)GatherCollector::create(name, o);
        ADD_FAILURE() << "a foreign object under the bell's name was replaced";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::already_exists);
        EXPECT_NE(std::string(e.what()).find("is not a ringcast doorbell"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(judge_bell(bell).has_value());
    struct stat st {};
    EXPECT_EQ(::lstat(("/dev/shm/" + bell).c_str(), &st), 0) << "the foreign object is kept";
    EXPECT_NE(::lstat(("/dev/shm/" + gather_ring_name(name, 0)).c_str(), &st), 0) << "the failed create's ring 0 is removed";
    ::shm_unlink(("/" + bell).c_str());
}

// A killed collector's bell of another ringcast version (same size and magic, another ABI) is not
// reclaimed, by a create nor by a sweep: another version's objects are never touched. The create says
// which version holds the name and how to free it.
TEST(GatherDoorbell, AnotherVersionsBellKeepsTheNameTaken) {
    ScopedName name("gv");
    const std::string bell = gather_bell_name(name);
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    ASSERT_NO_FATAL_FAILURE(create_in_a_killed_collector(name, o));
    {  // what another version's collector would have left
        const int fd = ::shm_open(("/" + bell).c_str(), O_RDWR, 0);
        ASSERT_GE(fd, 0);
        void* p = ::mmap(nullptr, sizeof(layout::DoorbellLine), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        ASSERT_NE(p, MAP_FAILED);
        static_cast<layout::DoorbellLine*>(p)->abi_version = layout::kAbiVersion + 1;
        ::munmap(p, sizeof(layout::DoorbellLine));
    }
    const std::optional<JudgedBell> read = read_bell(bell);
    ASSERT_TRUE(read.has_value());
    EXPECT_FALSE(read->this_version);
    EXPECT_EQ(read->abi_version, layout::kAbiVersion + 1);
    EXPECT_FALSE(judge_bell(bell).has_value());
    for (std::uint32_t r = 0; r < 2; ++r) (void)Segment::remove(gather_ring_name(name, r));  // its rings: gone
    for (const auto& swept : sweep_abandoned(std::string(name)))
        EXPECT_NE(swept.name, bell) << "a sweep removed another version's bell";
    try {
        (void)GatherCollector::create(name, o);
        ADD_FAILURE() << "another version's bell was replaced";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::already_exists);
        EXPECT_NE(std::string(e.what()).find("another ringcast version (ABI " + std::to_string(layout::kAbiVersion + 1)),
                  std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("`ringcast rm " + bell + "`"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_bell(bell).value_or(JudgedBell{}).identity, read->identity) << "the bell is kept as it was";
    ::shm_unlink(("/" + bell).c_str());
}

TEST(GatherDoorbell, NoBellRingWhenTheCollectorIsAwake) {
    ScopedName name("gb");
    GatherOptions o;
    o.ranks = 2;
    o.capacity = 64 * 1024;
    auto c = GatherCollector::create(name, o);
    auto w0 = GatherWorker::attach(name, 0);
    auto w1 = GatherWorker::attach(name, 1);
    for (std::uint64_t tag = 1; tag <= 500; ++tag) {
        ASSERT_EQ(w0.reply(tag, reply_bytes(0, tag)), Status::ok);
        ASSERT_EQ(w1.reply(tag, reply_bytes(1, tag)), Status::ok);
        ASSERT_EQ(c.collect_all(tag, 1s).status, Status::ok);
    }
    // bell_rings() counts the whole group's rings (one shared line): 0 means neither worker rang.
    EXPECT_EQ(w0.bell_rings(), 0u);
    EXPECT_EQ(w1.bell_rings(), 0u);
    EXPECT_EQ(c.kernel_waits(), 0u);
}

// GatherCollector::create makes the reply rings first and the bell last (a bell then always names a
// group whose rings exist: what `ringcast gc` goes by), and a create that fails removes what it made
// and nothing else. (Before: the bell came first, and a ring that someone else held made the
// collector's destructor remove every ring of the name, that one included.)
TEST(GatherGroups, ACreateThatFailsRemovesWhatItMadeAndNothingElse) {
    ScopedName name("gfail");
    const std::string group(name.str());
    const auto exists = [](const std::string& n) {
        try {
            (void)ShmObject::open(n);
            return true;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::not_found) << e.what();
            return false;
        }
    };
    {
        const Segment theirs = Segment::create(group + ".r1", SegmentOptions{.readers = 1, .capacity = 64 * 1024});
        try {
            (void)GatherCollector::create(group, GatherOptions{.ranks = 3, .capacity = 64 * 1024});
            FAIL() << "created a group over a reply ring in use";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::already_exists) << e.what();
            EXPECT_NE(std::string(e.what()).find(group + ".r1"), std::string::npos) << e.what();
        }
        EXPECT_FALSE(exists(group + ".r0")) << "the ring it made is left behind";
        EXPECT_TRUE(exists(group + ".r1")) << "a ring it did not make was removed";
        EXPECT_FALSE(exists(group + ".r2"));
        EXPECT_FALSE(exists(group + ".bell")) << "a bell was made before its rings";
        EXPECT_TRUE(Segment::remove(group + ".r1"));
    }
    { auto bell = DoorbellMapping::create(group + ".bell", 2, 0600); }  // a dead group's bell: no ring left
    {
        auto c = GatherCollector::create(group, GatherOptions{.ranks = 2, .capacity = 64 * 1024});
        EXPECT_TRUE(exists(group + ".bell"));
        // A successor under the name replaced the bell (make_bell may, once this group's rings are
        // gone): this collector's removal of its names must leave the successor's bell alone.
        ASSERT_EQ(::shm_unlink(("/" + group + ".bell").c_str()), 0);
        { auto theirs = DoorbellMapping::create(group + ".bell", 2, 0600); }
    }
    EXPECT_FALSE(exists(group + ".r0"));
    EXPECT_FALSE(exists(group + ".r1"));
    EXPECT_TRUE(exists(group + ".bell")) << "a bell it did not make was removed";
    EXPECT_TRUE(Segment::remove(group + ".bell"));
}

// A moved-from collector leaves the group's names to the one it moved into, and that one removes them.
// (Every create() moves one. The destructor once went by the name being empty after a move, which
// libstdc++ does but the standard does not promise; ownership now moves with a flag. With libstdc++
// the first half cannot tell the two apart — a moved-from name is empty either way — the second
// fails if the flag does not move: the successor would leave the names behind.)
TEST(GatherGroups, AMovedFromCollectorLeavesTheNamesToItsSuccessor) {
    ScopedName name("gmove");
    const std::string group(name.str());
    std::optional<GatherCollector> first;
    first.emplace(GatherCollector::create(group, GatherOptions{.ranks = 1, .capacity = 64 * 1024}));
    {
        GatherCollector second = std::move(*first);
        first.reset();  // the moved-from one dies first
        auto w = GatherWorker::attach(group, 0);
        const std::byte bytes[8]{};
        ASSERT_EQ(w.reply(1, bytes, 1s), Status::ok);
        EXPECT_EQ(second.collect_all(1, 1s).status, Status::ok);
    }
    EXPECT_THROW((void)ShmObject::open(group + ".bell"), Error) << "the successor left the bell behind";
    EXPECT_THROW((void)ShmObject::open(group + ".r0"), Error) << "the successor left a ring behind";
}

TEST(GatherDoorbell, BadArguments) {
    EXPECT_THROW((void)GatherCollector::create("rc-gbad", GatherOptions{.ranks = 0}), Error);
    EXPECT_THROW((void)GatherCollector::create("rc-gbad", GatherOptions{.ranks = 200, .method = GatherWait::futex_waitv}), Error);
    EXPECT_THROW((void)GatherWorker::attach("rc-gbad-none", 0), Error);
    ScopedName name("gr");
    auto c = GatherCollector::create(name, GatherOptions{.ranks = 2});
    EXPECT_THROW((void)GatherWorker::attach(name, 2), Error);
    const std::uint32_t bad[] = {5};
    EXPECT_THROW((void)c.collect(1, bad, 1s), Error);
}

}  // namespace
}  // namespace ringcast::test
