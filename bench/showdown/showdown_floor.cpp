// The C++ floor of the executor showdown: one executor process + W worker processes, K steps.
// Each step broadcasts a ~2 KB request through the ring, every worker burns `work_us` of CPU, then
// replies; the executor collects from one output rank or from all ranks. Prints what a step costs
// without Python: p50/p99 step latency and overhead = latency - the slowest collected worker's work.
//
//   ringcast-showdown-floor [--workers 2] [--steps 5000] [--work-us 200] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"

using namespace std::chrono;
using namespace ringcast;

namespace {

struct Args {
    std::uint32_t workers = 2;
    std::uint64_t steps = 5000;
    std::uint64_t work_us = 200;
    std::string json;
};

double now_us() { return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count(); }

double thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

// Burns CPU for `us` microseconds (the worker's "model step").
double burn(std::uint64_t us) {
    const double t0 = now_us();
    volatile std::uint64_t x = 0;
    while (now_us() - t0 < double(us)) x = x + 1;
    return now_us() - t0;
}

struct Reply {
    std::uint64_t step;
    double work_us;
};

enum class Collect { rank_by_rank, gather_doorbell, gather_waitv };
const char* name_of(Collect c) {
    switch (c) {
        case Collect::rank_by_rank: return "rank-by-rank";
        case Collect::gather_doorbell: return "gather doorbell";
        case Collect::gather_waitv: return "gather futex_waitv";
    }
    return "?";
}

struct Row {
    std::string variant, replies;
    double p50, p99, overhead_p50, overhead_p99, exec_cpu_pct;
};

double pct(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * double(v.size())))];
}

Row run(const Args& a, Collect how, bool all_ranks) {
    const std::string base = "rc-floor-" + std::to_string(::getpid());
    WriterOptions wo;
    auto req = Writer::create(base + ".req", SegmentOptions{.readers = a.workers, .capacity = 1 << 20}, wo);
    GatherOptions go;
    go.ranks = a.workers;
    go.method = how == Collect::gather_waitv ? GatherWait::futex_waitv : GatherWait::doorbell;
    auto gather = GatherCollector::create(base + ".rep", go);
    std::vector<pid_t> kids;
    for (std::uint32_t r = 0; r < a.workers; ++r) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int code = 0;
            try {
                auto in = Reader::attach(base + ".req", r);
                auto out = GatherWorker::attach(base + ".rep", r);
                for (;;) {
                    const Message m = in.peek();
                    if (m.status != Status::ok) break;
                    const std::uint64_t step = m.tag;
                    in.release();
                    const Reply rep{step, burn(a.work_us)};
                    // Single-rank routing: only the output rank (0) replies.
                    if (all_ranks || r == 0)
                        if (out.reply(step, std::as_bytes(std::span(&rep, 1)), seconds(30)) != Status::ok) { code = 3; break; }
                }
            } catch (const std::exception& e) {
                std::fprintf(stderr, "worker %u: %s\n", r, e.what());
                code = 2;
            }
            ::_exit(code);
        }
        kids.push_back(pid);
    }
    // Rank-by-rank: the collector's Readers are reached one after another, each with its own wait —
    // emulated with the gather group's single-rank collect called per rank in order.
    std::vector<std::byte> request(2048, std::byte{0x42});
    std::vector<double> lat, over;
    const std::uint64_t warmup = std::min<std::uint64_t>(200, a.steps / 10);
    const double cpu0 = thread_cpu_us(), wall0 = now_us();
    for (std::uint64_t step = 1; step <= a.steps + warmup; ++step) {
        const double t0 = now_us();
        if (req.write(request, seconds(30), step) != Status::ok) throw std::runtime_error("broadcast failed");
        double max_work = 0;
        auto take = [&](const GatherResult& res) {
            if (res.status != Status::ok) throw std::runtime_error("collect: " + res.describe());
            for (const auto& rep : res.replies)
                if (rep) {
                    Reply r{};
                    std::memcpy(&r, rep->data(), sizeof r);
                    max_work = std::max(max_work, r.work_us);
                }
        };
        if (!all_ranks) {
            const std::uint32_t only[] = {0};
            take(gather.collect(step, only, seconds(30)));
        } else if (how == Collect::rank_by_rank) {
            for (std::uint32_t r = 0; r < a.workers; ++r) {
                const std::uint32_t one[] = {r};
                take(gather.collect(step, one, seconds(30)));
            }
        } else {
            take(gather.collect_all(step, seconds(30)));
        }
        const double dt = now_us() - t0;
        if (step > warmup) {
            lat.push_back(dt);
            over.push_back(dt - max_work);
        }
    }
    const double cpu = thread_cpu_us() - cpu0, wall = now_us() - wall0;
    req.close();
    for (pid_t k : kids) ::waitpid(k, nullptr, 0);
    return {name_of(how), all_ranks ? "all" : "single", pct(lat, 0.5), pct(lat, 0.99), pct(over, 0.5),
            pct(over, 0.99), 100.0 * cpu / wall};
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", s.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (s == "--workers") a.workers = static_cast<std::uint32_t>(std::stoul(next()));
        else if (s == "--steps") a.steps = std::stoull(next());
        else if (s == "--work-us") a.work_us = std::stoull(next());
        else if (s == "--json") a.json = next();
        else { std::fprintf(stderr, "usage: %s [--workers N] [--steps K] [--work-us U] [--json FILE]\n", argv[0]); return 2; }
    }
    std::vector<Row> rows;
    try {
        rows.push_back(run(a, Collect::gather_doorbell, false));
        rows.push_back(run(a, Collect::rank_by_rank, true));
        rows.push_back(run(a, Collect::gather_doorbell, true));
        rows.push_back(run(a, Collect::gather_waitv, true));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "showdown floor failed: %s\n", e.what());
        return 1;
    }
    std::printf("C++ floor: 1 executor + %u workers, %llu steps, worker work %llu us, default waits (adaptive hybrid)\n", a.workers,
                static_cast<unsigned long long>(a.steps), static_cast<unsigned long long>(a.work_us));
    std::printf("%-20s %-7s %10s %10s %14s %14s %9s\n", "collect", "replies", "p50 us", "p99 us", "overhead p50",
                "overhead p99", "exec CPU%");
    for (const Row& r : rows)
        std::printf("%-20s %-7s %10.1f %10.1f %14.1f %14.1f %9.1f\n", r.variant.c_str(), r.replies.c_str(), r.p50, r.p99,
                    r.overhead_p50, r.overhead_p99, r.exec_cpu_pct);
    if (!a.json.empty()) {
        FILE* f = std::fopen(a.json.c_str(), "w");
        if (f == nullptr) { std::perror(a.json.c_str()); return 1; }
        std::fprintf(f, "{\"workers\": %u, \"steps\": %llu, \"work_us\": %llu, \"rows\": [", a.workers,
                     static_cast<unsigned long long>(a.steps), static_cast<unsigned long long>(a.work_us));
        for (std::size_t i = 0; i < rows.size(); ++i)
            std::fprintf(f, "%s{\"collect\": \"%s\", \"replies\": \"%s\", \"p50_us\": %.2f, \"p99_us\": %.2f, "
                            "\"overhead_p50_us\": %.2f, \"overhead_p99_us\": %.2f, \"executor_cpu_pct\": %.1f}",
                         i ? ", " : "", rows[i].variant.c_str(), rows[i].replies.c_str(), rows[i].p50, rows[i].p99,
                         rows[i].overhead_p50, rows[i].overhead_p99, rows[i].exec_cpu_pct);
        std::fprintf(f, "]}\n");
        std::fclose(f);
    }
    return 0;
}
