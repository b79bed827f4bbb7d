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
//   publish     the writer's time from reserve() to commit()'s return (the demote ways' last CLDEMOTE
//               included)
//   reader 0    from the publish's start until reader 0's read() returned (the message copied out and
//               its space released)
//   last        the same for the last reader of the step
// for four ways to publish, alternated block by block in every round:
//   natural     reserve(); the payload in one memcpy; commit() (front to back as far as the C library's
//               memcpy is: glibc's vector copies may store a large copy's first bytes last)
//   line-last   reserve(); the payload after the stamp's line, then its head; commit()
//   demote      reserve(); the natural order, each payload line past the stamp's line written back to
//               the shared cache with CLDEMOTE before commit() (a hint; a no-op on CPUs without it),
//               and the stamp's line after commit()
//   both        line-last and demote
// Between steps the writer waits until every reader acknowledged and then --gap-us more, so that
// every reader waits on the ring when the next message comes (as a synchronous executor's workers do
// after an all-rank step). Times are CLOCK_MONOTONIC, one clock for every process.
//
// Every message carries its step number and a pattern made from it; each reader checks every byte and
// that the steps come one after another (after taking its time), so a misplaced byte fails the run.
//
//   build/bench/profile/ringcast-fanout [--readers 8] [--size 2048] [--steps 3000] [--rounds 8]
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
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"  // rcbench::now_ns, median, whole_number, pin_to_cpu
#include "ringcast/ring.hpp"

namespace {

using rcbench::median;
using rcbench::now_ns;

constexpr std::size_t kHardwareLine = 64;  // x86-64 (ringcast's layout::kLine is a pair of them)

struct alignas(kHardwareLine) Ack {  // a line per reader: the writer polls them while the others copy
    std::atomic<std::uint64_t> step{0};
    std::atomic<std::int64_t> had_at_ns{0};
};
static_assert(sizeof(Ack) == kHardwareLine);

enum class Way { natural, line_last, demote, both };
constexpr int kWays = 4;
constexpr const char* kWayNames[kWays] = {"natural", "line-last", "demote", "both"};
constexpr std::uint64_t kQuit = ~std::uint64_t{0};
constexpr std::int64_t kAckDeadlineNs = 10'000'000'000;  // a reader silent this long has failed
// Readers: a writer and 15 readers fill a 16-CPU machine, one process a CPU.
constexpr std::uint64_t kMaxReaders = 15;

struct Options {
    std::uint32_t readers = 8;
    std::size_t size = 2048, steps = 3000, rounds = 8;  // rounds: a multiple of 4 puts each way in each place
    std::int64_t gap_ns = 50'000;
    std::size_t stamp_line = kHardwareLine;  // --line: the bytes written last, 64 or 128 (a pair of lines,
                                             // which Intel's adjacent-line prefetcher fetches together)
    std::vector<int> cpus;  // writer first, then reader 0, 1, ...; empty: unpinned
};

struct Failed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "ringcast-fanout: %s\nusage: ringcast-fanout [--readers N (1..15)] [--size BYTES (16..65536)] "
                 "[--steps N] [--rounds N] [--gap-us N] [--line 64|128] [--cpus W,R0,R1,...]\n",
                 why);
    std::exit(2);
}

std::uint64_t parse_u64(const std::string& text, const char* what, std::uint64_t lo, std::uint64_t hi) {
    const std::optional<std::uint64_t> v = rcbench::whole_number(text, lo, hi);
    if (!v) usage((std::string("bad ") + what + " '" + text + "' (" + std::to_string(lo) + ".." + std::to_string(hi) + ")").c_str());
    return *v;
}

Options parse(int argc, char** argv) {
    Options o;
    constexpr std::uint64_t kBig = 1'000'000'000;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(("missing value of " + a).c_str());
        const std::string v = argv[++i];
        if (a == "--readers") o.readers = static_cast<std::uint32_t>(parse_u64(v, "--readers", 1, kMaxReaders));
        else if (a == "--size") o.size = parse_u64(v, "--size", 16, 1u << 16);
        else if (a == "--steps") o.steps = parse_u64(v, "--steps", 1, kBig);
        else if (a == "--rounds") o.rounds = parse_u64(v, "--rounds", 1, 1000);
        else if (a == "--gap-us") o.gap_ns = static_cast<std::int64_t>(parse_u64(v, "--gap-us", 0, kBig)) * 1000;
        else if (a == "--line") {
            o.stamp_line = parse_u64(v, "--line", 64, 128);
            if (o.stamp_line != 64 && o.stamp_line != 128) usage("--line must be 64 or 128");
        } else if (a == "--cpus") {
            for (std::size_t at = 0; at <= v.size();) {
                const std::size_t comma = std::min(v.find(',', at), v.size());
                o.cpus.push_back(static_cast<int>(parse_u64(v.substr(at, comma - at), "--cpus", 0, CPU_SETSIZE - 1)));
                at = comma + 1;
            }
        } else usage(("unknown option " + a).c_str());
    }
    if (!o.cpus.empty() && o.cpus.size() != o.readers + 1u) usage("--cpus needs the writer's CPU and one per reader");
    return o;
}

void pin(const Options& o, std::size_t who) {
    if (o.cpus.empty()) return;
    if (!rcbench::pin_to_cpu(o.cpus[who]))
        throw Failed("sched_setaffinity(CPU " + std::to_string(o.cpus[who]) + "): " + std::strerror(errno));
}

// A hint: the line goes to the shared cache, where every reader fetches it without a snoop of this
// core. A no-op on CPUs without CLDEMOTE (its encoding is a reserved NOP there). The clobber keeps the
// compiler from moving it across the publish's stores.
inline void demote_line(const std::byte* p) noexcept {
#if defined(__x86_64__)
    asm volatile("cldemote %0" : : "m"(*reinterpret_cast<const char*>(p)) : "memory");
#else
    (void)p;
#endif
}

// The payload's bytes that share the line (or pair of lines) of the record's header and stamp.
std::size_t head_bytes(const std::byte* payload, std::size_t n, std::size_t stamp_line) {
    const auto header = reinterpret_cast<std::uintptr_t>(payload) - sizeof(ringcast::layout::RecordHeader);
    const std::uintptr_t line_end = (header | (stamp_line - 1)) + 1;
    return std::min<std::size_t>(n, line_end - reinterpret_cast<std::uintptr_t>(payload));
}

void fill(std::vector<std::byte>& msg, std::uint64_t step) {
    std::memcpy(msg.data(), &step, sizeof step);
    for (std::size_t i = sizeof step; i < msg.size(); ++i) msg[i] = static_cast<std::byte>(step * 131 + i);
}

void publish(ringcast::Writer& w, Way way, const std::vector<std::byte>& msg, std::size_t stamp_line) {
    const ringcast::Reservation r = w.reserve(msg.size());
    if (r.status != ringcast::Status::ok) throw Failed("reserve() failed");
    std::byte* dst = r.bytes.data();
    const std::size_t head = head_bytes(dst, msg.size(), stamp_line);
    const bool line_last = way == Way::line_last || way == Way::both;
    const bool demote = way == Way::demote || way == Way::both;
    if (line_last) {
        std::memcpy(dst + head, msg.data() + head, msg.size() - head);
        std::atomic_signal_fence(std::memory_order_seq_cst);  // a compiler barrier: the copies' order is the point
        std::memcpy(dst, msg.data(), head);
    } else {
        std::memcpy(dst, msg.data(), msg.size());
    }
    if (demote)  // the lines past the stamp's (the one holding the payload's first byte past the head too)
        for (std::size_t at = head; at < msg.size(); at += kHardwareLine) demote_line(dst + at);
    w.commit(msg.size());
    if (demote) demote_line(dst - sizeof(ringcast::layout::RecordHeader));  // the stamp's line itself
}

[[noreturn]] void reader_main(const std::string& name, std::uint32_t rank, Ack* ack, const Options& o) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    try {
        pin(o, 1 + rank);
        ringcast::Reader r = ringcast::Reader::attach(name, rank);
        std::vector<std::byte> into, expected(o.size);
        for (std::uint64_t want = 1;; ++want) {
            if (r.read(into) != ringcast::Status::ok) throw Failed("read() failed");
            const std::int64_t had = now_ns();
            std::uint64_t step = 0;
            if (into.size() >= sizeof step) std::memcpy(&step, into.data(), sizeof step);
            if (step == kQuit) _exit(0);
            fill(expected, want);
            if (into != expected)  // a byte out of place, or a step skipped or repeated
                throw Failed("step " + std::to_string(want) + ": the message read is not the one written");
            ack->had_at_ns.store(had, std::memory_order_relaxed);
            ack->step.store(step, std::memory_order_release);  // pairs with the writer's acquire poll
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringcast-fanout: reader %u: %s\n", rank, e.what());
        _exit(5);
    }
}

struct Samples {
    std::vector<double> publish, reader0, last;
};

int run(const Options& o) {
    const std::string name = "ringcast-fanout-" + std::to_string(::getpid());
    ringcast::SegmentOptions so;
    so.readers = o.readers;
    so.capacity = 16u << 20;  // a MessageQueue's default ring
    ringcast::WriterOptions wo;
    wo.unlink_on_destroy = true;
    ringcast::Writer w = ringcast::Writer::create(name, so, wo);  // unlinked on every way out of run()
    void* shared = ::mmap(nullptr, sizeof(Ack) * o.readers, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) throw Failed(std::string("mmap of the acknowledgement lines: ") + std::strerror(errno));
    Ack* acks = static_cast<Ack*>(shared);
    for (std::uint32_t r = 0; r < o.readers; ++r) new (&acks[r]) Ack{};
    std::vector<pid_t> kids;
    const auto reap = [&] {  // every reader's exit status; SIGKILL first where `kill`
        int bad = 0;
        for (pid_t pid : kids) {
            int st = 0;
            ::waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++bad;
        }
        kids.clear();
        return bad;
    };
    for (std::uint32_t rank = 0; rank < o.readers; ++rank) {
        const pid_t pid = ::fork();
        if (pid < 0) throw Failed(std::string("fork: ") + std::strerror(errno));
        if (pid == 0) reader_main(name, rank, &acks[rank], o);
        kids.push_back(pid);
    }
    try {
        pin(o, 0);
        std::printf("ringcast-fanout: 1 writer, %u reader(s) waiting with default options, %zu B messages, 16 MiB ring, "
                    "%zu steps per way per round, %zu rounds, gap %lld us after the last acknowledgement, "
                    "stamp's line %zu B, %s\n",
                    o.readers, o.size, o.steps, o.rounds, static_cast<long long>(o.gap_ns / 1000), o.stamp_line,
                    o.cpus.empty() ? "unpinned" : "pinned");
        std::vector<std::byte> msg(o.size);
        std::uint64_t step = 0;
        std::vector<std::vector<Samples>> rounds(o.rounds, std::vector<Samples>(kWays));
        for (std::size_t round = 0; round < o.rounds; ++round) {
            for (int k = 0; k < kWays; ++k) {
                const int way_index = static_cast<int>((k + round) % kWays);  // each way in every place in turn
                Samples& s = rounds[round][way_index];
                for (std::size_t i = 0; i < o.steps + 100; ++i) {  // the first 100: warm-up, not kept
                    fill(msg, ++step);
                    const std::int64_t t0 = now_ns();
                    publish(w, static_cast<Way>(way_index), msg, o.stamp_line);
                    const std::int64_t t1 = now_ns();
                    std::int64_t reader0 = 0, last = 0;
                    for (std::uint32_t r = 0; r < o.readers; ++r) {
                        for (std::uint32_t spins = 1; acks[r].step.load(std::memory_order_acquire) != step; ++spins) {
                            ringcast::cpu_relax();
                            if ((spins & 0xffff) == 0 && now_ns() - t1 > kAckDeadlineNs)
                                throw Failed("reader " + std::to_string(r) + " did not acknowledge step " +
                                             std::to_string(step) + " within 10 s");
                        }
                        const std::int64_t had = acks[r].had_at_ns.load(std::memory_order_relaxed) - t0;
                        if (r == 0) reader0 = had;
                        last = std::max(last, had);
                    }
                    if (i >= 100) {
                        s.publish.push_back(static_cast<double>(t1 - t0));
                        s.reader0.push_back(static_cast<double>(reader0));
                        s.last.push_back(static_cast<double>(last));
                    }
                    const std::int64_t until = now_ns() + o.gap_ns;
                    while (now_ns() < until) ringcast::cpu_relax();
                }
            }
        }
        msg.assign(o.size, std::byte{0});
        std::memcpy(msg.data(), &kQuit, sizeof kQuit);
        if (w.write(msg) != ringcast::Status::ok) throw Failed("the quit message could not be written");
        if (const int bad = reap(); bad != 0) throw Failed(std::to_string(bad) + " reader(s) failed");
        std::printf("p50 ns per round (publish / reader 0 had it / the last reader had it):\n");
        std::vector<double> med[kWays][3];
        for (int way = 0; way < kWays; ++way) {
            std::printf("  %-9s", kWayNames[way]);
            for (std::size_t round = 0; round < o.rounds; ++round) {
                const Samples& s = rounds[round][way];
                const double p = median(s.publish), f = median(s.reader0), l = median(s.last);
                med[way][0].push_back(p);
                med[way][1].push_back(f);
                med[way][2].push_back(l);
                std::printf("  %4.0f/%4.0f/%4.0f", p, f, l);
            }
            std::printf("\n");
        }
        std::printf("median of the rounds, and against natural:\n");
        const double base[3] = {median(med[0][0]), median(med[0][1]), median(med[0][2])};
        for (int way = 0; way < kWays; ++way) {
            const double p = median(med[way][0]), f = median(med[way][1]), l = median(med[way][2]);
            std::printf("  %-9s publish %6.0f (%.2f)  reader 0 %6.0f (%.2f)  last %6.0f (%.2f)\n", kWayNames[way], p,
                        p / base[0], f, f / base[1], l, l / base[2]);
        }
        return 0;
    } catch (...) {
        for (pid_t pid : kids) ::kill(pid, SIGKILL);
        reap();
        throw;
    }
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringcast-fanout: %s\n", e.what());
        return 1;
    }
}
