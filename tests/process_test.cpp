// Cross-process tests: real processes (fork), each with its own mapping of the segment.
#include <bit>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <signal.h>

#include <gtest/gtest.h>

#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

struct BroadcastParam {
    WaitKind kind;
    std::uint64_t messages;  // before RINGCAST_TEST_SCALE
    std::chrono::microseconds spin_max{0};
};

class Broadcast : public ::testing::TestWithParam<BroadcastParam> {};

// 1 writer → 3 reader processes; random sizes 0..64 KiB (log-uniform) plus one of 2..5 MiB every
// 100,000 messages (fragmented through the 1 MiB ring). Every reader checks order and checksum of
// every message, then the closed result.
TEST_P(Broadcast, OneWriterThreeReaderProcesses) {
    const auto [kind, base_messages, spin_max] = GetParam();
    const std::uint64_t n = std::max<std::uint64_t>(1000, static_cast<std::uint64_t>(double(base_messages) * test_scale()));
    const std::uint64_t big_every = std::min<std::uint64_t>(100'000, n / 4);
    ScopedName name("bcast");
    WriterOptions wo;
    wo.wait.kind = kind;
    wo.wait.spin_max = spin_max;
    auto w = Writer::create(name, SegmentOptions{.readers = 3, .capacity = 1 << 20}, wo);

    std::vector<pid_t> children;
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        children.push_back(fork_child([&, rank] {
            ReaderOptions ro;
            ro.wait.kind = kind;
            ro.wait.spin_max = spin_max;
            auto r = Reader::attach(name, rank, ro);
            std::uint64_t bytes = 0;
            for (std::uint64_t seq = 0; seq < n; ++seq) {
                const Message m = r.peek(60s);
                ASSERT_EQ(m.status, Status::ok) << "rank " << rank << " seq " << seq;
                const std::string err = check_message(m.bytes, seq, message_size(seq, big_every));
                ASSERT_TRUE(err.empty()) << "rank " << rank << ": " << err;
                ASSERT_EQ(m.tag, seq);
                bytes += m.bytes.size();
                r.release();
            }
            ASSERT_EQ(r.peek(60s).status, Status::closed);
            std::printf("rank %u: %llu messages, %.1f MiB verified\n", rank, static_cast<unsigned long long>(n),
                        double(bytes) / double(1 << 20));
        }));
    }
    std::vector<std::byte> big;
    std::uint64_t fragmented = 0;
    for (std::uint64_t seq = 0; seq < n; ++seq) {
        const std::size_t size = message_size(seq, big_every);
        if (size <= w.max_reserve()) {  // zero-copy path
            Reservation res = w.reserve(size, 60s);
            ASSERT_EQ(res.status, Status::ok) << "seq " << seq;
            fill_message(res.bytes, seq);
            w.commit(size, seq);
        } else {  // fragmented path
            big.resize(size);
            fill_message(big, seq);
            ASSERT_EQ(w.write(big, 60s, seq), Status::ok) << "seq " << seq;
            ++fragmented;
        }
    }
    w.close();
    for (pid_t c : children) EXPECT_EQ(wait_child(c), 0);
    // RINGCAST_TEST_SCALE scales the count, never the classes: at n >= 1000, big_every <= n / 4.
    EXPECT_GE(fragmented, 4u) << "fragmented messages sent (every reader checked each)";
    EXPECT_GT(w.segment().writer_line().tail.load(), 2 * w.capacity()) << "the ring never wrapped";
}

INSTANTIATE_TEST_SUITE_P(Strategies, Broadcast,
                         ::testing::Values(BroadcastParam{WaitKind::futex, 300'000},
                                           BroadcastParam{WaitKind::hybrid, 300'000},
                                           BroadcastParam{WaitKind::hybrid, 200'000, std::chrono::microseconds{2000}},
                                           BroadcastParam{WaitKind::spin, 20'000},
                                           BroadcastParam{WaitKind::spin_yield, 20'000}),
                         [](const auto& info) {
                             return std::string(to_string(info.param.kind)) +
                                    (info.param.spin_max.count() > 0 ? "_adaptive" : "");
                         });

TEST(Processes, CloseWakesReadersBlockedInOtherProcesses) {
    ScopedName name("pclose");
    auto w = Writer::create(name, SegmentOptions{.readers = 2});
    std::vector<pid_t> children;
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
        children.push_back(fork_child([&, rank] {
            ReaderOptions ro;
            ro.wait.kind = WaitKind::futex;
            auto r = Reader::attach(name, rank, ro);
            std::vector<std::byte> got;
            ASSERT_EQ(r.read(got, 30s), Status::ok);
            ASSERT_EQ(check_message(got, 9, 123), "");
            ASSERT_EQ(r.read(got, 30s), Status::closed);  // blocked here when the writer closes
        }));
    }
    std::vector<std::byte> msg(123);
    fill_message(msg, 9);
    ASSERT_EQ(w.write(msg, 5s), Status::ok);
    // Let both readers go to sleep in the kernel before closing.
    const auto until = std::chrono::steady_clock::now() + 5s;
    const auto both_asleep = [&] { return std::popcount(w.segment().reader_sleep_line().sleeping[0].load()) == 2; };
    while (!both_asleep() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(both_asleep()) << "the two reader processes never both announced a sleep within 5 s";
    w.close();
    for (pid_t c : children) EXPECT_EQ(wait_child(c, 30s), 0);
}

// Writer::wake_ahead across processes: wake-aheads before some messages (twice before some), at
// random gaps that let the hybrid readers sleep in some and spin in others. Every reader gets every
// message, in order, intact. (Delivery, not the wake: a lost wake here would be repaired by the next
// message's wake within 1.5 ms — no wake is lost is the model's -DAHEAD check and
// WakeAhead.AWakeAheadWithoutAMessageLosesNothing's.)
TEST(Processes, WakeAheadsAnywhereLoseNothing) {
    ScopedName name("pahead");
    constexpr std::uint32_t kReaders = 2;
    const std::uint64_t messages = std::max<std::uint64_t>(200, static_cast<std::uint64_t>(2000 * test_scale()));
    auto w = Writer::create(name, SegmentOptions{.readers = kReaders, .capacity = 1 << 16});
    std::vector<pid_t> children;
    for (std::uint32_t rank = 0; rank < kReaders; ++rank) {
        children.push_back(fork_child([&, rank] {
            ReaderOptions ro;
            ro.wait.spin_max = 300us;  // hybrid, adaptive: short waits spin, gaps of ~1 ms sleep
            auto r = Reader::attach(name, rank, ro);
            std::vector<std::byte> got;
            for (std::uint64_t seq = 0; seq < messages; ++seq) {
                ASSERT_EQ(r.read(got, 30s), Status::ok) << "message " << seq;
                ASSERT_EQ(check_message(got, seq, message_size(seq)), "") << "message " << seq;
            }
            ASSERT_EQ(r.read(got, 30s), Status::closed);
        }));
    }
    std::uint64_t rng = 42;
    std::vector<std::byte> msg;
    for (std::uint64_t seq = 0; seq < messages; ++seq) {
        rng = mix(rng);
        if (rng % 3 != 0) (void)w.wake_ahead();               // before two messages in three
        if (rng % 7 == 0) (void)w.wake_ahead();               // sometimes twice
        std::this_thread::sleep_for(std::chrono::microseconds((rng >> 8) % 1500));  // making it
        msg.resize(message_size(seq));
        fill_message(msg, seq);
        ASSERT_EQ(w.write(msg, 30s), Status::ok);
    }
    w.close();
    for (pid_t c : children) EXPECT_EQ(wait_child(c, 120s), 0);
}

TEST(Processes, LateReaderProcessMissesNothing) {
    ScopedName name("plate");
    auto w = Writer::create(name, SegmentOptions{.readers = 1});
    std::vector<std::byte> msg;
    for (std::uint64_t seq = 0; seq < 40; ++seq) {  // fits: 40 × ~1 KiB < 1 MiB
        msg.resize(1000);
        fill_message(msg, seq);
        ASSERT_EQ(w.write(msg, 1s), Status::ok);
    }
    const pid_t child = fork_child([&] {
        auto r = Reader::attach(name, 0);
        std::vector<std::byte> got;
        for (std::uint64_t seq = 0; seq < 40; ++seq) {
            ASSERT_EQ(r.read(got, 5s), Status::ok);
            ASSERT_EQ(check_message(got, seq, 1000), "");
        }
    });
    EXPECT_EQ(wait_child(child, 30s), 0);
}

TEST(Processes, SameRankInTwoLiveProcessesIsAnError) {
    ScopedName name("prank");
    auto w = Writer::create(name, SegmentOptions{.readers = 1});
    auto r = Reader::attach(name, 0);
    const pid_t child = fork_child([&] {
        try {
            auto again = Reader::attach(name, 0);
            ADD_FAILURE() << "a second process attached rank 0";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::rank_in_use) << e.what();
        }
    });
    EXPECT_EQ(wait_child(child, 30s), 0);
}

TEST(Processes, RankOfADeadProcessCanBeTakenOver) {
    ScopedName name("ptake");
    auto w = Writer::create(name, SegmentOptions{.readers = 1});
    const pid_t holder = fork_child([&] {
        auto r = Reader::attach(name, 0);
        ::raise(SIGKILL);  // dies holding the rank
    });
    EXPECT_EQ(wait_child(holder, 30s), -SIGKILL);
    EXPECT_NO_THROW({ auto r = Reader::attach(name, 0); });
}

TEST(Processes, WriterBlockedOnADeadReaderFailsNamingIt) {
    ScopedName name("pdead");
    WriterOptions wo;
    wo.liveness_interval = 50ms;
    auto w = Writer::create(name, SegmentOptions{.readers = 2}, wo);
    auto alive = Reader::attach(name, 1);
    const pid_t doomed = fork_child([&] {
        auto r = Reader::attach(name, 0);
        ::raise(SIGKILL);
    });
    ASSERT_EQ(wait_child(doomed, 30s), -SIGKILL);
    std::vector<std::byte> msg(4000);
    // The writer fills the ring (rank 0's head stays at 0), then blocks: the write that finds no room
    // must fail within two liveness intervals (checked with slack for a loaded machine: 10), not at
    // its 10 s timeout.
    std::int64_t call_start = 0;
    try {
        for (int i = 0; i < 1000; ++i) {
            call_start = now_ns();
            const Status s = w.write(msg, 10s);
            if (s != Status::ok) {
                ADD_FAILURE() << "write " << i << " returned " << to_string(s) << ": the dead reader went unnoticed";
                break;
            }
        }
        ADD_FAILURE() << "the writer never noticed the dead reader";
    } catch (const Error& e) {
        const auto took = std::chrono::nanoseconds(now_ns() - call_start);
        EXPECT_LT(took, 10 * wo.liveness_interval) << "detection took " << took.count() / 1'000'000 << " ms";
        EXPECT_EQ(e.code(), ErrorCode::peer_dead);
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(doomed)), std::string::npos) << e.what();
        // ... and as data, for a caller that names its readers otherwise (the Python binding)
        const auto* died = dynamic_cast<const ReaderDiedError*>(&e);
        ASSERT_NE(died, nullptr) << "a dead reader's error carries its rank index and pid";
        EXPECT_EQ(died->rank_index(), 0u);
        EXPECT_EQ(died->pid(), doomed);
    }
}

TEST(Processes, ReaderBlockedOnADeadWriterFails) {
    ScopedName name("pwdead");
    {
        auto seg = Segment::create(name, SegmentOptions{.readers = 1});
    }
    const pid_t writer = fork_child([&] {
        WriterOptions wo;
        wo.unlink_on_destroy = false;
        auto w = Writer::open(name, wo);
        std::vector<std::byte> msg(10);
        (void)w.write(msg, 1s);
        ::raise(SIGKILL);  // dies without closing
    });
    ASSERT_EQ(wait_child(writer, 30s), -SIGKILL);
    ReaderOptions ro;
    ro.liveness_interval = 50ms;
    auto r = Reader::attach(name, 0, ro);
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 1s), Status::ok) << "what was published before the death is delivered";
    const std::int64_t call_start = now_ns();
    try {
        (void)r.read(got, 10s);
        ADD_FAILURE() << "the reader never noticed the dead writer";
    } catch (const Error& e) {
        const auto took = std::chrono::nanoseconds(now_ns() - call_start);
        EXPECT_LT(took, 10 * ro.liveness_interval) << "detection took " << took.count() / 1'000'000 << " ms";
        EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::to_string(writer)), std::string::npos) << e.what();
    }
    // Once known dead, it stays so: every later call that finds nothing says so at once, polls too
    // (they said timed_out until the next interval: a caller retrying on timeouts saw an idle queue).
    for (const auto timeout : {0ms, 0ms, 10ms, 0ms}) {
        try {
            const Status s = r.read(got, timeout);
            ADD_FAILURE() << "a read after the death was reported returned " << to_string(s);
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
        }
    }
}

}  // namespace
}  // namespace ringcast::test

namespace ringcast::test {
// A reader started before its writer waits for the name (ReaderOptions::create_timeout); without it,
// or past it, attach fails naming the missing segment.
TEST(Processes, AReaderStartedBeforeTheWriterWaitsForTheName) {
    ScopedName name("early");
    ReaderOptions ro;
    ro.create_timeout = 10s;
    const pid_t writer = fork_child([&] {
        std::this_thread::sleep_for(200ms);
        WriterOptions wo;
        wo.unlink_on_destroy = false;  // the parent's ScopedName removes it
        auto w = Writer::create(name, SegmentOptions{.readers = 1}, wo);
        std::vector<std::byte> msg(64);
        fill_message(msg, 1);
        ASSERT_EQ(w.write(msg, 10s), Status::ok);
    });
    auto r = Reader::attach(name, 0, ro);  // before the writer created it
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 10s), Status::ok);
    EXPECT_EQ(check_message(got, 1, 64), "");
    EXPECT_EQ(wait_child(writer, 30s), 0);

    ScopedName never("never");
    ro.create_timeout = 100ms;
    const auto start = std::chrono::steady_clock::now();
    try {
        (void)Reader::attach(never, 0, ro);
        FAIL() << "attached a name nobody created";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::not_found);
        EXPECT_NE(std::string(e.what()).find("waited 100 ms"), std::string::npos) << e.what();
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
}

// A reader started before its writer waits past a segment left over under the name (nobody alive
// uses it; its writer was killed, or its rank there can never be claimed again) until the writer's
// create reclaims the name, and reads that writer's message. (Before: it claimed a rank in the
// left-over at once — a queue nobody writes, or rank_left.) Past the wait it attaches to what is
// there and the error says the segment is a left-over. Not waited past: a queue whose writer closed
// it and exited before the reader looked (drained), and a segment no writer has had yet.
TEST(Processes, AnEarlyReaderWaitsPastALeftOverSegmentForItsWriter) {
    enum class Ending { killed, rank_left, closed };
    const auto earlier_run = [](const ScopedName& name, Ending ending) {
        const pid_t pid = fork_child([&] {
            WriterOptions wo;
            wo.unlink_on_destroy = false;  // the name stays, as after a kill
            auto w = Writer::create(name, SegmentOptions{.readers = 1}, wo);
            std::vector<std::byte> msg(64);
            fill_message(msg, 1);
            ASSERT_EQ(w.write(msg, 1s), Status::ok);
            if (ending == Ending::killed) ::kill(::getpid(), SIGKILL);
            if (ending == Ending::rank_left) {
                auto r = Reader::attach(name, 0);  // detaches cleanly at once: rank 0 is left
            }
        });
        return wait_child(pid, 30s);
    };
    ReaderOptions ro;
    ro.create_timeout = 10s;
    for (const Ending ending : {Ending::killed, Ending::rank_left}) {
        SCOPED_TRACE(ending == Ending::killed ? "killed" : "rank left");
        ScopedName name("leftover");
        ASSERT_EQ(earlier_run(name, ending), ending == Ending::killed ? -SIGKILL : 0);
        const pid_t writer = fork_child([&] {
            std::this_thread::sleep_for(200ms);
            WriterOptions wo;
            wo.unlink_on_destroy = false;  // the parent's ScopedName removes it
            auto w = Writer::create(name, SegmentOptions{.readers = 1}, wo);  // reclaims the left-over
            std::vector<std::byte> msg(64);
            fill_message(msg, 7);
            ASSERT_EQ(w.write(msg, 10s), Status::ok);
        });
        {
            auto r = Reader::attach(name, 0, ro);
            std::vector<std::byte> got;
            ASSERT_EQ(r.read(got, 10s), Status::ok);
            EXPECT_EQ(check_message(got, 7, 64), "") << "read the left-over's message, not the new writer's";
        }
        EXPECT_EQ(wait_child(writer, 30s), 0);
    }

    ScopedName closed("leftover-closed");  // a finished run: closed, rank 0 never attached
    ASSERT_EQ(earlier_run(closed, Ending::closed), 0);
    auto start = std::chrono::steady_clock::now();
    {
        auto r = Reader::attach(closed, 0, ro);
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 0s), Status::ok);
        EXPECT_EQ(check_message(got, 1, 64), "");
        EXPECT_EQ(r.read(got, 0s), Status::closed);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "waited past a closed queue left to drain";

    // Made by a launcher that has exited, for a Writer::open still to come: no writer has had it yet.
    ScopedName launched("leftover-launched");
    const pid_t launcher = fork_child([&] { auto seg = Segment::create(launched, SegmentOptions{.readers = 1}); });
    ASSERT_EQ(wait_child(launcher, 30s), 0);
    start = std::chrono::steady_clock::now();
    {
        auto r = Reader::attach(launched, 0, ro);
        EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "waited past a segment no writer has had yet";
        const pid_t writer = fork_child([&] {
            auto w = Writer::open(launched);
            std::vector<std::byte> msg(64);
            fill_message(msg, 9);
            ASSERT_EQ(w.write(msg, 10s), Status::ok);
        });
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 10s), Status::ok);
        EXPECT_EQ(check_message(got, 9, 64), "");
        EXPECT_EQ(wait_child(writer, 30s), 0);
    }

    ScopedName only("leftover-only");
    ASSERT_EQ(earlier_run(only, Ending::rank_left), 0);
    ro.create_timeout = 100ms;
    start = std::chrono::steady_clock::now();
    try {
        (void)Reader::attach(only, 0, ro);
        FAIL() << "attached a rank released by a clean detach";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::rank_left) << e.what();
        EXPECT_NE(std::string(e.what()).find("is left over: nobody alive uses it (waited 100 ms"), std::string::npos)
            << e.what();
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
}

// A name whose creator, writer and readers were all killed is reclaimed by the next create (killed
// processes leave their segments behind); a name still in use is refused naming the live user; with
// reclaim_abandoned off the refusal names `ringcast gc`.
TEST(Processes, CreateReclaimsANameNobodyUsesAnyMore) {
    ScopedName name("reclaim");
    const pid_t owner = fork_child([&] {
        WriterOptions wo;
        wo.unlink_on_destroy = false;
        auto w = Writer::create(name, SegmentOptions{.readers = 2}, wo);
        auto r = Reader::attach(name, 1);
        std::vector<std::byte> msg(64);
        ASSERT_EQ(w.write(msg, 1s), Status::ok);
        ::kill(::getpid(), SIGKILL);  // creator, writer and reader rank 1 die together
    });
    EXPECT_EQ(wait_child(owner, 30s), -SIGKILL);
    SegmentOptions no_reclaim{.readers = 1};
    no_reclaim.reclaim_abandoned = false;
    try {
        (void)Writer::create(name, no_reclaim);
        FAIL() << "an abandoned name was reclaimed with reclaim_abandoned off";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::already_exists);
        EXPECT_NE(std::string(e.what()).find("ringcast gc"), std::string::npos) << e.what();
    }
    WriterOptions keep;
    keep.unlink_on_destroy = false;
    auto w = Writer::create(name, SegmentOptions{.readers = 1}, keep);  // reclaimed: a fresh segment
    EXPECT_EQ(w.reader_count(), 1u);
    try {
        (void)Writer::create(name, SegmentOptions{.readers = 1});
        FAIL() << "a live segment's name was taken";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::already_exists);
        EXPECT_NE(std::string(e.what()).find("is alive"), std::string::npos) << e.what();
    }
}
}  // namespace ringcast::test
