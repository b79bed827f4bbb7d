// The C++ API used wrongly, or at its limits, the way a new user might: each case once crashed,
// corrupted the ring other processes read, lost a message or overflowed (found by a user's review),
// and must now refuse with a clear Error or keep working. The sanitizer builds (UBSan for the
// overflows, TSan for the cancel race) make the silent ones fail too.
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

std::vector<std::byte> bytes_of(std::size_t n, unsigned char fill) { return std::vector<std::byte>(n, std::byte{fill}); }

// A moved-from Writer kept its pointers into the ring: its write() stamped a record into the ring its
// successor writes (readers then got it, and lost the successor's next message) before it crashed.
TEST(MovedFrom, AWriterIsClosedAndNeverTouchesTheRingItsSuccessorWrites) {
    ScopedName name("moved-writer");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    Writer successor(std::move(w));
    const auto msg = bytes_of(100, 1);
    EXPECT_EQ(w.write(msg, 0ns, 666), Status::closed);  // NOLINT(bugprone-use-after-move): the subject
    EXPECT_EQ(w.reserve(10, 0ns).status, Status::closed);
    EXPECT_TRUE(w.closed());
    w.close();
    w.cancel();
    EXPECT_FALSE(successor.closed());  // closing the moved-from one closed nothing
    ASSERT_EQ(successor.write(msg, 1s, 2), Status::ok);
    const Message m = r.peek(1s);
    ASSERT_EQ(m.status, Status::ok);
    EXPECT_EQ(m.tag, 2u);
    r.release();
}

TEST(MovedFrom, AReaderAndACollectorRefuseToRead) {
    ScopedName name("moved-reader");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    Reader kept(std::move(r));
    try {
        (void)r.peek(0ns);  // NOLINT(bugprone-use-after-move): the subject
        ADD_FAILURE() << "peek() of a moved-from Reader returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol);
        EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << e.what();
    }
    r.cancel();
    ASSERT_EQ(w.write(bytes_of(5, 2), 1s, 3), Status::ok);
    EXPECT_EQ(kept.peek(1s).tag, 3u);
    kept.release();

    ScopedName group("moved-collector");
    auto c = GatherCollector::create(group, GatherOptions{.ranks = 1, .capacity = 64 << 10});
    GatherCollector moved(std::move(c));
    c.cancel();  // NOLINT(bugprone-use-after-move): the subject
    try {
        (void)c.collect_all(0, 0ns);  // it said ok, with no replies
        ADD_FAILURE() << "collect_all() of a moved-from GatherCollector returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol);
    }
    EXPECT_EQ(moved.collect_all(0, 0ns).status, Status::timed_out);
}

// commit() of a reservation made before close() published a message after `closed`: a reader that
// had drained saw closed, then the message.
TEST(CloseWithAReservationOpen, DropsItAndCommitPublishesNothing) {
    ScopedName name("commit-after-close");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    const Reservation res = w.reserve(5, 1s);
    ASSERT_EQ(res.status, Status::ok);
    w.close();
    EXPECT_EQ(r.peek(0ns).status, Status::closed);
    try {
        w.commit(5, 42);
        ADD_FAILURE() << "commit() after close() returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol);
    }
    EXPECT_EQ(r.peek(0ns).status, Status::closed);
}

// A fragmented message handed out whole, then released in part: rewind_fragments() moved the head
// back into the middle of the message and the rest was skipped as orphans — the message lost,
// silently. Refused now, as it is while the message streams.
TEST(RewindFragments, AfterPartOfAWholeHandedOutMessageWasReleasedIsRefused) {
    ScopedName name("rewind-partial");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    ASSERT_GT(20'000u, w.max_reserve());
    ASSERT_EQ(w.write(bytes_of(20'000, 3), 1s, 7), Status::ok);  // two records
    const Fragment first = r.peek_fragment(1s);
    const Fragment last = r.peek_fragment(1s);
    ASSERT_EQ(first.status, Status::ok);
    ASSERT_TRUE(last.last());
    r.release_fragments(first.release_mark);
    EXPECT_THROW(r.rewind_fragments(), Error);
    r.release_fragments(last.release_mark);  // the caller still holds the rest, and gives it back
    ASSERT_EQ(w.write(bytes_of(10, 4), 1s, 8), Status::ok);
    EXPECT_EQ(r.peek_fragment(1s).tag, 8u);
}

// nanoseconds::max() as a liveness interval or a spin cap: `now + interval` and `4 x spin_max`
// overflowed (UBSan), and the liveness clock's wrapped deadline made a blocked peek spin on futex
// calls (294 ms of CPU in a 300 ms wait). "Never" now.
TEST(HugeIntervals, AreNeverNotAnOverflow) {
    ScopedName name("huge-intervals");
    WriterOptions wo;
    wo.liveness_interval = std::chrono::nanoseconds::max();
    wo.wait.spin_max = std::chrono::nanoseconds::max();
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10}, wo);
    ReaderOptions ro;
    ro.liveness_interval = std::chrono::nanoseconds::max();
    ro.wait.spin_max = std::chrono::nanoseconds::max();
    auto r = Reader::attach(name, 0, ro);
    for (std::uint64_t i = 0; i < 20; ++i) {
        ASSERT_EQ(w.write(bytes_of(8, 5), 1s, i), Status::ok);
        const Message m = r.peek(1s);
        ASSERT_EQ(m.status, Status::ok);
        EXPECT_EQ(m.tag, i);
        r.release();
    }
    const std::uint64_t waits_before = r.waits();
    EXPECT_EQ(r.peek(50ms).status, Status::timed_out);
    EXPECT_LE(r.waits() - waits_before, 3u) << "the blocked peek spun on futex calls";
}

// cancel() is "safe from any thread": it read the eventfd pointer that wake_fd() was setting in
// another thread (a data race TSan reports; a poke could miss an event-loop waiter).
TEST(Cancel, FromAnotherThreadWhileWakeFdIsMadeIsNoRace) {
    ScopedName name("cancel-race");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    std::thread canceller([&] {
        r.cancel();
        w.cancel();
    });
    EXPECT_GE(r.wake_fd(), 0);
    EXPECT_GE(w.wake_fd(), 0);
    canceller.join();
    r.clear_cancel();
    w.clear_cancel();
}

}  // namespace
}  // namespace ringcast::test

namespace ringcast::test {
namespace {

// A resumable write retried with other bytes under the same WriteProgress went on after the fragments
// already out: readers then met a message whose fragments disagree with its announced total — the
// segment called corrupt, for good. Refused now, and the right retry still completes the message.
TEST(ResumedWrite, WithOtherPartsIsRefusedAndTheRightOneCompletes) {
    ScopedName name("resume-other");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    const auto big = bytes_of(200'000, 6);  // three times the ring: the reader must drain for it to finish
    const std::span<const std::byte> parts[] = {big};
    WriteProgress progress;
    ASSERT_EQ(w.write_parts(parts, 20ms, 9, &progress), Status::timed_out);
    ASSERT_TRUE(progress.started());
    const auto other = bytes_of(150'000, 7);
    const std::span<const std::byte> other_parts[] = {other};
    EXPECT_THROW((void)w.write_parts(other_parts, 0ns, 9, &progress), Error);
    const auto small = bytes_of(10, 8);
    const std::span<const std::byte> small_parts[] = {small};
    EXPECT_THROW((void)w.write_parts(small_parts, 0ns, 9, &progress), Error);  // a whole record inside it
    EXPECT_THROW((void)w.write_parts(parts, 0ns, 10, &progress), Error);       // another tag
    std::vector<std::byte> got;
    std::thread reader([&] { ASSERT_EQ(r.read(got, 10s), Status::ok); });
    Status s = Status::timed_out;
    for (int i = 0; i < 1000 && s == Status::timed_out; ++i) s = w.write_parts(parts, 10ms, 9, &progress);
    reader.join();
    EXPECT_EQ(s, Status::ok);
    EXPECT_EQ(got, big);
}

}  // namespace
}  // namespace ringcast::test
