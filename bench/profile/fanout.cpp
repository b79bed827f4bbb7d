// What a broadcast costs when many readers wait on the ring at once, and how the writer can lay its
// stores out so that they do not fight the readers for the line the readers poll.
//
// A waiting reader polls the stamp of the record at its head (Reader::stamped_at_head): every waiting
// reader keeps that line in its cache, shared. A writer that stores into the line takes it back from
// all of them (a read-for-ownership that invalidates every copy), and each reader fetches it again at
// its next poll. A record's first payload bytes share the stamp's line, so a writer that copies the
// payload front to back and then stamps it takes the line twice per publish — once for the payload's
// head and, the readers having fetched it again meanwhile, once more for the header and the stamp:
//
//     stamp's line              next lines
//     | hdr | payload head |   | payload ... |
//       ^2    ^1 (copy)          ^1 (copy)           natural order: 1 then 2 — the line taken twice
//       ^2    ^2                 ^1                  stamp's line last: the head copied just before
//                                                    the header, the line taken once
// With one waiting reader each take is one hand-over; with eight, each waits behind eight readers'
// fetches of the line. This program measures, with the real Writer and Readers (separate processes),
// one writer and R readers waiting with their default options:
//   publish     the writer's time from its first store to commit()'s return
//   first       from the publish's start until reader 0 has the message copied out
//   last        the same for the last reader of the step
// for four ways to publish, alternated block by block in every round:
//   natural     reserve(); the payload front to back; commit()
//   line-last   reserve(); the payload after the stamp's line, then its head; commit() (what
//               Writer::write does, layout::payload_on_stamp_line)
//   demote      reserve(); the natural order, each payload line past the stamp's line written back to
//               the shared cache with CLDEMOTE before commit() (a hint; a no-op on CPUs without it),
//               and the stamp's line after commit()
//   both        line-last and demote
// Between steps the writer waits until every reader acknowledged and then --gap-us more, so that
// every reader waits on the ring when the next message comes (as a synchronous executor's workers do
// after an all-rank step). Times are CLOCK_MONOTONIC, one clock for every process.
//
//   build/bench/profile/ringcast-fanout [--readers 8] [--size 2048] [--steps 4000] [--rounds 5]
//                                       [--gap-us 50] [--line 64] [--cpus W,R0,R1,...]
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common.hpp"  // rcbench::now_ns, rcbench::median
#include "ringcast/ring.hpp"

namespace {

using rcbench::median;
using rcbench::now_ns;

constexpr std::size_t kLine = 64;
std::size_t g_stamp_line = kLine;  // --line: the bytes written last, 64 or 128 (a pair of lines, which Intel's
                                   // adjacent-line prefetcher fetches together)

struct alignas(kLine) Ack {  // a line per reader: the writer polls them while the others copy
    std::atomic<std::uint64_t> step{0};
    std::atomic<std::int64_t> had_at_ns{0};
};
static_assert(sizeof(Ack) == kLine);

enum class Way { natural, line_last, demote, both };
constexpr const char* kWayNames[] = {"natural", "line-last", "demote", "both"};
constexpr std::uint64_t kQuit = ~std::uint64_t{0};

struct Options {
    std::uint32_t readers = 8;
    std::size_t size = 2048, steps = 4000, rounds = 5;
    std::int64_t gap_ns = 50'000;
    std::vector<int> cpus;  // writer first, then reader 0, 1, ...; empty: unpinned
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "ringcast-fanout: %s\nusage: ringcast-fanout [--readers N (1..15)] [--size BYTES (>= 8)] "
                 "[--steps N] [--rounds N] [--gap-us N] [--line 64|128] [--cpus W,R0,R1,...]\n",
                 why);
    std::exit(2);
}

std::uint64_t parse_u64(const char* text, const char* what) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') usage((std::string("bad ") + what).c_str());
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(("missing value of " + a).c_str());
        const char* v = argv[++i];
        if (a == "--readers") o.readers = static_cast<std::uint32_t>(parse_u64(v, "--readers"));
        else if (a == "--size") o.size = parse_u64(v, "--size");
        else if (a == "--steps") o.steps = parse_u64(v, "--steps");
        else if (a == "--rounds") o.rounds = parse_u64(v, "--rounds");
        else if (a == "--line") {
            g_stamp_line = parse_u64(v, "--line");
            if (g_stamp_line != 64 && g_stamp_line != 128) usage("--line must be 64 or 128");
        } else if (a == "--gap-us") o.gap_ns = static_cast<std::int64_t>(parse_u64(v, "--gap-us")) * 1000;
        else if (a == "--cpus") {
            std::string s = v;
            for (std::size_t at = 0; at <= s.size();) {
                const std::size_t comma = std::min(s.find(',', at), s.size());
                o.cpus.push_back(static_cast<int>(parse_u64(s.substr(at, comma - at).c_str(), "--cpus")));
                at = comma + 1;
            }
        } else usage(("unknown option " + a).c_str());
    }
    if (o.readers < 1 || o.readers > 15) usage("--readers must be 1..15");
    if (o.size < 8 || o.size > (1u << 16)) usage("--size must be 8..65536");
    if (o.steps < 1 || o.rounds < 1) usage("--steps and --rounds must be >= 1");
    if (!o.cpus.empty() && o.cpus.size() != o.readers + 1u) usage("--cpus needs the writer's CPU and one per reader");
    return o;
}

void pin(const Options& o, std::size_t who) {
    if (o.cpus.empty()) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.cpus[who], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        std::perror("sched_setaffinity");
        std::exit(2);
    }
}

inline void demote_line(const std::byte* p) noexcept {
#if defined(__x86_64__)
    asm volatile("cldemote %0" : : "m"(*reinterpret_cast<const char*>(p)));
#else
    (void)p;
#endif
}

// The payload's bytes that share the line of the record's header (and so its stamp).
std::size_t head_bytes(const std::byte* payload, std::size_t n) {
    const auto header = reinterpret_cast<std::uintptr_t>(payload) - sizeof(ringcast::layout::RecordHeader);
    const std::uintptr_t line_end = (header | (g_stamp_line - 1)) + 1;
    return std::min<std::size_t>(n, line_end - reinterpret_cast<std::uintptr_t>(payload));
}

void publish(ringcast::Writer& w, Way way, const std::vector<std::byte>& msg) {
    const ringcast::Reservation r = w.reserve(msg.size());
    if (r.status != ringcast::Status::ok) usage("reserve() failed");
    std::byte* dst = r.bytes.data();
    const std::size_t head = head_bytes(dst, msg.size());
    const bool line_last = way == Way::line_last || way == Way::both;
    const bool demote = way == Way::demote || way == Way::both;
    if (line_last) {
        std::memcpy(dst + head, msg.data() + head, msg.size() - head);
        std::memcpy(dst, msg.data(), head);
    } else {
        std::memcpy(dst, msg.data(), msg.size());
    }
    if (demote)
        for (std::size_t at = head; at < msg.size(); at += kLine) demote_line(dst + at);  // (head may end mid-line: the
                                                                                         // line's rest is demoted with it)
    w.commit(msg.size());
    if (demote) demote_line(dst);
}

[[noreturn]] void reader_main(const std::string& name, std::uint32_t rank, Ack* ack, const Options& o) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(o, 1 + rank);
    try {
        ringcast::Reader r = ringcast::Reader::attach(name, rank);
        std::vector<std::byte> into;
        for (;;) {
            if (r.read(into) != ringcast::Status::ok) _exit(3);
            const std::int64_t had = now_ns();
            std::uint64_t step = 0;
            std::memcpy(&step, into.data(), sizeof step);
            if (step == kQuit) _exit(0);
            if (into.size() != o.size || into.back() != static_cast<std::byte>(step)) _exit(4);  // a torn copy
            ack->had_at_ns.store(had, std::memory_order_relaxed);
            ack->step.store(step, std::memory_order_release);  // pairs with the writer's acquire poll
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "reader %u: %s\n", rank, e.what());
        _exit(5);
    }
}

struct Samples {
    std::vector<double> publish, first, last;
};

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const std::string name = "ringcast-fanout-" + std::to_string(::getpid());
    ringcast::SegmentOptions so;
    so.readers = o.readers;
    so.capacity = 16u << 20;  // a MessageQueue's default ring
    ringcast::WriterOptions wo;
    wo.unlink_on_destroy = true;
    ringcast::Writer w = ringcast::Writer::create(name, so, wo);
    void* shared = ::mmap(nullptr, sizeof(Ack) * o.readers, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) usage("mmap of the acknowledgement lines failed");
    Ack* acks = new (shared) Ack[o.readers];
    std::vector<pid_t> kids;
    for (std::uint32_t rank = 0; rank < o.readers; ++rank) {
        const pid_t pid = ::fork();
        if (pid < 0) usage("fork failed");
        if (pid == 0) reader_main(name, rank, &acks[rank], o);
        kids.push_back(pid);
    }
    pin(o, 0);
    std::printf("ringcast-fanout: 1 writer, %u reader(s) waiting with default options, %zu B messages, 16 MiB ring, "
                "%zu steps per way per round, %zu rounds, gap %lld us after the last acknowledgement, stamp's line %zu B, %s\n",
                o.readers, o.size, o.steps, o.rounds, static_cast<long long>(o.gap_ns / 1000), g_stamp_line,
                o.cpus.empty() ? "unpinned" : "pinned");
    std::vector<std::byte> msg(o.size);
    std::uint64_t step = 0;
    std::vector<std::vector<Samples>> rounds(o.rounds, std::vector<Samples>(4));
    for (std::size_t round = 0; round < o.rounds; ++round) {
        for (int k = 0; k < 4; ++k) {
            const int way_index = static_cast<int>((k + round) % 4);  // each way in every position in turn
            const Way way = static_cast<Way>(way_index);
            Samples& s = rounds[round][way_index];
            for (std::size_t i = 0; i < o.steps + 100; ++i) {  // the first 100: warm-up, not kept
                ++step;
                std::memcpy(msg.data(), &step, sizeof step);
                msg.back() = static_cast<std::byte>(step);
                const std::int64_t t0 = now_ns();
                publish(w, way, msg);
                const std::int64_t t1 = now_ns();
                std::int64_t first = 0, last = 0;
                for (std::uint32_t r = 0; r < o.readers; ++r) {
                    while (acks[r].step.load(std::memory_order_acquire) != step) ringcast::cpu_relax();
                    const std::int64_t had = acks[r].had_at_ns.load(std::memory_order_relaxed) - t0;
                    if (r == 0) first = had;
                    last = std::max(last, had);
                }
                if (i >= 100) {
                    s.publish.push_back(static_cast<double>(t1 - t0));
                    s.first.push_back(static_cast<double>(first));
                    s.last.push_back(static_cast<double>(last));
                }
                const std::int64_t until = now_ns() + o.gap_ns;
                while (now_ns() < until) ringcast::cpu_relax();
            }
        }
    }
    msg.assign(o.size, std::byte{0});
    std::memcpy(msg.data(), &kQuit, sizeof kQuit);
    if (w.write(msg) != ringcast::Status::ok) usage("the quit message failed");
    int bad = 0;
    for (pid_t pid : kids) {
        int st = 0;
        ::waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++bad;
    }
    if (bad != 0) {
        std::fprintf(stderr, "ringcast-fanout: %d reader(s) failed\n", bad);
        return 1;
    }
    std::printf("p50 ns per round (publish / reader 0 had it / the last reader had it):\n");
    std::vector<double> med[4][3];
    for (int way = 0; way < 4; ++way) {
        std::printf("  %-9s", kWayNames[way]);
        for (std::size_t round = 0; round < o.rounds; ++round) {
            const Samples& s = rounds[round][way];
            const double p = median(s.publish), f = median(s.first), l = median(s.last);
            med[way][0].push_back(p);
            med[way][1].push_back(f);
            med[way][2].push_back(l);
            std::printf("  %4.0f/%4.0f/%4.0f", p, f, l);
        }
        std::printf("\n");
    }
    std::printf("median of the rounds, and against natural:\n");
    const double base[3] = {median(med[0][0]), median(med[0][1]), median(med[0][2])};
    for (int way = 0; way < 4; ++way) {
        const double p = median(med[way][0]), f = median(med[way][1]), l = median(med[way][2]);
        std::printf("  %-9s publish %6.0f (%.2f)  reader 0 %6.0f (%.2f)  last %6.0f (%.2f)\n", kWayNames[way], p,
                    p / base[0], f, f / base[1], l, l / base[2]);
    }
    return 0;
}
