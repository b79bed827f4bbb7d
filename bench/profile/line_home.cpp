// The atomic floor's round trip, cache line by cache line: does which lines a hand-off uses decide how
// fast two CPUs hand them back and forth?
//
// `ringcast-bench hop` compares ringcast's round trip with a bare atomic hand-off (floor_atomic: a
// request word, the message's data and an ack word on lines of one page, mapped afresh for every row
// of every round). On some hosts that floor moves 0.25–0.50 µs from round to round while ringcast's
// round trip, and a ring with its records and fences (floor_ring_tail), move less. One explanation
// (not tested here): on a mesh of cores a line is handed over through the agent that keeps its
// directory entry, chosen by a hash of the line's physical address, so a hand-off on a few lines pays
// those lines' agents' distances, drawn anew with every mapping, while a ring walks through many lines.
// What this program measures, with two processes on two given CPUs (or unpinned):
//   1. "each pair alone": for each of N request/ack line pairs at different addresses, T round trips
//      on that pair alone; its p50; the same pairs again in every round, in another order. If the
//      pair decides, a pair keeps its speed (and its place among the pairs) from round to round;
//   2. "walking": then T·N round trips through the same pairs, the k-th on pair k mod N, as a ring
//      moves through its lines; its p50 against the pairs'.
// Every round trip is timed on its own with CLOCK_MONOTONIC (two clock reads per trip in both phases).
// Medians of a round's trips are nearest-rank (the upper middle); medians over pairs or rounds average
// the two middle values.
//
//   build/bench/profile/ringcast-line-home [--cpus A,B] [--pairs 32] [--trips 20000] [--rounds 3]
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"        // rcbench::now_ns, median, whole_number, pin_to_cpu
#include "ringcast/wait.hpp"  // ringcast::cpu_relax

namespace {

using rcbench::median;
using rcbench::now_ns;

struct alignas(64) Word {  // a line of its own (the pairs' lines lie in different pages)
    std::atomic<std::uint64_t> value{0};
};
static_assert(sizeof(Word) == 64 && std::atomic<std::uint64_t>::is_always_lock_free);

constexpr std::size_t kMaxTripsInAll = 100'000'000;  // pairs x trips: a walk's samples (800 MB) at most

struct Options {
    int cpu_writer = -1, cpu_reader = -1;  // -1: unpinned
    std::size_t pairs = 32, trips = 20000, rounds = 3;
};

[[noreturn]] void refuse(const std::string& why) {
    std::fprintf(stderr, "ringcast-line-home: %s\nusage: ringcast-line-home [--cpus A,B] [--pairs 2..4096] "
                         "[--trips 100..10000000] [--rounds 1..100]\n", why.c_str());
    std::exit(2);
}

// A whole number in [lo, hi], digits only (no sign, no spaces).
std::size_t whole(const std::string& name, const std::string& v, std::size_t lo, std::size_t hi) {
    const std::optional<std::uint64_t> n = rcbench::whole_number(v, lo, hi);
    if (!n)
        refuse(name + " wants a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + v + "'");
    return std::size_t(*n);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i += 2) {
        const std::string k = argv[i];
        if (i + 1 >= argc) refuse(k + " wants a value");
        const std::string v = argv[i + 1];
        if (k == "--cpus") {
            const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
            const auto comma = v.find(',');
            const std::string bad = "--cpus wants two different CPU numbers below " + std::to_string(cpus) +
                                    ", e.g. 2,3; not '" + v + "'";
            if (comma == std::string::npos) refuse(bad);
            const auto limit = std::size_t(std::max(1L, cpus)) - 1;
            o.cpu_writer = int(whole("--cpus", v.substr(0, comma), 0, limit));
            o.cpu_reader = int(whole("--cpus", v.substr(comma + 1), 0, limit));
            if (o.cpu_writer == o.cpu_reader) refuse(bad);
        } else if (k == "--pairs") {
            o.pairs = whole(k, v, 2, 4096);
        } else if (k == "--trips") {
            o.trips = whole(k, v, 100, 10'000'000);
        } else if (k == "--rounds") {
            o.rounds = whole(k, v, 1, 100);
        } else {
            refuse("unknown option '" + k + "'");
        }
    }
    if (o.pairs * o.trips > kMaxTripsInAll)
        refuse("--pairs x --trips is at most " + std::to_string(kMaxTripsInAll) + " (a walk keeps every trip's time)");
    return o;
}

// False where the CPU cannot be had (not in this process's cpuset, offline); -1 (unpinned): true.
bool pin(int cpu) { return cpu < 0 || rcbench::pin_to_cpu(cpu); }

// The pairs' order in a round: rotated by 7 every two rounds and reversed every other round, so that a
// drift of the host's speed over a round does not pass for a difference between pairs.
std::size_t pair_in_order(std::size_t round, std::size_t i, std::size_t pairs) {
    const std::size_t k = round % 2 == 0 ? i : pairs - 1 - i;
    return (k + round / 2 * 7) % pairs;
}

// Pair j's request and ack lines: each pair `stride` (17 pages) after the one before, its ack 8.5 pages
// after its request; in-page offsets j·64 (request) and 2048 + j·64 (ack), mod 4096 (they repeat after
// 64 pairs; the pages never do).
struct Lines {
    std::byte* base = nullptr;
    std::size_t bytes = 0;
    static constexpr std::size_t stride = 17 * 4096;
    Word& request(std::size_t j) const { return *reinterpret_cast<Word*>(base + j * stride + (j * 64) % 4096); }
    Word& ack(std::size_t j) const { return *reinterpret_cast<Word*>(base + j * stride + stride / 2 + (j * 64) % 4096); }
};

Lines map_lines(std::size_t pairs) {
    Lines l;
    l.bytes = pairs * Lines::stride;
    void* p = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("ringcast-line-home: mmap");
        std::exit(2);
    }
    l.base = static_cast<std::byte*>(p);
    for (std::size_t j = 0; j < pairs; ++j) {
        new (&l.request(j)) Word{};
        new (&l.ack(j)) Word{};
    }
    return l;
}

// The values the writer sends in round r: r·2T + 1 .. r·2T + T on each pair alone, then r·2T + T + 1 ..
// r·2T + 2T walking (the k-th walk trip on pair k mod N carries r·2T + T + k / N + 1). Every value a line
// carries is above the one before, so a reader never takes an old value for a new request.
std::uint64_t alone_value(std::size_t round, std::size_t t, const Options& o) { return round * 2 * o.trips + t; }
std::uint64_t walk_value(std::size_t round, std::size_t k, const Options& o) {
    return round * 2 * o.trips + o.trips + k / o.pairs + 1;
}

void wait_for(const std::atomic<std::uint64_t>& w, std::uint64_t v) {
    while (w.load(std::memory_order_acquire) != v) ringcast::cpu_relax();
}

// The writer's wait for an ack: a reader that died would leave it spinning forever, so every ~2^20
// polls it asks whether the reader is still there (SIGCHLD is left at its default, so a dead reader
// stays a zombie until this waitpid; ECHILD counts as gone too).
void wait_for_ack(const std::atomic<std::uint64_t>& w, std::uint64_t v, pid_t reader) {
    for (std::uint32_t polls = 1; w.load(std::memory_order_acquire) != v; ++polls) {
        ringcast::cpu_relax();
        if (polls % (1u << 20) != 0) continue;
        const pid_t r = ::waitpid(reader, nullptr, WNOHANG);
        if (r == reader || (r < 0 && errno == ECHILD)) {
            std::fprintf(stderr, "ringcast-line-home: the reader process ended early\n");
            std::exit(1);
        }
    }
}

// The reader's side of every phase, in the writer's order: answers each request with its value.
void reader(const Lines& lines, const Options& o) {
    for (std::size_t round = 0; round < o.rounds; ++round) {
        for (std::size_t i = 0; i < o.pairs; ++i)
            for (std::size_t t = 1, j = pair_in_order(round, i, o.pairs); t <= o.trips; ++t) {
                const std::uint64_t v = alone_value(round, t, o);
                wait_for(lines.request(j).value, v);
                lines.ack(j).value.store(v, std::memory_order_release);
            }
        for (std::size_t k = 0; k < o.trips * o.pairs; ++k) {
            const std::size_t j = k % o.pairs;
            const std::uint64_t v = walk_value(round, k, o);
            wait_for(lines.request(j).value, v);
            lines.ack(j).value.store(v, std::memory_order_release);
        }
    }
}

// One round trip on pair j carrying v; its time in ns.
double round_trip(const Lines& lines, std::size_t j, std::uint64_t v, pid_t reader) {
    const std::int64_t t0 = now_ns();
    lines.request(j).value.store(v, std::memory_order_release);
    wait_for_ack(lines.ack(j).value, v, reader);
    return double(now_ns() - t0);
}

double nearest_rank_p50(std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
}

// Ranks 1..n, ties sharing the mean of their ranks.
std::vector<double> ranks(const std::vector<double>& v) {
    std::vector<std::size_t> idx(v.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < idx.size();) {
        std::size_t j = i;
        while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
        for (std::size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * double(i + j) + 1.0;
        i = j + 1;
    }
    return r;
}

// Spearman's rank correlation of two rounds' per-pair p50s: 1 where the pairs keep their order, ~0
// where a round's order is a new draw. (0 where either round's values are all equal.)
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double n = double(a.size()), mean = (n + 1) / 2;
    double sab = 0, saa = 0, sbb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    // A dead reader must stay waitable (wait_for_ack); an ignored SIGCHLD inherited through exec would
    // have the kernel reap it at once.
    std::signal(SIGCHLD, SIG_DFL);
    // Both CPUs are tried before the fork, the reader's last: the child inherits it.
    if (!pin(o.cpu_writer) || !pin(o.cpu_reader))
        refuse("--cpus " + std::to_string(o.cpu_writer) + "," + std::to_string(o.cpu_reader) +
               ": this process may not run there (" + std::strerror(errno) + ")");
    const Lines lines = map_lines(o.pairs);
    const pid_t writer_pid = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("ringcast-line-home: fork");
        return 2;
    }
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a spinning orphan would burn its CPU forever
        if (::getppid() != writer_pid) ::_exit(1);  // the writer died before the line above
        reader(lines, o);
        ::_exit(0);
    }
    (void)pin(o.cpu_writer);  // granted above
    std::printf("line_home: round trips on one request/ack line pair at a time (%zu pairs, %zu trips each), then\n"
                "walking through the same pairs (the k-th trip on pair k mod %zu); writer CPU %s, reader CPU %s; %zu rounds\n",
                o.pairs, o.trips, o.pairs, o.cpu_writer < 0 ? "any" : std::to_string(o.cpu_writer).c_str(),
                o.cpu_reader < 0 ? "any" : std::to_string(o.cpu_reader).c_str(), o.rounds);
    std::vector<std::vector<double>> per_pair(o.rounds, std::vector<double>(o.pairs));
    std::vector<double> walk_p50(o.rounds);
    std::vector<double> rtt;
    rtt.reserve(o.trips * o.pairs);
    for (std::size_t round = 0; round < o.rounds; ++round) {
        for (std::size_t i = 0; i < o.pairs; ++i) {
            const std::size_t j = pair_in_order(round, i, o.pairs);
            rtt.clear();
            for (std::size_t t = 1; t <= o.trips; ++t) rtt.push_back(round_trip(lines, j, alone_value(round, t, o), child));
            per_pair[round][j] = nearest_rank_p50(rtt);
        }
        rtt.clear();
        for (std::size_t k = 0; k < o.trips * o.pairs; ++k)
            rtt.push_back(round_trip(lines, k % o.pairs, walk_value(round, k, o), child));
        walk_p50[round] = nearest_rank_p50(rtt);
    }
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "ringcast-line-home: the reader process failed\n");
        return 1;
    }
    std::printf("\np50 round trip, ns, pair by pair (rows: rounds)\n");
    for (std::size_t round = 0; round < o.rounds; ++round) {
        std::printf("round %zu:", round + 1);
        for (double v : per_pair[round]) std::printf(" %4.0f", v);
        std::printf("\n");
    }
    std::printf("\n%-7s %8s %8s %8s %8s   %s\n", "round", "min", "median", "max", "mean", "walking through them");
    for (std::size_t round = 0; round < o.rounds; ++round) {
        const std::vector<double>& row = per_pair[round];
        double mean = 0;
        for (double v : row) mean += v / double(row.size());
        std::printf("%-7zu %8.0f %8.0f %8.0f %8.0f   %8.0f\n", round + 1, *std::min_element(row.begin(), row.end()),
                    median(row), *std::max_element(row.begin(), row.end()), mean, walk_p50[round]);
    }
    // Does a pair keep its speed from round to round? Each pair's median over the rounds, spread
    // between the pairs; how far one pair moves over the rounds (its max - min; the median of that over
    // the pairs); and whether the pairs keep their order: Spearman's rank correlation of every two
    // rounds, the median over those.
    if (o.rounds > 1) {
        std::vector<double> medians, within, rho;
        for (std::size_t j = 0; j < o.pairs; ++j) {
            std::vector<double> v;
            for (std::size_t round = 0; round < o.rounds; ++round) v.push_back(per_pair[round][j]);
            medians.push_back(median(v));
            within.push_back(*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end()));
        }
        for (std::size_t a = 0; a < o.rounds; ++a)
            for (std::size_t b = a + 1; b < o.rounds; ++b) rho.push_back(spearman(per_pair[a], per_pair[b]));
        std::printf("\neach pair's median over the rounds, ns:");
        for (double v : medians) std::printf(" %4.0f", v);
        std::printf("\nbetween the pairs (their medians): %.0f..%.0f ns; one pair over the rounds (max - min), median of the "
                    "pairs: %.0f ns\n", *std::min_element(medians.begin(), medians.end()),
                    *std::max_element(medians.begin(), medians.end()), median(within));
        std::printf("the pairs' order from round to round: Spearman's rank correlation, median of the %zu pairs of rounds "
                    "%.2f (%.2f..%.2f)\n", rho.size(), median(rho), *std::min_element(rho.begin(), rho.end()),
                    *std::max_element(rho.begin(), rho.end()));
    }
    return 0;
}
