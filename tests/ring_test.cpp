// The broadcast ring, in one process (threads stand in for processes so TSan sees every access).
// One typed suite runs every wait strategy.
#include <atomic>
#include <bit>
#include <csignal>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <pthread.h>

#include <gtest/gtest.h>

#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

template <WaitKind K>
struct Kind {
    static constexpr WaitKind value = K;
    static constexpr std::chrono::microseconds spin_max{0};
};
// The adaptive hybrid (spin_max > spin_for) runs every typed test too.
struct AdaptiveKind {
    static constexpr WaitKind value = WaitKind::hybrid;
    static constexpr std::chrono::microseconds spin_max{2000};
};

template <class K>
class RingTest : public ::testing::Test {
protected:
    static WriterOptions writer_options() {
        WriterOptions o;
        o.wait.kind = K::value;
        o.wait.spin_max = K::spin_max;
        return o;
    }
    static ReaderOptions reader_options() {
        ReaderOptions o;
        o.wait.kind = K::value;
        o.wait.spin_max = K::spin_max;
        return o;
    }
    static bool spins() { return K::value == WaitKind::spin || K::value == WaitKind::spin_yield; }
    // Spinning strategies on an oversubscribed 2-core machine cost a timeslice per hand-off.
    static std::uint64_t scaled(std::uint64_t n) {
        const double s = test_scale() * (spins() ? 0.1 : 1.0);
        return std::max<std::uint64_t>(50, static_cast<std::uint64_t>(double(n) * s));
    }
    // Blocks (bounded, failing fast) until `rank` has gone to sleep for data `nth` times in all: its
    // waits counter (bumped just before the futex wait, after the re-check 3d) reached nth and its bit
    // is set. Spinning strategies never sleep: they get a pause to reach their spin instead.
    static void await_reader_sleep(const Writer& w, std::uint32_t rank, std::uint64_t nth) {
        if (spins()) {
            std::this_thread::sleep_for(20ms);
            return;
        }
        const auto& seg = w.segment();
        ASSERT_TRUE(wait_until([&] {
            return seg.reader_slot(rank).waits.load() >= nth &&
                   (seg.reader_sleep_line().sleeping[rank / 64].load() >> (rank % 64) & 1) != 0;
        }, 10000ms)) << "rank " << rank << " did not go to sleep (time " << nth << ") within 10 s";
    }
    // The same for the writer asleep for space.
    static void await_writer_sleep(const Writer& w, std::uint64_t nth) {
        if (spins()) {
            std::this_thread::sleep_for(20ms);
            return;
        }
        const auto& line = w.segment().space_line();
        ASSERT_TRUE(wait_until([&] { return line.writer_waits.load() >= nth && line.writer_sleeping.load() != 0; }, 10000ms))
            << "the writer did not go to sleep for space within 10 s";
    }
    SegmentOptions seg(std::uint32_t readers, std::uint64_t capacity = 64 * 1024) {
        SegmentOptions o;
        o.readers = readers;
        o.capacity = capacity;
        return o;
    }
};

using Strategies = ::testing::Types<Kind<WaitKind::spin>, Kind<WaitKind::spin_yield>, Kind<WaitKind::futex>,
                                    Kind<WaitKind::hybrid>, AdaptiveKind, Kind<WaitKind::eventfd>>;
class KindNames {
public:
    template <class T>
    static std::string GetName(int) {
        return std::string(to_string(T::value)) + (T::spin_max.count() > 0 ? "_adaptive" : "");
    }
};
TYPED_TEST_SUITE(RingTest, Strategies, KindNames);

// The waker side of wait.hpp's protocol for a bare flag (w1..w3).
void publish_flag_and_notify(std::atomic<bool>& flag, std::atomic<std::uint32_t>& seq,
                             std::atomic<std::uint64_t>& sleeping) {
    flag.exchange(true, std::memory_order_seq_cst);
    std::atomic<std::uint64_t> waits{0}, wakes{0};
    notify_sleepers(SleepSite{&seq, &sleeping, 1, 0, &waits}, wakes);
}

std::vector<std::byte> make(std::size_t n, std::uint64_t seq) {
    std::vector<std::byte> v(n);
    fill_message(v, seq);
    return v;
}

TYPED_TEST(RingTest, RoundTripSmallAndEmptyMessages) {
    ScopedName name("rt");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    for (std::uint64_t seq = 0; seq < 100; ++seq) {
        const auto msg = make(seq % 40, seq);
        ASSERT_EQ(w.write(msg, 1s, seq * 3), Status::ok);
        const Message m = r.peek(1s);
        ASSERT_EQ(m.status, Status::ok);
        EXPECT_EQ(m.tag, seq * 3);
        EXPECT_EQ(check_message(m.bytes, seq, msg.size()), "");
        r.release();
    }
}

TYPED_TEST(RingTest, WrapAroundKeepsEveryByte) {
    ScopedName name("wrap");
    auto w = Writer::create(name, this->seg(2), this->writer_options());
    auto r0 = Reader::attach(name, 0, this->reader_options());
    auto r1 = Reader::attach(name, 1, this->reader_options());
    // Sizes chosen to land records at every distance from the ring's end, forcing padding records.
    std::vector<std::byte> got;
    for (std::uint64_t seq = 0; seq < 3000; ++seq) {
        const std::size_t n = (seq * 1237) % 9000;
        const auto msg = make(n, seq);
        ASSERT_EQ(w.write(msg, 1s), Status::ok);
        for (Reader* r : {&r0, &r1}) {
            ASSERT_EQ(r->read(got, 1s), Status::ok);
            ASSERT_EQ(check_message(got, seq, n), "");
        }
    }
    EXPECT_GT(w.segment().writer_line().tail.load(), 10 * w.capacity()) << "the ring must have wrapped";
}

TYPED_TEST(RingTest, FragmentedMessagesLargerThanTheRing) {
    ScopedName name("frag");
    auto w = Writer::create(name, this->seg(2), this->writer_options());
    std::vector<std::size_t> sizes = {w.max_reserve(), w.max_reserve() + 1, 64 * 1024, 5 * 64 * 1024 + 3,
                                      3u << 20, 0, 17};
    std::atomic<int> failures{0};
    auto consume = [&](std::uint32_t rank) {
        auto r = Reader::attach(name, rank, this->reader_options());
        std::vector<std::byte> got;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            std::uint64_t tag = 0;
            if (r.read(got, 10s, &tag) != Status::ok || check_message(got, i, sizes[i]) != "" || tag != i + 100)
                ++failures;
        }
        if (r.read(got, 10s) != Status::closed) ++failures;
    };
    std::thread t0(consume, 0), t1(consume, 1);
    for (std::size_t i = 0; i < sizes.size(); ++i) ASSERT_EQ(w.write(make(sizes[i], i), 10s, i + 100), Status::ok);
    w.close();
    t0.join();
    t1.join();
    EXPECT_EQ(failures.load(), 0);
}

TYPED_TEST(RingTest, ReserveCommitIsZeroCopyAndMayShrink) {
    ScopedName name("zc");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    Reservation res = w.reserve(1000, 1s);
    ASSERT_EQ(res.status, Status::ok);
    ASSERT_EQ(res.bytes.size(), 1000u);
    // The span points into the shared data ring.
    EXPECT_GE(res.bytes.data(), w.segment().data());
    EXPECT_LT(res.bytes.data(), w.segment().data() + w.capacity());
    fill_message(res.bytes.first(600), 7);
    w.commit(600, 42);
    const Message m = r.peek(1s);
    ASSERT_EQ(m.status, Status::ok);
    EXPECT_EQ(m.tag, 42u);
    EXPECT_EQ(check_message(m.bytes, 7, 600), "");
    EXPECT_EQ(r.peek(1s).bytes.data(), m.bytes.data()) << "peek before release returns the same message";
    r.release();
    EXPECT_THROW(r.release(), Error);
    EXPECT_THROW(w.commit(1), Error) << "commit without reserve";
    try {
        (void)w.reserve(w.max_reserve() + 1, 1s);
        FAIL() << "oversize reserve must throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::message_too_large);
        EXPECT_NE(std::string(e.what()).find("write()"), std::string::npos) << e.what();
    }
}

TYPED_TEST(RingTest, BackPressureNeverOverwritesUnreadBytes) {
    ScopedName name("bp");
    auto w = Writer::create(name, this->seg(2), this->writer_options());
    auto fast = Reader::attach(name, 0, this->reader_options());
    auto slow = Reader::attach(name, 1, this->reader_options());
    // Fill the ring while the slow reader reads nothing: the writer must time out, not overwrite.
    std::uint64_t written = 0;
    std::vector<std::byte> got;
    for (;; ++written) {
        const Status s = w.write(make(1000, written), 20ms);
        if (s == Status::timed_out) break;
        ASSERT_EQ(s, Status::ok);
        ASSERT_EQ(fast.read(got, 1s), Status::ok);
        ASSERT_LT(written, 1000u) << "the writer never blocked: back-pressure is broken";
    }
    EXPECT_GE(written * 1016, w.capacity() - 2048) << "the ring should have been (almost) full";
    // Everything the slow reader has not read is intact.
    for (std::uint64_t seq = 0; seq < written; ++seq) {
        ASSERT_EQ(slow.read(got, 1s), Status::ok);
        ASSERT_EQ(check_message(got, seq, 1000), "");
    }
    // The message that timed out was not published.
    EXPECT_EQ(slow.read(got, 10ms), Status::timed_out);
    EXPECT_EQ(fast.read(got, 10ms), Status::timed_out);
}

TYPED_TEST(RingTest, SlowReadersHoldTheWriterAndMissNothing) {
    ScopedName name("slow");
    auto w = Writer::create(name, this->seg(3), this->writer_options());
    const std::uint64_t n = this->scaled(3000);
    std::atomic<int> failures{0};
    std::atomic<std::uint64_t> fragmented{0};  // messages delivered that were larger than one record
    std::vector<std::thread> readers;
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        readers.emplace_back([&, rank] {
            auto r = Reader::attach(name, rank, this->reader_options());
            std::vector<std::byte> got;
            for (std::uint64_t seq = 0; seq < n; ++seq) {
                if (r.read(got, 30s) != Status::ok || !check_message(got, seq, message_size(seq)).empty()) {
                    ++failures;
                    return;
                }
                if (got.size() > w.max_reserve()) ++fragmented;
                if (rank == 2 && seq % 64 == 0) std::this_thread::sleep_for(200us);  // the laggard
            }
            if (r.read(got, 30s) != Status::closed) ++failures;
        });
    }
    for (std::uint64_t seq = 0; seq < n; ++seq) ASSERT_EQ(w.write(make(message_size(seq), seq), 30s), Status::ok);
    w.close();
    for (auto& t : readers) t.join();
    EXPECT_EQ(failures.load(), 0);
    // The hard cases happened at every scale (n >= 50): fragments, and a ring that wrapped.
    EXPECT_GT(fragmented.load(), 0u) << n << " messages: none was fragmented";
    EXPECT_GT(w.segment().writer_line().tail.load(), 2 * w.capacity()) << n << " messages: the ring never wrapped";
}

TYPED_TEST(RingTest, LateReaderGetsEverythingFromTheStart) {
    ScopedName name("late");
    auto w = Writer::create(name, this->seg(2), this->writer_options());
    auto early = Reader::attach(name, 0, this->reader_options());
    std::vector<std::byte> got;
    for (std::uint64_t seq = 0; seq < 20; ++seq) {
        ASSERT_EQ(w.write(make(500, seq), 1s), Status::ok);
        ASSERT_EQ(early.read(got, 1s), Status::ok);
    }
    auto late = Reader::attach(name, 1, this->reader_options());
    for (std::uint64_t seq = 0; seq < 20; ++seq) {
        ASSERT_EQ(late.read(got, 1s), Status::ok);
        ASSERT_EQ(check_message(got, seq, 500), "");
    }
}

TYPED_TEST(RingTest, CloseLetsReadersDrainThenReportsClosed) {
    ScopedName name("close");
    auto w = Writer::create(name, this->seg(2), this->writer_options());
    auto r0 = Reader::attach(name, 0, this->reader_options());
    std::atomic<int> state{0};
    std::thread blocked([&] {
        auto r1 = Reader::attach(name, 1, this->reader_options());
        std::vector<std::byte> got;
        state = 1;
        const Status first = r1.read(got, 10s);  // blocks until the write below
        const Status second = r1.read(got, 10s);  // blocks until close
        state = (first == Status::ok && second == Status::closed) ? 2 : 3;
    });
    while (state.load() == 0) std::this_thread::yield();
    this->await_reader_sleep(w, 1, 1);  // the write below wakes a sleeper, not a reader still checking
    ASSERT_EQ(w.write(make(64, 0), 1s), Status::ok);
    this->await_reader_sleep(w, 1, 2);  // ... and so does close
    w.close();
    blocked.join();
    EXPECT_EQ(state.load(), 2);
    std::vector<std::byte> got;
    ASSERT_EQ(r0.read(got, 1s), Status::ok) << "published before close: still delivered";
    EXPECT_EQ(r0.read(got, 1s), Status::closed);
    EXPECT_EQ(r0.read(got, 1s), Status::closed) << "closed is sticky";
}

TYPED_TEST(RingTest, TimeoutsOnBothSides) {
    ScopedName name("to");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    std::vector<std::byte> got;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(r.read(got, 30ms), Status::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
    EXPECT_EQ(r.read(got, 0ms), Status::timed_out) << "zero timeout polls";
    while (w.write(make(4000, 1), 0ms) == Status::ok) {
    }
    t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(w.write(make(4000, 1), 30ms), Status::timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
    EXPECT_EQ(w.reserve(4000, 5ms).status, Status::timed_out);
}

TYPED_TEST(RingTest, CancelFromAnotherThread) {
    ScopedName name("cancel");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    // cancel() comes once the call sleeps (spinning strategies: after a pause) and must end a sleep
    // well within the liveness interval (1 s): a lost cancel wake would show as a second's delay (a
    // spinning call has no wake to lose, and a loaded machine may deschedule it for as long).
    std::atomic<std::int64_t> cancelled_at{0};
    const auto since_cancel = [&] { return std::chrono::nanoseconds(now_ns() - cancelled_at.load()); };
    {
        std::thread t([&] {
            this->await_reader_sleep(w, 0, 1);
            cancelled_at = now_ns();
            r.cancel();
        });
        std::vector<std::byte> got;
        EXPECT_EQ(r.read(got, 20s), Status::cancelled);
        if (!this->spins()) {
            EXPECT_LT(since_cancel(), 500ms) << "the cancelled read went on sleeping";
        }
        t.join();
        EXPECT_EQ(r.read(got, 20s), Status::cancelled) << "cancel is sticky";
        r.clear_cancel();
        EXPECT_EQ(r.read(got, 5ms), Status::timed_out);
    }
    while (w.write(make(4000, 1), 0ms) == Status::ok) {
    }
    std::thread t([&] {
        this->await_writer_sleep(w, 1);
        cancelled_at = now_ns();
        w.cancel();
    });
    EXPECT_EQ(w.write(make(4000, 1), 20s), Status::cancelled);
    if (!this->spins()) {
        EXPECT_LT(since_cancel(), 500ms) << "the cancelled write went on sleeping";
    }
    t.join();
    w.clear_cancel();
    EXPECT_EQ(w.write(make(4000, 1), 5ms), Status::timed_out);
}

// A cancel ends only a call that has to wait: one whose answer is already there gets it — room for
// the write, a message in the ring, a queue closed and drained (ring.hpp, cancel()). A close shows
// only in the full look, not in a spinning reader's look at the stamp, so a wait that spins first
// must take the full look before it reports the cancel.
TYPED_TEST(RingTest, ACancelledCallWhoseAnswerIsThereStillGetsIt) {
    ScopedName name("cancel-ready");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    r.cancel();
    w.cancel();
    ASSERT_EQ(w.write(make(100, 7), 1s), Status::ok) << "room for it: a cancelled write still completes";
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 1s), Status::ok) << "a message there: a cancelled read still takes it";
    EXPECT_EQ(got, make(100, 7));
    EXPECT_EQ(r.read(got, 1s), Status::cancelled) << "nothing there: the cancel ends the wait";
    w.close();
    EXPECT_EQ(r.read(got, 1s), Status::closed) << "closed and drained: that is the answer, not the cancel";
    EXPECT_EQ(r.read(got, 0ms), Status::closed) << "a poll too";
}

TYPED_TEST(RingTest, FragmentedWriteTimingOutIsWithdrawn) {
    ScopedName name("abort");
    auto w = Writer::create(name, this->seg(1), this->writer_options());
    auto r = Reader::attach(name, 0, this->reader_options());
    // No one reads: a 1 MiB message cannot finish through a 64 KiB ring.
    EXPECT_EQ(w.write(make(1u << 20, 0), 30ms), Status::timed_out);
    // The reader drains the published fragments but never sees the half message ...
    std::vector<std::byte> got;
    EXPECT_EQ(r.read(got, 30ms), Status::timed_out);
    // ... and the next message arrives whole after the writer's abort record.
    std::thread t([&] { EXPECT_EQ(w.write(make(100, 1), 5s), Status::ok); });
    ASSERT_EQ(r.read(got, 5s), Status::ok);
    EXPECT_EQ(check_message(got, 1, 100), "");
    t.join();
}

// RINGCAST_TEST_SCALE scales the count, never the classes: a 2..5 MiB message (fragmented through the
// 256 KiB ring) every 997 messages, or every n/4 when fewer are sent, so every strategy at every scale
// delivers at least four fragmented messages (checked).
TYPED_TEST(RingTest, ThreeReadersStressWithFragments) {
    ScopedName name("stress");
    auto w = Writer::create(name, this->seg(3, 256 * 1024), this->writer_options());
    const std::uint64_t n = this->scaled(20000);
    const std::uint64_t big_every = std::min<std::uint64_t>(997, n / 4);
    std::atomic<int> failures{0};
    std::atomic<std::uint64_t> fragmented{0};  // fragmented messages delivered, all readers together
    std::vector<std::thread> readers;
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        readers.emplace_back([&, rank] {
            auto r = Reader::attach(name, rank, this->reader_options());
            for (std::uint64_t seq = 0; seq < n; ++seq) {
                const Message m = r.peek(60s);
                if (m.status != Status::ok || !check_message(m.bytes, seq, message_size(seq, big_every)).empty()) {
                    ++failures;
                    return;
                }
                if (m.bytes.size() > w.max_reserve()) ++fragmented;
                r.release();
            }
            if (r.peek(60s).status != Status::closed) ++failures;
        });
    }
    std::uint64_t fragmented_sent = 0;
    for (std::uint64_t seq = 0; seq < n; ++seq) {
        const std::size_t size = message_size(seq, big_every);
        fragmented_sent += size > w.max_reserve() ? 1 : 0;
        if (size <= w.max_reserve() && seq % 2 == 0) {
            Reservation res = w.reserve(size, 60s);
            ASSERT_EQ(res.status, Status::ok);
            fill_message(res.bytes, seq);
            w.commit();
        } else {
            ASSERT_EQ(w.write(make(size, seq), 60s), Status::ok);
        }
    }
    w.close();
    for (auto& t : readers) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GE(fragmented_sent, 4u) << n << " messages, one 2..5 MiB every " << big_every;
    EXPECT_EQ(fragmented.load(), 3 * fragmented_sent) << "fragmented messages delivered (3 readers)";
    EXPECT_GT(w.segment().writer_line().tail.load(), 2 * w.capacity()) << "the ring never wrapped";
}

// ---- record stamps (layout.hpp "Stamps"): what a caught-up reader finds at its head -----------------

std::vector<std::byte> bytes_of(std::size_t n, std::uint8_t fill) { return std::vector<std::byte>(n, std::byte{fill}); }

// A payload of `n` bytes whose every 16-byte slot is a header a record written in lap 1 of a ring of
// `capacity` would carry: a valid `length`, the stamp of a message of that lap.
std::vector<std::byte> lap1_headers(std::size_t n, std::uint32_t length, std::uint64_t capacity) {
    const std::uint32_t stamp = layout::make_stamp(layout::RecordKind::message, capacity,
                                                   static_cast<unsigned>(std::countr_zero(capacity)));
    std::vector<std::byte> forged(n);
    for (std::size_t off = 0; off + sizeof(layout::RecordHeader) <= n; off += sizeof(layout::RecordHeader)) {
        std::memcpy(forged.data() + off, &length, sizeof length);
        std::memcpy(forged.data() + off + 4, &stamp, sizeof stamp);
    }
    return forged;
}

// Old payload bytes are the sender's: here every 16-byte slot of a first lap's payload is a perfect
// next-lap header (a valid length, the stamp a record written there in lap 1 would carry). A reader
// that catches up in lap 1 polls where the next record will start; without the writer's zero-ahead
// (Z) it would take those bytes for a record nobody wrote.
TEST(Stamps, ForgedStampsInOldPayloadAreNeverTaken) {
    ScopedName n("forge");
    auto w = Writer::create(n, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(n, 0);
    const std::vector<std::byte> forged = lap1_headers(4000, 8, w.capacity());
    std::vector<std::byte> got;
    std::uint64_t sent = 0;
    while (w.segment().writer_line().tail.load() < w.capacity() - 8192) {  // lap 0: forged payload all over
        ASSERT_EQ(w.write(forged, 0ns), Status::ok);
        ASSERT_EQ(r.read(got, 0ns), Status::ok);
        ++sent;
    }
    // Lap 1 in small steps, so the reader's head (where it polls) lands all over the old payload.
    for (std::size_t i = 0; w.segment().writer_line().tail.load() < 2 * w.capacity() - 8192; ++i) {
        const auto msg = bytes_of(24 + 16 * (i % 7), std::uint8_t(i));
        ASSERT_EQ(w.write(msg, 0ns), Status::ok);
        ASSERT_EQ(r.read(got, 0ns), Status::ok);
        ASSERT_EQ(got, msg) << "message " << i << " of lap 1";
        ASSERT_EQ(r.read(got, 0ns), Status::timed_out)
            << "after message " << i << " of lap 1 the reader took a record nobody wrote (old payload at head "
            << r.segment().reader_slot(0).head.load() << ")";
        ++sent;
    }
    EXPECT_GT(sent, 100u);
}

// A full ring: the writer's record ends exactly where the slowest reader's next (previous-lap) record
// starts, so that stamp is not cleared (Z). A caught-up reader polling there must see its lap is old.
TEST(Stamps, AFullRingsOldStampIsNotTakenForANewRecord) {
    ScopedName n("full");
    auto w = Writer::create(n, SegmentOptions{.readers = 2, .capacity = 64 << 10});
    auto fast = Reader::attach(n, 0);
    auto slow = Reader::attach(n, 1);  // reads nothing until the ring is full
    const std::size_t payload = 1024 - sizeof(layout::RecordHeader);  // records of 1 KiB: 64 fill the ring
    std::vector<std::byte> got;
    std::uint64_t sent = 0;
    for (;; ++sent) {
        if (w.write(bytes_of(payload, std::uint8_t(sent)), 0ns) != Status::ok) break;
        ASSERT_EQ(fast.read(got, 0ns), Status::ok);
    }
    ASSERT_EQ(sent, w.capacity() / 1024) << "the ring holds exactly capacity / record size records";
    ASSERT_EQ(fast.read(got, 0ns), Status::timed_out) << "the fast reader took the slow reader's old record";
    ASSERT_EQ(slow.read(got, 0ns), Status::ok);  // frees the first kilobyte
    ASSERT_EQ(got, bytes_of(payload, 0));
    ASSERT_EQ(w.write(bytes_of(payload, 0xee), 0ns), Status::ok);
    ASSERT_EQ(fast.read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(payload, 0xee));
    EXPECT_EQ(fast.read(got, 0ns), Status::timed_out);
}

// A head inside a record leaves old payload where the ring fills up to: Z cannot clear that word for
// the slow rank's sake, but one that passes for a stamp of the new lap is cleared anyway, so the other,
// caught-up rank does not take the slow rank's payload for a record. (No call puts a head there now —
// release_fragments refuses a mark that ends no record, ReleaseFragments.AMarkInsideARecordIsRefused —
// so the slot's head is set as a corrupt or hostile slot would have it.)
TEST(Stamps, AHeadReleasedInsideARecordCannotExposeItsPayload) {
    ScopedName n("midrec");
    auto w = Writer::create(n, SegmentOptions{.readers = 2, .capacity = 64 << 10});
    auto fast = Reader::attach(n, 0);
    auto slow = Reader::attach(n, 1);
    const std::size_t payload = 1024 - sizeof(layout::RecordHeader);
    const std::vector<std::byte> forged = lap1_headers(payload, 16, w.capacity());
    std::vector<std::byte> got;
    ASSERT_EQ(w.write(forged, 0ns), Status::ok);
    ASSERT_EQ(fast.read(got, 0ns), Status::ok);
    const Fragment f = slow.peek_fragment(0ns);
    ASSERT_EQ(f.status, Status::ok);
    EXPECT_THROW(slow.release_fragments(512), Error);  // aligned, handed out, but inside the record
    slow.segment().reader_slot(1).head.store(512, std::memory_order_release);
    for (std::uint64_t i = 1; i < w.capacity() / 1024; ++i) {  // the rest of lap 0
        ASSERT_EQ(w.write(bytes_of(payload, std::uint8_t(i)), 0ns), Status::ok);
        ASSERT_EQ(fast.read(got, 0ns), Status::ok);
    }
    // Lap 1: a record ending exactly at the slow head + capacity, where record 0's payload lies.
    ASSERT_EQ(w.write(bytes_of(512 - sizeof(layout::RecordHeader), 0xab), 0ns), Status::ok);
    ASSERT_EQ(fast.read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(512 - sizeof(layout::RecordHeader), 0xab));
    EXPECT_EQ(fast.read(got, 0ns), Status::timed_out) << "the fast reader took the slow rank's old payload for a record";
}

// A writer that died between its stamp and its tail exchange: a caught-up reader took the record, so
// its head is past the tail. Opening the segment accepts that head, and the next writer adopts the
// record (the other reader gets it too) instead of writing over it.
TEST(Stamps, AStampedRecordWhoseTailNeverMovedIsAdopted) {
    ScopedName n("adopt");
    auto seg = Segment::create(n, SegmentOptions{.readers = 2, .capacity = 64 << 10});
    ReaderOptions keep;
    keep.keep_place = true;  // rank 0 detaches and re-attaches with its head past the tail
    std::optional<Reader> a(Reader::attach(n, 0, keep));
    auto b = Reader::attach(n, 1);
    {
        WriterOptions wo;
        wo.unlink_on_destroy = false;
        auto w = Writer::open(n, wo);
        ASSERT_EQ(w.write(bytes_of(100, 1), 0ns), Status::ok);
    }  // (closes the queue)
    seg.writer_line().tail.store(0);  // as if the tail exchange never ran
    seg.header().flags.store(0);
    std::vector<std::byte> got;
    ASSERT_EQ(a->read(got, 0ns), Status::ok) << "a caught-up reader finds the record by its stamp";
    EXPECT_EQ(got, bytes_of(100, 1));
    EXPECT_GT(seg.reader_slot(0).head.load(), seg.writer_line().tail.load());
    EXPECT_NO_THROW((void)Segment::open(n)) << "a head past the tail by a stamped record is not corrupt";
    a.reset();
    EXPECT_NO_THROW(a.emplace(Reader::attach(n, 0, keep))) << "nor is it for the rank's next attach";
    ASSERT_TRUE(a.has_value());
    WriterOptions wo;
    wo.unlink_on_destroy = false;
    auto w = Writer::open(n, wo);
    EXPECT_EQ(seg.writer_line().tail.load(), layout::record_size(100)) << "the successor adopts the stamped record";
    ASSERT_EQ(w.write(bytes_of(50, 2), 0ns), Status::ok);
    ASSERT_EQ(a->read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(50, 2));
    ASSERT_EQ(b.read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(100, 1));
    ASSERT_EQ(b.read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(50, 2));
}

// A spinning reader looks at the stamp alone on each step (SpinLook in wait.hpp) and at the tail and
// the closed flag only at its checkpoints: what only they show must still be found while it spins, long
// before its deadline (whose last look would find it too). Here the tail moves past a record that
// carries no stamp (a corrupt ring: nothing but the tail says it is there): the spinning reader reports
// it as corrupt. (Next test: a spinning reader of a drained queue sees it close.) The forger writes
// through the reader's own mapping, so that TSan sees the length and the tail's release as the
// reader's acquire pairs with them.
TEST(Stamps, ASpinningReaderFindsWhatOnlyTheTailShows) {
    ScopedName n("spintail");
    auto w = Writer::create(n, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    ReaderOptions spin;
    spin.wait.kind = WaitKind::spin;
    auto r = Reader::attach(n, 0, spin);
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 0ns), Status::timed_out);  // caught up: it polls the stamp at 0 from now on
    const auto t0 = std::chrono::steady_clock::now();
    std::thread forger([&] {
        std::this_thread::sleep_for(20ms);
        auto& h = layout::record_at(r.segment().data(), 0);
        h.length = 8;  // a header without a stamp, then the tail past it
        r.segment().writer_line().tail.store(layout::record_size(8), std::memory_order_release);
    });
    EXPECT_THROW((void)r.read(got, 2s), Error) << "the record only the tail shows was not found while spinning";
    forger.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(Stamps, ASpinningReaderSeesItsQueueClose) {
    ScopedName n("spinclose");
    auto w = Writer::create(n, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    ReaderOptions spin;
    spin.wait.kind = WaitKind::spin;
    auto r = Reader::attach(n, 0, spin);
    std::vector<std::byte> got;
    ASSERT_EQ(w.write(bytes_of(8, 1), 0ns), Status::ok);
    ASSERT_EQ(r.read(got, 0ns), Status::ok);
    const auto t0 = std::chrono::steady_clock::now();
    std::thread closer([&] {
        std::this_thread::sleep_for(20ms);
        w.close();
    });
    EXPECT_EQ(r.read(got, 2s), Status::closed);
    closer.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

// ---- the futex protocol's promise: no wake system call while nobody sleeps -------------------------

TEST(WakeAccounting, NoWakeSyscallWhenNobodySleeps) {
    ScopedName name("nowake");
    WriterOptions wo;
    wo.wait.kind = WaitKind::futex;
    ReaderOptions ro;
    ro.wait.kind = WaitKind::futex;
    auto w = Writer::create(name, SegmentOptions{.readers = 2, .capacity = 1 << 20}, wo);
    auto r0 = Reader::attach(name, 0, ro);
    auto r1 = Reader::attach(name, 1, ro);
    std::vector<std::byte> got;
    for (std::uint64_t seq = 0; seq < 5000; ++seq) {
        ASSERT_EQ(w.write(make(200, seq), 1s), Status::ok);
        ASSERT_EQ(r0.read(got, 1s), Status::ok);
        ASSERT_EQ(r1.read(got, 1s), Status::ok);
    }
    EXPECT_EQ(w.wake_calls(), 0u) << "the writer made wake syscalls with no reader asleep";
    EXPECT_EQ(r0.wake_calls() + r1.wake_calls(), 0u) << "readers woke a writer that was not asleep";
    EXPECT_EQ(r0.waits() + r1.waits(), 0u);
    EXPECT_EQ(w.space_waits(), 0u);
}

TEST(WakeAccounting, ASleepingReaderIsWokenExactlyWhenItSleeps) {
    // The positive control for the test above: the counters do move when someone sleeps.
    ScopedName name("wake");
    ReaderOptions ro;
    ro.wait.kind = WaitKind::futex;
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0, ro);
    std::thread t([&] {
        std::vector<std::byte> got;
        EXPECT_EQ(r.read(got, 10s), Status::ok);
    });
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (w.segment().reader_sleep_line().sleeping[0].load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    ASSERT_NE(w.segment().reader_sleep_line().sleeping[0].load(), 0u) << "the reader never announced a sleep";
    ASSERT_EQ(w.write(make(10, 0), 1s), Status::ok);
    t.join();
    EXPECT_EQ(w.wake_calls(), 1u);
    EXPECT_GE(r.waits(), 1u);
}

TEST(WakeAccounting, WriterWaitingForSpaceIsTheMirrorImage) {
    ScopedName name("space");
    WriterOptions wo;
    wo.wait.kind = WaitKind::futex;
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16}, wo);
    auto r = Reader::attach(name, 0);
    while (w.write(make(4000, 0), 0ms) == Status::ok) {
    }
    std::thread t([&] { EXPECT_EQ(w.write(make(4000, 0), 10s), Status::ok); });
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (w.segment().space_line().writer_sleeping.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    ASSERT_NE(w.segment().space_line().writer_sleeping.load(), 0u) << "the writer never announced a sleep";
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 1s), Status::ok);
    t.join();
    EXPECT_EQ(r.wake_calls(), 1u);
    EXPECT_GE(w.space_waits(), 1u);
}

// ---- Writer::wake_ahead: readers woken while a message is made (wait.hpp, "Waking ahead") ------------

namespace {

// Blocks (bounded) until rank 0 has gone to sleep for data `nth` times in all and is asleep now.
void await_rank0_asleep(const Writer& w, std::uint64_t nth) {
    const auto& seg = w.segment();
    ASSERT_TRUE(wait_until([&] { return seg.reader_slot(0).waits.load() >= nth && (seg.reader_sleep_line().sleeping[0].load() & 1) != 0; },
                           10000ms))
        << "the reader did not go to sleep (time " << nth << ") within 10 s";
}

ReaderOptions hybrid_reader(std::chrono::nanoseconds spin_for, std::chrono::nanoseconds spin_max) {
    ReaderOptions ro;
    ro.wait.kind = WaitKind::hybrid;
    ro.wait.spin_for = spin_for;
    ro.wait.spin_max = spin_max;
    return ro;
}

}  // namespace

TEST(WakeAhead, NobodyAsleepNoWake) {
    ScopedName name("ahead0");
    auto w = Writer::create(name, SegmentOptions{.readers = 2});
    auto r = Reader::attach(name, 0);
    EXPECT_FALSE(w.wake_ahead()) << "a wake call with no reader asleep";
    EXPECT_EQ(w.wake_calls(), 0u);
    EXPECT_EQ(w.segment().writer_line().ahead_us.load(), 0u) << "a hint without a wake";
}

// A reader woken ahead spins for the message: the publish then finds it awake and makes no wake call
// of its own, and the reader does not sleep again. The writer's hint is twice its learned lead (one
// wake-ahead that came 30 ms before its message: 60 ms). The reader's spin floor (spin_for, which a
// woken reader spins at least, and within which its yields never end the spin) is 200 ms here, so
// that a loaded machine (sanitizers, parallel tests) cannot cut the spin before the publish.
TEST(WakeAhead, AReaderWokenAheadSpinsUntilTheMessageAndThePublishNeedsNoWake) {
    ScopedName name("ahead1");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0, hybrid_reader(200ms, 1s));
    std::thread t([&] {
        std::vector<std::byte> got;
        for (std::uint64_t seq = 0; seq < 2; ++seq) {
            ASSERT_EQ(r.read(got, 20s), Status::ok);
            EXPECT_EQ(check_message(got, seq, 64), "");
        }
    });
    // 1: teach the writer a lead of >= 30 ms (the reader, woken ahead, spins its 200 ms floor through it).
    await_rank0_asleep(w, 1);
    ASSERT_TRUE(w.wake_ahead());
    EXPECT_EQ(w.segment().writer_line().ahead_us.load(), std::uint32_t(detail::AheadClock::kFirstGuess.count() / 1000));
    std::this_thread::sleep_for(30ms);
    ASSERT_EQ(w.write(make(64, 0), 1s), Status::ok);
    // 2: the reader asleep again; woken ahead, it spins (its bit is retracted) for ~60 ms.
    const std::uint64_t sleeps = w.segment().reader_slot(0).waits.load() + 1;
    await_rank0_asleep(w, sleeps);
    const std::uint64_t wakes = w.wake_calls();
    ASSERT_TRUE(w.wake_ahead());
    const std::uint32_t hint = w.segment().writer_line().ahead_us.load();
    EXPECT_GE(hint, 60'000u) << "twice the 30 ms lead";
    EXPECT_LT(hint, 1'000'000u);
    ASSERT_TRUE(wait_until([&] { return (w.segment().reader_sleep_line().sleeping[0].load() & 1) == 0; }, 10000ms))
        << "the woken reader never retracted its announcement";
    ASSERT_EQ(w.write(make(64, 1), 1s), Status::ok);
    t.join();
    EXPECT_EQ(w.wake_calls(), wakes + 1) << "the publish woke the reader again: it was not spinning for the message";
    EXPECT_EQ(w.segment().reader_slot(0).waits.load(), sleeps) << "the reader slept again before the message came";
}

// A wake-ahead that no message follows costs the reader its spin, then it sleeps again and the
// publish wakes it as always: nothing is lost.
TEST(WakeAhead, AWakeAheadWithoutAMessageLosesNothing) {
    ScopedName name("ahead2");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0, hybrid_reader(10us, 200us));
    std::thread t([&] {
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 20s), Status::ok);
        EXPECT_EQ(check_message(got, 7, 100), "");
    });
    await_rank0_asleep(w, 1);
    ASSERT_TRUE(w.wake_ahead());
    await_rank0_asleep(w, 2);  // spun (at most 200 us), slept again
    ASSERT_EQ(w.write(make(100, 7), 1s), Status::ok);
    t.join();
    EXPECT_EQ(w.wake_calls(), 2u) << "one wake ahead, one by the publish";
}

// A futex reader (sleep at once, never spin) woken ahead sleeps again, and the publish wakes it.
TEST(WakeAhead, AFutexReaderWokenAheadStillGetsTheMessage) {
    ScopedName name("ahead3");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    ReaderOptions ro;
    ro.wait.kind = WaitKind::futex;
    auto r = Reader::attach(name, 0, ro);
    std::thread t([&] {
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 20s), Status::ok);
    });
    await_rank0_asleep(w, 1);
    ASSERT_TRUE(w.wake_ahead());
    await_rank0_asleep(w, 2);
    ASSERT_EQ(w.write(make(10, 0), 1s), Status::ok);
    t.join();
    EXPECT_EQ(w.wake_calls(), 2u);
}

// Wake-aheads that do not pay (the publish still had to wake readers: they slept again before the
// message came) pause after kMissesToPause in a row, for kPauseFor wake-aheads; one that paid resets
// the count.
TEST(WakeAhead, WakeAheadsThatDoNotPayPauseForAWhile) {
    detail::AheadClock clock;
    const auto miss = [&] {
        (void)clock.started(Clock::now());
        clock.published(true);
    };
    for (int i = 0; i + 1 < detail::AheadClock::kMissesToPause; ++i) miss();
    (void)clock.started(Clock::now());
    clock.published(false);  // this one paid: the count starts again
    EXPECT_FALSE(clock.paused());
    for (int i = 0; i < detail::AheadClock::kMissesToPause; ++i) miss();
    for (int i = 0; i < detail::AheadClock::kPauseFor; ++i) EXPECT_TRUE(clock.paused()) << "wake-ahead " << i;
    EXPECT_FALSE(clock.paused()) << "the pause never ends";
    clock.published(true);  // a publish with no wake-ahead open changes nothing
    EXPECT_FALSE(clock.paused());
}

// A peer killed between making the condition true (w1) and its wake (w2..w3) never wakes us: the
// kernel wait is cut at the liveness interval, or at kUnwatchedRecheck with liveness off, so such a
// death costs one interval, never a hang (tests/model/ring.pml, orphan_rel). Simulated: the close
// flag is set without close()'s wake.
TEST(WakeAccounting, AWakeThatNeverCameCostsAtMostOneRecheckInterval) {
    ScopedName name("orphan");
    auto w = Writer::create(name, SegmentOptions{.readers = 1});
    ReaderOptions ro;
    ro.wait.kind = WaitKind::futex;
    ro.liveness_interval = 0ns;  // off: the re-check still bounds the wait
    auto r = Reader::attach(name, 0, ro);
    std::thread closer([&] {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (w.segment().reader_sleep_line().sleeping[0].load() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        w.segment().header().flags.fetch_or(layout::kFlagClosed);  // w1 of close(), then "dies"
    });
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(r.peek(10s).status, Status::closed);
    const auto took = std::chrono::steady_clock::now() - start;
    closer.join();
    EXPECT_LT(took, kUnwatchedRecheck + 1s) << "the reader slept past its re-check";
}

// ---- scatter writes ----------------------------------------------------------------------------

// A message in parts is received as their concatenation, small (one record) or fragmented.
TEST(ScatterWrite, PartsArriveAsOneMessage) {
    ScopedName name("parts");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    for (const std::size_t size : {std::size_t{0}, std::size_t{100}, std::size_t{16 * 1024 - 16}, std::size_t{40'000}}) {
        const auto whole = make(size, size);
        const std::span<const std::byte> all(whole);
        const std::size_t a = size / 3, b = size / 2;
        const std::span<const std::byte> parts[] = {all.first(a), all.subspan(a, b - a), {}, all.subspan(b)};
        std::thread reader([&] {
            std::vector<std::byte> got;
            std::uint64_t tag = 0;
            EXPECT_EQ(r.read(got, 10s, &tag), Status::ok);
            EXPECT_EQ(got, whole) << "size " << size;
            EXPECT_EQ(tag, 5u);
        });
        EXPECT_EQ(w.write_parts(parts, 10s, 5), Status::ok);
        reader.join();
    }
}

// The one-record paths place every byte wherever in its cache line a record starts (its header at each
// 16-byte offset, the payload's first line shared with it or not) and wherever the parts split.
TEST(ScatterWrite, EveryByteInPlaceWhereverTheRecordStartsInItsLine) {
    ScopedName name("stamp-line");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    std::vector<std::byte> got;
    int checked = 0;
    for (std::size_t size = 1; size <= 200; size += 7) {  // record sizes step the start through a line
        const auto whole = make(size, size);
        const std::span<const std::byte> all(whole);
        ASSERT_EQ(w.write(all, 1s, size), Status::ok);
        std::uint64_t tag = 0;
        ASSERT_EQ(r.read(got, 1s, &tag), Status::ok);
        EXPECT_EQ(got, whole) << "write(), size " << size;
        for (std::size_t cut = 0; cut <= size; cut += 5) {  // the seams before, on and past the header's line end
            const std::span<const std::byte> parts[] = {all.first(cut / 2), all.subspan(cut / 2, cut - cut / 2), all.subspan(cut)};
            ASSERT_EQ(w.write_parts(parts, 1s, cut), Status::ok);
            ASSERT_EQ(r.read(got, 1s, &tag), Status::ok);
            EXPECT_EQ(got, whole) << "write_parts(), size " << size << ", cut " << cut;
            EXPECT_EQ(tag, cut);
            ++checked;
        }
    }
    EXPECT_EQ(checked, 592);  // 29 sizes, their cuts
}

// A message over kMaxMessage is refused before any of it is out: a reader refuses such a total as
// corrupt, so first fragments already published would leave every reader stuck at them for good.
TEST(ScatterWrite, AMessageOverTheReassemblyLimitIsRefusedWithNothingPublished) {
    ScopedName name("too-large");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    const Writer::FillFn fill = [](void*, std::span<std::byte> dst, std::uint64_t) { std::memset(dst.data(), 7, dst.size()); };
    WriteProgress progress;
    for (WriteProgress* p : {static_cast<WriteProgress*>(nullptr), &progress}) {
        try {
            (void)w.write_filled(kMaxMessage + 4096, fill, nullptr, 100ms, 0, p);
            ADD_FAILURE() << "a message over kMaxMessage was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::message_too_large);
            EXPECT_NE(std::string(e.what()).find("largest a reader reassembles"), std::string::npos) << e.what();
        }
    }
    std::vector<std::byte> got;
    EXPECT_EQ(r.read(got, 0ns), Status::timed_out) << "nothing of the refused message was published";
    const auto next = make(100, 3);
    ASSERT_EQ(w.write(next, 1s), Status::ok);
    ASSERT_EQ(r.read(got, 1s), Status::ok) << "the queue goes on";
    EXPECT_EQ(got, next);
}

// After close() a Writer publishes nothing more: a reader that already got `closed` would miss what
// a reader still draining gets. Every way to write says closed.
TEST(ScatterWrite, EveryWriteAfterCloseSaysClosedAndPublishesNothing) {
    ScopedName name("after-close");
    auto w = Writer::create(name, SegmentOptions{.readers = 2, .capacity = 1 << 16});
    auto r0 = Reader::attach(name, 0);
    auto r1 = Reader::attach(name, 1);
    const auto before = make(100, 1);
    ASSERT_EQ(w.write(before, 1s), Status::ok);
    w.close();
    std::vector<std::byte> got;
    ASSERT_EQ(r0.read(got, 1s), Status::ok);
    ASSERT_EQ(r0.read(got, 1s), Status::closed);
    const auto small = make(100, 2);
    const auto large = make(40'000, 2);  // fragmented in a 64 KiB ring
    const std::span<const std::byte> parts[] = {large};
    const Writer::FillFn fill = [](void*, std::span<std::byte> dst, std::uint64_t) { std::memset(dst.data(), 9, dst.size()); };
    EXPECT_EQ(w.write(small, 1s), Status::closed);
    EXPECT_EQ(w.write(large, 1s), Status::closed);
    EXPECT_EQ(w.write_parts(parts, 1s), Status::closed);
    EXPECT_EQ(w.write_filled(100, fill, nullptr, 1s), Status::closed);
    EXPECT_EQ(w.reserve(64, 1s).status, Status::closed);
    EXPECT_EQ(r0.read(got, 0ns), Status::closed) << "the reader that had drained sees nothing new";
    ASSERT_EQ(r1.read(got, 1s), Status::ok);
    EXPECT_EQ(got, before);
    EXPECT_EQ(r1.read(got, 1s), Status::closed) << "nor does the one still draining";
}

// A fragmented message written in short slices resumes where it stopped: the reader gets it once,
// whole, and no abort record is published between the slices.
TEST(ScatterWrite, ATimedOutFragmentedWriteResumesWithItsProgress) {
    ScopedName name("resume");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    const auto big = make(300 * 1024, 42);  // ~19 fragments of a 64 KiB ring
    const std::span<const std::byte> all(big);
    const std::span<const std::byte> parts[] = {all.first(1000), all.subspan(1000)};
    std::atomic<bool> done{false};
    std::atomic<bool> writer_timed_out{false};
    std::thread reader([&] {
        // A slow reader: it starts only once the writer has timed out on the full ring, so at least
        // one slice is resumed whatever the machine's timing (a reader that kept up with every 200 us
        // slice once made the writer never time out).
        while (!writer_timed_out.load() && !done.load()) std::this_thread::sleep_for(100us);
        std::vector<std::byte> got;
        for (;;) {
            const Message m = r.peek(50ms);
            if (m.status == Status::ok) {
                got.assign(m.bytes.begin(), m.bytes.end());
                r.release();
                break;
            }
            if (done.load()) break;
        }
        EXPECT_EQ(check_message(got, 42, big.size()), "");
        std::vector<std::byte> next;
        EXPECT_EQ(r.read(next, 10s), Status::ok);
        EXPECT_EQ(check_message(next, 43, 100), "") << "the message after the resumed one";
    });
    WriteProgress progress;
    int slices = 0;
    for (;; ++slices) {
        const Status s = w.write_parts(parts, 200us, 9, &progress);
        if (s == Status::ok) break;
        ASSERT_EQ(s, Status::timed_out);
        writer_timed_out = true;
        ASSERT_LT(slices, 1'000'000);
    }
    EXPECT_GT(slices, 0) << "the ring never filled: nothing was resumed";
    ASSERT_EQ(w.write(make(100, 43), 10s), Status::ok);
    done = true;
    reader.join();
}

// abort_write withdraws an open message: readers drop its fragments and get the next message.
TEST(ScatterWrite, AbortWriteWithdrawsTheOpenMessage) {
    ScopedName name("abortw");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    const auto big = make(200 * 1024, 1);
    const std::span<const std::byte> parts[] = {std::span<const std::byte>(big)};
    WriteProgress progress;
    ASSERT_EQ(w.write_parts(parts, 0ns, 0, &progress), Status::timed_out);  // the ring fills, nobody reads
    ASSERT_TRUE(progress.started());
    std::thread reader([&] {
        std::vector<std::byte> got;
        EXPECT_EQ(r.read(got, 10s), Status::ok);
        EXPECT_EQ(check_message(got, 2, 64), "") << "the withdrawn message must not arrive";
    });
    ASSERT_EQ(w.abort_write(progress, 10s), Status::ok);
    EXPECT_FALSE(progress.started());
    ASSERT_EQ(w.write(make(64, 2), 10s), Status::ok);
    reader.join();
}

// A stale progress (its stream was withdrawn by another write) is not resumed: the message restarts.
TEST(ScatterWrite, AProgressOfAWithdrawnStreamRestartsTheMessage) {
    ScopedName name("stale");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 1 << 16});
    auto r = Reader::attach(name, 0);
    const auto big = make(100 * 1024, 7);
    const std::span<const std::byte> parts[] = {std::span<const std::byte>(big)};
    WriteProgress progress;
    ASSERT_EQ(w.write_parts(parts, 0ns, 0, &progress), Status::timed_out);
    std::vector<std::byte> got;
    std::thread reader([&] {
        std::vector<std::byte> m;
        EXPECT_EQ(r.read(m, 10s), Status::ok);
        EXPECT_EQ(check_message(m, 8, 64), "");
        EXPECT_EQ(r.read(m, 10s), Status::ok);
        EXPECT_EQ(check_message(m, 7, big.size()), "") << "restarted whole, not resumed mid-way";
    });
    ASSERT_EQ(w.write(make(64, 8), 10s), Status::ok);  // withdraws the open stream first
    ASSERT_EQ(w.write_parts(parts, 10s, 0, &progress), Status::ok);
    reader.join();
}

// ---- ranks ----------------------------------------------------------------------------------------

TEST(Ranks, SameRankTwiceWhileAliveIsAnError) {
    ScopedName name("rank");
    auto w = Writer::create(name, SegmentOptions{.readers = 2});
    auto r = Reader::attach(name, 1);
    try {
        auto again = Reader::attach(name, 1);
        FAIL() << "duplicate rank attached";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::rank_in_use);
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    try {
        auto bad = Reader::attach(name, 2);
        FAIL() << "rank out of range attached";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    }
    try {
        auto w2 = Writer::open(name);
        FAIL() << "second writer";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::writer_in_use);
    }
}

// A closed queue stays closed unless the opener asks to reopen it; a reopened queue delivers again to a
// reader that had drained it and got `closed`.
TEST(Ranks, WriterOpenOfAClosedQueueRefusesUnlessAskedToReopen) {
    ScopedName name("reopen");
    WriterOptions first;
    first.unlink_on_destroy = false;
    { auto w = Writer::create(name, SegmentOptions{.readers = 1}, first); }  // closes; the name stays
    auto r = Reader::attach(name, 0);
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 0ns), Status::closed) << "the first writer's destructor closed the queue";
    try {
        (void)Writer::open(name);
        FAIL() << "a closed queue was reopened without reopen_closed";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol);
        EXPECT_NE(std::string(e.what()).find("reopen_closed"), std::string::npos) << e.what();
    }
    WriterOptions reopen;
    reopen.reopen_closed = true;
    auto w = Writer::open(name, reopen);
    EXPECT_FALSE(w.closed());
    ASSERT_EQ(w.write(make(10, 7), 1s), Status::ok);
    ASSERT_EQ(r.read(got, 1s), Status::ok);
    EXPECT_EQ(check_message(got, 7, 10), "");
}

// keep_place: a clean detach keeps the rank's head honoured; the rank re-attaches and resumes.
TEST(Ranks, ARankThatKeptItsPlaceReattachesAndResumes) {
    ScopedName name("reattach");
    auto w = Writer::create(name, SegmentOptions{.readers = 1});
    std::vector<std::byte> got;
    for (std::uint64_t seq = 0; seq < 4; ++seq) ASSERT_EQ(w.write(make(100, seq), 1s), Status::ok);
    ReaderOptions keep;
    keep.keep_place = true;
    {
        auto r = Reader::attach(name, 0, keep);
        ASSERT_EQ(r.read(got, 1s), Status::ok);
        ASSERT_EQ(check_message(got, 0, 100), "");
    }
    EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state, layout::SlotState::detached);
    auto r = Reader::attach(name, 0);
    ASSERT_EQ(r.read(got, 1s), Status::ok);
    EXPECT_EQ(check_message(got, 1, 100), "") << "resumes after the last released message";
}

// detach() gives the rank back before the object goes (a Python shutdown()), and the object's
// destructor later touches nothing: not a successor's claim of a kept place.
TEST(Ranks, DetachReleasesTheRankNowAndTheDestructorLeavesASuccessorAlone) {
    ScopedName name("detach-now");
    auto w = Writer::create(name, SegmentOptions{.readers = 2});
    ReaderOptions keep;
    keep.keep_place = true;
    std::optional<Reader> kept(Reader::attach(name, 0, keep));
    auto left = Reader::attach(name, 1);
    left.detach();
    EXPECT_TRUE(left.detached());
    EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(1).owner.load()).state, layout::SlotState::left);
    kept->detach();
    kept->detach();  // idempotent
    EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state, layout::SlotState::detached);
    auto successor = Reader::attach(name, 0);  // the kept place, claimed by another reader
    kept.reset();  // the first object goes: it must not release the successor's claim
    EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state, layout::SlotState::attached);
    ASSERT_EQ(w.write(make(100, 7), 1s), Status::ok);
    std::vector<std::byte> got;
    ASSERT_EQ(successor.read(got, 1s), Status::ok);
    EXPECT_EQ(check_message(got, 7, 100), "");
}

// The default clean-exit policy: a reader that leaves releases its rank, so it can never hold the
// writer again (the writer writes past its head at once), and re-attaching it is a clear error.
TEST(Ranks, ACleanDetachReleasesTheRankByDefault) {
    ScopedName name("left");
    auto w = Writer::create(name, SegmentOptions{.readers = 2, .capacity = 1 << 16});
    auto stays = Reader::attach(name, 1);
    { auto leaves = Reader::attach(name, 0); }
    EXPECT_EQ(layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state, layout::SlotState::left);
    std::vector<std::byte> got;
    for (std::uint64_t seq = 0; seq < 200; ++seq) {  // ~12 x the ring: rank 0 would block the 2nd lap
        ASSERT_EQ(w.write(make(4000, seq), 1s), Status::ok) << "message " << seq;
        ASSERT_EQ(stays.read(got, 1s), Status::ok);
        ASSERT_EQ(check_message(got, seq, 4000), "");
    }
    try {
        (void)Reader::attach(name, 0);
        FAIL() << "a released rank re-attached";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::rank_left);
        EXPECT_NE(std::string(e.what()).find("keep_place"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace ringcast::test

namespace ringcast::test {
namespace {

// The size promise: any message up to at least 1 GiB through a ring of the smallest capacity (64 KiB),
// streamed in fragments and reassembled (64 MiB in sanitizer builds, RINGCAST_TEST_SCALE < 1).
TEST(Fragments, OneGibibyteThroughTheSmallestRing) {
    const std::size_t size = test_scale() >= 1.0 ? (std::size_t{1} << 30) : (std::size_t{64} << 20);
    ScopedName name("gib");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = layout::kMinCapacity});
    std::string failure = "reader did not run";
    std::thread reader([&] {
        auto r = Reader::attach(name, 0);
        const Message m = r.peek(120s);
        if (m.status != Status::ok) {
            failure = std::string("peek: ") + to_string(m.status);
            return;
        }
        failure = check_message(m.bytes, 77, size);
        r.release();
    });
    {
        std::vector<std::byte> big(size);
        fill_message(big, 77);
        ASSERT_EQ(w.write(big, 120s, 5), Status::ok);
    }
    reader.join();
    EXPECT_EQ(failure, "");
}

// ---- the adaptive hybrid's predictor -------------------------------------------------------------
constexpr std::chrono::nanoseconds kFloor = 10us, kMax = 2ms;

TEST(SpinHistory, StartsAtTheFloorAndSpinsTheCapWhileEveryRecentWaitFitsInIt) {
    SpinHistory h;
    EXPECT_EQ(h.budget(kFloor, kMax), kFloor) << "no history: spin only the floor";
    for (int i = 0; i < 30; ++i) h.record(100us, kMax);
    EXPECT_GE(h.typical(), 95us);
    EXPECT_LE(h.typical(), 100us);
    EXPECT_EQ(h.budget(kFloor, kMax), kMax) << "waits at a rhythm within the cap: a late one is spun to its end";
    h.record(1900us, kMax);  // a late reply, still within the cap
    EXPECT_EQ(h.budget(kFloor, kMax), kMax);
    SpinHistory tiny;  // a cap below the floor: the floor
    tiny.record(1us, 5us);
    EXPECT_EQ(tiny.budget(kFloor, 5us), kFloor);
}

// A pause longer than the cap (a bursty reader between bursts) ends the whole-cap rule: the budget is
// about twice the typical wait again, until the pause has decayed under the cap (1/32 a wait: ~44
// waits for the longest recorded, 4 x spin_max).
TEST(SpinHistory, APausePastTheCapFallsBackToTwiceTheTypicalWaitUntilItDecays) {
    SpinHistory h;
    for (int i = 0; i < 30; ++i) h.record(100us, kMax);
    h.record(std::chrono::hours(1), kMax);  // recorded as 4 x kMax
    for (int i = 0; i < 30; ++i) h.record(100us, kMax);
    EXPECT_GE(h.budget(kFloor, kMax), 190us) << "about twice the typical wait";
    EXPECT_LE(h.budget(kFloor, kMax), 210us);
    int waits = 30;
    while (h.budget(kFloor, kMax) != kMax && waits < 1000) {
        h.record(100us, kMax);
        ++waits;
    }
    EXPECT_GE(waits, 40) << "the pause is remembered for ~44 waits";
    EXPECT_LE(waits, 48);
    h.record(2500us, kMax);  // one wait just past the cap
    EXPECT_LT(h.budget(kFloor, kMax), kMax);
    SpinHistory copy(h);  // a collect's copy keeps it
    EXPECT_EQ(copy.budget(kFloor, kMax), h.budget(kFloor, kMax));
}

TEST(SpinHistory, LongWaitsFallBackToTheFloorAndAreForgotten) {
    SpinHistory h;
    for (int i = 0; i < 30; ++i) h.record(100us, kMax);
    h.record(std::chrono::hours(1), kMax);  // an idle hour: capped at 4 x spin_max
    EXPECT_LE(h.typical(), 4 * kMax);
    EXPECT_EQ(h.budget(kFloor, kMax), kFloor) << "waits have been long: do not spin through them";
    for (int i = 0; i < 12; ++i) h.record(100us, kMax);  // a burst of steps again
    EXPECT_GT(h.budget(kFloor, kMax), kFloor) << "the idle hour must be forgotten after a few short waits";
    EXPECT_LE(h.budget(kFloor, kMax), kMax);
}

TEST(SpinHistory, BudgetNeverLeavesFloorToMax) {
    SpinHistory h;
    for (auto w : {0us, 1us, 3us, 900us, 999us, 1000us, 1001us, 5000us}) {
        h.record(w, kMax);
        const auto b = h.budget(kFloor, kMax);
        EXPECT_GE(b, kFloor);
        EXPECT_LE(b, kMax);
    }
}

// Long regular waits (an executor collecting a 20 ms step) are predicted: sleep until shortly before
// the expected end, then spin a window of 2 x lead; the lead follows how regular the waits are.
TEST(SpinHistory, PredictsRegularLongWaits) {
    SpinHistory h;
    EXPECT_EQ(h.predicted(kMax).wake_after, 0ns) << "no history: no prediction";
    for (int i = 0; i < 40; ++i) h.record(20ms, kMax);
    EXPECT_EQ(h.budget(kFloor, kMax), kFloor) << "a long wait is not spun through";
    const SpinHistory::Prediction p = h.predicted(kMax);
    EXPECT_GE(p.wake_after, 20ms - kMax / 4);
    EXPECT_LE(p.wake_after, 20ms - SpinHistory::kMinLead);
    const auto lead = p.spin / 2;  // the window is centred on the expected end (within the average's rounding)
    EXPECT_LE(std::chrono::abs(p.wake_after + lead - 20ms), 10us);
    // The copy a collect uses (gather.cpp) predicts the same.
    EXPECT_EQ(SpinHistory(h).predicted(kMax).wake_after, p.wake_after);
    // Alarms that go off 200 us late: the alarm is set that much earlier, so that the window, which
    // opens when the alarm actually goes off, keeps its centre on the expected end.
    for (int i = 0; i < 40; ++i) h.record_alarm_late(200us);
    const SpinHistory::Prediction q = h.predicted(kMax);
    EXPECT_LE(std::chrono::abs(q.wake_after + 200us + q.spin / 2 - 20ms), 10us);
}

// A gather collect's later waits (its copy after stop_predicting) spin for the budget the collector
// learned from its collects' spread, whatever the history of whole collects says (for steps longer than
// spin_max that would be the floor: a futex wake for every reply more than 10 us behind the first).
TEST(SpinHistory, ACollectsLaterWaitsSpinForTheBudgetLearnedFromTheSpread) {
    SpinHistory whole;
    for (int i = 0; i < 40; ++i) whole.record(20ms, kMax);
    ASSERT_EQ(whole.budget(kFloor, kMax), kFloor) << "a whole collect of 20 ms is not spun through";
    SpinHistory spread;  // the collector's reply_spread_: last replies ~0.5 ms behind the first
    for (int i = 0; i < 40; ++i) spread.record(500us, kMax);
    SpinHistory later(whole);
    later.stop_predicting_from(spread, kFloor, kMax);
    EXPECT_EQ(later.budget(kFloor, kMax), kMax) << "every recent spread fit in the cap: the whole cap";
    EXPECT_EQ(later.predicted(kMax).wake_after, 0ns) << "and never predicted";
    for (int i = 0; i < 40; ++i) later.record(3ms, kMax);
    EXPECT_EQ(later.budget(kFloor, kMax), kMax) << "the copy's own later waits do not change it";
    SpinHistory paused;  // spreads of ~0.5 ms after one of 5 ms: twice the typical spread
    paused.record(5ms, kMax);
    for (int i = 0; i < 20; ++i) paused.record(500us, kMax);
    SpinHistory later_after_pause(whole);
    later_after_pause.stop_predicting_from(paused, kFloor, kMax);
    EXPECT_GE(later_after_pause.budget(kFloor, kMax), 990us) << "twice the typical spread";
    EXPECT_LE(later_after_pause.budget(kFloor, kMax), 1010us);
    SpinHistory straggler;  // one rank always 3 ms behind: sleep for it, do not spin spin_max each step
    for (int i = 0; i < 40; ++i) straggler.record(3ms, kMax);
    SpinHistory later2(whole);
    later2.stop_predicting_from(straggler, kFloor, kMax);
    EXPECT_EQ(later2.budget(kFloor, kMax), kFloor);
}

// Whether a collect's later waits yield before their first spin step is the spread's own verdict —
// a typical spread of more than half of spin_for, within spin_max — passed with their budget, not
// read from that budget (the whole cap while every recent spread fits, however short).
TEST(SpinHistory, ACollectsLaterWaitsExpectALongWaitOnlyWhereTheirSpreadsAreLong) {
    SpinHistory whole;
    for (int i = 0; i < 40; ++i) whole.record(20ms, kMax);
    ASSERT_TRUE(whole.expects_long(kFloor));
    // A collect's copy after its first wait, with spreads of `spread_length`: its budget and verdict.
    struct Later {
        std::chrono::nanoseconds budget;
        bool expects_long;
        bool next_collect_expects_long;  // a fresh copy's: the next collect's first wait
    };
    const auto later_for = [&](std::chrono::nanoseconds spread_length) {
        SpinHistory spread;
        for (int i = 0; i < 40; ++i) spread.record(spread_length, kMax);
        SpinHistory later(whole);
        later.stop_predicting_from(spread, kFloor, kMax);
        return Later{later.budget(kFloor, kMax), later.expects_long(kFloor), SpinHistory(later).expects_long(kFloor)};
    };
    EXPECT_EQ(later_for(2us).budget, kMax) << "spreads of 2 us fit: the whole cap";
    EXPECT_FALSE(later_for(2us).expects_long) << "and no yield at once for them";
    EXPECT_TRUE(later_for(2us).next_collect_expects_long) << "the next collect's first wait reads whole collects";
    EXPECT_FALSE(later_for(4us).expects_long) << "less than half of spin_for";
    EXPECT_TRUE(later_for(6us).expects_long) << "more than half of spin_for";
    EXPECT_TRUE(later_for(500us).expects_long);
    EXPECT_FALSE(later_for(3ms).expects_long) << "past spin_max: slept through or predicted";
    SpinHistory ms_spread;
    for (int i = 0; i < 40; ++i) ms_spread.record(1500us, kMax);
    EXPECT_TRUE(ms_spread.later_waits_long(kFloor, kMax));
    EXPECT_FALSE(ms_spread.later_waits_long(3ms, kMax)) << "a cap under spin_for: no adaptive budget to pass it";
}

// A spread longer than spin_max (one rank ~3 ms behind the first): the collector predicts the last
// reply from it, and the later waits of that collect share one window on the clock, counted from the
// first reply, with the alarm lateness the collector measured on its whole collects.
TEST(SpinHistory, ACollectsLaterWaitsShareAWindowOnTheClockForALongSpread) {
    SpinHistory whole;
    for (int i = 0; i < 40; ++i) whole.record(20ms, kMax);
    for (int i = 0; i < 40; ++i) whole.record_alarm_late(150us);
    SpinHistory spread;
    for (int i = 0; i < 40; ++i) spread.record(3ms, kMax);
    ASSERT_EQ(spread.budget(kFloor, kMax), kFloor) << "a spread past spin_max is not spun through";
    spread.take_alarm_late(whole);
    const SpinHistory::Prediction p = spread.predicted(kMax);
    ASSERT_GT(p.wake_after, 0ns);
    const Deadline first_reply = Clock::now();
    const SpinHistory::Window w = spread.on_the_clock(p, first_reply);
    EXPECT_EQ(w.alarm, first_reply + p.wake_after);
    EXPECT_LE(std::chrono::abs(w.end - w.alarm - (150us + p.spin)), 1us)
        << "the window opens when the alarm goes off, ~150 us late";
    EXPECT_LE(std::chrono::abs(w.alarm + 150us + p.spin / 2 - (first_reply + 3ms)), 10us) << "centred on 3 ms";
    SpinHistory later(whole);
    EXPECT_EQ(later.later_window().end, later.later_window().alarm) << "no window before stop_predicting";
    later.stop_predicting_from(spread, kFloor, kMax, w);
    EXPECT_EQ(later.later_window().alarm, w.alarm);
    EXPECT_EQ(later.later_window().end, w.end);
    EXPECT_EQ(later.budget(kFloor, kMax), kFloor) << "outside the window: the floor, then sleep";
    EXPECT_EQ(SpinHistory(later).later_window().end, SpinHistory(later).later_window().alarm)
        << "a fresh copy (the next collect) has none";
    EXPECT_FALSE(later.ended_before_window());
    later.note_before_window(true);  // what block_until notes when a reply woke the sleep before the alarm
    EXPECT_TRUE(later.ended_before_window());
    SpinHistory near;  // a spread within spin_max is spun through: no window
    for (int i = 0; i < 40; ++i) near.record(500us, kMax);
    EXPECT_EQ(near.predicted(kMax).wake_after, 0ns);
}

TEST(SpinHistory, IrregularWaitsGetTheWidestWindowAndNoMore) {
    SpinHistory h;
    for (int i = 0; i < 40; ++i) h.record(i % 2 ? 10ms : 30ms, kMax);  // deviation ~10 ms
    const SpinHistory::Prediction p = h.predicted(kMax);
    ASSERT_GT(p.wake_after, 0ns);
    EXPECT_EQ(p.spin, 2 * (kMax / 4)) << "the lead is capped at spin_max / 4: idle cost stays bounded";
}

// An idle peer (or a caller waiting in slices) must not cost one spin window per wait: after a window
// that ended without its event (a timeout), predictions pause until a wait ends by its event again.
TEST(SpinHistory, AMissedWindowPausesPredictionsUntilAnEventComes) {
    SpinHistory h;
    for (int i = 0; i < 40; ++i) h.record(20ms, kMax);
    ASSERT_GT(h.predicted(kMax).wake_after, 0ns);
    h.prediction_missed();
    EXPECT_EQ(h.predicted(kMax).wake_after, 0ns);
    EXPECT_EQ(SpinHistory(h).predicted(kMax).wake_after, 0ns) << "a collect's copy pauses too";
    SpinHistory endpoint;
    for (int i = 0; i < 40; ++i) endpoint.record(20ms, kMax);
    endpoint.take_prediction_state(h);  // what gather.cpp does after a collect
    EXPECT_EQ(endpoint.predicted(kMax).wake_after, 0ns);
    h.event_came();
    EXPECT_GT(h.predicted(kMax).wake_after, 0ns);
    // A gather collect's copy stops after its first wait; the endpoint it came from does not.
    SpinHistory copy(h);
    copy.stop_predicting(kFloor, false, SpinHistory::Window{});
    EXPECT_EQ(copy.predicted(kMax).wake_after, 0ns);
    h.take_prediction_state(copy);
    EXPECT_GT(h.predicted(kMax).wake_after, 0ns);
    EXPECT_GT(SpinHistory(copy).predicted(kMax).wake_after, 0ns) << "a fresh copy predicts again";
}

// Waits near the cap that often outlast it (a 1 ms step that takes 1.5-2.3 ms on a slow machine) are
// predicted too: a spin of spin_max would end about half of them in a sleep. Waits as long but
// regular, or short and irregular, are spun through.
TEST(SpinHistory, WaitsThatOftenOutlastTheSpinArePredicted) {
    SpinHistory straying;
    for (int i = 0; i < 40; ++i) straying.record(i % 2 ? 1500us : 2300us, kMax);  // typical 1.9 ms, deviation 0.4 ms
    ASSERT_LE(straying.typical(), kMax);
    const SpinHistory::Prediction p = straying.predicted(kMax);
    ASSERT_GT(p.wake_after, 0ns) << "typical 1.9 ms + 2 x 0.4 ms is past the 2 ms spin";
    EXPECT_LE(p.wake_after, 1500us) << "the window opens before the short ones end";
    EXPECT_GE(p.wake_after + p.spin, 2300us) << "and closes after the long ones";
    SpinHistory regular;
    for (int i = 0; i < 40; ++i) regular.record(i % 2 ? 1700us : 1800us, kMax);
    EXPECT_EQ(regular.predicted(kMax).wake_after, 0ns) << "1.75 ms +- 50 us: the 2 ms spin covers it";
    SpinHistory short_irregular;
    for (int i = 0; i < 40; ++i) short_irregular.record(i % 2 ? 300us : 1700us, kMax);
    EXPECT_EQ(short_irregular.predicted(kMax).wake_after, 0ns) << "no window fits below a 1 ms wait: spin it";
    SpinHistory two_kinds;
    for (int i = 0; i < 40; ++i) two_kinds.record(i % 2 ? 500us : 2500us, kMax);
    EXPECT_EQ(two_kinds.predicted(kMax).wake_after, 0ns)
        << "0.5 and 2.5 ms waits: a window would catch neither, the spin catches the short ones";
    // One idle wait among short ones: after it, the short waits are spun through again at once (its
    // deviation lingers for ~20 waits; predicting them would sleep each until a far-off alarm).
    SpinHistory idle_once;
    for (int i = 0; i < 40; ++i) idle_once.record(100us, kMax);
    idle_once.record(1s, kMax);
    for (int i = 0; i < 25; ++i) {
        idle_once.record(100us, kMax);
        EXPECT_EQ(idle_once.predicted(kMax).wake_after, 0ns) << "short wait " << i + 1 << " after an idle second";
    }
}

TEST(SpinHistory, NoPredictionForShortOrIdleWaits) {
    SpinHistory h;
    for (int i = 0; i < 40; ++i) h.record(100us, kMax);
    EXPECT_EQ(h.predicted(kMax).wake_after, 0ns) << "short waits are spun through, not predicted";
    for (int i = 0; i < 40; ++i) h.record(std::chrono::hours(1), kMax);
    EXPECT_EQ(h.predicted(kMax).wake_after, 0ns) << "an idle queue is not a step";
}

// The polite spin stops when its yields gave more than half its time away (a busy thread beside it),
// not at the first brief run of another thread (a VM's kernel threads: tens of us now and then).
TEST(GivenAwayCpu, ABusyNeighbourStopsTheSpinBriefRunsOfOthersDoNot) {
    GivenAwayCpu busy_neighbour;
    EXPECT_FALSE(busy_neighbour.keep_spinning(1ms, 1ms + 12us)) << "a timeslice at the first yield: stop";
    GivenAwayCpu kernel_threads;
    for (auto at = 100us; at <= 2ms; at += 100us) {
        const auto took = at % 1ms == 0us ? 60us : 2us;  // a 60 us run of someone else once per ms
        EXPECT_TRUE(kernel_threads.keep_spinning(took, at)) << "at " << at.count() << " us";
    }
    GivenAwayCpu short_yields;
    for (auto at = 20us; at <= 2ms; at += 20us) EXPECT_TRUE(short_yields.keep_spinning(19us, at)) << "yields under 20 us give nothing away";
    GivenAwayCpu adding_up;  // late yields each under half the time spun, that add up past it
    EXPECT_TRUE(adding_up.keep_spinning(300us, 1300us));
    EXPECT_TRUE(adding_up.keep_spinning(300us, 1600us));
    EXPECT_TRUE(adding_up.keep_spinning(300us, 1900us));
    EXPECT_FALSE(adding_up.keep_spinning(300us, 2200us)) << "1.2 of 2.2 ms given away: stop";
    GivenAwayCpu often;
    bool kept = true;
    for (auto at = 150us; at <= 2ms && kept; at += 150us) kept = often.keep_spinning(100us, at);  // 100 of every 150 us
    EXPECT_FALSE(kept) << "others running most of the time: stop";
}

// The adaptive spin yields at every checkpoint, from the first (so a peer sharing its CPU runs at
// once), and a yield begun within spin_for never ends the spin, however late it returns. `now` is set
// back to stand for a yield that took that long.
TEST(AdaptiveHybridStrategy, YieldsFromTheFirstCheckpointAndALateYieldWithinSpinForDoesNotStopIt) {
    const AdaptiveHybridStrategy s{10us, 2ms};
    Deadline now = Clock::now();
    const Deadline before = now;
    EXPECT_TRUE(s.keep_spinning(1us, now));
    EXPECT_GT(now, before) << "a checkpoint within spin_for yields and moves the clock to after the yield";
    now = Clock::now() - 50ms;  // as if the yield took 50 ms: another thread had the CPU
    EXPECT_TRUE(s.keep_spinning(3us, now)) << "a yield begun within spin_for is not given-away time";
    // A real yield (no `now` set back) past spin_for: the 50 ms are out of the account, so it keeps
    // spinning. 45 ms spun besides them: a yield that a loaded machine (a sanitizer build beside other
    // tests; one took over 4 ms in a clean-clone CI run) makes take up to ~45 ms still cannot flip this
    // check; counting the 50 ms as given away would, whatever the yield takes (100 of 95 ms).
    now = Clock::now();
    EXPECT_TRUE(s.keep_spinning(50ms + 45ms, now)) << "the 50 ms are out of the account: a yield past spin_for keeps spinning";
    const AdaptiveHybridStrategy d{10us, 2ms};
    now = Clock::now() - 5ms;
    EXPECT_TRUE(d.keep_spinning(3us, now));
    now = Clock::now() - 1ms;
    EXPECT_FALSE(d.keep_spinning(5ms + 200us, now))
        << "the excused 5 ms do not dilute a busy neighbour's 1 ms past spin_for: 1 of ~1.2 ms given away, stop";
    const AdaptiveHybridStrategy late{10us, 2ms};
    now = Clock::now() - 5ms;
    EXPECT_FALSE(late.keep_spinning(20us, now)) << "past spin_for, 5 ms of 5.02 given away: stop";
}

// Only waits that happen are recorded: a condition already true, or a zero-timeout poll, is not a wait
// and must not teach the predictor that waits are short.
TEST(AdaptiveWait, RecordsOnlyRealWaits) {
    std::atomic<std::uint32_t> seq{0};
    std::atomic<std::uint64_t> sleeping{0}, waits{0};
    std::atomic<bool> flag{true};
    SpinHistory h;
    WaitOptions o;
    o.spin_max = kMax;
    ASSERT_TRUE(o.adaptive());
    const SleepSite site{&seq, &sleeping, 1, 0, &waits};
    WaitContext ctx{{&site, 1}};
    ctx.history = &h;
    const auto ready = [&] { return flag.load(std::memory_order_acquire); };
    EXPECT_EQ(block_until(o, ctx, ready), WaitOutcome::ready);
    EXPECT_EQ(h.typical(), 0ns);
    flag = false;
    ctx.deadline = kPollOnly;
    EXPECT_EQ(block_until(o, ctx, ready), WaitOutcome::timed_out);
    EXPECT_EQ(h.typical(), 0ns);
    // A real wait of >= 5 ms, ended by a publish from another thread: recorded (a quarter of it). The
    // waker counts its 5 ms from the waiter's announcement (its spin is over, it is in the wait), not
    // from its own start: on a loaded machine the waiter may start the wait milliseconds late.
    ctx.deadline = Clock::now() + 10s;
    std::thread waker([&] {
        const auto give_up = Clock::now() + 10s;
        while (sleeping.load() == 0 && Clock::now() < give_up) std::this_thread::yield();
        std::this_thread::sleep_for(5ms);
        publish_flag_and_notify(flag, seq, sleeping);
    });
    EXPECT_EQ(block_until(o, ctx, ready), WaitOutcome::ready);
    waker.join();
    EXPECT_GE(h.typical(), 1ms);
}

// A wait that is over within the spin's first kSpinStepsPerClockRead steps reads no clock: it is
// recorded as zero (a busy pipeline's usual wait costs no clock reads). One that outlasts them is
// timed from the first read.
TEST(AdaptiveWait, AWaitOverBeforeTheFirstClockReadIsRecordedAsZero) {
    std::atomic<std::uint32_t> seq{0};
    std::atomic<std::uint64_t> sleeping{0}, waits{0};
    SpinHistory h;
    WaitOptions o;
    o.spin_max = kMax;
    const SleepSite site{&seq, &sleeping, 1, 0, &waits};
    WaitContext ctx{{&site, 1}};
    ctx.history = &h;
    ctx.deadline = Clock::now() + 10s;
    std::uint32_t calls = 0;
    std::uint32_t ready_at = 5;  // the wrapper's check, the loop's case 1, then 3 spin steps
    const auto ready = [&] { return ++calls >= ready_at; };
    EXPECT_EQ(block_until(o, ctx, ready), WaitOutcome::ready);
    EXPECT_EQ(calls, ready_at);
    EXPECT_EQ(h.typical(), 0ns) << "a wait within the first spin steps reads no clock and is recorded as zero";

    calls = 0;
    ready_at = 2 + 3 * kSpinStepsPerClockRead;  // past the first read and one more
    // On a loaded machine the spin's yields may hand the CPU away long enough to end it: the waiter
    // then sleeps, and this waker's notifications make it look again (two checks per wake) until the
    // counted checks make it ready.
    std::atomic<bool> done{false};
    std::thread waker([&] {
        std::atomic<std::uint64_t> wakes{0};
        while (!done.load()) {
            notify_sleepers(site, wakes);
            std::this_thread::sleep_for(1ms);
        }
    });
    EXPECT_EQ(block_until(o, ctx, ready), WaitOutcome::ready);
    done = true;
    waker.join();
    EXPECT_GT(h.typical(), 0ns) << "a longer wait is timed from the spin's first clock read";
}

// WaitOptions::end_on_signal: a signal handler that runs while the waiter sleeps in the kernel ends the
// call as timed out — in a plain sleep, in an adaptive wait's sleep (which must not be recorded as a
// wait of that length) and in the sleep before a predicted wait's alarm (which must not count as a
// missed prediction: that would pause predictions). Without the option the same signals end nothing:
// the wait goes on until its event. Signals come every 5 ms until the waiter returns, so one that
// lands outside the kernel wait (during the spin) cannot decide the outcome.
enum class SleepKind { plain, adaptive, predicted };
class EndOnSignal : public ::testing::TestWithParam<SleepKind> {
protected:
    static void on_signal(int) {}
    void SetUp() override {
        struct sigaction sa {};
        sa.sa_handler = &EndOnSignal::on_signal;  // no SA_RESTART: the kernel wait returns EINTR
        sigemptyset(&sa.sa_mask);
        ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old_), 0);
    }
    void TearDown() override { ::sigaction(SIGUSR1, &old_, nullptr); }
    struct sigaction old_ {};
};

TEST_P(EndOnSignal, ASignalEndsAKernelWaitOnlyWhenAsked) {
    const SleepKind kind = GetParam();
    const bool predicted = kind == SleepKind::predicted;
    std::atomic<std::uint32_t> seq{0};
    std::atomic<std::uint64_t> sleeping{0}, waits{0};
    std::atomic<bool> flag{false}, returned{false};
    SpinHistory h;
    WaitOptions o;
    if (kind == SleepKind::plain) o.kind = WaitKind::futex;
    o.spin_max = kind == SleepKind::plain ? 0ns : kMax;
    if (predicted) {  // regular 450 ms waits: the next one sleeps until shortly before 450 ms
        for (int i = 0; i < 40; ++i) h.record(450ms, kMax);
        ASSERT_GT(h.predicted(kMax).wake_after, 300ms);
    }
    for (const bool end_on_signal : {true, false}) {
        SCOPED_TRACE(end_on_signal ? "end_on_signal" : "default");
        o.end_on_signal = end_on_signal;
        flag = false;
        returned = false;
        const SleepSite site{&seq, &sleeping, 1, 0, &waits};
        WaitContext ctx{{&site, 1}};
        ctx.history = &h;
        ctx.deadline = Clock::now() + 20s;
        WaitOutcome outcome = WaitOutcome::cancelled;
        std::thread waiter([&] {
            outcome = block_until(o, ctx, [&] { return flag.load(std::memory_order_acquire); });
            returned = true;
        });
        const auto give_up = Clock::now() + 10s;
        while (sleeping.load() == 0 && Clock::now() < give_up) std::this_thread::yield();
        const auto first_signal = Clock::now();
        // Until it returns (end_on_signal), or for 200 ms (default: it must still be waiting then).
        while (!returned && Clock::now() - first_signal < (end_on_signal ? 10s : 200ms)) {
            ASSERT_EQ(::pthread_kill(waiter.native_handle(), SIGUSR1), 0);
            std::this_thread::sleep_for(5ms);
        }
        if (end_on_signal) {
            EXPECT_LT(Clock::now() - first_signal, 5s) << "signals every 5 ms did not end the wait";
            waiter.join();
            EXPECT_EQ(outcome, WaitOutcome::timed_out);
            EXPECT_EQ(sleeping.load(), 0u) << "the announcement is retracted";
            if (predicted) {  // a signal is neither a missed prediction nor a late alarm
                EXPECT_GT(h.predicted(kMax).wake_after, 300ms);
            }
            if (kind == SleepKind::adaptive) {  // nothing recorded: the history has seen no wait
                EXPECT_EQ(h.typical(), 0ns);
            }
        } else {
            EXPECT_FALSE(returned.load()) << "a signal alone ended a wait without end_on_signal";
            publish_flag_and_notify(flag, seq, sleeping);
            waiter.join();
            EXPECT_EQ(outcome, WaitOutcome::ready);
        }
    }
}
INSTANTIATE_TEST_SUITE_P(SleepKinds, EndOnSignal,
                         ::testing::Values(SleepKind::plain, SleepKind::adaptive, SleepKind::predicted),
                         [](const auto& info) {
                             switch (info.param) {
                                 case SleepKind::plain: return "PlainSleep";
                                 case SleepKind::adaptive: return "AdaptiveSleep";
                                 case SleepKind::predicted: return "PredictedSleep";
                             }
                             return "?";
                         });

// That it spins through waits as short as recent ones is timing-based: tested alone (RUN_SERIAL) in
// tests/python/test_gather.py::test_adaptive_spin_catches_waits_as_short_as_recent_ones.

// A creator that removed its queue's name (Python's shutdown) and is destroyed later must not take the
// name from a newer queue created under it meanwhile: it unlinks a name only while it leads to its own
// segment.
TEST(Names, ARemovedNameIsNotTakenFromANewerQueue) {
    ScopedName n("newer");
    std::optional<Writer> first(Writer::create(n, SegmentOptions{.readers = 1, .capacity = 64 << 10}));
    first->close();
    first->remove_name();
    EXPECT_THROW((void)Segment::open(n), Error) << "the name is gone";
    auto second = Writer::create(n, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    first.reset();  // its destructor must not unlink the name again
    auto reader = Reader::attach(n, 0);
    ASSERT_EQ(second.write(bytes_of(10, 3), 0ns), Status::ok);
    std::vector<std::byte> got;
    ASSERT_EQ(reader.read(got, 0ns), Status::ok);
    EXPECT_EQ(got, bytes_of(10, 3));
    // and a destructor whose name was replaced under it (no remove_name) leaves the newer one too
    const std::string other = n.str() + "-b";
    std::optional<Writer> third(Writer::create(other, SegmentOptions{.readers = 1, .capacity = 64 << 10}));
    ASSERT_TRUE(Segment::remove(other));
    auto fourth = Writer::create(other, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    third.reset();
    EXPECT_NO_THROW((void)Segment::open(other)) << "the newer queue's name stays";
}  // fourth removes it

}  // namespace
}  // namespace ringcast::test
