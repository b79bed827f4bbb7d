// ringcast-events-bench: the event-loop wake paths, each next to its floor measured in the same run.
//
//   batch [--rounds N]   waking N = 1, 4, 16 sleeping reader processes: N eventfd write() calls vs
//                        one io_uring_submit of N writes vs one futex wake of a shared word
//   rtt   [--trips N]    round trips between two processes: WaitSet (io_uring, futex words) vs a bare
//                        futex ping-pong; WaitSet (epoll, eventfds) vs a bare eventfd ping-pong
//   idle  [--seconds S]  CPU of a process blocked in WaitSet::wait over 64 idle queues (each back end)
//
// Every row prints its per-run values; methods are interleaved in blocks so drift hits all alike.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef RINGCAST_HAVE_IO_URING
#include <liburing.h>
#endif

#include "ringcast/events/waitset.hpp"
#include "ringcast/futex.hpp"

namespace {

using namespace std::chrono_literals;
using ringcast::Status;

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
template <class T>
T* shared_page(std::size_t n = 1) {
    void* p = ::mmap(nullptr, sizeof(T) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    return new (p) T[n]{};
}
void die(const char* what) {
    std::perror(what);
    std::exit(1);
}
std::string machine() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return std::to_string(std::thread::hardware_concurrency()) + " cores, host " + host;
}

// ---- batch -----------------------------------------------------------------------------------------
enum class Method { writes, io_uring, futex };
const char* name(Method m) {
    switch (m) {
        case Method::writes: return "N write()";
        case Method::io_uring: return "io_uring N writes";
        case Method::futex: return "1 futex wake";
    }
    return "?";
}

struct alignas(128) BatchShared {
    std::atomic<std::uint32_t> word{0};    // futex word (futex method)
    std::atomic<std::uint32_t> acked{0};   // readers that woke this round
    std::atomic<std::uint32_t> stop{0};
    std::atomic<std::int64_t> last_wake{0};  // latest wake time of this round
};

struct BatchResult {
    std::vector<double> signal_us;  // writer: cost of the signalling call(s)
    std::vector<double> last_us;    // from before signalling to the last reader awake
};

void run_batch(int n, int rounds, std::vector<Method> methods, std::vector<std::vector<BatchResult>>& out, int rep) {
    auto* sh = shared_page<BatchShared>();
    std::vector<int> efd(n);
    for (int i = 0; i < n; ++i)
        if ((efd[i] = ::eventfd(0, EFD_CLOEXEC)) < 0) die("eventfd");
    std::vector<pid_t> kids;
    for (int i = 0; i < n; ++i) {
        const pid_t p = ::fork();
        if (p == 0) {
            // Each round: block on the eventfd AND be ready for a futex wake: the writer tells which
            // by the method index in the word's high bits... simpler: two phases per method below.
            for (;;) {
                const std::uint32_t w = sh->word.load(std::memory_order_acquire);
                if (sh->stop.load()) ::_exit(0);
                if ((w & 1u) == 0) {  // even: eventfd methods: block in read
                    std::uint64_t v = 0;
                    pollfd pf{efd[i], POLLIN, 0};
                    if (::poll(&pf, 1, 50) != 1) continue;
                    if (::read(efd[i], &v, sizeof v) != sizeof v) continue;
                } else {  // odd: futex method
                    (void)ringcast::futex_wait(&sh->word, w, ringcast::deadline_after(50ms));
                    if (sh->word.load(std::memory_order_acquire) == w) continue;
                }
                const std::int64_t t = now_ns();
                std::int64_t prev = sh->last_wake.load();
                while (t > prev && !sh->last_wake.compare_exchange_weak(prev, t)) {
                }
                sh->acked.fetch_add(1);
            }
        }
        kids.push_back(p);
    }
#ifdef RINGCAST_HAVE_IO_URING
    io_uring ring{};
    const bool have_uring = io_uring_queue_init(64, &ring, 0) == 0;
#else
    const bool have_uring = false;
#endif
    const std::uint64_t one = 1;
    for (std::size_t mi = 0; mi < methods.size(); ++mi) {
        const Method m = methods[mi];
        if (m == Method::io_uring && !have_uring) continue;
        // futex rounds: the word is odd (readers wait on it); eventfd rounds: even.
        if (m == Method::futex) sh->word.store(1, std::memory_order_release);
        else sh->word.store(0, std::memory_order_release);
        std::this_thread::sleep_for(60ms);  // every reader has switched to the right wait
        BatchResult& r = out[mi][rep];
        for (int k = 0; k < rounds; ++k) {
            sh->acked.store(0);
            sh->last_wake.store(0);
            std::this_thread::sleep_for(300us);  // the readers are asleep again
            const std::int64_t t0 = now_ns();
            if (m == Method::writes) {
                for (int i = 0; i < n; ++i)
                    if (::write(efd[i], &one, sizeof one) != sizeof one) die("write");
            } else if (m == Method::futex) {
                sh->word.fetch_add(2, std::memory_order_release);  // stays odd
                ringcast::futex_wake(&sh->word, INT_MAX);
            } else {
#ifdef RINGCAST_HAVE_IO_URING
                for (int i = 0; i < n; ++i) io_uring_prep_write(io_uring_get_sqe(&ring), efd[i], &one, sizeof one, 0);
                io_uring_submit(&ring);
#endif
            }
            const std::int64_t t1 = now_ns();
            while (sh->acked.load() < static_cast<std::uint32_t>(n)) ::sched_yield();
#ifdef RINGCAST_HAVE_IO_URING
            if (m == Method::io_uring) {
                io_uring_cqe* cqe = nullptr;
                for (int i = 0; i < n; ++i) {
                    if (io_uring_wait_cqe(&ring, &cqe) != 0) die("io_uring_wait_cqe");
                    io_uring_cqe_seen(&ring, cqe);
                }
            }
#endif
            r.signal_us.push_back(double(t1 - t0) / 1e3);
            r.last_us.push_back(double(sh->last_wake.load() - t0) / 1e3);
        }
    }
    sh->stop.store(1);
    sh->word.fetch_add(2);
    ringcast::futex_wake(&sh->word, INT_MAX);
    for (int i = 0; i < n; ++i) (void)!::write(efd[i], &one, sizeof one);
    for (pid_t p : kids) ::waitpid(p, nullptr, 0);
#ifdef RINGCAST_HAVE_IO_URING
    if (have_uring) io_uring_queue_exit(&ring);
#endif
    for (int fd : efd) ::close(fd);
    ::munmap(sh, sizeof(BatchShared));
}

int cmd_batch(int rounds, int reps) {
    std::printf("batched wakes: one writer wakes N sleeping reader processes; %d rounds x %d runs per row,\n"
                "methods alternated per run; p50 in us. signal = the writer's call(s); last = from before\n"
                "signalling until the last reader is awake. machine: %s\n\n",
                rounds, reps, machine().c_str());
    const std::vector<Method> methods = {Method::writes, Method::io_uring, Method::futex};
    for (int n : {1, 4, 16}) {
        std::vector<std::vector<BatchResult>> out(methods.size(), std::vector<BatchResult>(reps));
        for (int rep = 0; rep < reps; ++rep) run_batch(n, rounds, methods, out, rep);
        for (std::size_t mi = 0; mi < methods.size(); ++mi) {
            std::string sig, last;
            for (int rep = 0; rep < reps; ++rep) {
                if (out[mi][rep].last_us.empty()) continue;
                char b[64];
                std::snprintf(b, sizeof b, "%s%.1f", sig.empty() ? "" : " ", median(out[mi][rep].signal_us));
                sig += b;
                std::snprintf(b, sizeof b, "%s%.1f", last.empty() ? "" : " ", median(out[mi][rep].last_us));
                last += b;
            }
            if (sig.empty()) sig = last = "(io_uring unavailable)";
            std::printf("N=%-2d  %-18s  signal p50 [%s]   last awake p50 [%s]\n", n, name(methods[mi]), sig.c_str(),
                        last.c_str());
        }
        std::printf("\n");
    }
    return 0;
}

// ---- rtt --------------------------------------------------------------------------------------------
struct alignas(128) PingShared {
    std::atomic<std::uint32_t> ping{0}, pong{0};
};

// Bare futex ping-pong: the floor of a futex-word wait.
double floor_futex(int trips) {
    auto* sh = shared_page<PingShared>();
    const pid_t p = ::fork();
    if (p == 0) {
        for (std::uint32_t i = 1; i <= static_cast<std::uint32_t>(trips); ++i) {
            while (sh->ping.load(std::memory_order_acquire) != i) (void)ringcast::futex_wait(&sh->ping, i - 1, ringcast::kNoDeadline);
            sh->pong.store(i, std::memory_order_release);
            ringcast::futex_wake(&sh->pong, 1);
        }
        ::_exit(0);
    }
    std::vector<double> rtt;
    for (std::uint32_t i = 1; i <= static_cast<std::uint32_t>(trips); ++i) {
        const std::int64_t t0 = now_ns();
        sh->ping.store(i, std::memory_order_release);
        ringcast::futex_wake(&sh->ping, 1);
        while (sh->pong.load(std::memory_order_acquire) != i) (void)ringcast::futex_wait(&sh->pong, i - 1, ringcast::kNoDeadline);
        rtt.push_back(double(now_ns() - t0) / 1e3);
    }
    ::waitpid(p, nullptr, 0);
    ::munmap(sh, sizeof(PingShared));
    return median(rtt);
}

// Bare eventfd ping-pong: the floor of an eventfd wait (poll + read, as a loop does).
double floor_eventfd(int trips) {
    const int a = ::eventfd(0, EFD_CLOEXEC), b = ::eventfd(0, EFD_CLOEXEC);
    const std::uint64_t one = 1;
    auto wait_fd = [](int fd) {
        pollfd pf{fd, POLLIN, 0};
        (void)::poll(&pf, 1, -1);
        std::uint64_t v = 0;
        (void)!::read(fd, &v, sizeof v);
    };
    const pid_t p = ::fork();
    if (p == 0) {
        for (int i = 0; i < trips; ++i) {
            wait_fd(a);
            (void)!::write(b, &one, sizeof one);
        }
        ::_exit(0);
    }
    std::vector<double> rtt;
    for (int i = 0; i < trips; ++i) {
        const std::int64_t t0 = now_ns();
        (void)!::write(a, &one, sizeof one);
        wait_fd(b);
        rtt.push_back(double(now_ns() - t0) / 1e3);
    }
    ::waitpid(p, nullptr, 0);
    ::close(a);
    ::close(b);
    return median(rtt);
}

// ringcast ping-pong where both sides wait in a WaitSet of the given back end.
double waitset_pingpong(ringcast::WaitSetBackend backend, int trips) {
    const std::string base = "rc-evb-" + std::to_string(::getpid());
    const std::string ping = base + "-ping", pong = base + "-pong";
    auto side = [&](const std::string& in, const std::string& out, bool starter) {
        ringcast::WriterOptions wo;
        wo.wait.kind = ringcast::WaitKind::futex;
        auto w = ringcast::Writer::create(out, {.readers = 1, .capacity = 1 << 16}, wo);
        ringcast::ReaderOptions ro;
        ro.create_timeout = 10s;
        ro.wait.kind = ringcast::WaitKind::futex;
        auto r = ringcast::Reader::attach(in, 0, ro);
        ringcast::WaitSet set({.backend = backend});
        (void)set.add(r);
        std::vector<std::byte> msg(64), got;
        std::vector<double> rtt;
        // Both readers attached before the first publish (each writer's name goes with it).
        while (ringcast::layout::unpack_owner(w.segment().reader_slot(0).owner.load()).state !=
               ringcast::layout::SlotState::attached)
            std::this_thread::sleep_for(1ms);
        for (int i = 0; i < trips; ++i) {
            const std::int64_t t0 = now_ns();
            if (starter && w.write(msg, 1s) != Status::ok) die("write");
            for (;;) {
                if (r.read(got, 0s) == Status::ok) break;
                (void)set.wait(1s);
            }
            if (!starter && w.write(msg, 1s) != Status::ok) die("write");
            rtt.push_back(double(now_ns() - t0) / 1e3);
        }
        std::this_thread::sleep_for(20ms);  // the peer's last read before our name goes
        return median(rtt);
    };
    const pid_t p = ::fork();
    if (p == 0) {
        (void)side(ping, pong, false);
        ::_exit(0);
    }
    const double m = side(pong, ping, true);
    ::waitpid(p, nullptr, 0);
    return m;
}

int cmd_rtt(int trips, int reps) {
    std::printf("round trips between two processes, %d trips per run, %d runs, alternated; p50 in us per run.\n"
                "machine: %s\n\n",
                trips, reps, machine().c_str());
    const std::string why = ringcast::io_uring_futex_unavailable_reason();
    std::vector<double> fu, uw, fe, ew;
    for (int rep = 0; rep < reps; ++rep) {
        fu.push_back(floor_futex(trips));
        if (why.empty()) uw.push_back(waitset_pingpong(ringcast::WaitSetBackend::io_uring, trips));
        fe.push_back(floor_eventfd(trips));
        ew.push_back(waitset_pingpong(ringcast::WaitSetBackend::epoll, trips));
    }
    auto list = [](const std::vector<double>& v) {
        std::string s;
        for (double x : v) s += (s.empty() ? "" : " ") + std::to_string(x).substr(0, std::to_string(x).find('.') + 2);
        return s;
    };
    std::printf("%-34s [%s]\n", "floor: bare futex ping-pong", list(fu).c_str());
    if (why.empty()) {
        std::printf("%-34s [%s]\n", "WaitSet io_uring (futex words)", list(uw).c_str());
        std::printf("  ratio io_uring / futex floor (median of runs): %.2f (target <= 1.3: %s)\n", median(uw) / median(fu),
                    median(uw) / median(fu) <= 1.3 ? "met" : "MISSED");
    } else {
        std::printf("WaitSet io_uring: unavailable here (%s)\n", why.c_str());
    }
    std::printf("%-34s [%s]\n", "floor: bare eventfd ping-pong", list(fe).c_str());
    std::printf("%-34s [%s]\n", "WaitSet epoll (eventfds)", list(ew).c_str());
    std::printf("  ratio epoll WaitSet / eventfd floor (median of runs): %.2f (target <= 1.15: %s)\n",
                median(ew) / median(fe), median(ew) / median(fe) <= 1.15 ? "met" : "MISSED");
    return 0;
}

// ---- idle -------------------------------------------------------------------------------------------
double idle_cpu_percent(ringcast::WaitSetBackend backend, double seconds, int queues, double recheck_s) {
    const std::string base = "rc-evi-" + std::to_string(::getpid()) + "-" + ringcast::to_string(backend);
    std::vector<ringcast::Writer> writers;
    for (int q = 0; q < queues; ++q)
        writers.push_back(ringcast::Writer::create(base + "-" + std::to_string(q), {.readers = 1, .capacity = 1 << 16}));
    int pipefd[2];
    if (::pipe(pipefd) != 0) die("pipe");
    const pid_t p = ::fork();
    if (p == 0) {
        std::vector<ringcast::Reader> readers;
        for (int q = 0; q < queues; ++q) readers.push_back(ringcast::Reader::attach(base + "-" + std::to_string(q), 0));
        ringcast::WaitSet set({.backend = backend,
                               .recheck = std::chrono::nanoseconds(static_cast<std::int64_t>(recheck_s * 1e9))});
        for (auto& r : readers) (void)set.add(r);
        (void)set.wait(0s);  // armed: the measurement is the idle state, not the set-up
        rusage a{}, b{};
        ::getrusage(RUSAGE_SELF, &a);
        const std::int64_t t0 = now_ns();
        while (now_ns() - t0 < static_cast<std::int64_t>(seconds * 1e9)) (void)set.wait(200ms);
        ::getrusage(RUSAGE_SELF, &b);
        const double cpu = double(b.ru_utime.tv_sec - a.ru_utime.tv_sec + b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
                           double(b.ru_utime.tv_usec - a.ru_utime.tv_usec + b.ru_stime.tv_usec - a.ru_stime.tv_usec) / 1e6;
        const double pct = 100.0 * cpu / (double(now_ns() - t0) / 1e9);
        (void)!::write(pipefd[1], &pct, sizeof pct);
        ::_exit(0);
    }
    double pct = -1;
    (void)!::read(pipefd[0], &pct, sizeof pct);
    ::waitpid(p, nullptr, 0);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return pct;
}

int cmd_idle(double seconds, double recheck_s) {
    std::printf("idle: one process in WaitSet::wait(200 ms) over 64 empty queues for %.1f s, re-check every %.1f s\n"
                "(target <= 0.1 %% CPU). machine: %s\n",
                seconds, recheck_s, machine().c_str());
    for (auto b : {ringcast::WaitSetBackend::epoll, ringcast::WaitSetBackend::io_uring}) {
        if (b == ringcast::WaitSetBackend::io_uring && !ringcast::io_uring_futex_unavailable_reason().empty()) {
            std::printf("%-9s unavailable (%s)\n", ringcast::to_string(b), ringcast::io_uring_futex_unavailable_reason().c_str());
            continue;
        }
        const double pct = idle_cpu_percent(b, seconds, 64, recheck_s);
        std::printf("%-9s %.4f %% CPU (%s)\n", ringcast::to_string(b), pct, pct <= 0.1 ? "met" : "MISSED");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    auto arg = [&](const char* flag, double dflt) {
        for (int i = 2; i + 1 < argc; ++i)
            if (std::strcmp(argv[i], flag) == 0) return std::atof(argv[i + 1]);
        return dflt;
    };
    try {
        if (cmd == "batch") return cmd_batch(static_cast<int>(arg("--rounds", 2000)), static_cast<int>(arg("--runs", 3)));
        if (cmd == "rtt") return cmd_rtt(static_cast<int>(arg("--trips", 20000)), static_cast<int>(arg("--runs", 3)));
        if (cmd == "idle") return cmd_idle(arg("--seconds", 3), arg("--recheck", 1));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringcast-events-bench: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: ringcast-events-bench batch [--rounds N] [--runs R] | rtt [--trips N] [--runs R] |"
                         " idle [--seconds S]\n");
    return 2;
}
