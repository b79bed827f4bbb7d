// The C++ API used wrongly, or at its limits, the way a new user might: each case once crashed,
// corrupted the ring other processes read, lost a message or overflowed (found by a user's review),
// and must now refuse with a clear Error or keep working. The sanitizer builds (UBSan for the
// overflows, TSan for the cancel race) make the silent ones fail too.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ringcast/gather.hpp"
#include "fork_child.hpp"
#include "ringcast/ring.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

// eventfd() refused on demand, as with the fd table full (EMFILE): ringcast_tests links with
// -Wl,--wrap=eventfd (tests/CMakeLists.txt), so the library's calls come here first.
namespace {
std::atomic<bool> g_eventfd_fails{false};
}  // namespace
#ifdef RINGCAST_TESTS_WRAP_EVENTFD
extern "C" int __real_eventfd(unsigned int initval, int flags);  // NOLINT(bugprone-reserved-identifier)
extern "C" int __wrap_eventfd(unsigned int initval, int flags) {  // NOLINT(bugprone-reserved-identifier)
    if (g_eventfd_fails.load()) {
        errno = EMFILE;
        return -1;
    }
    return __real_eventfd(initval, flags);
}
#endif

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

// Every call of a moved-from endpoint either refuses (Error(protocol), naming the move) or reads as
// idle — none dereferences the pointers the move took (each of these crashed: release() after a peek
// the move took along, the fragment calls, liveness checks, the event-loop calls, the counters).
TEST(MovedFrom, EveryCallRefusesOrIsIdleAndNoneCrashes) {
    ScopedName name("moved-all"), group("moved-all-g");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    ASSERT_EQ(w.write(bytes_of(10, 1), 1s, 1), Status::ok);
    ASSERT_EQ(r.peek(1s).status, Status::ok);
    Reader r2(std::move(r));
    const auto refused = [](const char* what, auto&& call) {
        try {
            call();
            ADD_FAILURE() << what << " of a moved-from endpoint returned";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::protocol) << what << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find("moved from"), std::string::npos) << what << ": " << e.what();
        }
    };
    // NOLINTBEGIN(bugprone-use-after-move): the subject
    refused("Reader::release", [&] { r.release(); });
    refused("Reader::release_fragments", [&] { r.release_fragments(0); });
    refused("Reader::rewind_fragments", [&] { r.rewind_fragments(); });
    refused("Reader::abandon_fragments", [&] { r.abandon_fragments(); });
    refused("Reader::check_liveness", [&] { r.check_liveness(); });
    refused("Reader::wake_fd", [&] { (void)r.wake_fd(); });
    refused("Reader::arm_wake_fd", [&] { (void)r.arm_wake_fd(); });
    r.disarm_wake_fd();
    EXPECT_EQ(r.waits() + r.wake_calls(), 0u);
    r2.release();  // the peeked message moved along: released through the new owner
    Writer w2(std::move(w));
    refused("Writer::check_liveness", [&] { w.check_liveness(); });
    refused("Writer::wake_fd", [&] { (void)w.wake_fd(); });
    refused("Writer::arm_wake_fd", [&] { (void)w.arm_wake_fd(10); });
    w.disarm_wake_fd();
    EXPECT_FALSE(w.wake_ahead());
    EXPECT_TRUE(w.slowest_readers().empty());
    EXPECT_EQ(w.wake_calls() + w.space_waits(), 0u);
    auto c = GatherCollector::create(group, GatherOptions{.ranks = 1});
    auto worker = GatherWorker::attach(group, 0);
    GatherCollector c2(std::move(c));
    GatherWorker worker2(std::move(worker));
    refused("GatherCollector::wake_fd", [&] { (void)c.wake_fd(); });
    refused("GatherCollector::arm_wake_fd", [&] { (void)c.arm_wake_fd(1, {}); });
    c.disarm_wake_fd();
    EXPECT_EQ(worker.bell_rings(), 0u);
    // NOLINTEND(bugprone-use-after-move)
    ASSERT_EQ(w2.write(bytes_of(10, 2), 1s, 2), Status::ok);  // the new owners work on
    EXPECT_EQ(r2.peek(1s).tag, 2u);
    r2.release();
    const std::byte reply{3};
    ASSERT_EQ(worker2.reply(4, {&reply, 1}, 1s), Status::ok);
    EXPECT_EQ(c2.collect_all(4, 1s).status, Status::ok);
}

// A child fork()ed while its parent holds a Writer, a Reader waiting on an eventfd and a
// GatherCollector, whose copies of them are destroyed there (as in a child that returns from main):
// nothing of the parent's is released. They closed the parent's queue, gave its rank up (the writer
// then overwrote what the parent's reader had not read: Error(corrupt) there), unregistered its
// eventfd and unlinked its names.
TEST(Fork, AChildsCopiesOfItsParentsEndpointsReleaseNothing) {
    ScopedName name("fork-copies"), group("fork-copies-g");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    ReaderOptions ro;
    ro.wait.kind = WaitKind::eventfd;
    auto r = Reader::attach(name, 0, ro);
    const int fd = r.wake_fd();
    auto c = GatherCollector::create(group, GatherOptions{.ranks = 1});
    const pid_t child = fork_child([&] {
        Writer wc(std::move(w));
        Reader rc(std::move(r));
        GatherCollector cc(std::move(c));
    });  // (their destructors run here, in the child)
    ASSERT_EQ(wait_child(child, 30s), 0);
    EXPECT_FALSE(w.closed());
    const auto msg = bytes_of(1000, 7);
    std::uint64_t written = 0;
    while (written < 1000 && w.write(msg, 0ns, written) == Status::ok) ++written;
    EXPECT_LT(written, 1000u) << "the writer no longer waits for the parent's reader";
    for (std::uint64_t i = 0; i < written; ++i) {
        const Message m = r.peek(1s);
        ASSERT_EQ(m.status, Status::ok) << "message " << i;
        EXPECT_EQ(m.tag, i);
        r.release();
    }
    ASSERT_FALSE(r.arm_wake_fd());  // nothing there: armed on the parent's (still registered) eventfd
    ASSERT_EQ(w.write(msg, 1s, 9999), Status::ok);
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the publish did not reach the parent's eventfd";
    r.disarm_wake_fd();
    EXPECT_EQ(r.peek(1s).tag, 9999u);
    r.release();
    auto worker = GatherWorker::attach(group, 0);  // the group's names are still there
    const std::byte reply{5};
    ASSERT_EQ(worker.reply(1, {&reply, 1}, 1s), Status::ok);
    EXPECT_EQ(c.collect_all(1, 1s).status, Status::ok);
}

// In a fork()ed child, every call of the parent's endpoints that would write, read, release, wait or
// register through the parent's role throws Error(protocol) naming the parent's pid and the fork, and
// the calls that cannot throw (close, remove_name, wake_ahead, disarm) leave the queue alone. Before,
// they ran: the child's release moved the parent's cursor (the parent then read past a message it had
// not released, or the writer overwrote one it was reading), its write put a second writer on the
// ring, its collect took the parent's replies, its close ended the parent's queue.
TEST(Fork, AChildsCopiesOfItsParentsEndpointsRefuseWhatWouldTouchTheParentsQueue) {
    ScopedName name("fork-refuse"), group("fork-refuse-g");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    auto c = GatherCollector::create(group, GatherOptions{.ranks = 1});
    auto worker = GatherWorker::attach(group, 0);
    ASSERT_EQ(w.write(bytes_of(100, 1), 1s, 1), Status::ok);
    ASSERT_EQ(w.write(bytes_of(100, 2), 1s, 2), Status::ok);
    ASSERT_EQ(r.peek(1s).tag, 1u);  // the parent holds message 1 across the fork
    const std::byte reply{7};
    ASSERT_EQ(worker.reply(5, {&reply, 1}, 1s), Status::ok);  // a reply waits for the parent's collect
    const Reservation open = w.reserve(10, 1s);                // and a reservation stays open
    ASSERT_EQ(open.status, Status::ok);
    // A second queue whose reader the parent has armed on its eventfd (its bit announced, asleep as
    // far as the writer knows): the child's disarm and cancel must not touch that announcement.
    ScopedName idle_name("fork-refuse-idle");
    auto idle_w = Writer::create(idle_name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto idle_r = Reader::attach(idle_name, 0);
    const int idle_fd = idle_r.wake_fd();
    ASSERT_FALSE(idle_r.arm_wake_fd());  // nothing there: armed
    const pid_t parent = ::getpid();
    const pid_t child = fork_child([&] {
        const auto refused = [&](const char* what, auto&& call) {
            try {
                call();
                ADD_FAILURE() << what << " ran in the forked child";
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::protocol) << what << ": " << e.what();
                const std::string text = e.what();
                EXPECT_NE(text.find("belongs to pid " + std::to_string(parent)), std::string::npos) << what << ": " << text;
                EXPECT_NE(text.find("through fork()"), std::string::npos) << what << ": " << text;
            }
        };
        refused("write", [&] { (void)w.write(bytes_of(10, 9), 0ns, 9); });
        refused("reserve", [&] { (void)w.reserve(10, 0ns); });
        refused("commit", [&] { w.commit(10, 9); });
        WriteProgress nothing_open;  // withdrawing nothing touches nothing: a cleanup call, not refused
        EXPECT_EQ(w.abort_write(nothing_open, 0ns), Status::ok);
        refused("Writer::check_liveness", [&] { w.check_liveness(); });
        refused("Writer::wake_fd", [&] { (void)w.wake_fd(); });
        refused("peek", [&] { (void)r.peek(0ns); });
        refused("release", [&] { r.release(); });
        refused("peek_fragment", [&] { (void)r.peek_fragment(0ns); });
        refused("release_fragments", [&] { r.release_fragments(0); });
        refused("abandon_fragments", [&] { r.abandon_fragments(); });
        refused("Reader::wake_fd", [&] { (void)r.wake_fd(); });
        refused("Reader::arm_wake_fd", [&] { (void)r.arm_wake_fd(); });
        refused("Writer::arm_wake_fd", [&] { (void)w.arm_wake_fd(10); });
        refused("collect", [&] { (void)c.collect_all(5, 0ns); });
        refused("GatherCollector::wake_fd", [&] { (void)c.wake_fd(); });
        refused("GatherCollector::arm_wake_fd", [&] { (void)c.arm_wake_fd(5, {}); });
        refused("reply", [&] { (void)worker.reply(6, {&reply, 1}, 0ns); });
        EXPECT_FALSE(w.wake_ahead());
        w.disarm_wake_fd();
        r.disarm_wake_fd();
        c.disarm_wake_fd();
        idle_r.disarm_wake_fd();  // would retract the parent's announcement: its wake then lost
        idle_r.cancel();          // would wake and poke the parent's waits
        idle_w.cancel();
        refused("idle Reader::arm_wake_fd", [&] { (void)idle_r.arm_wake_fd(); });
        w.remove_name();
        w.close();
        worker.close();
        EXPECT_EQ(std::string(w.segment().name()), name.str());
    });
    ASSERT_EQ(wait_child(child, 30s), 0);
    // The parent's armed reader is still announced: the next publish reaches its eventfd.
    ASSERT_EQ(idle_w.write(bytes_of(10, 4), 1s, 4), Status::ok);
    pollfd p{.fd = idle_fd, .events = POLLIN, .revents = 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the publish did not reach the parent's eventfd: its announcement was retracted";
    idle_r.disarm_wake_fd();
    EXPECT_EQ(idle_r.peek(1s).tag, 4u);
    idle_r.release();
    // The parent's queue as it was: open, its name there, message 1 still held, then 2, the reservation
    // still its own, the reply still in its ring, the worker's reply ring open.
    EXPECT_FALSE(w.closed());
    EXPECT_FALSE(Segment::open(group.str() + ".r0").closed_acquire()) << "the child's worker.close() closed the reply ring";
    EXPECT_NO_THROW((void)Segment::open(name.str()));
    EXPECT_EQ(r.peek(0ns).tag, 1u);
    r.release();
    EXPECT_EQ(r.peek(1s).tag, 2u);
    r.release();
    w.commit(10, 3);
    EXPECT_EQ(r.peek(1s).tag, 3u);
    r.release();
    const GatherResult got = c.collect_all(5, 1s);
    ASSERT_EQ(got.status, Status::ok);
    ASSERT_TRUE(got.replies[0].has_value());
    EXPECT_EQ((*got.replies[0])[0], reply);
    ASSERT_EQ(worker.reply(6, {&reply, 1}, 1s), Status::ok);  // the worker's ring still open
    EXPECT_EQ(c.collect_all(6, 1s).status, Status::ok);
}

// A child made without fork()'s handlers — a raw clone() system call, as glibc's _Fork() or a
// language runtime's own process spawning makes one — still knows it is not its parent: the pid word
// lives in a page the kernel zeroes in every such child (MADV_WIPEONFORK, detail/process.hpp). Before,
// the child read its parent's pid from a word only a pthread_atfork handler refreshed: its write went
// into the parent's ring as if it were the parent's writer. Not under TSan: its runtime keeps state a
// raw clone() (no fork interceptor) leaves inconsistent in the child.
TEST(Fork, AChildMadeWithoutForksHandlersStillRefusesTheParentsEndpoints) {
#if defined(RINGCAST_TEST_UNDER_TSAN)
    GTEST_SKIP() << "a raw clone() child under TSan's runtime";
#else
    if (!ringcast::detail::pid_word_wiped_in_fork_children())
        GTEST_SKIP() << "the kernel refused MADV_WIPEONFORK: the fork rule does not hold in a raw clone() child here";
    ScopedName name("fork-raw-clone");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    const pid_t parent = ::getpid();
    const long child = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);  // no CLONE_VM: a copy, as fork's
    if (child == 0) ::_exit(write_through_parents_writer(w, parent));
    const int clone_errno = errno;
    ASSERT_GT(child, 0) << "clone: " << std::strerror(clone_errno);
    EXPECT_EQ(wait_child(static_cast<pid_t>(child), 30s), kWriteRefused) << "codes: fork_child.hpp";
    EXPECT_EQ(r.peek(0ns).status, Status::timed_out);  // nothing of the child's in the ring
    ASSERT_EQ(w.write(bytes_of(10, 1), 1s, 1), Status::ok);  // the parent's writer goes on
    EXPECT_EQ(r.peek(1s).tag, 1u);
#endif
}

// Where the kernel refuses the wiped page (before 4.14, or a sandbox's seccomp filter), the pid lives in a
// static word that a pthread_atfork handler refreshes in every fork() child: that child must still find
// it is not its parent. A child process installs a filter that fails madvise(MADV_WIPEONFORK) with
// EINVAL and execs fork_fallback_probe.cpp's program, whose initialisation then takes the fallback;
// the probe forks and checks that its child's copy of the writer is refused and writes nothing (the
// probe's exit codes are listed there).
TEST(Fork, WhereTheKernelRefusesTheWipedPageAForkChildIsStillRefused) {
#if !defined(MADV_WIPEONFORK)
    GTEST_SKIP() << "headers without MADV_WIPEONFORK: the library takes the fallback everywhere here";
#else
    // seccomp_data.arch of this build's system calls (another ABI's calls are left alone).
#if defined(__x86_64__)
    constexpr std::uint32_t kThisAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    constexpr std::uint32_t kThisAuditArch = AUDIT_ARCH_AARCH64;
#else
    constexpr std::uint32_t kThisAuditArch = 0;
#endif
    if (kThisAuditArch == 0) GTEST_SKIP() << "no seccomp architecture word known for this CPU";
    ScopedName name("fork-fallback");
    constexpr int kNoSeccomp = 77;         // the kernel takes no filter at all here: skip
    constexpr int kFilterRefused = 78;     // it takes a filter, but not ours: the program is wrong
    constexpr int kExecFailed = 79;
    const pid_t child = ::fork();
    if (child == 0) {  // only system calls from here to the exec (the parent may have threads)
        sock_filter allow_all[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        sock_filter refuse_wipeonfork[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kThisAuditArch, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
            // The advice is an int: the low word of args[2] (little-endian, as the arch check ensures).
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_WIPEONFORK, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        const sock_fprog allow{static_cast<unsigned short>(std::size(allow_all)), allow_all};
        const sock_fprog refuse{static_cast<unsigned short>(std::size(refuse_wipeonfork)), refuse_wipeonfork};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &allow) != 0)
            ::_exit(kNoSeccomp);
        if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &refuse) != 0) ::_exit(kFilterRefused);
        ::execl(RINGCAST_FORK_FALLBACK_PROBE, RINGCAST_FORK_FALLBACK_PROBE, name.str().c_str(),
                static_cast<char*>(nullptr));
        ::_exit(kExecFailed);
    }
    ASSERT_GT(child, 0) << std::strerror(errno);
    const int code = wait_child(child, 60s);
    if (code == kNoSeccomp) GTEST_SKIP() << "seccomp filters are not allowed here: the fallback cannot be forced";
    EXPECT_EQ(code, 0) << "exit code of " << RINGCAST_FORK_FALLBACK_PROBE << " (fork_fallback_probe.cpp lists them), "
                       << kFilterRefused << " (the kernel refused the filter) or " << kExecFailed
                       << " (the exec failed); negative: killed by that signal, -1000: timed out";
#endif
}

// A constructor that fails after it claimed its role — eventfd() refused (the fd table full) — gives
// the role back: no destructor runs for a constructor that throws, so the claim stayed with this live
// process (the retry got rank_in_use / writer_in_use naming its own pid, and a writer waited for a
// reader that never read, with no peer_dead ever).
TEST(ConstructorFailure, AnEndpointWhoseEventfdFailsGivesItsClaimBack) {
#ifndef RINGCAST_TESTS_WRAP_EVENTFD
    GTEST_SKIP() << "needs the library linked statically (eventfd() is made to fail through --wrap)";
#endif
    ScopedName name("ctor-eventfd");
    const auto owner_word = [&](std::uint32_t rank) {  // the rank's slot, or the writer's (rank ~0u)
        const Segment seg = Segment::open(name.str());
        return rank == ~0u ? seg.header().writer_owner.load() : seg.reader_slot(rank).owner.load();
    };
    {
        auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10},
                                WriterOptions{.unlink_on_destroy = false});
        ReaderOptions ro;
        ro.wait.kind = WaitKind::eventfd;
        const std::uint64_t before = owner_word(0);
        g_eventfd_fails = true;
        EXPECT_THROW((void)Reader::attach(name, 0, ro), Error);
        g_eventfd_fails = false;
        EXPECT_EQ(owner_word(0), before) << "the rank's word is not what the failed attach found";
        auto r = Reader::attach(name, 0, ro);
        ASSERT_EQ(w.write(bytes_of(10, 1), 1s, 5), Status::ok);
        EXPECT_EQ(r.peek(1s).tag, 5u);
        r.release();
    }  // the writer closed the queue; the name stays
    {  // as if a writer had died holding the role: a failed open must leave that claim, not free it
        const Segment seg = Segment::open(name.str());
        seg.header().writer_owner.store(layout::pack_owner({layout::SlotState::attached, 4242, 77}));
    }
    WriterOptions wo{.unlink_on_destroy = false, .reopen_closed = true};
    wo.wait.kind = WaitKind::eventfd;
    const std::uint64_t before = owner_word(~0u);
    g_eventfd_fails = true;
    try {
        (void)Writer::open(name, wo);
        ADD_FAILURE() << "Writer::open returned with eventfd() failing";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::system) << e.what();
    }
    g_eventfd_fails = false;
    EXPECT_EQ(owner_word(~0u), before) << "the writer's word is not what the failed open found";
    auto w = Writer::open(name, wo);
    EXPECT_FALSE(w.closed());
}

// release_fragments() with a mark inside a handed-out record — aligned, in range, but not a record's
// end — was taken: the head then lay inside the record, and a re-attach of the rank (keep_place) read
// the payload there as a record: here a message the writer never wrote, forged in the payload.
TEST(ReleaseFragments, AMarkInsideARecordIsRefused) {
    ScopedName name("mark-inside");
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    std::vector<std::byte> payload(64, std::byte{0});
    auto* forged = reinterpret_cast<layout::RecordHeader*>(payload.data() + 16);  // at ring offset 32
    forged->length = 5;
    forged->stamp.store(layout::make_stamp(layout::RecordKind::message, 32, 16));
    forged->tag = 0xbad;
    {
        ReaderOptions ro;
        ro.keep_place = true;
        auto r = Reader::attach(name, 0, ro);
        ASSERT_EQ(w.write(payload, 1s, 7), Status::ok);
        const Fragment f = r.peek_fragment(1s);
        ASSERT_EQ(f.status, Status::ok);
        ASSERT_GT(f.release_mark, 32u);
        try {
            r.release_fragments(32);
            ADD_FAILURE() << "release_fragments(32) inside the record [0, " << f.release_mark << ") was taken";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::protocol) << e.what();
        }
    }  // detached, keeping its place (nothing released)
    auto r2 = Reader::attach(name, 0);
    std::vector<std::byte> got;
    std::uint64_t tag = 0;
    ASSERT_EQ(r2.read(got, 1s, &tag), Status::ok);
    EXPECT_EQ(tag, 7u) << "the re-attached reader did not get the message the writer wrote";
    EXPECT_EQ(got, payload);
}

}  // namespace
}  // namespace ringcast::test
