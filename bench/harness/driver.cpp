// The driver: forks the reader processes of one configuration and runs the same protocol over every
// system, so ringcast, the floors and the peers are measured by identical code.
//
// Protocol (writer → all readers; every message begins with its u64 tag):
//   start  → each reader resets its counters and CPU clock, replies (an ack)
//   ping   → each reader replies with 8 bytes; round trip = broadcast until the last reply is in
//   stream → no reply; readers count messages and check the sequence
//   end    → each reader replies with its ReaderStats for the phase
//   quit   → each reader replies and exits
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.hpp"

namespace rcbench {

void pin_to(unsigned index) {
    // The CPUs this process was started with, read once: after the first measurement the writer (this
    // process) is pinned to one CPU, and reading its affinity again would put every later reader on
    // that CPU too (it did: the strategy table's rows after the first ran three processes on one CPU).
    static const cpu_set_t allowed = [] {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) != 0) CPU_ZERO(&set);
        return set;
    }();
    const int n = CPU_COUNT(&allowed);
    if (n <= 0) return;
    unsigned want = index % unsigned(n);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (want-- == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            (void)::sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

namespace {

std::vector<std::byte> make_message(std::size_t size, std::uint64_t tag) {
    std::vector<std::byte> m(std::max<std::size_t>(size, 8));
    for (std::size_t i = 8; i < m.size(); ++i) m[i] = std::byte(i * 131u);
    std::memcpy(m.data(), &tag, 8);
    return m;
}
void set_tag(std::vector<std::byte>& m, std::uint64_t tag) { std::memcpy(m.data(), &tag, 8); }
std::uint64_t read_tag(std::span<const std::byte> b) {
    if (b.size() < 8) throw BenchError("message shorter than its tag (" + std::to_string(b.size()) + " bytes)");
    std::uint64_t t;
    std::memcpy(&t, b.data(), 8);
    return t;
}

// The reader process's loop. Returns normally on quit; throws on any protocol violation.
void reader_loop(ReaderEnd& end, std::uint32_t rank) {
    ReaderStats st{};
    st.rank = rank;
    std::int64_t cpu0 = process_cpu_ns(), wall0 = now_ns();
    std::uint64_t expect_stream = 0;
    std::byte reply[kReplyMax];
    for (;;) {
        const auto msg = end.receive();
        const std::uint64_t tag = read_tag(msg);
        std::memcpy(reply, &tag, 8);
        switch (tag_kind(tag)) {
            case Kind::stream:
                // Sequence check: a lost, duplicated or reordered message fails the benchmark.
                if (tag_seq(tag) != expect_stream)
                    throw BenchError("reader " + std::to_string(rank) + ": stream message " +
                                     std::to_string(tag_seq(tag)) + " where " + std::to_string(expect_stream) +
                                     " was due");
                ++expect_stream;
                ++st.messages;
                st.bytes += msg.size();
                break;
            case Kind::ping: end.reply({reply, 8}); break;
            case Kind::start:
                st.messages = st.bytes = 0;
                expect_stream = 0;
                cpu0 = process_cpu_ns();
                wall0 = now_ns();
                end.reply({reply, 8});
                break;
            case Kind::end:
                st.cpu_ns = process_cpu_ns() - cpu0;
                st.wall_ns = now_ns() - wall0;
                std::memcpy(reply + 8, &st, sizeof st);
                end.reply({reply, kReplyMax});
                break;
            case Kind::quit: end.reply({reply, 8}); return;
            default: throw BenchError("reader " + std::to_string(rank) + ": unknown tag " + std::to_string(tag));
        }
    }
}

struct Children {
    std::vector<pid_t> pids;
    Children() = default;
    Children(Children&& o) noexcept : pids(std::exchange(o.pids, {})) {}  // the moved-from kills no one
    Children(const Children&) = delete;
    Children& operator=(const Children&) = delete;
    ~Children() {  // on an exception in the parent: no reader process outlives the run
        for (pid_t p : pids) {
            ::kill(p, SIGKILL);
            ::waitpid(p, nullptr, 0);
        }
    }
    void reap() {
        std::string failed;
        for (pid_t p : pids) {
            int status = 0;
            while (::waitpid(p, &status, 0) < 0 && errno == EINTR) {
            }
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed += " " + std::to_string(p);
        }
        pids.clear();
        if (!failed.empty()) throw BenchError("reader process(es) failed:" + failed);
    }
};

Children fork_readers(System& sys, std::uint32_t readers, bool pin) {
    Children c;
    std::fflush(nullptr);
    for (std::uint32_t r = 0; r < readers; ++r) {
        const pid_t pid = ::fork();
        if (pid < 0) throw BenchError("fork failed");
        if (pid == 0) {
            int rc = 0;
            try {
                if (pin) pin_to(r + 1);
                auto end = sys.make_reader(r);
                reader_loop(*end, r);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "reader %u: %s\n", r, e.what());
                rc = 1;
            }
            std::fflush(nullptr);
            ::_exit(rc);  // no destructors of the parent's objects copied into this process
        }
        c.pids.push_back(pid);
    }
    return c;
}

// Sends a control message and gathers one reply per reader; stats, when asked, by rank.
void control(WriterEnd& w, std::vector<std::byte>& buf, Kind k, std::uint32_t readers,
             std::vector<ReaderStats>* stats) {
    const std::uint64_t tag = make_tag(k, 0);
    set_tag(buf, tag);
    w.broadcast({buf.data(), 8});
    std::uint32_t got = 0;
    w.collect([&](std::uint32_t, std::span<const std::byte> r) {
        if (read_tag(r) != tag) throw BenchError("control reply with a foreign tag");
        if (stats) {
            if (r.size() != kReplyMax) throw BenchError("stats reply of the wrong size");
            ReaderStats s;
            std::memcpy(&s, r.data() + 8, sizeof s);
            if (s.rank >= readers) throw BenchError("stats reply from an unknown rank");
            (*stats)[s.rank] = s;
        }
        ++got;
    });
    if (got != readers) throw BenchError("control step got " + std::to_string(got) + " replies");
}

double pct(std::int64_t cpu, std::int64_t wall) { return wall > 0 ? 100.0 * double(cpu) / double(wall) : 0.0; }

}  // namespace

RunResult run_config(const SystemInfo& info, std::size_t size, std::uint32_t readers, const PhaseLimits& limits,
                     const RunOptions& options) {
    RunResult res;
    res.system = info.name;
    res.size = size;
    res.readers = readers;
    auto sys = info.make();
    sys->prepare(size, readers);
    struct Cleanup {
        System& s;
        ~Cleanup() { s.cleanup(); }
    } cleanup{*sys};
    Children children = fork_readers(*sys, readers, options.pin);
    if (options.pin) pin_to(0);
    {
        auto w = sys->make_writer();
        auto buf = make_message(size, 0);
        std::vector<ReaderStats> stats(readers);

        // Round trips. The warm-up faults the pages in and gets every process scheduled once.
        const auto ping = [&](std::uint64_t seq) {
            const std::uint64_t tag = make_tag(Kind::ping, seq);
            set_tag(buf, tag);
            w->broadcast(buf);
            std::uint32_t got = 0;
            w->collect([&](std::uint32_t, std::span<const std::byte> r) {
                if (r.size() != 8 || read_tag(r) != tag) throw BenchError("ping reply with a foreign tag");
                ++got;
            });
            if (got != readers) throw BenchError("ping got " + std::to_string(got) + " replies");
        };
        control(*w, buf, Kind::start, readers, nullptr);
        std::uint64_t seq = 0;
        for (const std::int64_t until = now_ns() + std::int64_t(limits.warmup_s * 1e9); now_ns() < until;) ping(seq++);

        control(*w, buf, Kind::start, readers, nullptr);
        std::int64_t cpu0 = process_cpu_ns(), wall0 = now_ns();
        res.rtt_ns.reserve(std::min<std::uint64_t>(limits.rtt_max_iters, 1'000'000));
        const std::int64_t rtt_until = wall0 + std::int64_t(limits.rtt_s * 1e9);
        for (std::uint64_t i = 0; i < limits.rtt_max_iters; ++i) {
            const std::int64_t t0 = now_ns();
            ping(seq++);
            const std::int64_t t1 = now_ns();
            res.rtt_ns.push_back(double(t1 - t0));
            if (t1 >= rtt_until) break;
        }
        control(*w, buf, Kind::end, readers, &stats);
        res.writer_cpu_rtt = pct(process_cpu_ns() - cpu0, now_ns() - wall0);
        for (auto& s : stats) res.reader_cpu_rtt.push_back(pct(s.cpu_ns, s.wall_ns));

        std::sort(res.rtt_ns.begin(), res.rtt_ns.end());
        res.p50 = percentile(res.rtt_ns, 50);
        res.p99 = percentile(res.rtt_ns, 99);
        res.p999 = percentile(res.rtt_ns, 99.9);
        res.max = res.rtt_ns.empty() ? 0 : res.rtt_ns.back();

        // Streaming: as fast as the slowest reader takes them; the phase ends when every reader has
        // confirmed the last message (the end reply comes after all stream messages, in order).
        if (limits.stream && sys->can_stream()) {
            control(*w, buf, Kind::start, readers, nullptr);
            cpu0 = process_cpu_ns();
            wall0 = now_ns();
            const std::int64_t until = wall0 + std::int64_t(limits.stream_s * 1e9);
            std::uint64_t n = 0;
            for (;;) {
                set_tag(buf, make_tag(Kind::stream, n));
                w->broadcast(buf);
                ++n;
                if ((n & 15) == 0 || size >= 65536) {
                    if (now_ns() >= until) break;
                }
            }
            control(*w, buf, Kind::end, readers, &stats);
            const std::int64_t wall = now_ns() - wall0;
            res.writer_cpu_stream = pct(process_cpu_ns() - cpu0, wall);
            for (auto& s : stats) {
                if (s.messages != n)
                    throw BenchError("reader " + std::to_string(s.rank) + " got " + std::to_string(s.messages) +
                                     " of " + std::to_string(n) + " stream messages");
                res.reader_cpu_stream.push_back(pct(s.cpu_ns, s.wall_ns));
            }
            res.msgs_per_s = double(n) / (double(wall) * 1e-9);
            res.gbytes_per_s = res.msgs_per_s * double(buf.size()) * 1e-9;
        }
        control(*w, buf, Kind::quit, readers, nullptr);
    }  // the writer end closes before the children are reaped
    children.reap();
    return res;
}

std::vector<double> measure_idle(const std::vector<const SystemInfo*>& systems, double seconds) {
    struct One {
        std::unique_ptr<System> sys;
        std::unique_ptr<WriterEnd> w;
        std::vector<std::byte> buf = make_message(8, 0);
    };
    std::vector<One> all(systems.size());
    std::vector<Children> kids;
    struct CleanupAll {
        std::vector<One>& a;
        ~CleanupAll() {
            for (auto& o : a)
                if (o.sys) o.sys->cleanup();
        }
    } cleanup{all};
    for (std::size_t i = 0; i < systems.size(); ++i) {
        all[i].sys = systems[i]->make();
        all[i].sys->prepare(8, 1);
        kids.push_back(fork_readers(*all[i].sys, 1, false));
    }
    for (auto& o : all) {
        o.w = o.sys->make_writer();
        control(*o.w, o.buf, Kind::start, 1, nullptr);  // the reader now blocks waiting for the next one
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::vector<double> out;
    for (auto& o : all) {
        std::vector<ReaderStats> st(1);
        control(*o.w, o.buf, Kind::end, 1, &st);
        out.push_back(pct(st[0].cpu_ns, st[0].wall_ns));
        control(*o.w, o.buf, Kind::quit, 1, nullptr);
        o.w.reset();
    }
    for (auto& k : kids) k.reap();
    return out;
}

double memcpy_gbps(std::size_t size, std::size_t working_set, double seconds) {
    working_set = std::max(working_set, size);
    const std::size_t blocks = working_set / size;
    std::vector<std::byte> src(blocks * size), dst(blocks * size);
    for (std::size_t i = 0; i < src.size(); i += 4096) src[i] = std::byte(i);  // fault pages in
    std::memset(dst.data(), 1, dst.size());
    std::uint64_t bytes = 0;
    std::size_t b = 0;
    const std::int64_t t0 = now_ns(), until = t0 + std::int64_t(seconds * 1e9);
    std::int64_t t = t0;
    while (t < until) {
        for (int k = 0; k < 16; ++k) {
            std::memcpy(dst.data() + b * size, src.data() + b * size, size);
            b = b + 1 == blocks ? 0 : b + 1;
        }
        // Keeps the copies from being optimised away.
        asm volatile("" : : "r"(dst.data()) : "memory");
        bytes += 16 * size;
        t = now_ns();
    }
    return double(bytes) / double(t - t0);  // bytes/ns = GB/s
}

}  // namespace rcbench
