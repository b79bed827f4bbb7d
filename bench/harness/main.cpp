// ringcast-bench — the cross-process harness.
//
//   ringcast-bench strategies [--readers 2] [--size 64] [--json FILE] [--pin]
//       1 writer process → R reader processes, each wait strategy in turn: round-trip p50/p99,
//       messages/s, CPU% per process; the two floors measured in the same run for scale.
//   ringcast-bench hop [--readers 2] [--size 64] [--rounds 7] [--rtt-seconds 0.4] [--json FILE] [--pin]
//       The core hop: the atomic floor, the wakeable floor (the atomic one plus the fence a waiter
//       that may sleep needs), the ring floors (ringcast's ring protocol without its code, without and
//       with its tail word), spin, hybrid and hybrid_adapt round trips alternated in rounds; each
//       round's ratio to that round's floors, and their medians.
//   ringcast-bench matrix [--readers-list 1,2] [--sizes 8,64,4096,65536,1048576] [--runs 1] [--pin]
//                         [--out DIR] [--rtt-seconds 0.5] [--stream-seconds 0.5] [--idle-seconds 10]
//                         [--oversub N] [--no-micro]
//       The whole benchmark matrix: floors, peers, strategies, sizes, oversubscription,
//       idle CPU, the microbenchmarks; a table, JSON and SVG plots under DIR (default <build>/report).
//
// Every figure is measured in this run; ratios are against floors and peers of the same run.
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>

#include "common.hpp"
#include "svg.hpp"

namespace rcbench {
namespace {

namespace fs = std::filesystem;

// ---- command line --------------------------------------------------------------------------------
struct Args {
    std::map<std::string, std::string> kv;
    std::vector<std::string> flags;
    bool has(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
    std::string get(const std::string& k, const std::string& def) const {
        auto it = kv.find(k);
        return it == kv.end() ? def : it->second;
    }
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "ringcast-bench: %s\n"
                 "usage:\n"
                 "  ringcast-bench strategies [--readers 2] [--size 64] [--json FILE] [--pin]\n"
                 "  ringcast-bench hop [--readers 2] [--size 64] [--rounds 7] [--rtt-seconds 0.4] [--json FILE] [--pin]\n"
                 "  ringcast-bench matrix [--readers-list 1,2] [--sizes 8,64,4096,65536,1048576] [--runs 1]\n"
                 "                        [--pin] [--out DIR] [--rtt-seconds 0.5] [--stream-seconds 0.5]\n"
                 "                        [--idle-seconds 10] [--oversub N] [--no-micro]\n",
                 why.c_str());
    std::exit(2);
}

Args parse(int argc, char** argv, const std::vector<std::string>& valued, const std::vector<std::string>& flags) {
    Args a;
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        if (std::find(flags.begin(), flags.end(), s) != flags.end()) {
            a.flags.push_back(s);
        } else if (std::find(valued.begin(), valued.end(), s) != valued.end()) {
            if (i + 1 >= argc) usage(s + " needs a value");
            a.kv[s] = argv[++i];
        } else {
            usage("unknown option '" + s + "'");
        }
    }
    return a;
}

std::uint64_t to_u64(const std::string& opt, const std::string& v, std::uint64_t lo, std::uint64_t hi) {
    const std::optional<std::uint64_t> x = whole_number(v, lo, hi);
    if (!x) usage(opt + " wants an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + v + "'");
    return *x;
}
double to_seconds(const std::string& opt, const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(x > 0) || x > 3600) usage(opt + " wants seconds in (0, 3600], got '" + v + "'");
    return x;
}
std::vector<std::uint64_t> to_list(const std::string& opt, const std::string& v, std::uint64_t lo, std::uint64_t hi) {
    std::vector<std::uint64_t> out;
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(to_u64(opt, item, lo, hi));
    if (out.empty()) usage(opt + " wants a comma-separated list");
    return out;
}

// ---- the machine ---------------------------------------------------------------------------------
struct Machine {
    unsigned cores = 0;
    std::string model, kernel, date, compiler, load_start, load_end;
};
std::string read_first_line(const char* path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return s;
}
Machine describe_machine() {
    Machine m;
    m.cores = unsigned(::sysconf(_SC_NPROCESSORS_ONLN));
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("model name", 0) == 0) {
            m.model = line.substr(line.find(':') + 2);
            break;
        }
    utsname u{};
    if (::uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
    char buf[64];
    const std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
    m.date = buf;
    m.compiler = std::string("g++ ") + __VERSION__;
    m.load_start = read_first_line("/proc/loadavg");
    return m;
}
std::string machine_line(const Machine& m) {
    return std::to_string(m.cores) + " cores, " + m.model + ", " + m.kernel + ", " + m.date;
}

// ---- formatting ----------------------------------------------------------------------------------
std::string fmt(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}
std::string us(double ns) { return ns > 0 ? fmt(ns < 10'000 ? "%.2f" : "%.1f", ns / 1000) : "-"; }
std::string ratio(double a, double b) {
    if (!(a > 0 && b > 0)) return "-";
    const double r = a / b;
    return fmt(r < 0.1 ? "%.3f" : r < 10 ? "%.2f" : r < 1000 ? "%.1f" : "%.0f", r);
}
std::string rate(double v) {
    if (v <= 0) return "-";
    if (v >= 1e6) return fmt("%.2fM", v / 1e6);
    if (v >= 1e3) return fmt("%.1fk", v / 1e3);
    return fmt("%.0f", v);
}
std::string size_name(std::size_t s) {
    if (s >= (1u << 20) && s % (1u << 20) == 0) return std::to_string(s >> 20) + " MiB";
    if (s >= 1024 && s % 1024 == 0) return std::to_string(s >> 10) + " KiB";
    return std::to_string(s) + " B";
}
std::string pad(std::string s, std::size_t w, bool right = true) {
    if (s.size() >= w) return s;
    return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}
double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
}
std::string cpu_list(double w, const std::vector<double>& r) {
    if (w <= 0 && r.empty()) return "-";
    std::string s = fmt("%.0f", w);
    for (double x : r) s += "/" + fmt("%.0f", x);
    return s;
}
std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        o += c;
    }
    return o + "\"";
}
std::string json_num(double v) { return std::isfinite(v) ? fmt("%.6g", v) : "null"; }
std::string json_arr(const std::vector<double>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + json_num(v[i]);
    return s + "]";
}
std::string json_arr(const std::vector<std::size_t>& v) {  // counts: exact (%.6g would round them)
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

// ---- aggregation over runs ----------------------------------------------------------------------
struct Agg {
    std::string system, group;
    std::size_t size = 0;
    std::uint32_t readers = 0;
    int runs = 0;
    double p50 = 0, p99 = 0, p999 = 0, max = 0, p50_lo = 0, p50_hi = 0;
    double msgs = 0, gbps = 0, wcpu_rtt = 0, wcpu_stream = 0;
    std::vector<double> rcpu_rtt, rcpu_stream;  // per reader, median over runs
    std::size_t samples = 0;
    std::vector<double> last_samples;  // sorted round trips of the last run (CDF)
};
Agg aggregate(const std::vector<RunResult>& runs, const std::string& group) {
    Agg a;
    a.system = runs.front().system;
    a.group = group;
    a.size = runs.front().size;
    a.readers = runs.front().readers;
    a.runs = int(runs.size());
    std::vector<double> p50, p99, p999, msgs, gb, wr, ws;
    for (const auto& r : runs) {
        p50.push_back(r.p50), p99.push_back(r.p99), p999.push_back(r.p999), msgs.push_back(r.msgs_per_s);
        gb.push_back(r.gbytes_per_s), wr.push_back(r.writer_cpu_rtt), ws.push_back(r.writer_cpu_stream);
        a.max = std::max(a.max, r.max);
        a.samples += r.rtt_ns.size();
    }
    a.p50 = median(p50), a.p99 = median(p99), a.p999 = median(p999), a.msgs = median(msgs), a.gbps = median(gb);
    a.p50_lo = *std::min_element(p50.begin(), p50.end());
    a.p50_hi = *std::max_element(p50.begin(), p50.end());
    a.wcpu_rtt = median(wr), a.wcpu_stream = median(ws);
    for (std::size_t i = 0; i < runs.front().reader_cpu_rtt.size(); ++i) {
        std::vector<double> x, y;
        for (const auto& r : runs) {
            x.push_back(r.reader_cpu_rtt.at(i));
            if (i < r.reader_cpu_stream.size()) y.push_back(r.reader_cpu_stream[i]);
        }
        a.rcpu_rtt.push_back(median(x));
        if (!y.empty()) a.rcpu_stream.push_back(median(y));
    }
    a.last_samples = runs.back().rtt_ns;
    return a;
}

std::vector<std::pair<double, double>> cdf_points(const std::vector<double>& sorted) {
    std::vector<std::pair<double, double>> pts;
    if (sorted.empty()) return pts;
    const std::size_t n = sorted.size(), step = std::max<std::size_t>(1, n / 400);
    for (std::size_t i = 0; i < n; i += step) pts.emplace_back(sorted[i] / 1000, double(i + 1) / double(n));
    pts.emplace_back(sorted.back() / 1000, 1.0);
    return pts;
}

Agg measure(const SystemInfo& sys, std::size_t size, std::uint32_t readers, const PhaseLimits& lim, int runs,
            bool pin) {
    std::vector<RunResult> rr;
    for (int i = 0; i < runs; ++i) rr.push_back(run_config(sys, size, readers, lim, {pin}));
    return aggregate(rr, sys.group);
}

std::string exe_dir() {
    std::error_code ec;
    const auto p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : p.parent_path().string();
}

// =================================================================================================
int cmd_strategies(int argc, char** argv) {
    const Args a = parse(argc, argv, {"--readers", "--size", "--json"}, {"--pin"});
    const auto readers = std::uint32_t(to_u64("--readers", a.get("--readers", "2"), 1, 64));
    const auto size = std::size_t(to_u64("--size", a.get("--size", "64"), 8, 1ULL << 30));
    const bool pin = a.has("--pin");
    Machine m = describe_machine();
    PhaseLimits lim;
    lim.warmup_s = 0.2;
    lim.rtt_s = 1.5;
    lim.rtt_max_iters = 200'000;
    lim.stream_s = 1.0;

    std::printf("ringcast strategies: 1 writer -> %u reader processes, %s messages, 8 B replies, %s\n", readers,
                size_name(size).c_str(), pin ? "pinned" : "unpinned");
    std::printf("machine: %s; load average at start: %s\n", machine_line(m).c_str(), m.load_start.c_str());
    std::printf("round trip = broadcast until every reader's reply is in; msgs/s = streaming broadcast, each\n"
                "reader copying every message out; CPU%% = process CPU time / wall time over the phase\n"
                "(100 = one core), writer/reader0/reader1...\n\n");
    std::vector<Agg> rows;
    for (const char* name : {"spin", "spin_yield", "futex", "hybrid", "hybrid_adapt", "eventfd", "floor_eventfd",
                             "floor_atomic", "floor_futex"}) {
        std::fprintf(stderr, "  measuring %s...\n", name);
        rows.push_back(measure(*find_system(name), size, readers, lim, 1, pin));
    }
    const double atomic_floor = rows[rows.size() - 2].p50, futex_floor = rows.back().p50;
    const double eventfd_ratio = rows[rows.size() - 4].p50 / rows[rows.size() - 3].p50;  // eventfd / floor_eventfd
    std::printf("%-13s %9s %9s %8s %8s %10s %18s %18s\n", "strategy", "p50 us", "p99 us", "x atomic", "x futex",
                "msgs/s", "cpu% rtt phase", "cpu% stream phase");
    for (const auto& r : rows) {
        std::printf("%-13s %9s %9s %8s %8s %10s %18s %18s\n", r.system.c_str(), us(r.p50).c_str(), us(r.p99).c_str(),
                    ratio(r.p50, atomic_floor).c_str(), ratio(r.p50, futex_floor).c_str(), rate(r.msgs).c_str(),
                    cpu_list(r.wcpu_rtt, r.rcpu_rtt).c_str(),
                    r.msgs > 0 ? cpu_list(r.wcpu_stream, r.rcpu_stream).c_str() : "-");
    }
    std::printf("\neventfd RTT / floor_eventfd RTT (p50): %.2f (target <= 1.15: %s). floor_eventfd: the same\n"
                "lock-step hand-off as floor_futex, woken by an eventfd write + poll/read each way.\n",
                eventfd_ratio, eventfd_ratio <= 1.15 ? "met" : "MISSED");
    m.load_end = read_first_line("/proc/loadavg");
    std::printf("\nfloor_atomic / floor_futex: bare shared-memory hand-off (pause spin / futex wait+wake), no\n"
                "queue; round trips only. x atomic, x futex = p50 / that floor's p50. 1 run per row, %zu..%zu\n"
                "round trips each. Load average at end: %s\n",
                std::min_element(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.samples < y.samples; })->samples,
                std::max_element(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.samples < y.samples; })->samples,
                m.load_end.c_str());
    if (a.kv.count("--json")) {
        std::ofstream f(a.get("--json", ""));
        f << "{\"command\":\"strategies\",\"machine\":{\"cores\":" << m.cores << ",\"model\":" << json_str(m.model)
          << ",\"kernel\":" << json_str(m.kernel) << ",\"date\":" << json_str(m.date)
          << ",\"load_start\":" << json_str(m.load_start) << ",\"load_end\":" << json_str(m.load_end)
          << "},\"readers\":" << readers << ",\"size\":" << size << ",\"rows\":[";
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const auto& r = rows[i];
            f << (i ? "," : "") << "{\"system\":" << json_str(r.system) << ",\"p50_ns\":" << json_num(r.p50)
              << ",\"p99_ns\":" << json_num(r.p99) << ",\"p999_ns\":" << json_num(r.p999)
              << ",\"max_ns\":" << json_num(r.max) << ",\"round_trips\":" << r.samples
              << ",\"msgs_per_s\":" << json_num(r.msgs) << ",\"writer_cpu_pct_rtt\":" << json_num(r.wcpu_rtt)
              << ",\"reader_cpu_pct_rtt\":" << json_arr(r.rcpu_rtt)
              << ",\"writer_cpu_pct_stream\":" << json_num(r.wcpu_stream)
              << ",\"reader_cpu_pct_stream\":" << json_arr(r.rcpu_stream) << "}";
        }
        f << "]}\n";
        if (!f) throw BenchError("cannot write " + a.get("--json", ""));
    }
    return 0;
}

// =================================================================================================
// The core hop, measured fairly on a VM whose speed drifts: strategies and matrix measure each row
// once, one after the other, so a ratio to the floor also carries whatever the host did between the
// two rows (the floor moved 0.36–0.75 µs between back-to-back tables on the 16-core machine). Here
// the floor and the ringcast rows alternate in short rounds — the order rotated each round and
// reversed every other one, so no row keeps its place or its neighbour — and each round's ratio uses
// that round's floor. A row runs for its time (--rtt-seconds), not for a count of round trips.
int cmd_hop(int argc, char** argv) {
    const Args a = parse(argc, argv, {"--readers", "--size", "--rounds", "--rtt-seconds", "--json"}, {"--pin"});
    const auto readers = std::uint32_t(to_u64("--readers", a.get("--readers", "2"), 1, 64));
    const auto size = std::size_t(to_u64("--size", a.get("--size", "64"), 8, 1ULL << 20));
    const auto rounds = std::size_t(to_u64("--rounds", a.get("--rounds", "7"), 1, 100));
    const bool pin = a.has("--pin");
    PhaseLimits lim;
    lim.warmup_s = 0.1;
    lim.rtt_s = to_seconds("--rtt-seconds", a.get("--rtt-seconds", "0.4"));
    lim.rtt_max_iters = 1'000'000'000;  // bounded by rtt_s: a fast row must not stop early
    lim.stream = false;                  // round trips only: the floor cannot stream
    // floor_wakeable: the atomic floor plus what any waker owes a waiter that may sleep (systems.cpp),
    // so hybrid / floor_wakeable is what ringcast adds beyond that price; floor_ring: a ring of
    // ringcast's records and fences with none of its code around it, floor_ring_tail the same with
    // ringcast's tail word (floor_ring.cpp), so hybrid / floor_ring_tail is ringcast's code's share;
    // floor_ring_asym: floor_ring_tail without the fences on its hot path (a wake protocol with
    // asymmetric fences would move them to the waiter about to sleep), so floor_ring_asym /
    // floor_ring_tail is the most such a protocol could take off.
    static constexpr std::array<std::string_view, 8> kRows = {"floor_atomic", "floor_wakeable", "floor_ring",
                                                              "floor_ring_tail", "floor_ring_asym", "spin",
                                                              "hybrid", "hybrid_adapt"};
    constexpr std::size_t kAtomic = 0, kWakeable = 1, kRing = 2, kRingTail = 3, kRingAsym = 4, kHybrid = 6;
    static_assert(kRows[kAtomic] == "floor_atomic" && kRows[kWakeable] == "floor_wakeable" &&
                  kRows[kRing] == "floor_ring" && kRows[kRingTail] == "floor_ring_tail" &&
                  kRows[kRingAsym] == "floor_ring_asym" && kRows[kHybrid] == "hybrid");
    const std::vector<std::string> names(kRows.begin(), kRows.end());
    Machine m = describe_machine();
    std::printf("ringcast hop: 1 writer -> %u reader processes, %s messages, 8 B replies, %s; %zu rounds, each\n"
                "running %s in a rotated order, reversed every other round (%.2f s of round trips per row;\n"
                "hybrid: the fixed 10 us spin, the matrix's target row; hybrid_adapt: the library's default)\n",
                readers, size_name(size).c_str(), pin ? "pinned" : "unpinned", rounds,
                "floor_atomic, floor_wakeable, floor_ring, floor_ring_tail, floor_ring_asym, spin, hybrid,\nhybrid_adapt",
                lim.rtt_s);
    std::printf("machine: %s; load average at start: %s\n\n", machine_line(m).c_str(), m.load_start.c_str());
    std::vector<std::vector<double>> p50(names.size());                // [row][round], ns
    std::vector<std::vector<std::size_t>> samples(names.size());       // [row][round], round trips
    std::vector<std::vector<std::size_t>> orders(rounds);              // [round]: the rows in the order run
    for (std::size_t k = 0; k < rounds; ++k) {
        for (std::size_t j = 0; j < names.size(); ++j) {
            const std::size_t step = k % 2 == 0 ? j : names.size() - 1 - j;
            orders[k].push_back((step + k / 2) % names.size());
        }
        for (const std::size_t i : orders[k]) {
            std::fprintf(stderr, "  round %zu: %s...\n", k + 1, names[i].c_str());
            const RunResult r = run_config(*find_system(names[i]), size, readers, lim, {pin});
            p50[i].push_back(r.p50);
            samples[i].push_back(r.rtt_ns.size());
        }
    }
    // Round k's ratio of row i: its p50 over the same round's p50 of row `floor`.
    const auto ratios = [&](std::size_t i, std::size_t floor) {
        std::vector<double> r;
        for (std::size_t k = 0; k < rounds; ++k) r.push_back(p50[i][k] / p50[floor][k]);
        return r;
    };
    std::printf("%-16s %s\n", "p50 us", "round 1..N");
    for (std::size_t i = 0; i < names.size(); ++i) {
        std::printf("%-16s", names[i].c_str());
        for (double v : p50[i]) std::printf(" %6s", us(v).c_str());
        std::printf("\n");
    }
    std::printf("order per round (f floor_atomic, w floor_wakeable, r floor_ring, t floor_ring_tail, y floor_ring_asym,\n"
                "s spin, h hybrid, a hybrid_adapt):");
    for (const auto& order : orders) {
        std::printf(" ");
        for (const std::size_t i : order) std::printf("%c", "fwrtysha"[i]);
    }
    std::printf("\n");
    std::printf("\n%-16s %s\n", "x floor", "round 1..N, then the median of the rounds and how many <= 1.30");
    for (std::size_t i = 1; i < names.size(); ++i) {
        const auto r = ratios(i, kAtomic);
        std::printf("%-16s", names[i].c_str());
        for (double v : r) std::printf(" %6.2f", v);
        std::printf("   median %.2f, <= 1.30 in %zu of %zu\n", median(r),
                    std::size_t(std::count_if(r.begin(), r.end(), [](double v) { return v <= 1.3; })), r.size());
    }
    // The floors besides the atomic one (the target's): each gives hybrid one more ratio, printed with
    // what that floor is, and the JSON keys over_floor_<key> (per row) and hybrid_over_floor_<key>_median.
    struct OtherFloor {
        std::size_t row;
        std::string_view key, label, what;
    };
    static constexpr std::array<OtherFloor, 4> kOtherFloors = {{
        {kWakeable, "wakeable", "wakeable floor",
         "floor_wakeable: the atomic floor plus the\nexchange and sleepers' load a waiter that may sleep needs on "
         "every publish; its own x floor row above"},
        {kRing, "ring", "ring floor",
         "floor_ring: ringcast's records, stamps and fenced\npublishes and releases, none of its code around them; "
         "its own x floor row above"},
        {kRingTail, "ring_tail", "ring floor with a tail",
         "floor_ring_tail: the same, publishing\na tail word as ringcast does"},
        {kRingAsym, "ring_asym", "ring floor with a tail, no fences",
         "floor_ring_asym: the same\nwithout the waker's fences (asymmetric fences would move them to a waiter "
         "about to sleep): their\nprice on a hop"},
    }};
    const double hybrid_median = median(ratios(kHybrid, kAtomic));
    m.load_end = read_first_line("/proc/loadavg");
    std::printf("\nhybrid RTT / atomic floor, median of the rounds: %.2f (target <= 1.30: %s). Load average at end: %s\n",
                hybrid_median, hybrid_median <= 1.3 ? "met" : "MISSED", m.load_end.c_str());
    for (const OtherFloor& floor : kOtherFloors)
        std::printf("hybrid RTT / %s, median of the rounds: %.2f (%s)\n", std::string(floor.label).c_str(),
                    median(ratios(kHybrid, floor.row)), std::string(floor.what).c_str());
    if (a.kv.count("--json")) {
        std::ofstream f(a.get("--json", ""));
        f << "{\"command\":\"hop\",\"machine\":{\"cores\":" << m.cores << ",\"model\":" << json_str(m.model)
          << ",\"kernel\":" << json_str(m.kernel) << ",\"date\":" << json_str(m.date)
          << ",\"load_start\":" << json_str(m.load_start) << ",\"load_end\":" << json_str(m.load_end)
          << "},\"readers\":" << readers << ",\"size\":" << size << ",\"pinned\":" << (pin ? "true" : "false")
          << ",\"rtt_seconds\":" << json_num(lim.rtt_s) << ",\"rows\":[";
        for (std::size_t i = 0; i < names.size(); ++i) {
            f << (i ? "," : "") << "{\"system\":" << json_str(names[i]) << ",\"p50_ns\":" << json_arr(p50[i])
              << ",\"round_trips\":" << json_arr(samples[i]) << ",\"over_floor_atomic\":" << json_arr(ratios(i, kAtomic));
            for (const OtherFloor& floor : kOtherFloors)
                f << ",\"over_floor_" << floor.key << "\":" << json_arr(ratios(i, floor.row));
            f << "}";
        }
        f << "],\"orders\":[";
        for (std::size_t k = 0; k < rounds; ++k) f << (k ? "," : "") << json_arr(orders[k]);
        // hybrid_over_floor_median: over the atomic floor, the target's (the key is older than the other floors)
        f << "],\"hybrid_over_floor_median\":" << json_num(hybrid_median);
        for (const OtherFloor& floor : kOtherFloors)
            f << ",\"hybrid_over_floor_" << floor.key << "_median\":" << json_num(median(ratios(kHybrid, floor.row)));
        f << "}\n";
        if (!f) throw BenchError("cannot write " + a.get("--json", ""));
    }
    return 0;
}

// =================================================================================================
// Reads one aggregate of a Google Benchmark JSON file: the "real_time" of the entry named `name`.
std::optional<double> gbench_value(const std::string& json, const std::string& name, const std::string& field) {
    const std::string key = "\"name\": \"" + name + "\"";
    const auto at = json.find(key);
    if (at == std::string::npos) return std::nullopt;
    const auto end = json.find('}', at);
    const auto f = json.find("\"" + field + "\": ", at);
    if (f == std::string::npos || f > end) return std::nullopt;
    return std::strtod(json.c_str() + f + field.size() + 4, nullptr);
}

struct Target {
    Target(std::string w, std::string m, double v, double b, bool most, std::string n = "")
        : what(std::move(w)), measured_as(std::move(m)), value(v), bound(b), at_most(most), note(std::move(n)) {}
    std::string what, measured_as;
    double value = NAN, bound = 0;
    bool at_most = true;  // value <= bound, else value >= bound
    std::string note;
};

int cmd_matrix(int argc, char** argv) {
    const Args a = parse(argc, argv,
                         {"--readers-list", "--sizes", "--runs", "--out", "--rtt-seconds", "--stream-seconds",
                          "--idle-seconds", "--oversub"},
                         {"--pin", "--no-micro"});
    const auto readers_list = to_list("--readers-list", a.get("--readers-list", "1,2"), 1, 64);
    const auto sizes = to_list("--sizes", a.get("--sizes", "8,64,4096,65536,1048576"), 8, 1ULL << 28);
    const int runs = int(to_u64("--runs", a.get("--runs", "1"), 1, 100));
    const bool pin = a.has("--pin");
    const double idle_s = to_seconds("--idle-seconds", a.get("--idle-seconds", "10"));
    PhaseLimits lim;
    lim.rtt_s = to_seconds("--rtt-seconds", a.get("--rtt-seconds", "0.5"));
    lim.stream_s = to_seconds("--stream-seconds", a.get("--stream-seconds", "0.5"));
    Machine m = describe_machine();
    const auto oversub = std::uint32_t(
        to_u64("--oversub", a.get("--oversub", std::to_string(std::min(2 * m.cores, 32u))), 1, 64));
    const fs::path out = a.get("--out", (fs::path(exe_dir()) / ".." / "report").lexically_normal().string());
    fs::create_directories(out);
    const std::int64_t t_start = now_ns();
    const auto progress = [&](const std::string& s) {
        std::fprintf(stderr, "[%6.1fs] %s\n", double(now_ns() - t_start) * 1e-9, s.c_str());
    };

    // 1. Copy floor.
    std::map<std::size_t, double> memcpy_bw;
    for (auto s : sizes) memcpy_bw[s] = memcpy_gbps(s, std::size_t{16} << 20, 0.25);
    progress("memcpy floor done");

    // 2. Floors, peers and strategies for each reader count and size.
    std::vector<Agg> all;
    for (auto r : readers_list)
        for (auto s : sizes)
            for (const auto& sys : all_systems()) {
                progress("R=" + std::to_string(r) + " " + size_name(s) + " " + sys.name);
                all.push_back(measure(sys, s, std::uint32_t(r), lim, runs, pin));
            }
    const auto find = [&](const std::string& sys, std::size_t s, std::uint64_t r) -> const Agg* {
        for (const auto& x : all)
            if (x.system == sys && x.size == s && x.readers == r) return &x;
        return nullptr;
    };

    // 3. Oversubscription: more reader processes than cores.
    std::vector<Agg> over;
    for (const char* name : {"spin", "spin_yield", "futex", "hybrid", "hybrid_adapt"}) {
        progress("oversubscribed R=" + std::to_string(oversub) + " " + name);
        over.push_back(measure(*find_system(name), 64, oversub, lim, runs, pin));
    }

    // 4. Idle CPU of a blocked reader (all four concurrently: the blocked ones do not care).
    progress("idle readers for " + fmt("%.0f", idle_s) + " s");
    const std::vector<const SystemInfo*> idle_sys = {find_system("spin"), find_system("spin_yield"),
                                                     find_system("futex"), find_system("hybrid"),
                                                     find_system("hybrid_adapt")};
    const std::vector<double> idle = measure_idle(idle_sys, idle_s);

    // 5. Microbenchmarks (fast-path publish cost vs readers attached), when built next to us.
    std::string micro_json;
    const fs::path micro = fs::path(exe_dir()) / "ringcast_micro";
    if (!a.has("--no-micro") && fs::exists(micro)) {
        progress("microbenchmarks");
        const std::string cmd = micro.string() + " --benchmark_repetitions=" + std::to_string(std::max(runs, 3)) +
                                " --benchmark_min_time=0.2 --benchmark_report_aggregates_only=true --benchmark_out=" +
                                (out / "micro.json").string() + " --benchmark_out_format=json > " +
                                (out / "micro.txt").string() + " 2>&1";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "warning: %s failed\n", cmd.c_str());
        std::ifstream f(out / "micro.json");
        micro_json.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    m.load_end = read_first_line("/proc/loadavg");
    const double elapsed = double(now_ns() - t_start) * 1e-9;

    // ---- the table --------------------------------------------------------------------------------
    std::ostringstream t;
    t << "ringcast benchmark matrix\nmachine: " << machine_line(m) << "\ncompiler: " << m.compiler
      << "\nload average: start " << m.load_start << " | end " << m.load_end << "\nruns per configuration: " << runs
      << " (figures are medians over runs; p50 range = min..max of the runs' p50)\n"
      << "phases: warm-up " << lim.warmup_s << " s, round trips <= " << lim.rtt_s << " s, streaming " << lim.stream_s
      << " s; " << (pin ? "pinned" : "unpinned") << "; total " << fmt("%.0f", elapsed) << " s\n\n"
      << "Round trip: writer broadcasts one message, every reader copies it out and replies 8 B; RTT ends\n"
      << "when all replies are in. Stream: writer broadcasts as fast as possible; GB/s = bytes delivered to\n"
      << "EACH reader per second. x atomic / x futex = p50 / p50 of the bare atomic / futex floor (same\n"
      << "size, same R); x hybrid = p50 / ringcast hybrid p50 (peer rows: how much slower than ringcast);\n"
      << "x memcpy = GB/s / single-core memcpy GB/s of that size. CPU%: writer/reader0/reader1... (100 =\n"
      << "one core), round-trip phase.\n";
    for (auto r : readers_list) {
        for (auto s : sizes) {
            t << "\n== R=" << r << " readers, " << size_name(s) << " (memcpy " << fmt("%.1f", memcpy_bw[s])
              << " GB/s) ==\n";
            t << pad("system", 13, false) << pad("p50 us", 10) << pad("p50 range", 18) << pad("p99", 10)
              << pad("p99.9", 10) << pad("max", 10) << pad("x atomic", 9) << pad("x futex", 8) << pad("x hybrid", 9)
              << pad("msgs/s", 9) << pad("GB/s", 8) << pad("x memcpy", 9) << "  cpu% rtt\n";
            const Agg* fa = find("floor_atomic", s, r);
            const Agg* ff = find("floor_futex", s, r);
            const Agg* hy = find("hybrid", s, r);
            for (const auto& x : all) {
                if (x.size != s || x.readers != r) continue;
                t << pad(x.system, 13, false) << pad(us(x.p50), 10)
                  << pad(us(x.p50_lo) + ".." + us(x.p50_hi), 18) << pad(us(x.p99), 10) << pad(us(x.p999), 10)
                  << pad(us(x.max), 10) << pad(fa ? ratio(x.p50, fa->p50) : "-", 9)
                  << pad(ff ? ratio(x.p50, ff->p50) : "-", 8) << pad(hy ? ratio(x.p50, hy->p50) : "-", 9)
                  << pad(rate(x.msgs), 9) << pad(x.gbps > 0 ? fmt("%.2f", x.gbps) : "-", 8)
                  << pad(x.gbps > 0 ? ratio(x.gbps, memcpy_bw[s]) : "-", 9) << "  "
                  << cpu_list(x.wcpu_rtt, x.rcpu_rtt) << "\n";
            }
        }
    }
    t << "\n== Oversubscription: R=" << oversub << " reader processes + 1 writer on " << m.cores << " cores, 64 B ==\n";
    t << pad("strategy", 13, false) << pad("p50 us", 10) << pad("p99", 10) << pad("max", 10) << pad("x hybrid", 9)
      << pad("msgs/s", 9) << "  writer cpu% / mean reader cpu% (rtt phase)\n";
    for (const auto& x : over)
        t << pad(x.system, 13, false) << pad(us(x.p50), 10) << pad(us(x.p99), 10) << pad(us(x.max), 10)
          << pad(ratio(x.p50, over.back().p50), 9) << pad(rate(x.msgs), 9) << "  " << fmt("%.0f", x.wcpu_rtt) << " / "
          << fmt("%.0f", mean(x.rcpu_rtt)) << "\n";
    t << "\n== Idle: CPU of one reader blocked on an empty queue for " << fmt("%.0f", idle_s)
      << " s (the four ran concurrently) ==\n";
    for (std::size_t i = 0; i < idle.size(); ++i)
        t << pad(idle_sys[i]->name, 13, false) << fmt("%.4f", idle[i]) << " %\n";

    // ---- targets ---------------------------------------------------------------------------------------
    const std::size_t ref = std::find(sizes.begin(), sizes.end(), 64u) != sizes.end() ? 64 : sizes.front();
    const std::uint64_t r1 = readers_list.front();
    const auto p50of = [&](const char* s) {
        const Agg* x = find(s, ref, r1);
        return x ? x->p50 : NAN;
    };
    std::vector<Target> targets;
    const std::string at = " (" + size_name(ref) + ", R=" + std::to_string(r1) + ", p50)";
    targets.push_back({"hybrid RTT / spin floor", "hybrid / floor_atomic" + at, p50of("hybrid") / p50of("floor_atomic"), 1.3, true});
    targets.push_back({"futex RTT / futex floor", "futex / floor_futex" + at, p50of("futex") / p50of("floor_futex"), 1.15, true});
    targets.push_back({"Boost mq / ringcast futex", "boost_mq / futex" + at, p50of("boost_mq") / p50of("futex"), 1.2, false});
    targets.push_back({"Boost mq / ringcast hybrid", "boost_mq / hybrid" + at, p50of("boost_mq") / p50of("hybrid"), 20, false});
    targets.push_back({"ZeroMQ / ringcast hybrid", "zmq_pair / hybrid" + at, p50of("zmq_pair") / p50of("hybrid"), 50, false,
                       find_system("zmq_pair") ? "" : "ZeroMQ peer not built (no cppzmq/libzmq found)"});
    {
        const bool have = std::find(readers_list.begin(), readers_list.end(), 2u) != readers_list.end() &&
                          std::find(sizes.begin(), sizes.end(), 1u << 20) != sizes.end();
        const Agg* x = have ? find("hybrid", 1u << 20, 2) : nullptr;
        targets.push_back({"1 MiB broadcast to 2 readers / memcpy", "hybrid GB/s per reader / 1-core memcpy GB/s (1 MiB)",
                           x ? x->gbps / memcpy_bw[1u << 20] : NAN, 0.7, false, x ? "" : "R=2 and 1 MiB not in this run"});
    }
    {
        const auto p1 = gbench_value(micro_json, "BM_PublishFastPath/readers:1_median", "cpu_time");
        const auto p8 = gbench_value(micro_json, "BM_PublishFastPath/readers:8_median", "cpu_time");
        targets.push_back({"publish cost 8 readers / 1 reader", "ringcast_micro BM_PublishFastPath cpu_time medians",
                           p1 && p8 ? *p8 / *p1 : NAN, 1.2, true, p1 && p8 ? "" : "microbenchmarks not run"});
    }
    for (std::size_t i = 0; i < idle.size(); ++i)
        if (idle_sys[i]->name == "hybrid" || idle_sys[i]->name == "futex" || idle_sys[i]->name == "hybrid_adapt")
            targets.push_back({"blocked idle reader CPU% (" + idle_sys[i]->name + ")",
                               "CPU time / wall over " + fmt("%.1f", idle_s) + " s", idle[i], 0.1, true});
    t << "\n== Issue-5 targets (this run) ==\n";
    for (const auto& g : targets) {
        const bool known = std::isfinite(g.value);
        const bool met = known && (g.at_most ? g.value <= g.bound : g.value >= g.bound);
        t << pad(g.what, 40, false) << pad(known ? fmt("%.3g", g.value) : "-", 9) << "  target "
          << (g.at_most ? "<= " : ">= ") << fmt("%g", g.bound) << "  " << (known ? (met ? "MET" : "MISSED") : "NOT MEASURED")
          << "   [" << g.measured_as << (g.note.empty() ? "" : "; " + g.note) << "]\n";
    }
    const std::string table = t.str();
    std::fputs(table.c_str(), stdout);
    std::ofstream(out / "matrix.txt") << table;

    // ---- JSON --------------------------------------------------------------------------------------
    {
        std::ofstream f(out / "matrix.json");
        f << "{\"machine\":{\"cores\":" << m.cores << ",\"model\":" << json_str(m.model)
          << ",\"kernel\":" << json_str(m.kernel) << ",\"date\":" << json_str(m.date)
          << ",\"compiler\":" << json_str(m.compiler) << ",\"load_start\":" << json_str(m.load_start)
          << ",\"load_end\":" << json_str(m.load_end) << "},\"runs\":" << runs << ",\"pinned\":" << (pin ? "true" : "false")
          << ",\"elapsed_s\":" << json_num(elapsed) << ",\"memcpy_gbps\":{";
        bool first = true;
        for (auto [s, g] : memcpy_bw) f << (first ? "" : ",") << "\"" << s << "\":" << json_num(g), first = false;
        const auto row = [&](const Agg& x) {
            const Agg* fa = find("floor_atomic", x.size, x.readers);
            const Agg* ff = find("floor_futex", x.size, x.readers);
            const Agg* hy = find("hybrid", x.size, x.readers);
            f << "{\"system\":" << json_str(x.system) << ",\"group\":" << json_str(x.group) << ",\"size\":" << x.size
              << ",\"readers\":" << x.readers << ",\"runs\":" << x.runs << ",\"round_trips\":" << x.samples
              << ",\"p50_ns\":" << json_num(x.p50) << ",\"p50_min_ns\":" << json_num(x.p50_lo)
              << ",\"p50_max_ns\":" << json_num(x.p50_hi) << ",\"p99_ns\":" << json_num(x.p99)
              << ",\"p999_ns\":" << json_num(x.p999) << ",\"max_ns\":" << json_num(x.max)
              << ",\"msgs_per_s\":" << json_num(x.msgs) << ",\"gbytes_per_s\":" << json_num(x.gbps)
              << ",\"writer_cpu_pct_rtt\":" << json_num(x.wcpu_rtt) << ",\"reader_cpu_pct_rtt\":" << json_arr(x.rcpu_rtt)
              << ",\"writer_cpu_pct_stream\":" << json_num(x.wcpu_stream)
              << ",\"reader_cpu_pct_stream\":" << json_arr(x.rcpu_stream)
              << ",\"p50_over_floor_atomic\":" << json_num(fa ? x.p50 / fa->p50 : NAN)
              << ",\"p50_over_floor_futex\":" << json_num(ff ? x.p50 / ff->p50 : NAN)
              << ",\"p50_over_hybrid\":" << json_num(hy ? x.p50 / hy->p50 : NAN) << ",\"gbps_over_memcpy\":"
              << json_num(x.gbps > 0 && memcpy_bw.count(x.size) ? x.gbps / memcpy_bw[x.size] : NAN) << "}";
        };
        f << "},\"results\":[";
        for (std::size_t i = 0; i < all.size(); ++i) f << (i ? "," : ""), row(all[i]);
        f << "],\"oversubscription\":{\"readers\":" << oversub << ",\"results\":[";
        for (std::size_t i = 0; i < over.size(); ++i) f << (i ? "," : ""), row(over[i]);
        f << "]},\"idle\":{\"seconds\":" << json_num(idle_s);
        for (std::size_t i = 0; i < idle.size(); ++i) f << ",\"" << idle_sys[i]->name << "_cpu_pct\":" << json_num(idle[i]);
        f << "},\"targets\":[";
        for (std::size_t i = 0; i < targets.size(); ++i) {
            const auto& g = targets[i];
            const bool known = std::isfinite(g.value);
            f << (i ? "," : "") << "{\"target\":" << json_str(g.what) << ",\"measured_as\":" << json_str(g.measured_as)
              << ",\"value\":" << json_num(g.value) << ",\"bound\":" << json_num(g.bound)
              << ",\"at_most\":" << (g.at_most ? "true" : "false") << ",\"met\":"
              << (known ? ((g.at_most ? g.value <= g.bound : g.value >= g.bound) ? "true" : "false") : "null")
              << ",\"note\":" << json_str(g.note) << "}";
        }
        f << "]}\n";
    }

    // ---- plots -------------------------------------------------------------------------------------
    for (auto r : readers_list) {
        std::vector<Series> cdf;
        for (const auto& x : all)
            if (x.size == ref && x.readers == r && !x.last_samples.empty())
                cdf.push_back({x.system, cdf_points(x.last_samples), x.group != "ringcast"});
        write_svg_plot((out / ("latency_cdf_R" + std::to_string(r) + ".svg")).string(),
                       {"Round-trip latency CDF, " + size_name(ref) + ", 1 writer -> " + std::to_string(r) +
                            " readers (last run)",
                        "round trip (us, log)", "fraction of round trips", true, false, true},
                       cdf);
        std::vector<Series> bw;
        std::vector<std::pair<double, double>> mc;
        for (auto s : sizes) mc.emplace_back(double(s), memcpy_bw[s]);
        bw.push_back({"memcpy (1 core)", mc, true});
        for (const auto& sys : all_systems()) {
            std::vector<std::pair<double, double>> pts;
            for (auto s : sizes)
                if (const Agg* x = find(sys.name, s, r); x && x->gbps > 0) pts.emplace_back(double(s), x->gbps);
            if (!pts.empty()) bw.push_back({sys.name, pts, sys.group != "ringcast"});
        }
        write_svg_plot((out / ("bandwidth_R" + std::to_string(r) + ".svg")).string(),
                       {"Streaming bandwidth per reader vs message size, R=" + std::to_string(r),
                        "message size (bytes, log)", "GB/s per reader (log)", true, true, false},
                       bw);
    }
    std::fprintf(stderr, "report: %s/{matrix.txt,matrix.json,latency_cdf_R*.svg,bandwidth_R*.svg%s}\n",
                 out.string().c_str(), micro_json.empty() ? "" : ",micro.json");
    return 0;
}

}  // namespace
}  // namespace rcbench

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the table interleaves sensibly with progress on stderr
    if (argc < 2) rcbench::usage("missing subcommand");
    const std::string cmd = argv[1];
    try {
        if (cmd == "strategies") return rcbench::cmd_strategies(argc, argv);
        if (cmd == "matrix") return rcbench::cmd_matrix(argc, argv);
        if (cmd == "hop") return rcbench::cmd_hop(argc, argv);
        if (cmd == "--help" || cmd == "-h") rcbench::usage("help");
        rcbench::usage("unknown subcommand '" + cmd + "'");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringcast-bench: %s\n", e.what());
        return 1;
    }
}
