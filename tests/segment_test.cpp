// Segment creation and validation: layout constants, permissions, space, and every way an attach
// must refuse a segment with a clear error instead of crashing or hanging.
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"
#include "test_util.hpp"

namespace ringcast::test {
namespace {

using namespace layout;

// Expects `fn` to throw Error with `code` and a message containing `needle`.
template <class Fn>
void expect_error(Fn&& fn, ErrorCode code, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "expected an error containing '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST(Layout, LinesAndOffsetsAreFixed) {
    EXPECT_EQ(kWriterLineOffset, 128u);
    EXPECT_EQ(kReaderSleepLineOffset, 256u);
    EXPECT_EQ(kSpaceLineOffset, 384u);
    EXPECT_EQ(kReaderSlotsOffset, 512u);
    EXPECT_EQ(data_offset(3), 512u + 3 * 128u);
    EXPECT_EQ(offsetof(ReaderSlot, owner), 8u);
    EXPECT_EQ(data_offset(1) % kLine, 0u) << "the data ring starts on its own line";
    EXPECT_EQ(offsetof(WriterLine, tail), 0u);
    EXPECT_EQ(offsetof(ReaderSlot, head), 0u);
    EXPECT_EQ(sizeof(RecordHeader), 16u);
    EXPECT_EQ(record_size(0), 16u);
    EXPECT_EQ(record_size(1), 32u);
    EXPECT_EQ(record_size(16), 32u);
    EXPECT_EQ(max_record_payload(64 * 1024), 16 * 1024 - 16u);
    EXPECT_NE(kLayoutHash, 0u);
}

TEST(Segment, CreatedOwnerOnlyByDefaultAndModeIsSelectable) {
    ScopedName a("mode"), b("mode");
    auto w = Writer::create(a, SegmentOptions{});
    struct stat st {};
    const int fd = ::shm_open(("/" + a.str()).c_str(), O_RDONLY, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fstat(fd, &st), 0);
    ::close(fd);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    const mode_t old = ::umask(0077);  // the requested mode wins over the umask
    auto w2 = Writer::create(b, SegmentOptions{.mode = 0640});
    ::umask(old);
    const int fd2 = ::shm_open(("/" + b.str()).c_str(), O_RDONLY, 0);
    ASSERT_GE(fd2, 0);
    ASSERT_EQ(::fstat(fd2, &st), 0);
    ::close(fd2);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    expect_error([&] { (void)Segment::create("rc-x", SegmentOptions{.mode = 0666}); }, ErrorCode::invalid_argument,
                 "world-writable");
}

TEST(Segment, BadArgumentsAreRejected) {
    expect_error([] { (void)Segment::create("rc-x", SegmentOptions{.capacity = 100000}); },
                 ErrorCode::invalid_argument, "power of two");
    expect_error([] { (void)Segment::create("rc-x", SegmentOptions{.capacity = 32 * 1024}); },
                 ErrorCode::invalid_argument, "64 KiB");
    expect_error([] { (void)Segment::create("rc-x", SegmentOptions{.readers = 0}); }, ErrorCode::invalid_argument,
                 "reader count");
    expect_error([] { (void)Segment::create("a/b", SegmentOptions{}); }, ErrorCode::invalid_argument, "letters");
    expect_error([] { (void)Segment::create("", SegmentOptions{}); }, ErrorCode::invalid_argument, "1..200");
    expect_error([] { (void)Segment::create(std::string(201, 'x'), SegmentOptions{}); }, ErrorCode::invalid_argument,
                 "1..200");
    expect_error([] { (void)Segment::open("rc-does-not-exist-xyz"); }, ErrorCode::not_found, "does not exist");
}

TEST(Segment, CreateTwiceIsAnErrorUnlessReplacing) {
    ScopedName n("twice");
    auto w = Writer::create(n, SegmentOptions{});
    expect_error([&] { (void)Segment::create(n, SegmentOptions{}); }, ErrorCode::already_exists, "already exists");
}

// Minor page faults this thread takes while `fn` runs.
template <class Fn>
long minor_faults_of(Fn&& fn) {
    rusage before{}, after{};
    ::getrusage(RUSAGE_THREAD, &before);
    fn();
    ::getrusage(RUSAGE_THREAD, &after);
    return after.ru_minflt - before.ru_minflt;
}

// A fresh ring is walked front to back: unprefaulted, its first lap costs the writer and every reader
// a fault per page (segment.cpp, prefault_created / Segment::prefault). The writer's and a reader's
// mappings must arrive populated: writing a byte of every page through either then takes no fault (a
// few allowed for what the sanitizers' shadow memory takes; unprefaulted it is one per page, 256 here —
// writes, because read faults on shared memory map 16 pages at a time).
// A reclaim (Writer::create over an abandoned name, `ringcast gc`) judges a segment, then unlinks its
// name — only if the name still leads to the object it judged. Another reclaimer may have unlinked
// it and created a live segment under the name in between: that one keeps its name. (Before: the
// check compared what the name led to with itself, and the live segment lost its name.)
TEST(Segment, AReclaimNeverUnlinksAnObjectThatTookTheNameMeanwhile) {
    const auto abandon = [](const ScopedName& name) {
        const pid_t creator = fork_child([&] {
            auto seg = Segment::create(name, SegmentOptions{.readers = 1, .capacity = 64 * 1024});
            ::kill(::getpid(), SIGKILL);
        });
        return wait_child(creator, std::chrono::seconds(30));
    };
    ScopedName name("ident");
    ASSERT_EQ(abandon(name), -SIGKILL);
    const Segment judged = Segment::open(name);
    ASSERT_EQ(Segment::user_of(judged.base()), "");
    ASSERT_TRUE(Segment::remove(name));  // another reclaimer, faster: unlinks and creates anew
    const Segment live = Segment::create(name, SegmentOptions{.readers = 1, .capacity = 64 * 1024});
    EXPECT_FALSE(unlink_if_still_abandoned(name, judged));
    const Segment still = Segment::open(name);  // throws not_found if the live segment lost its name
    EXPECT_EQ(still.identity(), live.identity());
    EXPECT_NE(live.identity(), judged.identity());

    ScopedName other("ident2");  // the name still leads to the judged object: unlinked
    ASSERT_EQ(abandon(other), -SIGKILL);
    const Segment judged_too = Segment::open(other);
    EXPECT_TRUE(unlink_if_still_abandoned(other, judged_too));
    EXPECT_FALSE(Segment::remove(other));
}

TEST(Segment, WriterAndReaderPrefaultTheRing) {
    {
        // Before Linux 5.14 there is no MADV_POPULATE_WRITE: the prefault is skipped there (a speed-up,
        // not a guarantee), and so is this test.
        void* probe = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(probe, MAP_FAILED);
        const int rc = ::madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */);
        const int err = errno;
        ::munmap(probe, 4096);
        if (rc != 0 && err == EINVAL) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)";
    }
    ScopedName n("prefault");
    auto w = Writer::create(n, SegmentOptions{.readers = 1, .capacity = 1u << 20});
    auto r = Reader::attach(n, 0);
    const std::size_t capacity = 1u << 20, pages = capacity / 4096;
    const auto touch_every_page = [&](std::byte* data, std::byte value) {
        return minor_faults_of([&] {
            for (std::size_t i = 0; i < capacity; i += 4096)
                std::atomic_ref<std::byte>(data[i]).store(value, std::memory_order_relaxed);
        });
    };
    const long writer_faults = touch_every_page(w.segment().data(), std::byte{1});
    const long reader_faults = touch_every_page(r.segment().data(), std::byte{2});
    EXPECT_EQ(w.segment().data()[4096], std::byte{2});  // one object behind both mappings
    EXPECT_LT(writer_faults, static_cast<long>(pages / 4)) << "the creator's mapping was not prefaulted";
    EXPECT_LT(reader_faults, static_cast<long>(pages / 4)) << "the reader's mapping was not prefaulted";
}

TEST(Segment, RefusesWhenDevShmLacksTheSpace) {
    const std::uint64_t free_bytes = shm_free_bytes();
    std::uint64_t cap = 1ULL << 20;
    while (cap <= free_bytes) cap <<= 1;
    ASSERT_LE(cap, kMaxCapacity) << "/dev/shm is larger than any ring: cannot test";
    ScopedName n("space");
    expect_error([&] { (void)Segment::create(n, SegmentOptions{.capacity = cap}); }, ErrorCode::no_space, "free");
    EXPECT_THROW((void)Segment::open(n), Error) << "no half-made segment is left behind";
}

// Writes raw bytes as a shm object, then attaches to it.
void make_raw(const std::string& name, const std::vector<std::byte>& image) {
    const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, image.data(), image.size()), static_cast<ssize_t>(image.size()));
    ::close(fd);
}

std::vector<std::byte> good_image() {
    ScopedName n("img");
    auto seg = Segment::create(n, SegmentOptions{.readers = 2, .capacity = 64 * 1024});
    return {seg.base(), seg.base() + seg.size()};
}

template <class T>
void poke(std::vector<std::byte>& image, std::size_t offset, T value) {
    std::memcpy(image.data() + offset, &value, sizeof value);
}

TEST(Segment, AttachValidatesEverything) {
    {
        ScopedName n("foreign");
        std::vector<std::byte> junk(100000, std::byte{0x5a});
        make_raw(n.str(), junk);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::not_ringcast, "foreign magic");
    }
    {
        // A gather's doorbell is ringcast's own object: said so, not called foreign.
        ScopedName group("bell-as-queue");
        auto collector = GatherCollector::create(group, GatherOptions{.ranks = 1});
        expect_error([&] { (void)Reader::attach(group.str() + ".bell", 0); }, ErrorCode::not_ringcast,
                     "a ringcast gather's doorbell");
    }
    {
        ScopedName n("tiny");
        make_raw(n.str(), std::vector<std::byte>(10));
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::not_ringcast, "too small");
    }
    {
        ScopedName n("uninit");
        make_raw(n.str(), std::vector<std::byte>(100000));
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::not_ringcast, "not initialised");
    }
    {
        ScopedName n("older");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, abi_version), kAbiVersion - 1);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::version_mismatch, "older segment");
    }
    {
        ScopedName n("newer");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, abi_version), kAbiVersion + 1);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::version_mismatch, "newer segment");
    }
    {
        ScopedName n("hash");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, layout_hash), kLayoutHash ^ 1);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::version_mismatch, "layout hash");
    }
    {
        ScopedName n("trunc");
        auto img = good_image();
        img.resize(img.size() - 4096);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "truncated");
    }
    {
        ScopedName n("cap");
        auto img = good_image();
        poke<std::uint64_t>(img, offsetof(SegmentHeader, capacity), 3 * 64 * 1024);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "capacity");
    }
    {
        ScopedName n("readers");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, reader_count), 5);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "total size");
    }
    {
        ScopedName n("head");
        auto img = good_image();
        poke<std::uint64_t>(img, kReaderSlotsOffset + offsetof(ReaderSlot, head), 12345);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "head");
    }
    // Cursors near 2^64 (tail and head alike): accepted, the tail wrapped to 128 at the next writes,
    // every read said "closed" and the writer filled the ring on without waiting for the reader.
    {
        ScopedName n("near-wrap");
        auto img = good_image();
        const std::uint64_t near_wrap = ~std::uint64_t{0} - 15;  // 2^64 - 16: aligned
        poke<std::uint64_t>(img, kWriterLineOffset + offsetof(WriterLine, tail), near_wrap);
        poke<std::uint64_t>(img, kReaderSlotsOffset + offsetof(ReaderSlot, head), near_wrap);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "past 2^63 bytes written");
        expect_error([&] { (void)Writer::open(n); }, ErrorCode::corrupt, "past 2^63 bytes written");
    }
    // Garbage over the flags word sets bit 0 half the time: read as a state, it said "closed by its
    // writer" (ClosedError in Python), to a reader and to a writer taking the segment over alike.
    for (const std::uint32_t flags : {0xdeadbeefu, 0x2u}) {
        ScopedName n("flags");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, flags), flags);
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "corrupt header: flags");
        expect_error([&] { (void)Writer::open(n); }, ErrorCode::corrupt, "corrupt header: flags");
    }
    // A writer's owner word is 0 or an attached owner; garbage read as a dead writer's claim.
    {
        ScopedName n("writer-owner");
        auto img = good_image();
        poke<std::uint64_t>(img, offsetof(SegmentHeader, writer_owner),
                            pack_owner({SlotState::evicted, 4242, 77}));
        make_raw(n.str(), img);
        expect_error([&] { (void)Reader::attach(n, 0); }, ErrorCode::corrupt, "writer owner word");
        expect_error([&] { (void)Writer::open(n); }, ErrorCode::corrupt, "writer owner word");
    }
    {  // the forms the library writes still open: closed, and a (dead) attached writer's claim
        ScopedName n("closed-dead-writer");
        auto img = good_image();
        poke<std::uint32_t>(img, offsetof(SegmentHeader, flags), kFlagClosed);
        poke<std::uint64_t>(img, offsetof(SegmentHeader, writer_owner), pack_owner({SlotState::attached, 4242, 77}));
        make_raw(n.str(), img);
        EXPECT_NO_THROW((void)Reader::attach(n, 0));
    }
}

// An attach while the creator is still making the object waits through both of its windows: the
// object empty (between its shm_open and its ftruncate), then sized with no magic yet (before the
// header's release store). Segment::open refused the empty object at once ("too small (0 bytes)"), and
// judged the magic after its look: a magic stored during the look got the look's "no magic" thrown.
TEST(Segment, OpenWaitsThroughTheCreatorsWindows) {
    ScopedName n("creating");
    const auto img = good_image();
    const int fd = ::shm_open(("/" + n.str()).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    std::thread creator([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(img.size())), 0);
        void* p = ::mmap(nullptr, img.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ASSERT_NE(p, MAP_FAILED);
        auto* base = static_cast<std::byte*>(p);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        constexpr std::size_t after_magic = sizeof(std::uint64_t);  // the magic is the header's first field
        std::memcpy(base + after_magic, img.data() + after_magic, img.size() - after_magic);
        std::uint64_t magic = 0;
        std::memcpy(&magic, img.data(), sizeof magic);
        reinterpret_cast<SegmentHeader*>(base)->magic.store(magic, std::memory_order_release);
        ::munmap(p, img.size());
    });
    std::optional<Segment> opened;
    try {
        opened.emplace(Segment::open(n.str()));
    } catch (const Error& e) {
        ADD_FAILURE() << "open during creation: " << e.what();
    }
    creator.join();
    ::close(fd);
    if (opened) {
        EXPECT_EQ(opened->header().reader_count, 2u);
    }
}

// A container that shares /dev/shm but not the PID namespace: its pids mean other processes here.
// A grandchild in a new PID namespace (with its own /proc, as a container has) must be refused an
// attach to our segment (it would be judged dead and evicted at the first liveness check), and a
// segment it keeps alive must survive our sweep (its creator, pid 1 there, is our init or nobody
// here). Needs CAP_SYS_ADMIN or unprivileged user namespaces; skipped, saying so, without either.
TEST(Segment, AnotherPidNamespacesSegmentIsNeitherAttachedNorSwept) {
    ScopedName outer("pidns-outer"), inner("pidns-inner");
    auto w = Writer::create(outer, {.readers = 1, .capacity = 64 * 1024});
    int report[2], go[2];
    ASSERT_EQ(::pipe(report), 0);
    ASSERT_EQ(::pipe(go), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(report[0]);
        ::close(go[1]);
        const auto say = [&](const std::string& s) { (void)!::write(report[1], s.data(), s.size()); };
        if (::unshare(CLONE_NEWPID | CLONE_NEWNS) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0) {
            say("S unshare: " + std::string(std::strerror(errno)) + "\n");
            ::_exit(0);
        }
        const pid_t g = ::fork();  // the first child of the new namespace: its pid 1
        if (g == 0) {
            if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
                say("S mount /proc: " + std::string(std::strerror(errno)) + "\n");
                ::_exit(0);
            }
            try {
                auto r = Reader::attach(outer, 0);
                say("A attached across namespaces\n");
            } catch (const Error& e) {
                const bool named = std::string(e.what()).find("another PID namespace") != std::string::npos;
                say(std::string(e.code() == ErrorCode::permission_denied && named ? "R " : "E ") + e.what() + "\n");
            }
            try {
                auto mine = Writer::create(inner, {.readers = 1, .capacity = 64 * 1024});
                say("C\n");
                char c;
                (void)!::read(go[0], &c, 1);  // alive until the test has swept
            } catch (const Error& e) {
                say(std::string("E create: ") + e.what() + "\n");
            }
            ::_exit(0);
        }
        int st = 0;
        if (g > 0) ::waitpid(g, &st, 0);
        ::_exit(0);
    }
    ::close(report[1]);
    ::close(go[0]);
    FILE* in = ::fdopen(report[0], "r");
    ASSERT_NE(in, nullptr);
    char line[512];
    std::vector<std::string> said;
    while (said.size() < 2 && std::fgets(line, sizeof line, in) != nullptr) {
        said.emplace_back(line);
        if (said.back()[0] == 'S') break;
    }
    const auto finish = [&] {
        ::close(go[1]);  // the grandchild ends
        std::fclose(in);
        int st = 0;
        ::waitpid(child, &st, 0);
    };
    if (!said.empty() && said[0][0] == 'S') {
        finish();
        GTEST_SKIP() << "no new PID namespace here: " << said[0].substr(2);
    }
    ASSERT_EQ(said.size(), 2u);
    EXPECT_EQ(said[0][0], 'R') << said[0];
    EXPECT_EQ(said[1][0], 'C') << said[1];
    // The grandchild lives: its segment must be kept by a sweep, and refused to us as it was to it.
    for (const auto& swept : sweep_abandoned(inner.str())) ADD_FAILURE() << "swept a live segment: " << swept.name;
    expect_error([&] { (void)Segment::open(inner); }, ErrorCode::permission_denied, "another PID namespace");
    finish();
}

// Two sweeps at once (every Python queue's creation runs one, beside a `gc`): each removes some of the
// abandoned segments, and what the other removed first is neither counted nor reported as kept — the
// first form said "in use by the time the sweep came to it" about dozens of names that no longer
// existed. Together they remove every one, and a kept list names only what is still there.
TEST(Segment, TwoSweepsAtOnceReportOnlyWhatStayed) {
    ScopedName prefix("sweeps");
    constexpr int kSegments = 150;
    const pid_t child = ::fork();
    if (child == 0) {  // their creator: dead once it exits, so every segment is abandoned
        for (int i = 0; i < kSegments; ++i)
            (void)Segment::create(prefix.str() + "-" + std::to_string(i), SegmentOptions{.readers = 1});
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::vector<AbandonedObject> removed[2];
    std::vector<KeptObject> kept[2];
    std::atomic<int> ready{0};
    std::vector<std::thread> sweepers;
    for (int s = 0; s < 2; ++s)
        sweepers.emplace_back([&, s] {
            ready.fetch_add(1);
            while (ready.load() < 2) {
            }
            removed[s] = sweep_abandoned(prefix.str(), false, &kept[s]);
        });
    for (auto& t : sweepers) t.join();
    EXPECT_EQ(removed[0].size() + removed[1].size(), static_cast<std::size_t>(kSegments));
    for (int s = 0; s < 2; ++s)
        for (const auto& k : kept[s]) ADD_FAILURE() << "sweep " << s << " kept " << k.name << ": " << k.why;
}

TEST(Segment, CorruptRecordHeaderIsAnErrorNotACrash) {
    ScopedName n("rec");
    auto w = Writer::create(n, SegmentOptions{.readers = 1});
    ReaderOptions keep;
    keep.keep_place = true;  // rank 0 re-attaches below, at the same head
    std::optional<Reader> r(Reader::attach(n, 0, keep));
    ASSERT_EQ(w.write(std::vector<std::byte>(100), std::chrono::seconds(1)), Status::ok);
    auto* h = reinterpret_cast<RecordHeader*>(w.segment().data());
    // A reader that finds the record by its stamp judges it by its length alone (a stamped record may
    // lie past the tail: ring.hpp); an impossible length sends it to the tail, which says what is wrong.
    h->length = 0x7fffffff;
    expect_error([&] { (void)r->peek(std::chrono::seconds(1)); }, ErrorCode::corrupt, "exceeds the maximum");
    // From here on this reader has loaded the tail: it judges the record at its head against it.
    h->length = 100;
    h->stamp = 99;  // kind 99, lap 0
    expect_error([&] { (void)r->peek(std::chrono::seconds(1)); }, ErrorCode::corrupt, "unknown record kind");
    h->stamp = make_stamp(RecordKind::message, w.capacity(), static_cast<unsigned>(std::countr_zero(w.capacity())));
    expect_error([&] { (void)r->peek(std::chrono::seconds(1)); }, ErrorCode::corrupt, "is not one of lap 0");
    h->stamp = static_cast<std::uint32_t>(RecordKind::message);
    h->length = 500;  // beyond the published tail
    expect_error([&] { (void)r->peek(std::chrono::seconds(1)); }, ErrorCode::corrupt, "past the published tail");
    // A fresh reader at the same head finds the record by its stamp: 500 bytes is a possible length.
    r.reset();
    r.emplace(Reader::attach(n, 0, keep));
    const Message m = r->peek(std::chrono::seconds(1));
    ASSERT_EQ(m.status, Status::ok);
    EXPECT_EQ(m.bytes.size(), 500u) << "a stamped record is taken by its own length";
}

}  // namespace
}  // namespace ringcast::test
