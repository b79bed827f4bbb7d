// ringcast-remote-bench: remote readers and replies over ZeroMQ against ZeroMQ's own floor, same run.
//
// Rows (every process forked; ZeroMQ contexts made after fork):
//   zmq floor RTT         DEALER<->DEALER ping-pong of 64 B over tcp (and ipc) loopback
//   remote RTT            ring write -> publisher -> RemoteReader -> RemoteGatherWorker -> bridge ->
//                         GatherCollector::collect: the executor's step round trip, 64 B each way
//   zmq floor 1 MiB       DEALER -> DEALER stream of 1 MiB messages over tcp, receiver-side rate
//   remote 1 MiB          ring -> publisher -> RemoteReader stream of 1 MiB messages, receiver-side rate
//   local RTT (0 / 2 remote readers attached)   ring -> local Reader -> GatherWorker -> collect
// Targets (issue): remote RTT <= 1.2x the tcp floor, remote 1 MiB >= 0.8x the floor's rate, local RTT
// with 2 remote readers <= 1.1x without. Printed as ratios; every repetition is printed.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "ringcast/gather.hpp"
#include "ringcast/remote/publisher.hpp"
#include "ringcast/remote/reader.hpp"
#include "ringcast/remote/reply.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace rr = ringcast::remote;

namespace {

struct Pipe {
    int fd[2];
    Pipe() {
        if (::pipe(fd) != 0) std::abort();
    }
    void put(const std::string& s) const {
        const std::string line = s + "\n";
        if (::write(fd[1], line.data(), line.size()) < 0) std::abort();
    }
    std::string get() const {
        std::string s;
        char c;
        while (::read(fd[0], &c, 1) == 1 && c != '\n') s.push_back(c);
        return s;
    }
};

pid_t child(const std::function<void()>& fn) {
    const pid_t p = ::fork();
    if (p != 0) return p;
    try {
        fn();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        std::fflush(nullptr);
        ::_exit(2);
    }
    std::fflush(nullptr);
    ::_exit(0);
}

void reap(pid_t p) {
    int st = 0;
    ::waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::fprintf(stderr, "a benchmark process failed (status %d)\n", st);
        std::exit(1);
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::string name_of(const char* what) { return std::string("rc-rbench-") + what + "-" + std::to_string(::getpid()); }

// ---- ZeroMQ floor -------------------------------------------------------------------------------
double zmq_rtt_us(const std::string& bind, int n) {
    Pipe ep, res;
    const pid_t a = child([&] {
        zmq::context_t ctx;
        zmq::socket_t s(ctx, zmq::socket_type::dealer);
        s.bind(bind);
        ep.put(s.get(zmq::sockopt::last_endpoint));
        std::vector<double> rtts;
        char buf[64] = {};
        for (int i = 0; i < n + 1000; ++i) {
            const auto t0 = Clock::now();
            s.send(zmq::buffer(buf, sizeof buf), zmq::send_flags::none);
            zmq::message_t m;
            (void)s.recv(m);
            if (i >= 1000) rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        res.put(std::to_string(median(rtts)));
    });
    const std::string e = ep.get();
    const pid_t b = child([&] {
        zmq::context_t ctx;
        zmq::socket_t s(ctx, zmq::socket_type::dealer);
        s.connect(e);
        for (int i = 0; i < n + 1000; ++i) {
            zmq::message_t m;
            (void)s.recv(m);
            s.send(m, zmq::send_flags::none);
        }
    });
    const double r = std::stod(res.get());
    reap(a);
    reap(b);
    return r;
}

double zmq_stream_mib_s(int n, std::size_t size) {
    Pipe ep, res;
    const pid_t rx = child([&] {
        zmq::context_t ctx;
        zmq::socket_t s(ctx, zmq::socket_type::dealer);
        s.set(zmq::sockopt::rcvhwm, 16);
        s.bind("tcp://127.0.0.1:*");
        ep.put(s.get(zmq::sockopt::last_endpoint));
        zmq::message_t m;
        (void)s.recv(m);  // the first message starts the clock
        const auto t0 = Clock::now();
        for (int i = 1; i < n; ++i) (void)s.recv(m);
        const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        res.put(std::to_string(double(n - 1) * double(size) / double(1 << 20) / sec));
    });
    const std::string e = ep.get();
    const pid_t tx = child([&] {
        zmq::context_t ctx;
        zmq::socket_t s(ctx, zmq::socket_type::dealer);
        s.set(zmq::sockopt::sndhwm, 16);
        s.connect(e);
        std::vector<char> buf(size, 'x');
        for (int i = 0; i < n; ++i) s.send(zmq::buffer(buf), zmq::send_flags::none);
        s.set(zmq::sockopt::linger, 10000);
    });
    const double r = std::stod(res.get());
    reap(tx);
    reap(rx);
    return r;
}

// ---- ringcast remote ----------------------------------------------------------------------------
// fixed_spin: the publisher's ring rank and the collector spin a fixed 10 µs, then sleep (spin_max 0)
// instead of the default adaptive spin: shows what the two thread hand-offs of the remote path cost
// as futex wakes. (The ring's writer and the reply bridge only wait for space, which never runs out
// here: their options do not matter.)
double remote_rtt_us(int n, bool fixed_spin = false) {
    const std::string ring = name_of("rtt"), gather = name_of("rttg");
    Pipe ep, res;
    const pid_t exec = child([&] {
        auto w = ringcast::Writer::create(ring, {.readers = 1, .capacity = 1 << 20});
        ringcast::GatherOptions go{.ranks = 1};
        if (fixed_spin) go.wait.spin_max = std::chrono::nanoseconds::zero();
        auto col = ringcast::GatherCollector::create(gather, go);
        rr::RemotePublisherOptions po;
        po.listen.ip = "127.0.0.1";
        po.ranks = {0};
        if (fixed_spin) po.ring.wait.spin_max = std::chrono::nanoseconds::zero();
        auto pub = rr::RemotePublisher::start(ring, 0, po);
        rr::RemoteReplyOptions ro;
        ro.listen.ip = "127.0.0.1";
        ro.ranks = {0};
        auto bridge = rr::RemoteReplyBridge::start(gather, ro);
        ep.put(pub.endpoint() + " " + bridge.endpoint());
        if (pub.wait_ready(30s) != ringcast::Status::ok || bridge.wait_ready(30s) != ringcast::Status::ok) std::abort();
        std::vector<double> rtts;
        std::byte msg[64] = {};
        for (int i = 0; i < n + 1000; ++i) {
            const auto t0 = Clock::now();
            if (w.write(msg, 10s, i) != ringcast::Status::ok) std::abort();
            if (col.collect_all(i, 10s).status != ringcast::Status::ok) std::abort();
            if (i >= 1000) rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        res.put(std::to_string(median(rtts)));
        w.close();
        (void)pub.drain(10s);
    });
    const std::string eps = ep.get();
    const std::string pe = eps.substr(0, eps.find(' ')), be = eps.substr(eps.find(' ') + 1);
    const pid_t worker = child([&] {
        auto r = rr::RemoteReader::connect(pe, 0);
        auto g = rr::RemoteGatherWorker::connect(be, 0);
        if (g.wait_ready(30s) != ringcast::Status::ok) std::abort();
        for (;;) {
            const ringcast::Message m = r.peek(30s);
            if (m.status != ringcast::Status::ok) break;
            const std::uint64_t tag = m.tag;
            std::byte reply[64] = {};
            r.release();
            if (g.reply(tag, reply, 10s) != ringcast::Status::ok) std::abort();
        }
    });
    const double v = std::stod(res.get());
    reap(worker);
    reap(exec);
    return v;
}

double remote_stream_mib_s(int n, std::size_t size) {
    const std::string ring = name_of("stream");
    Pipe ep, res;
    const pid_t writer = child([&] {
        auto w = ringcast::Writer::create(ring, {.readers = 1, .capacity = 8 << 20});
        rr::RemotePublisherOptions po;
        po.listen.ip = "127.0.0.1";
        po.ranks = {0};
        auto pub = rr::RemotePublisher::start(ring, 0, po);
        ep.put(pub.endpoint());
        if (pub.wait_ready(30s) != ringcast::Status::ok) std::abort();
        std::vector<std::byte> buf(size, std::byte{'x'});
        for (int i = 0; i < n; ++i)
            if (w.write(buf, 30s, i) != ringcast::Status::ok) std::abort();
        w.close();
        (void)pub.drain(30s);
    });
    const std::string e = ep.get();
    const pid_t reader = child([&] {
        auto r = rr::RemoteReader::connect(e, 0);
        if (r.peek(30s).status != ringcast::Status::ok) std::abort();
        r.release();
        const auto t0 = Clock::now();
        for (int i = 1; i < n; ++i) {
            if (r.peek(30s).status != ringcast::Status::ok) std::abort();
            r.release();
        }
        const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        res.put(std::to_string(double(n - 1) * double(size) / double(1 << 20) / sec));
    });
    const double v = std::stod(res.get());
    reap(reader);
    reap(writer);
    return v;
}

// Local step RTT (ring -> local reader -> local reply ring -> collect), with `remote` remote readers
// attached to the same ring through a publisher (they read every message).
double local_rtt_us(int n, int remote) {
    const std::string ring = name_of("local"), gather = name_of("localg");
    Pipe ep, res;
    std::vector<pid_t> kids;
    kids.push_back(child([&] {
        auto w = ringcast::Writer::create(ring, {.readers = static_cast<std::uint32_t>(remote > 0 ? 2 : 1), .capacity = 1 << 20});
        auto col = ringcast::GatherCollector::create(gather, {.ranks = 1});
        std::optional<rr::RemotePublisher> pub;
        if (remote > 0) {
            rr::RemotePublisherOptions po;
            po.listen.ip = "127.0.0.1";
            for (int i = 0; i < remote; ++i) po.ranks.push_back(static_cast<std::uint32_t>(i));
            pub.emplace(rr::RemotePublisher::start(ring, 1, po));
            ep.put(pub->endpoint());
            if (pub->wait_ready(30s) != ringcast::Status::ok) std::abort();
        } else {
            ep.put("-");
        }
        std::vector<double> rtts;
        std::byte msg[64] = {};
        for (int i = 0; i < n + 1000; ++i) {
            const auto t0 = Clock::now();
            if (w.write(msg, 10s, i) != ringcast::Status::ok) std::abort();
            if (col.collect_all(i, 10s).status != ringcast::Status::ok) std::abort();
            if (i >= 1000) rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        res.put(std::to_string(median(rtts)));
        w.close();
        if (pub) (void)pub->drain(10s);
    }));
    const std::string e = ep.get();
    kids.push_back(child([&] {
        ringcast::ReaderOptions o;
        o.create_timeout = 10s;
        auto r = ringcast::Reader::attach(ring, 0, o);
        auto g = ringcast::GatherWorker::attach(gather, 0);
        for (;;) {
            const ringcast::Message m = r.peek(30s);
            if (m.status != ringcast::Status::ok) break;
            const std::uint64_t tag = m.tag;
            r.release();
            std::byte reply[64] = {};
            if (g.reply(tag, reply, 10s) != ringcast::Status::ok) std::abort();
        }
    }));
    for (int i = 0; i < remote; ++i)
        kids.push_back(child([&, i] {
            auto r = rr::RemoteReader::connect(e, static_cast<std::uint32_t>(i));
            for (;;) {
                const ringcast::Message m = r.peek(30s);
                if (m.status != ringcast::Status::ok) break;
                r.release();
            }
        }));
    const double v = std::stod(res.get());
    for (const pid_t p : kids) reap(p);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
    const int n = argc > 2 ? std::atoi(argv[2]) : 10000;
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    double load[3] = {0, 0, 0};
    (void)::getloadavg(load, 3);
    std::printf("ringcast-remote-bench: %d repetitions, %d round trips each, %ld cores, load average %.2f %.2f %.2f "
                "(medians per repetition)\n", reps, n, cores, load[0], load[1], load[2]);
    std::printf("%-44s %12s %12s\n", "row", "value", "vs floor");
    std::fflush(stdout);  // before any fork: a child must not flush a copy of it
    std::vector<double> rtt_ratio, fixed_ratio, stream_ratio, local_ratio;
    const auto verdict = [](bool met) { return met ? "met" : "MISSED"; };
    for (int rep = 0; rep < reps; ++rep) {
        const double tcp = zmq_rtt_us("tcp://127.0.0.1:*", n);
        const double ipc = zmq_rtt_us("ipc:///tmp/rc-rbench-" + std::to_string(::getpid()) + ".ipc", n);
        const double rtt = remote_rtt_us(n);
        const double rtt_fixed = remote_rtt_us(n, true);
        const double zs = zmq_stream_mib_s(400, 1 << 20);
        const double rs = remote_stream_mib_s(400, 1 << 20);
        const double l0 = local_rtt_us(n, 0);
        const double l2 = local_rtt_us(n, 2);
        std::printf("rep %d\n", rep + 1);
        std::printf("  %-42s %9.1f us\n", "zmq floor RTT tcp 64 B", tcp);
        std::printf("  %-42s %9.1f us\n", "zmq floor RTT ipc 64 B", ipc);
        rtt_ratio.push_back(rtt / tcp);
        stream_ratio.push_back(rs / zs);
        local_ratio.push_back(l2 / l0);
        std::printf("  %-42s %9.1f us %9.2fx (target <= 1.2x: %s)\n", "remote step RTT (broadcast + reply)", rtt,
                    rtt / tcp, verdict(rtt / tcp <= 1.2));
        std::printf("  %-42s %9.1f us %9.2fx (target <= 1.2x: %s)\n", "  same, fixed 10 us spin (spin_max 0)",
                    rtt_fixed, rtt_fixed / tcp, verdict(rtt_fixed / tcp <= 1.2));
        fixed_ratio.push_back(rtt_fixed / tcp);
        std::printf("  %-42s %9.0f MiB/s\n", "zmq floor 1 MiB stream tcp", zs);
        std::printf("  %-42s %9.0f MiB/s %6.2fx (target >= 0.8x: %s)\n", "remote 1 MiB stream", rs, rs / zs,
                    verdict(rs / zs >= 0.8));
        std::printf("  %-42s %9.1f us\n", "local step RTT, no remote readers", l0);
        std::printf("  %-42s %9.1f us %9.2fx (target <= 1.1x: %s)\n", "local step RTT, 2 remote readers attached", l2,
                    l2 / l0, verdict(l2 / l0 <= 1.1));
        std::fflush(stdout);
    }
    // The summary: the median ratio over the repetitions (each ratio taken within one repetition, so
    // a repetition slowed by other load slows its floor too).
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
    };
    (void)::getloadavg(load, 3);
    std::printf("summary over %d repetitions (median ratio; load average now %.2f %.2f %.2f)\n", reps, load[0], load[1],
                load[2]);
    std::printf("  remote step RTT / zmq tcp floor RTT        %6.2fx (target <= 1.2x: %s)\n", median(rtt_ratio),
                verdict(median(rtt_ratio) <= 1.2));
    std::printf("  same, fixed 10 us spin (spin_max 0)        %6.2fx (target <= 1.2x: %s)\n", median(fixed_ratio),
                verdict(median(fixed_ratio) <= 1.2));
    std::printf("  remote 1 MiB stream / zmq tcp floor stream %6.2fx (target >= 0.8x: %s)\n", median(stream_ratio),
                verdict(median(stream_ratio) >= 0.8));
    std::printf("  local RTT with 2 remote readers / without  %6.2fx (target <= 1.1x: %s)\n", median(local_ratio),
                verdict(median(local_ratio) <= 1.1));
    return 0;
}
