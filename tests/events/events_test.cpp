// Event loops, across real processes (fork): the eventfd wake mode (events/eventfd.hpp), fd passing
// with pidfd_getfd and a peer that vanishes, and WaitSet (events/waitset.hpp) over both back ends.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/events/waitset.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace ringcast::test {
namespace {

// A writer that pauses between bursts, so its readers fall asleep between them: every burst's first
// message must be delivered through a wake, never through the re-check that bounds a lost one (the
// liveness interval: 10 s here, so one lost wake breaks the time bounds below, also under sanitizers).
constexpr auto kLongRecheck = std::chrono::seconds(10);
constexpr int kBursts = 40;
constexpr int kPerBurst = 5;
constexpr auto kPause = 3ms;

std::vector<std::byte> payload(std::uint64_t seq) {
    std::vector<std::byte> v(64 + seq % 200);
    fill_message(v, seq);
    return v;
}

// What a wait of `set` (up to `limit`) returned while `w` published payload(seq) 50 ms into it, and how
// long it took until the publishing thread was joined: a set woken by the publish is back well within
// 1 s; one whose wake was lost only at its re-check (or its limit).
struct LateWrite {
    std::vector<std::size_t> ready;
    std::chrono::steady_clock::duration took;
};
LateWrite wait_through_a_late_write(WaitSet& set, Writer& w, std::uint64_t seq, std::chrono::seconds limit) {
    std::thread late([&] {
        std::this_thread::sleep_for(50ms);
        (void)w.write(payload(seq), 1s);
    });
    const auto t0 = std::chrono::steady_clock::now();
    LateWrite out{set.wait(limit), {}};
    late.join();
    out.took = std::chrono::steady_clock::now() - t0;
    return out;
}

// ---- the eventfd wake mode -----------------------------------------------------------------------

// arm_wake_fd() after a cancel(): the cancel's poke is drained by the arm (3a'), so the arm must see
// the flag and say "look now" — it said "armed", and a loop polling the fd slept past the cancel.
TEST(EventfdWake, ArmAfterACancelSaysLookNow) {
    ScopedName name("ev-cancel");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    (void)r.wake_fd();
    r.cancel();
    EXPECT_TRUE(r.arm_wake_fd()) << "a cancelled reader's arm reported armed";
    std::vector<std::byte> got;
    EXPECT_EQ(r.read(got, 0s), Status::cancelled);
    r.clear_cancel();
    EXPECT_FALSE(r.arm_wake_fd());
    r.disarm_wake_fd();
    // A writer with no room: cancelled, its arm says "look now" too.
    while (w.write(payload(0), 0s) == Status::ok) {
    }
    (void)w.wake_fd();
    w.cancel();
    EXPECT_TRUE(w.arm_wake_fd(200)) << "a cancelled writer's arm reported armed";
    EXPECT_EQ(w.write(payload(0), 0s), Status::cancelled);
}

// A reader process in WaitKind::eventfd sleeps on its eventfd; the writer (another process) takes a
// copy of it with pidfd_getfd and writes it. Every burst after a pause needs one wake; a lost wake
// costs the 1 s re-check (wait.hpp kUnwatchedRecheck), so the time bound catches it.
TEST(EventfdWake, ReaderProcessSleepsOnItsEventfdAndEveryWakeArrives) {
    ScopedName name("efd-reader");
    WriterOptions wo;
    wo.wait.kind = WaitKind::futex;
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024}, wo);
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        ReaderOptions ro;
        ro.wait.kind = WaitKind::eventfd;
        ro.liveness_interval = kLongRecheck;
        auto r = Reader::attach(name, 0, ro);
        std::vector<std::byte> got;
        for (std::uint64_t seq = 0; seq < kBursts * kPerBurst; ++seq) {
            ASSERT_EQ(r.read(got, 10s), Status::ok) << "message " << seq;
            ASSERT_EQ(check_message(got, seq, 64 + seq % 200), "") << "message " << seq;
        }
        EXPECT_EQ(r.read(got, 10s), Status::closed);
        EXPECT_GT(r.waits(), std::uint64_t{kBursts / 2}) << "the reader hardly ever slept: the test tests nothing";
    }));
    const auto start = std::chrono::steady_clock::now();
    for (int b = 0; b < kBursts; ++b) {
        std::this_thread::sleep_for(kPause);  // the reader drains and goes to sleep on its eventfd
        for (int i = 0; i < kPerBurst; ++i) {
            const auto seq = static_cast<std::uint64_t>(b * kPerBurst + i);
            ASSERT_EQ(w.write(payload(seq), 10s), Status::ok);
        }
    }
    w.close();
    EXPECT_EQ(kids.wait(child, 60s), 0);
    const auto took = std::chrono::steady_clock::now() - start;
    // 40 pauses of 3 ms; one lost wake alone would add 10 s.
    EXPECT_LT(took, 4s) << "a wake was lost (each costs the 10 s re-check)";
}

// The writer waits for space on its eventfd; a reader process releases slowly.
TEST(EventfdWake, WriterProcessWaitsForSpaceOnItsEventfd) {
    ScopedName name("efd-space");
    ReaderOptions ro;
    ro.wait.kind = WaitKind::futex;
    WriterOptions wo;
    wo.wait.kind = WaitKind::eventfd;
    wo.liveness_interval = kLongRecheck;
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024}, wo);
    constexpr std::uint64_t kCount = 400;  // 4 KiB each: the 64 KiB ring is full ~every 15 messages
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        auto r = Reader::attach(name, 0, ro);
        std::vector<std::byte> got;
        for (std::uint64_t seq = 0; seq < kCount; ++seq) {
            ASSERT_EQ(r.read(got, 10s), Status::ok);
            ASSERT_EQ(check_message(got, seq, 4096), "");
            if (seq % 16 == 0) std::this_thread::sleep_for(1ms);
        }
    }));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::byte> m(4096);
    for (std::uint64_t seq = 0; seq < kCount; ++seq) {
        fill_message(m, seq);
        ASSERT_EQ(w.write(m, 10s), Status::ok);
    }
    EXPECT_EQ(kids.wait(child, 60s), 0);
    EXPECT_GT(w.space_waits(), 5u) << "the writer never waited for space: the test tests nothing";
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "a space wake was lost (each costs 10 s)";
}

// pidfd_getfd across processes: the copy is the child's eventfd (a write to it is read there).
TEST(EventfdWake, TakeFdOfAnotherProcessAndItsGoneCases) {
    int to_child[2], from_child[2];
    ASSERT_EQ(::pipe(to_child), 0);
    ASSERT_EQ(::pipe(from_child), 0);
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        const int efd = ::eventfd(0, EFD_CLOEXEC);
        ASSERT_GE(efd, 0);
        ASSERT_EQ(::write(from_child[1], &efd, sizeof efd), static_cast<ssize_t>(sizeof efd));
        std::uint64_t v = 0;
        ASSERT_EQ(::read(efd, &v, sizeof v), static_cast<ssize_t>(sizeof v));  // blocks until the parent writes
        EXPECT_EQ(v, 7u);
        char done = 0;
        ASSERT_EQ(::read(to_child[0], &done, 1), 1);
    }));
    int child_fd = -1;
    ASSERT_EQ(::read(from_child[0], &child_fd, sizeof child_fd), static_cast<ssize_t>(sizeof child_fd));
    const std::uint64_t start = process_start_time(child);
    ASSERT_NE(start, 0u);
    // The wrong start time: the pid names another process (pid reuse) — refused as gone.
    EXPECT_EQ(take_fd_of(static_cast<std::uint32_t>(child), start + 1, child_fd), -1);
    EXPECT_EQ(errno, ESRCH);
    // A fd number the child does not have.
    EXPECT_EQ(take_fd_of(static_cast<std::uint32_t>(child), start, 1000), -1);
    EXPECT_EQ(errno, EBADF);
    const int copy = take_fd_of(static_cast<std::uint32_t>(child), start, child_fd);
    ASSERT_GE(copy, 0) << std::strerror(errno);
    const std::uint64_t seven = 7;
    ASSERT_EQ(::write(copy, &seven, sizeof seven), static_cast<ssize_t>(sizeof seven));
    ASSERT_EQ(::write(to_child[1], "x", 1), 1);
    EXPECT_EQ(kids.wait(child, 10s), 0);
    // The process is gone (reaped): a clear ESRCH at once, no hang.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(take_fd_of(static_cast<std::uint32_t>(child), start, child_fd), -1);
    EXPECT_EQ(errno, ESRCH);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
    for (int fd : {copy, to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

// A reader registers its eventfd, announces (armed) and is SIGKILLed before the writer ever took the
// fd: the writer's publish finds the registrant gone, does not hang, counts it, and still wakes futex
// sleepers; a replacement reader of the rank registers anew and is woken through its own eventfd.
TEST(EventfdWake, WaiterKilledMidHandshakeIsAClearFailureNotAHang) {
    ScopedName name("efd-vanish");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    ChildGuard kids;
    int ready_pipe[2];
    ASSERT_EQ(::pipe(ready_pipe), 0);
    const pid_t child = kids.add(fork_child([&] {
        auto r = Reader::attach(name, 0);
        if (r.arm_wake_fd()) std::_Exit(3);  // nothing published yet: it must arm
        char c = 'a';
        (void)!::write(ready_pipe[1], &c, 1);
        ::pause();  // killed here: registered and announced, never woken
    }));
    char c = 0;
    ASSERT_EQ(::read(ready_pipe[0], &c, 1), 1);
    EXPECT_EQ(kids.kill_and_wait(child), -SIGKILL);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(w.write(payload(0), 1s), Status::ok);  // the wake path meets the dead registrant
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
    EXPECT_GE(w.wake_calls(), 1u) << "the dead reader's announcement was not even seen";
    // A replacement (a new process) takes the rank (C1/C2) and sleeps on an eventfd of its own.
    const pid_t next = kids.add(fork_child([&] {
        ReaderOptions ro;
        ro.wait.kind = WaitKind::eventfd;
        ro.liveness_interval = kLongRecheck;
        auto r = Reader::attach(name, 0, ro);
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 5s), Status::ok);
        ASSERT_EQ(check_message(got, 0, 64), "");
        const auto t = std::chrono::steady_clock::now();
        ASSERT_EQ(r.read(got, 20s), Status::ok);  // sleeps: the writer publishes 50 ms later
        EXPECT_LT(std::chrono::steady_clock::now() - t, 4s) << "woken by the re-check, not by its eventfd";
        EXPECT_GE(r.waits(), 1u);
    }));
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(w.write(payload(1), 1s), Status::ok);
    EXPECT_EQ(kids.wait(next, 20s), 0);
    ::close(ready_pipe[0]);
    ::close(ready_pipe[1]);
}

// A waker that cannot take the fd (pidfd_getfd EPERM: no ptrace access) records it in the slot; the
// waiter's next check is an Error naming the cause, not a silent sleep. (EPERM itself needs Yama or
// another user; the record is written here as the waker writes it.)
TEST(EventfdWake, RefusedWakerIsReportedToTheWaiter) {
    ScopedName name("efd-refused");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    (void)r.wake_fd();
    auto& slot = w.segment().reader_slot(0).eventfd;
    slot.refused_by.store(4242);
    slot.refused.store(EPERM);
    try {
        (void)r.arm_wake_fd();
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::permission_denied);
        EXPECT_NE(std::string(e.what()).find("pid 4242"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("ptrace"), std::string::npos) << e.what();
    }
}

// The waker's first copy of a reader's eventfd fails for a reason of its own (its fd table is full:
// EMFILE). That failure was remembered for the whole registration: the writer never signalled that
// eventfd again, and every later message reached the reader at its liveness tick (10 s here) long
// after the fds were free. Only failures of the registration itself are remembered; this one is tried
// again at the next wake.
TEST(EventfdWake, AWakerOutOfFdsOnceReachesTheEventfdAtItsNextWake) {
    ScopedName name("efd-emfile");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    constexpr int kMessages = 5;
    ChildGuard kids;
    Pipe asleep;
    const pid_t child = kids.add(fork_child([&] {
        ReaderOptions ro;
        ro.wait.kind = WaitKind::eventfd;
        ro.liveness_interval = kLongRecheck;
        auto r = Reader::attach(name, 0, ro);
        std::vector<std::byte> got;
        for (int i = 0; i < kMessages; ++i) {
            if (i != 1) asleep.send('s');  // (the writer waits a little more, so that this read sleeps first)
            ASSERT_EQ(r.read(got, 30s), Status::ok);
            std::int64_t sent = 0;
            ASSERT_GE(got.size(), sizeof sent);
            std::memcpy(&sent, got.data(), sizeof sent);
            // (message 0 comes with message 1's wake)
            EXPECT_LT(now_ns() - sent, 2'000'000'000) << "message " << i << " came at the liveness tick, not by a wake";
        }
        EXPECT_GE(r.waits(), 1u);
    }));
    const auto send = [&] {
        std::vector<std::byte> m(64);
        const std::int64_t now = now_ns();
        std::memcpy(m.data(), &now, sizeof now);
        ASSERT_EQ(w.write(m, 1s), Status::ok);
    };
    for (int i = 0; i < kMessages; ++i) {
        if (i == 1) {  // message 0's wake was lost: the reader still sleeps, and this wake must reach it
            std::this_thread::sleep_for(50ms);
            send();
            continue;
        }
        ASSERT_EQ(asleep.recv(30000ms), 's');
        std::this_thread::sleep_for(50ms);
        if (i != 0) {
            send();
            continue;
        }
        // The first wake with the fd table full: no fd for pidfd_open, so no copy of the eventfd.
        rlimit saved{};
        ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
        rlimit low = saved;
        low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 256);  // (quick to fill)
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
        std::vector<int> filler;
        int fd = -1;
        while ((fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) filler.push_back(fd);
        const int open_errno = errno;
        const std::uint64_t wakes = w.wake_calls();
        send();
        const bool woke = w.wake_calls() > wakes;
        for (int f : filler) ::close(f);
        ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
        ASSERT_EQ(open_errno, EMFILE);
        ASSERT_TRUE(woke) << "the reader was not asleep: the full fd table met no wake, the test tests nothing";
    }
    EXPECT_EQ(kids.wait(child, 60s), 0);
}

// Level semantics of arm(): a message that came while the loop was busy makes arm() say "ready";
// after arm() said "armed", the fd turns readable on the next publish, and a poll sees it.
TEST(EventfdWake, ArmIsLevelTriggeredAndTheFdTurnsReadable) {
    ScopedName name("efd-arm");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    const int fd = r.wake_fd();
    pollfd p{fd, POLLIN, 0};
    EXPECT_FALSE(r.arm_wake_fd());
    EXPECT_EQ(::poll(&p, 1, 0), 0);
    ASSERT_EQ(w.write(payload(0), 1s), Status::ok);
    EXPECT_EQ(::poll(&p, 1, 0), 1) << "the publish did not signal the armed reader";
    r.disarm_wake_fd();
    ASSERT_EQ(w.write(payload(1), 1s), Status::ok);  // not armed: no signal owed...
    EXPECT_TRUE(r.arm_wake_fd()) << "...but arm() must see the message that is there";
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 0s), Status::ok);
    ASSERT_EQ(r.read(got, 0s), Status::ok);
    EXPECT_FALSE(r.arm_wake_fd());  // drained: arm() drained the fd too
    EXPECT_EQ(::poll(&p, 1, 0), 0);
    w.close();
    EXPECT_EQ(::poll(&p, 1, 100), 1) << "close() did not signal the armed reader";
    r.disarm_wake_fd();
}

// A gather collector in WaitKind::eventfd (whatever its method, it sleeps on the doorbell): worker
// processes' replies wake it through its eventfd, fragments of a reply larger than the ring included.
TEST(EventfdWake, GatherCollectorSleepsOnItsEventfd) {
    ScopedName group("efd-gather");
    GatherOptions go;
    go.ranks = 2;
    go.capacity = 64 * 1024;
    go.wait.kind = WaitKind::eventfd;
    go.method = GatherWait::futex_waitv;
    go.liveness_interval = kLongRecheck;
    auto c = GatherCollector::create(group, go);
    constexpr std::uint64_t kTags = 30;
    ChildGuard kids;
    std::vector<pid_t> pids;
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
        pids.push_back(kids.add(fork_child([&, rank] {
            auto w = GatherWorker::attach(group, rank);
            for (std::uint64_t tag = 0; tag < kTags; ++tag) {
                std::this_thread::sleep_for(2ms);
                std::vector<std::byte> m(tag % 10 == 9 ? 100'000 : 64);  // every 10th: fragmented
                fill_message(m, tag * 2 + rank);
                ASSERT_EQ(w.reply(tag, m, 10s), Status::ok);
            }
        })));
    }
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t tag = 0; tag < kTags; ++tag) {
        const GatherResult res = c.collect_all(tag, 20s);
        ASSERT_EQ(res.status, Status::ok) << res.describe();
        for (std::uint32_t rank = 0; rank < 2; ++rank)
            ASSERT_EQ(check_message(*res.replies[rank], tag * 2 + rank, tag % 10 == 9 ? 100'000 : 64), "");
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "a wake was lost (each costs the 10 s re-check)";
    EXPECT_GT(c.kernel_waits(), kTags / 2) << "the collector hardly slept: the test tests nothing";
    for (pid_t p : pids) EXPECT_EQ(kids.wait(p, 30s), 0);
}

// A collect that timed out keeps the replies it took, for the next collect of its tag; a collect of
// another tag drops them and needs those ranks' rings again. The event-loop condition (arm_wake_fd)
// must skip a kept rank only for the tag it was kept for: for the next step's tag, the rank's new
// reply is what the collect waits for.
TEST(EventfdWake, ArmSkipsAKeptRankOnlyForTheTagItWasKeptFor) {
    ScopedName group("efd-kept");
    GatherOptions go;
    go.ranks = 2;
    go.capacity = 64 * 1024;
    auto c = GatherCollector::create(group, go);
    auto w0 = GatherWorker::attach(group, 0);
    const std::vector<std::byte> m = payload(1);
    ASSERT_EQ(w0.reply(1, m, 1s), Status::ok);
    const std::uint32_t both[] = {0, 1};
    const std::uint32_t rank0[] = {0};
    ASSERT_EQ(c.collect(1, both, 20ms).status, Status::timed_out) << "rank 1 never replies: rank 0's reply is kept";
    // Tag 1 again: rank 0 is taken, rank 1's ring is empty: armed. Rank 0 alone: nothing left to await.
    EXPECT_FALSE(c.arm_wake_fd(1, both)) << "rank 1 has nothing: the arm must wait";
    c.disarm_wake_fd();
    EXPECT_TRUE(c.arm_wake_fd(1, rank0)) << "every rank asked for is kept: a collect takes it now";
    // The next step, tag 2: rank 0 answers; the collect of tag 2 drops the kept tag-1 reply and needs it.
    ASSERT_EQ(w0.reply(2, m, 1s), Status::ok);
    EXPECT_TRUE(c.arm_wake_fd(2, rank0)) << "rank 0's tag-2 reply is there, hidden by the tag-1 reply it kept";
    for (const WaitSetBackend backend : {WaitSetBackend::epoll, WaitSetBackend::io_uring}) {
        if (backend == WaitSetBackend::io_uring && !io_uring_futex_unavailable_reason().empty()) continue;
        WaitSet set({.backend = backend, .recheck = std::chrono::seconds(5)});
        const std::size_t id = set.add(c, 1, rank0);
        set.set_tag(id, 2);
        const auto start = std::chrono::steady_clock::now();
        const std::vector<std::size_t> ready = set.wait(3s);
        EXPECT_EQ(ready, std::vector<std::size_t>{id}) << "backend " << static_cast<int>(backend);
        EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "found only by the re-check, or not at all";
    }
    const GatherResult r = c.collect(2, rank0, 0ns);
    ASSERT_EQ(r.status, Status::ok) << r.describe();
    EXPECT_EQ(check_message(*r.replies[0], 1, m.size()), "");
}

// A worker that replied, its reply taken and kept by a collect that timed out, may exit: the collect
// of that tag no longer waits for it, and neither does a WaitSet member for the tag (its liveness
// check leaves the rank out, as GatherCollector::check_liveness(tag, ...) does).
TEST(EventfdWake, AWorkerWhoseReplyIsKeptMayExitUnderAWaitSet) {
    ScopedName group("efd-kept-dead");
    GatherOptions go;
    go.ranks = 2;
    go.capacity = 64 * 1024;
    go.liveness_interval = 50ms;
    auto c = GatherCollector::create(group, go);
    ChildGuard kids;
    Pipe replied;
    const pid_t worker = kids.add(fork_child([&] {
        auto w0 = GatherWorker::attach(group, 0);
        ASSERT_EQ(w0.reply(5, payload(5), 1s), Status::ok);
        replied.send('r');
        ::pause();  // killed with its ring open
    }));
    ASSERT_EQ(replied.recv(10000ms), 'r');
    const std::uint32_t both[] = {0, 1};
    ASSERT_EQ(c.collect(5, both, 20ms).status, Status::timed_out);
    kids.kill_and_wait(worker);
    WaitSet set({.backend = WaitSetBackend::epoll, .recheck = 50ms});
    (void)set.add(c, 5, both);
    EXPECT_NO_THROW((void)set.wait(300ms)) << "rank 0's reply is in: its worker's death is not the collect's";
    const std::uint32_t rank0[] = {0};
    const GatherResult r = c.collect(5, rank0, 0ns);
    ASSERT_EQ(r.status, Status::ok) << r.describe();
}

// ---- WaitSet, both back ends ----------------------------------------------------------------------

// Rank 0 of a queue another process is creating right now. (ReaderOptions::create_timeout waits for
// the name only; between the creator's shm_open and its header the segment is "not ringcast yet".)
Reader attach_when_created(const std::string& name) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        try {
            return Reader::attach(name, 0);
        } catch (const Error& e) {
            const bool early = e.code() == ErrorCode::not_found || e.code() == ErrorCode::not_ringcast;
            if (!early || std::chrono::steady_clock::now() > give_up) throw;
        }
        std::this_thread::sleep_for(1ms);
    }
}

struct SharedCounts {  // in a MAP_SHARED page: what the children saw
    std::atomic<int> failures;
};

class WaitSetTest : public ::testing::TestWithParam<WaitSetBackend> {
protected:
    void SetUp() override {
        if (GetParam() == WaitSetBackend::io_uring) {
            const std::string why = io_uring_futex_unavailable_reason();
            if (!why.empty()) GTEST_SKIP() << "io_uring back end unavailable: " << why;
        }
    }
    // A lost wake costs the re-check interval: long here, so the time bounds below catch one.
    WaitSetOptions options() const { return {.backend = GetParam(), .recheck = std::chrono::seconds(5)}; }
};

// One loop over 3 queues (each written by its own process, in bursts with pauses) and one gather
// group of 2 workers (processes): every message and reply arrives, in order, through one wait.
TEST_P(WaitSetTest, ThreeQueuesAndAGatherGroupInOneLoop) {
    constexpr int kQueues = 3;
    constexpr std::uint64_t kMessages = 150;
    constexpr std::uint64_t kRequests = 30;
    std::vector<std::unique_ptr<ScopedName>> names;
    ScopedName group("ws-group");
    for (int q = 0; q < kQueues; ++q) names.push_back(std::make_unique<ScopedName>("ws-q" + std::to_string(q)));
    GatherOptions go;
    go.ranks = 2;
    go.capacity = 64 * 1024;
    go.wait.kind = WaitKind::futex;
    auto collector = GatherCollector::create(group, go);
    ChildGuard kids;
    std::vector<pid_t> pids;
    for (int q = 0; q < kQueues; ++q) {
        pids.push_back(kids.add(fork_child([&, q] {
            auto w = Writer::create(*names[q], {.readers = 1, .capacity = 64 * 1024});
            // Publish once the loop's reader is attached (the name goes with this writer).
            ASSERT_TRUE(wait_until([&] {
                return layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state == layout::SlotState::attached;
            }, 10000ms));
            for (std::uint64_t seq = 0; seq < kMessages; ++seq) {
                if (seq % 10 == 0) std::this_thread::sleep_for(2ms + 1ms * q);
                ASSERT_EQ(w.write(payload(seq), 10s), Status::ok);
            }
        })));
    }
    // Gather workers: reply to the request numbers 0..kRequests-1, paced so the collector sleeps.
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
        pids.push_back(kids.add(fork_child([&, rank] {
            auto worker = GatherWorker::attach(group, rank);
            for (std::uint64_t tag = 0; tag < kRequests; ++tag) {
                std::this_thread::sleep_for(1ms + 2ms * rank);
                const auto m = payload(tag * 2 + rank);
                ASSERT_EQ(worker.reply(tag, m, 10s), Status::ok);
            }
        })));
    }
    std::vector<Reader> readers;
    for (int q = 0; q < kQueues; ++q) readers.push_back(attach_when_created(names[q]->str()));
    WaitSet set(options());
    ASSERT_EQ(set.backend(), GetParam());
    std::vector<std::size_t> queue_id;
    for (auto& r : readers) queue_id.push_back(set.add(r));
    const std::size_t gather_id = set.add(collector, 0);
    std::vector<std::uint64_t> next(kQueues, 0);
    std::uint64_t tag = 0;
    int closed = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + 30s;
    std::vector<std::byte> got;
    while ((closed < kQueues || tag < kRequests) && std::chrono::steady_clock::now() < deadline) {
        for (std::size_t id : set.wait(5s)) {
            if (id == gather_id) {
                for (;;) {  // collect in slices: replies already taken are kept for the next slice
                    const GatherResult res = collector.collect_all(tag, 0s);
                    if (res.status != Status::ok) break;
                    for (std::uint32_t rank = 0; rank < 2; ++rank)
                        ASSERT_EQ(check_message(*res.replies[rank], tag * 2 + rank, 64 + (tag * 2 + rank) % 200), "");
                    if (++tag == kRequests) break;
                    set.set_tag(gather_id, tag);
                }
                continue;
            }
            const auto q = static_cast<std::size_t>(std::find(queue_id.begin(), queue_id.end(), id) - queue_id.begin());
            ASSERT_LT(q, readers.size());
            for (;;) {  // consume until it would block (the drain rule), then the next wait re-arms
                const Status s = readers[q].read(got, 0s);
                if (s == Status::timed_out) break;
                if (s == Status::closed) {
                    ++closed;
                    set.remove(id);
                    break;
                }
                ASSERT_EQ(s, Status::ok);
                ASSERT_EQ(check_message(got, next[q], 64 + next[q] % 200), "") << "queue " << q;
                ++next[q];
            }
        }
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "a wake was lost (each costs the 5 s re-check)";
    for (int q = 0; q < kQueues; ++q) EXPECT_EQ(next[q], kMessages) << "queue " << q;
    EXPECT_EQ(tag, kRequests);
    for (pid_t p : pids) EXPECT_EQ(kids.wait(p, 30s), 0);
    EXPECT_GT(set.kernel_waits(), 10u) << "the loop never slept: the test tests nothing";
}

// A writer inside the loop waits for space (add_space) while a reader process drains slowly.
TEST_P(WaitSetTest, WriterWaitsForSpaceInTheLoop) {
    ScopedName name("ws-space");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    constexpr std::uint64_t kCount = 300;
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        auto r = Reader::attach(name, 0);
        std::vector<std::byte> got;
        for (std::uint64_t seq = 0; seq < kCount; ++seq) {
            ASSERT_EQ(r.read(got, 10s), Status::ok);
            ASSERT_EQ(check_message(got, seq, 4096), "");
            if (seq % 16 == 0) std::this_thread::sleep_for(1ms);
        }
    }));
    WaitSet set(options());
    const std::size_t id = set.add_space(w, 4096);
    std::vector<std::byte> m(4096);
    std::uint64_t waits = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t seq = 0; seq < kCount;) {
        fill_message(m, seq);
        if (w.write(m, 0s) == Status::ok) {
            ++seq;
            continue;
        }
        const auto ready = set.wait(10s);
        ASSERT_EQ(ready.size(), 1u);
        ASSERT_EQ(ready[0], id);
        ++waits;
    }
    EXPECT_EQ(kids.wait(child, 30s), 0);
    EXPECT_GT(waits, 5u);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "a space wake was lost (each costs the 5 s re-check)";
}

// Nothing happens: wait() times out on time and reports nothing.
TEST_P(WaitSetTest, IdleWaitTimesOut) {
    ScopedName name("ws-idle");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    (void)set.add(r);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(set.wait(50ms).empty());
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 45ms);
    EXPECT_LT(took, 500ms);
    ASSERT_EQ(w.write(payload(0), 1s), Status::ok);
    const auto ready = set.wait(1s);
    ASSERT_EQ(ready.size(), 1u);
}

// Built in one thread, used in another (one thread uses it, not necessarily its creator): the io_uring
// ring is single-issuer (DEFER_TASKRUN) and starts disabled, so its issuer is the thread that first
// submits. Without R_DISABLED the creator would be the issuer and this wait would fail (EEXIST).
TEST_P(WaitSetTest, BuiltInOneThreadUsedInAnother) {
    ScopedName name("ws-thread");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    const std::size_t id = set.add(r);
    std::vector<std::size_t> first, second;
    std::string error;
    std::thread user([&] {
        try {
            first = set.wait(20ms);  // arms and submits: nothing there yet
            if (w.write(payload(1), 1s) != Status::ok) error = "write failed";
            second = set.wait(1s);
        } catch (const std::exception& e) {
            error = e.what();
        }
    });
    user.join();
    ASSERT_EQ(error, "");
    EXPECT_TRUE(first.empty());
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0], id);
}

// One member per endpoint (its announcement bit is its own: a second member's disarm would withdraw the
// first's announcement), for both back ends alike; removed, it may be added again.
TEST_P(WaitSetTest, AnEndpointIsAddedOnceAtATime) {
    ScopedName name("ws-twice");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    const std::size_t id = set.add(r);
    try {
        (void)set.add(r);
        ADD_FAILURE() << "a second member of the same reader was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find("already WaitSet member " + std::to_string(id)), std::string::npos) << e.what();
    }
    const std::size_t space = set.add_space(w, 64);
    EXPECT_THROW((void)set.add_space(w, 64), Error);
    set.remove(id);
    EXPECT_NO_THROW((void)set.add(r));
    (void)space;
}

// An endpoint that registers an eventfd while the set has it armed on its futex word (its wake_fd(),
// handed to another loop between two waits): its wakers signal that fd from then on and skip the futex
// wake, so the armed futex wait never ends. wait() re-arms such a member on the fd: the publish wakes it.
TEST_P(WaitSetTest, AnEventfdRegisteredWhileArmedLosesNoWake) {
    ScopedName name("ws-latefd");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    const std::size_t id = set.add(r);
    EXPECT_TRUE(set.wait(10ms).empty());  // armed
    ASSERT_GE(r.wake_fd(), 0);
    const LateWrite got = wait_through_a_late_write(set, w, 0, 3s);
    ASSERT_EQ(got.ready.size(), 1u) << "the wake was lost: the set slept through the message";
    EXPECT_EQ(got.ready[0], id);
    EXPECT_LT(got.took, 1s) << "woken by the re-check, not by the publish";
}

// Used from a second thread (a contract violation) with more members to arm than the submission queue
// holds: the submit that makes room fails there (EEXIST), and wait() throws Error(system) saying so —
// it wrote through the null SQE io_uring_get_sqe then returned (a crash).
TEST_P(WaitSetTest, UsedByASecondThreadWithManyMembersThrowsNotCrashes) {
    if (GetParam() != WaitSetBackend::io_uring) GTEST_SKIP() << "the epoll back end has no submission queue";
    constexpr int kMembers = 200;  // > the ring's 128 SQEs
    std::deque<ScopedName> names;  // (not movable: stays where it is made)
    std::vector<Writer> writers;
    std::vector<Reader> readers;
    writers.reserve(kMembers);
    readers.reserve(kMembers);
    for (int i = 0; i < kMembers; ++i) {
        names.emplace_back("ws-many-" + std::to_string(i));
        writers.push_back(Writer::create(names.back(), {.readers = 1, .capacity = 64 * 1024}));
        readers.push_back(Reader::attach(names.back(), 0));
    }
    WaitSet set(options());
    (void)set.wait(1ms);  // this thread is the ring's issuer now
    for (auto& r : readers) (void)set.add(r);
    std::string error = "no error";
    std::thread other([&] {
        try {
            (void)set.wait(10ms);
        } catch (const Error& e) {
            error = e.code() == ErrorCode::system ? e.what() : "another error code: " + std::string(e.what());
        }
    });
    other.join();
    EXPECT_NE(error.find("a WaitSet is used by one thread"), std::string::npos) << error;
}

// A member's own blocking call may run between two waits: it announces on the bit the set armed and
// withdraws it when it returns, so a publish after it saw no sleeper and woke nobody — the set slept
// through the message until its re-check (5 s here; 1 s by default). wait() re-announces its members.
TEST_P(WaitSetTest, TheMembersOwnBlockingCallBetweenWaitsLosesNoWake) {
    ScopedName name("ws-own");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    const std::size_t id = set.add(r);
    EXPECT_TRUE(set.wait(10ms).empty());  // armed, and stays armed
    std::vector<std::byte> got;
    ASSERT_EQ(r.read(got, 20ms), Status::timed_out);  // the reader's own wait: announces, withdraws
    ASSERT_EQ(w.write(payload(0), 1s), Status::ok);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ready = set.wait(2s);
    ASSERT_EQ(ready.size(), 1u) << "the wake was lost: the set slept through the message";
    EXPECT_EQ(ready[0], id);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    // ... and a writer's publish while the set sleeps, after such a call, wakes it.
    ASSERT_EQ(r.read(got, 0s), Status::ok);
    EXPECT_TRUE(set.wait(10ms).empty());
    ASSERT_EQ(r.read(got, 20ms), Status::timed_out);
    const LateWrite woken = wait_through_a_late_write(set, w, 1, 3s);
    ASSERT_EQ(woken.ready.size(), 1u);
    EXPECT_LT(woken.took, 1s) << "woken by the re-check, not by the publish";
}

// A dead peer is reported within about one re-check however the loop waits: in waits shorter than the
// re-check, and while another member is woken more often than that (the re-check's clock restarted
// at every wait() call, so neither loop ever reported the dead writer on epoll; io_uring only at its
// 8 x recheck backstop).
TEST_P(WaitSetTest, ADeadPeerIsReportedWithinAReCheckHoweverTheLoopWaits) {
    for (const bool busy : {false, true}) {
        SCOPED_TRACE(busy ? "another member woken every 50 ms, waits of 2 s" : "waits of 50 ms");
        ScopedName fed(busy ? "ws-dead-fed-b" : "ws-dead-fed"), dead(busy ? "ws-dead-b" : "ws-dead");
        auto wa = Writer::create(fed, {.readers = 1, .capacity = 64 * 1024});
        ChildGuard kids;
        Pipe made;
        const pid_t writer = kids.add(fork_child([&] {
            auto wb = Writer::create(dead, {.readers = 1, .capacity = 64 * 1024});
            made.send('w');
            ::pause();
        }));
        ASSERT_EQ(made.recv(10000ms), 'w');
        auto ra = Reader::attach(fed, 0);
        auto rb = Reader::attach(dead, 0);
        constexpr auto kRecheck = 200ms;
        WaitSet set({.backend = GetParam(), .recheck = kRecheck});
        const std::size_t ia = set.add(ra);
        (void)set.add(rb);
        kids.kill_and_wait(writer);
        std::atomic<bool> stop{false};
        std::thread feeder([&] {
            while (busy && !stop.load()) {
                (void)wa.write(payload(0), 0s);
                std::this_thread::sleep_for(50ms);
            }
        });
        const auto t0 = std::chrono::steady_clock::now();
        std::string error;
        std::vector<std::byte> got;
        while (error.empty() && std::chrono::steady_clock::now() - t0 < 10s) {
            try {
                for (const std::size_t id : set.wait(busy ? 2s : 50ms))
                    if (id == ia)
                        while (ra.read(got, 0s) == Status::ok) {
                        }
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
                error = e.what();
            }
        }
        const auto took = std::chrono::steady_clock::now() - t0;
        stop.store(true);
        feeder.join();
        ASSERT_NE(error, "") << "the dead writer was never reported";
        EXPECT_NE(error.find("'" + std::string(dead) + "'"), std::string::npos) << error;
        EXPECT_LT(took, 6 * kRecheck) << "reported only after " << std::chrono::duration<double>(took).count() << " s";
        EXPECT_NE(error.find("(WaitSet member 1)"), std::string::npos) << error;
        // ... and again while the member stays in the set, not only a re-check later: by every wait()
        // that has nothing else to report, and at least every other one — the live member's messages
        // keep coming meanwhile (a wait() with members ready returns them first).
        int reports = 0, live = 0;
        bool last_was_report = true;
        for (int again = 0; again < 6; ++again) {
            if (busy) {  // the live member has news (the feeder stopped)
                ASSERT_EQ(wa.write(payload(0), 1s), Status::ok);
            }
            const auto t1 = std::chrono::steady_clock::now();
            try {
                const auto ready = set.wait(busy ? 2s : 50ms);
                EXPECT_TRUE(busy) << "wait " << again << " after the report returned without it";
                EXPECT_TRUE(last_was_report) << "two waits in a row without the report";
                last_was_report = false;
                for (const std::size_t id : ready)
                    if (id == ia)
                        while (ra.read(got, 0s) == Status::ok) ++live;
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::peer_dead) << e.what();
                ++reports;
                last_was_report = true;
            }
            if (!busy) {
                EXPECT_LT(std::chrono::steady_clock::now() - t1, kRecheck / 2);
            }
        }
        EXPECT_GE(reports, 3);
        if (busy) {
            EXPECT_GT(live, 0) << "the live member was starved by the dead one's reports";
        }
    }
}

// A cancel() is reported, not drained away: made while the member is armed (its wake's re-check sees
// the flag) and made before the member's arm (the arm drains the eventfd, 3a', then sees the flag).
// The member comes back ready and its zero-timeout look says cancelled.
TEST_P(WaitSetTest, ACancelIsReportedArmedOrNot) {
    ScopedName name("ws-cancel");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    WaitSet set(options());
    for (const bool armed : {true, false}) {
        SCOPED_TRACE(armed ? "cancelled while armed" : "cancelled before the arm");
        const std::size_t id = set.add(r);
        if (armed) {
            EXPECT_TRUE(set.wait(10ms).empty());
        }
        std::thread canceller([&] {
            if (armed) std::this_thread::sleep_for(50ms);  // while the set sleeps
            r.cancel();
        });
        if (!armed) canceller.join();
        const auto t0 = std::chrono::steady_clock::now();
        const auto ready = set.wait(3s);
        if (armed) canceller.join();
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
        ASSERT_EQ(ready.size(), 1u) << "the cancel was lost";
        EXPECT_EQ(ready[0], id);
        std::vector<std::byte> got;
        EXPECT_EQ(r.read(got, 0s), Status::cancelled);
        r.clear_cancel();
        set.remove(id);
    }
    (void)w;
}

// A resumable write stopped part way (write_parts with a WriteProgress) needs room for its next whole
// fragment; a writer member that waited only for an empty record (the owed abort's room) was reported
// ready at once, its zero-timeout resume timed out, and the loop spun (100 000 reports in 300 ms).
// With the progress, the member is ready only when the resume gets somewhere.
TEST_P(WaitSetTest, AWriterResumingAStreamIsReadyOnlyWhenItsNextFragmentFits) {
    ScopedName name("ws-resume");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    std::vector<std::byte> small(100), big(200 * 1024);
    fill_message(small, 0);
    fill_message(big, 1);
    ASSERT_EQ(w.write(small, 0s), Status::ok);
    const std::span<const std::byte> parts[1] = {big};
    WriteProgress progress;
    ASSERT_EQ(w.write_parts(parts, 0s, 7, &progress), Status::timed_out);
    ASSERT_TRUE(progress.started()) << "no fragment went out: the test tests nothing";
    ChildGuard kids;
    Pipe go;
    const pid_t child = kids.add(fork_child([&] {
        auto r = Reader::attach(name, 0);
        ASSERT_EQ(go.recv(10000ms), 'g');
        std::vector<std::byte> got;
        ASSERT_EQ(r.read(got, 10s), Status::ok);
        ASSERT_EQ(check_message(got, 0, small.size()), "");
        ASSERT_EQ(r.read(got, 10s), Status::ok);
        ASSERT_EQ(check_message(got, 1, big.size()), "");
    }));
    WaitSet set(options());
    const std::size_t id = set.add_space(w, big.size(), &progress);
    // Nobody reads yet: only an empty record would fit between tail and the slowest head.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(set.wait(200ms).empty()) << "reported ready with no room for the next fragment";
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
    EXPECT_LE(set.kernel_waits(), 3u) << "the wait spun";
    go.send('g');
    std::uint64_t reports = 0, without_progress = 0;
    Status s = Status::timed_out;
    while (s != Status::ok && reports < 1000) {
        const auto ready = set.wait(10s);
        ASSERT_EQ(ready.size(), 1u) << "a space wake was lost (each costs the 5 s re-check)";
        ASSERT_EQ(ready[0], id);
        ++reports;
        const std::uint64_t before = progress.written;
        s = w.write_parts(parts, 0s, 7, &progress);
        if (s != Status::ok && progress.written == before) ++without_progress;
    }
    EXPECT_EQ(s, Status::ok);
    EXPECT_EQ(without_progress, 0u) << "of " << reports << " reports, these found no room for the fragment";
    EXPECT_EQ(kids.wait(child, 30s), 0);
}

// WaitSetOptions::recheck = nanoseconds::max() (or 50 years) means "never": now + recheck wrapped to a
// past deadline (epoll: wait() never returned; io_uring: 8 x recheck wrapped to a negative link
// timeout, every wait failed at once and was re-armed, at 100 % CPU). Each in a child process, so a
// wait that never returns fails the test instead of hanging it.
TEST_P(WaitSetTest, AHugeRecheckMeansNeverNotAnOverflow) {
    for (const std::chrono::nanoseconds recheck :
         {std::chrono::nanoseconds::max(), std::chrono::nanoseconds(std::chrono::hours(24 * 365 * 50))}) {
        SCOPED_TRACE("recheck " + std::to_string(recheck.count()) + " ns");
        ScopedName name("ws-recheck");
        ChildGuard kids;
        const WaitSetBackend backend = GetParam();
        const pid_t child = kids.add(fork_child([&] {
            auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
            auto r = Reader::attach(name, 0);
            WaitSet set({.backend = backend, .recheck = recheck});
            (void)set.add(r);
            rusage before{}, after{};
            ::getrusage(RUSAGE_SELF, &before);
            const auto t0 = std::chrono::steady_clock::now();
            EXPECT_TRUE(set.wait(300ms).empty());
            const auto took = std::chrono::steady_clock::now() - t0;
            ::getrusage(RUSAGE_SELF, &after);
            EXPECT_GE(took, 290ms);
            EXPECT_LT(took, 2s);
            EXPECT_LE(set.kernel_waits(), 5u) << "the wait did not sleep";
            const auto cpu_us = [](const rusage& u) {
                return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
            };
            EXPECT_LT(cpu_us(after) - cpu_us(before), 100'000) << "CPU time in a 300 ms idle wait (us)";
            // ... and it still wakes on a publish.
            EXPECT_EQ(wait_through_a_late_write(set, w, 0, 2s).ready.size(), 1u);
        }));
        EXPECT_EQ(kids.wait(child, 10s), 0) << "-1000: the wait never returned";
    }
}

// A forked child shares the set's epoll instance / io_uring rings and its members' announcement bits
// with the parent. A child that let its copy go (a worker returning from the scope that held it) did
// EPOLL_CTL_DEL / cancelled and retracted the parent's armed members: the parent's set was then woken
// only by its re-check. Its destructor and remove() touch nothing of the parent's; add() and wait()
// are refused in the child.
TEST_P(WaitSetTest, AForkedChildsCopyLeavesTheParentsSetAlone) {
    ScopedName name("ws-fork");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    auto set = std::make_unique<WaitSet>(options());
    const std::size_t id = set->add(r);
    EXPECT_TRUE(set->wait(10ms).empty());  // armed
    ChildGuard kids;
    for (const bool remove_first : {true, false}) {
        const pid_t child = kids.add(fork_child([&] {
            try {
                (void)set->wait(0s);
                ADD_FAILURE() << "wait() in a forked child was not refused";
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::protocol) << e.what();
                EXPECT_NE(std::string(e.what()).find("has a copy of it through fork()"), std::string::npos) << e.what();
            }
            EXPECT_THROW((void)set->add_space(w, 64), Error);
            if (remove_first) set->remove(id);
            set.reset();
        }));
        EXPECT_EQ(kids.wait(child, 10s), 0);
    }
    std::vector<std::byte> got;
    for (std::uint64_t i = 0; i < 3; ++i) {
        const LateWrite woken = wait_through_a_late_write(*set, w, i, 10s);
        ASSERT_EQ(woken.ready.size(), 1u);
        EXPECT_EQ(woken.ready[0], id);
        EXPECT_LT(woken.took, 1s) << "woken by the 5 s re-check, not by the publish";
        while (r.read(got, 0s) == Status::ok) {
        }
    }
}

// The other way round: a WaitSet made in the child, given the parent's endpoints (copies fork() gave
// the child). Its arming would take the parent's wakes — drain the parent's eventfd, or announce and
// then retract the parent's bit while the parent sleeps on it (a lost wake until the parent's
// re-check). add() refuses each such endpoint; the parent, armed on the reader all along, is woken by
// the next publish, not by its 5 s re-check.
TEST_P(WaitSetTest, AChildsSetRefusesTheParentsEndpoints) {
    ScopedName name("ws-fork-members"), group("ws-fork-members-g");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
    auto r = Reader::attach(name, 0);
    auto c = GatherCollector::create(group, GatherOptions{.ranks = 1});
    WaitSet set(options());
    const std::size_t id = set.add(r);
    EXPECT_TRUE(set.wait(10ms).empty());  // armed: the parent's bit announced
    const pid_t parent = ::getpid();
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        WaitSet mine(options());
        const auto refused = [&](const char* what, auto&& add) {
            try {
                (void)add();
                ADD_FAILURE() << what << ": the parent's endpoint was added";
            } catch (const Error& e) {
                EXPECT_EQ(e.code(), ErrorCode::protocol) << what << ": " << e.what();
                EXPECT_NE(std::string(e.what()).find("belongs to pid " + std::to_string(parent)), std::string::npos)
                    << what << ": " << e.what();
            }
        };
        refused("reader", [&] { return mine.add(r); });
        refused("writer", [&] { return mine.add_space(w, 64); });
        refused("collector", [&] { return mine.add(c, 1, {}); });
        EXPECT_TRUE(mine.wait(0s).empty());  // nothing of the parent's armed here, nothing retracted
    }));
    ASSERT_EQ(kids.wait(child, 10s), 0);
    const LateWrite woken = wait_through_a_late_write(set, w, 1, 10s);
    ASSERT_EQ(woken.ready.size(), 1u);
    EXPECT_EQ(woken.ready[0], id);
    EXPECT_LT(woken.took, 1s) << "woken by the 5 s re-check, not by the publish";
}

// add/remove cycles reuse the removed members' ids (wait() walks every id ever handed out: after 60 000
// cycles an idle wait(0) took 90 times as long), and a reused id is safe: a member removed while armed
// is not reported under the id its successor got.
TEST_P(WaitSetTest, AddRemoveCyclesReuseIds) {
    ScopedName name_a("ws-reuse-a"), name_b("ws-reuse-b");
    auto wa = Writer::create(name_a, {.readers = 1, .capacity = 64 * 1024});
    auto wb = Writer::create(name_b, {.readers = 1, .capacity = 64 * 1024});
    auto ra = Reader::attach(name_a, 0);
    auto rb = Reader::attach(name_b, 0);
    WaitSet set(options());
    const std::size_t first = set.add(ra);
    std::size_t largest = 0;
    for (int i = 0; i < 10000; ++i) {
        const std::size_t id = set.add(rb);
        largest = std::max(largest, id);
        if (i % 1000 == 0) {
            EXPECT_TRUE(set.wait(0s).empty());  // armed: removed while armed below
        }
        set.remove(id);
    }
    EXPECT_LE(largest, 1u) << "ids were not reused";
    EXPECT_EQ(set.size(), 1u);
    // A member removed while armed, its id given to another endpoint: a publish to the removed one
    // reports nothing; one to the new member reports it.
    const std::size_t old_id = set.add(rb);
    EXPECT_TRUE(set.wait(10ms).empty());  // both armed
    set.remove(first);
    set.remove(old_id);
    const std::size_t new_id = set.add(ra);
    ASSERT_EQ(new_id, old_id) << "the armed member's id was not the one reused: the test tests nothing";
    ASSERT_EQ(wb.write(payload(0), 1s), Status::ok);  // rb is no member any more
    EXPECT_TRUE(set.wait(100ms).empty());
    ASSERT_EQ(wa.write(payload(1), 1s), Status::ok);
    const auto ready = set.wait(2s);
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_EQ(ready[0], new_id);
}

INSTANTIATE_TEST_SUITE_P(Backends, WaitSetTest, ::testing::Values(WaitSetBackend::epoll, WaitSetBackend::io_uring),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// RINGCAST_WAITSET=epoll forces the fallback: the automatic choice takes epoll and says so on stderr,
// once; the set works.
TEST(WaitSetFallback, ForcedFallbackUsesEpollWithOneLogLine) {
    int err[2];
    ASSERT_EQ(::pipe(err), 0);
    ScopedName name("ws-fallback");
    ChildGuard kids;
    const pid_t child = kids.add(fork_child([&] {
        ::dup2(err[1], 2);
        ::setenv("RINGCAST_WAITSET", "epoll", 1);
        auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024});
        auto r = Reader::attach(name, 0);
        WaitSet a;
        WaitSet b;  // a second one: no second line
        EXPECT_EQ(a.backend(), WaitSetBackend::epoll);
        EXPECT_EQ(b.backend(), WaitSetBackend::epoll);
        (void)a.add(r);
        ASSERT_EQ(w.write(payload(0), 1s), Status::ok);
        EXPECT_EQ(a.wait(1s).size(), 1u);
    }));
    ::close(err[1]);
    EXPECT_EQ(kids.wait(child, 20s), 0);
    std::string text;
    char buf[512];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    ::close(err[0]);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    EXPECT_NE(text.find("ringcast: WaitSet uses epoll"), std::string::npos) << text;
    EXPECT_NE(text.find("RINGCAST_WAITSET=epoll"), std::string::npos) << text;
}

}  // namespace
}  // namespace ringcast::test
