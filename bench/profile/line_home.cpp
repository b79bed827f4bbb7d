// The atomic floor's round trip, cache line by cache line: does a line's address decide how fast two
// cores hand it back and forth?
//
// `ringcast-bench hop` compares ringcast's round trip with a bare atomic hand-off (floor_atomic): one
// request line and one ack line, mapped afresh for every row of every round. On some hosts that floor
// moves 0.25–0.45 µs from round to round while ringcast's round trip, and a ring with its records and
// fences (floor_ring_tail), hold steady. One explanation: on a mesh of cores a line is handed over
// through the agent that keeps its directory entry — chosen by a hash of the line's physical address —
// so a floor built on two lines pays those two agents' distances, which a new mapping draws anew, while
// a ring walks through many lines and pays their average. This program tests that explanation, with
// two processes on fixed CPUs (or unpinned):
//   1. "one pair at a time": for each of N request/ack line pairs at different addresses, T round trips
//      on that pair alone; the p50 of each pair, and the same pairs again in every round (in another
//      order) — if the
//      address decides, a pair is fast or slow in every round, and pairs differ by far more than the
//      rounds of one pair;
//   2. "walking": T·N round trips, the k-th on pair k mod N (as a ring moves through its lines) — its
//      p50 against the pairs' spread.
// Every round trip is timed on its own with CLOCK_MONOTONIC (two clock reads per trip in every case).
//
//   build/bench/profile/ringcast-line-home [--cpus A,B] [--pairs 32] [--trips 20000] [--rounds 3]
#include <sched.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <string>
#include <vector>

namespace {

struct alignas(64) Word {  // one line each: nothing else shares it
    std::atomic<std::uint64_t> value{0};
};
static_assert(sizeof(Word) == 64 && std::atomic<std::uint64_t>::is_always_lock_free);

struct Options {
    int cpu_writer = -1, cpu_reader = -1;  // -1: unpinned
    std::size_t pairs = 32, trips = 20000, rounds = 3;
};

std::int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void pause_cpu() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

void wait_for(const std::atomic<std::uint64_t>& w, std::uint64_t v) {
    while (w.load(std::memory_order_acquire) != v) pause_cpu();
}

// The writer's wait for an ack: a reader that died would leave it spinning forever, so every ~2^20
// polls it asks whether the reader is still there.
void wait_for_ack(const std::atomic<std::uint64_t>& w, std::uint64_t v, pid_t reader) {
    for (std::uint32_t polls = 1; w.load(std::memory_order_acquire) != v; ++polls) {
        pause_cpu();
        if (polls % (1u << 20) == 0 && ::waitpid(reader, nullptr, WNOHANG) == reader) {
            std::fprintf(stderr, "ringcast-line-home: the reader process ended early\n");
            std::exit(1);
        }
    }
}

void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
        std::perror("sched_setaffinity");
        std::exit(2);
    }
}

// The pairs' order in a round: rotated by 7 every two rounds and reversed every other round, so that a
// drift of the host's speed over a round does not pass for a difference between pairs.
std::size_t pair_in_order(std::size_t round, std::size_t i, std::size_t pairs) {
    const std::size_t k = round % 2 == 0 ? i : pairs - 1 - i;
    return (k + round / 2 * 7) % pairs;
}

// Pair j's request and ack lines: `stride` apart pairwise, the ack half a stride after its request,
// each a different in-page offset as well, so that neither the page nor the offset repeats.
struct Lines {
    std::byte* base = nullptr;
    std::size_t bytes = 0, stride = 0;
    Word& request(std::size_t j) const { return *reinterpret_cast<Word*>(base + j * stride + (j * 64) % 4096); }
    Word& ack(std::size_t j) const {
        return *reinterpret_cast<Word*>(base + j * stride + stride / 2 + ((j * 64 + 2048) % 4096));
    }
};

// The reader's side of every phase, in the writer's order: answers each request with the same value.
void reader(const Lines& fixed, const Lines& walking, const Options& o) {
    for (std::size_t round = 0; round < o.rounds; ++round) {
        for (std::size_t i = 0; i < o.pairs; ++i)
            for (std::size_t t = 1, j = pair_in_order(round, i, o.pairs); t <= o.trips; ++t) {
                const std::uint64_t v = round * o.trips + t;
                wait_for(fixed.request(j).value, v);
                fixed.ack(j).value.store(v, std::memory_order_release);
            }
        for (std::size_t t = 0; t < o.trips * o.pairs; ++t) {
            const std::size_t j = t % o.pairs;
            const std::uint64_t v = round * o.trips + t / o.pairs + 1;
            wait_for(walking.request(j).value, v);
            walking.ack(j).value.store(v, std::memory_order_release);
        }
    }
}

double p50(std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
}

[[noreturn]] void refuse(const std::string& why) {
    std::fprintf(stderr, "ringcast-line-home: %s\nusage: ringcast-line-home [--cpus A,B] [--pairs 2..4096] "
                         "[--trips 100..10000000] [--rounds 1..100]\n", why.c_str());
    std::exit(2);
}

std::size_t count(const std::string& name, const char* v, std::size_t lo, std::size_t hi) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || n < lo || n > hi)
        refuse(name + " wants a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + v + "'");
    return std::size_t(n);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; i += 2) {
        const std::string k = argv[i];
        if (i + 1 >= argc) refuse(k + " wants a value");
        const char* v = argv[i + 1];
        if (k == "--cpus") {
            const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
            char tail = 0;
            if (std::sscanf(v, "%d,%d%c", &o.cpu_writer, &o.cpu_reader, &tail) != 2 || o.cpu_writer < 0 ||
                o.cpu_reader < 0 || o.cpu_writer >= cpus || o.cpu_reader >= cpus || o.cpu_writer == o.cpu_reader)
                refuse("--cpus wants two different CPU numbers below " + std::to_string(cpus) + ", e.g. 2,3; not '" + v + "'");
        } else if (k == "--pairs") {
            o.pairs = count(k, v, 2, 4096);
        } else if (k == "--trips") {
            o.trips = count(k, v, 100, 10'000'000);
        } else if (k == "--rounds") {
            o.rounds = count(k, v, 1, 100);
        } else {
            refuse("unknown option '" + k + "'");
        }
    }
    return o;
}

Lines map_lines(std::size_t pairs) {
    Lines l;
    l.stride = 64 * 1024 + 4096;  // not a power of two: pairs land in different sets and pages
    l.bytes = pairs * l.stride + 8192;
    void* p = ::mmap(nullptr, l.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(2);
    }
    l.base = static_cast<std::byte*>(p);
    for (std::size_t j = 0; j < pairs; ++j) {
        new (&l.request(j)) Word{};
        new (&l.ack(j)) Word{};
    }
    return l;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const Lines fixed = map_lines(o.pairs), walking = map_lines(o.pairs);
    pin(o.cpu_reader);  // inherited by the reader: a CPU that cannot be had is refused before the fork
    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("fork");
        return 2;
    }
    if (child == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a spinning orphan would burn its CPU forever
        if (::getppid() == 1) ::_exit(1);
        reader(fixed, walking, o);
        ::_exit(0);
    }
    pin(o.cpu_writer);
    std::printf("line_home: round trips on one request/ack line pair at a time (%zu pairs, %zu trips each), then\n"
                "walking through the pairs (the k-th trip on pair k mod %zu); writer CPU %s, reader CPU %s; %zu rounds\n",
                o.pairs, o.trips, o.pairs, o.cpu_writer < 0 ? "any" : std::to_string(o.cpu_writer).c_str(),
                o.cpu_reader < 0 ? "any" : std::to_string(o.cpu_reader).c_str(), o.rounds);
    std::vector<std::vector<double>> per_pair(o.rounds, std::vector<double>(o.pairs));
    std::vector<double> walk_p50(o.rounds);
    std::vector<double> rtt;
    for (std::size_t round = 0; round < o.rounds; ++round) {
        for (std::size_t i = 0; i < o.pairs; ++i) {
            const std::size_t j = pair_in_order(round, i, o.pairs);
            rtt.clear();
            for (std::size_t t = 1; t <= o.trips; ++t) {
                const std::uint64_t v = round * o.trips + t;
                const std::int64_t t0 = now_ns();
                fixed.request(j).value.store(v, std::memory_order_release);
                wait_for_ack(fixed.ack(j).value, v, child);
                rtt.push_back(double(now_ns() - t0));
            }
            per_pair[round][j] = p50(rtt);
        }
        rtt.clear();
        for (std::size_t t = 0; t < o.trips * o.pairs; ++t) {
            const std::size_t j = t % o.pairs;
            const std::uint64_t v = round * o.trips + t / o.pairs + 1;
            const std::int64_t t0 = now_ns();
            walking.request(j).value.store(v, std::memory_order_release);
            wait_for_ack(walking.ack(j).value, v, child);
            rtt.push_back(double(now_ns() - t0));
        }
        walk_p50[round] = p50(rtt);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "the reader process failed\n");
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
        std::vector<double> s = per_pair[round];
        std::sort(s.begin(), s.end());
        double mean = 0;
        for (double v : s) mean += v / double(s.size());
        std::printf("%-7zu %8.0f %8.0f %8.0f %8.0f   %8.0f\n", round + 1, s.front(), s[s.size() / 2], s.back(), mean,
                    walk_p50[round]);
    }
    // Does a pair keep its speed from round to round? Each pair's median over the rounds, spread
    // between the pairs, against how far one pair moves over the rounds (its max - min; the median of
    // that over the pairs): where the address decides, the first is wide and the second narrow.
    if (o.rounds > 1) {
        std::vector<double> medians, within;
        for (std::size_t j = 0; j < o.pairs; ++j) {
            std::vector<double> v;
            for (std::size_t round = 0; round < o.rounds; ++round) v.push_back(per_pair[round][j]);
            std::sort(v.begin(), v.end());
            medians.push_back(v[v.size() / 2]);
            within.push_back(v.back() - v.front());
        }
        std::printf("\neach pair's median over the rounds, ns:");
        for (double v : medians) std::printf(" %4.0f", v);
        std::sort(medians.begin(), medians.end());
        std::printf("\nbetween the pairs (their medians): %.0f..%.0f ns; one pair over the rounds (max - min), median of the "
                    "pairs: %.0f ns\n", medians.front(), medians.back(), p50(within));
    }
    return 0;
}
