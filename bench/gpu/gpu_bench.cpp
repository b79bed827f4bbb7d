// GPU interop benchmark (one run prints every repeat, then the ratios against baselines measured in the
// same run, alternating the variants within each repeat):
//   bandwidth device -> host at 64 KiB, 1 MiB, 16 MiB, 256 MiB:
//     pinned    cudaMemcpyAsync into a cudaMallocHost buffer (the ceiling)
//     pageable  cudaMemcpyAsync into a malloc'd, pre-touched buffer (what an unregistered ring gets)
//     ring      cudaMemcpyAsync into the registered segment's data area (HostRegistration)
//     publish   DeviceWriter::publish into the ring, another process draining it (reserve -> copy ->
//               event -> commit; 256 MiB goes through the fragment path in 2 records)
//   bandwidth host -> device (the reader's direction): pinned / pageable / ring
//   latency of a 4 KiB hop device -> ring -> other process -> device (half a round trip) against two
//     bare cudaMemcpyAsync + sync (D2H then H2D through pinned memory) in one process; the same hop
//     with the echo in a thread of this process (one CUDA context: no GPU context switch between
//     processes) separates the ring's cost from the GPU's time-slicing of two processes.
//   receive of large messages, device -> ring -> device (a writer thread publishing, a reader thread
//     receiving; 128 MiB messages): one record (1 GiB ring) vs 8 MiB records through a 32 MiB ring, by
//     DeviceReader::receive (one DMA per record, a window of copies in flight) and, as before that
//     existed, by Reader::peek's reassembly into the heap + one copy from there.
// Usage: ringcast_gpu_bench [repeats=3] [--hop-only SETUP]. --hop-only measures the 4 KiB hop alone and
// labels its rows SETUP (device_run.sh runs it again under the setups a user can choose: MPS, ...).
// Environment, applied in every process of the run: RINGCAST_GPU_BENCH_SCHED=spin|yield|blocking
// (cudaSetDeviceFlags before any other CUDA call), RINGCAST_GPU_BENCH_PRIORITY=high (the streams get
// the device's greatest priority). Exits 0 with a message where no GPU is usable.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "ringcast/gpu/capabilities.hpp"
#include "ringcast/gpu/device_reader.hpp"
#include "ringcast/gpu/device_writer.hpp"

extern char** environ;

using namespace ringcast;
using namespace ringcast::gpu;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

#define CU(call)                                                                                      \
    do {                                                                                              \
        const cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(2);                                                                             \
        }                                                                                             \
    } while (0)

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Iterations so each measurement moves ~1 GB (at least 20 copies).
int iterations_for(std::size_t n) { return static_cast<int>(std::max<std::size_t>(20, (1ull << 30) / n)); }

double copy_gbps(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    CU(cudaMemcpyAsync(dst, src, n, kind, s));  // warm-up
    CU(cudaStreamSynchronize(s));
    const int iters = iterations_for(n);
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
        CU(cudaMemcpyAsync(dst, src, n, kind, s));
        CU(cudaStreamSynchronize(s));  // each copy complete before the next, as publish() needs
    }
    return double(n) * iters / seconds_since(t0) / 1e9;
}

std::string seg_name(const char* what) { return std::string("rc-gpubench-") + what + "-" + std::to_string(getpid()); }

pid_t spawn_self(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"/proc/self/exe"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return -1;
    return pid;
}

int wait_exit(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// RINGCAST_GPU_BENCH_SCHED / _PRIORITY (see the top): what a user can set in their own processes.
void apply_scheduling() {
    const char* sched = std::getenv("RINGCAST_GPU_BENCH_SCHED");
    if (sched == nullptr) return;
    const std::string v = sched;
    const unsigned flag = v == "spin" ? cudaDeviceScheduleSpin
                          : v == "yield" ? cudaDeviceScheduleYield
                          : v == "blocking" ? cudaDeviceScheduleBlockingSync
                                            : cudaDeviceScheduleAuto;
    CU(cudaSetDeviceFlags(flag));
}

cudaStream_t make_stream() {
    cudaStream_t s{};
    const char* prio = std::getenv("RINGCAST_GPU_BENCH_PRIORITY");
    if (prio != nullptr && std::string(prio) == "high") {
        int least = 0, greatest = 0;
        CU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CU(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
    } else {
        CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    return s;
}

WaitOptions spinning() {
    WaitOptions w;
    w.kind = WaitKind::spin_yield;  // the GPU side is polled too: compare like with like
    return w;
}

// ---- roles (separate processes) -----------------------------------------------------------------
int drain_role(const std::string& name) {  // peeks and releases every message, touching no byte
    ReaderOptions ro;
    ro.create_timeout = 30s;
    ro.wait = spinning();
    Reader r = Reader::attach(name, 0, ro);
    for (;;) {
        const Message m = r.peek(60s);
        if (m.status != Status::ok) return m.status == Status::closed ? 0 : 1;
        r.release();
    }
}

int echo_role(const std::string& ping, const std::string& pong, std::size_t n) {  // ring -> device -> ring
    apply_scheduling();  // the same setup as the measuring process
    ReaderOptions ro;
    ro.create_timeout = 30s;
    ro.wait = spinning();
    Reader r = Reader::attach(ping, 0, ro);
    SegmentOptions so;
    so.capacity = 1 << 20;
    WriterOptions wo;
    wo.wait = spinning();
    Writer w = Writer::create(pong, so, wo);
    DeviceReader dr(r, cuda());
    DeviceWriter dw(w, cuda());
    cudaStream_t s = make_stream();
    void* buf = nullptr;
    CU(cudaMalloc(&buf, n));
    for (;;) {
        const Received got = dr.receive(buf, n, s, 60s);
        if (got.status != Status::ok) break;
        if (dw.publish(buf, got.size, s, 60s, got.tag) != Status::ok) return 1;
    }
    CU(cudaFree(buf));
    return 0;
}

struct Table {
    std::map<std::string, std::vector<double>> runs;  // "d2h 1 MiB ring" -> per-repeat values
    void add(const std::string& key, double v) { runs[key].push_back(v); }
};

std::string size_label(std::size_t n) {
    return n >= (1 << 20) ? std::to_string(n >> 20) + " MiB" : std::to_string(n >> 10) + " KiB";
}

// ---- 4 KiB hop ------------------------------------------------------------------------------------
struct HopRuns {
    std::vector<double> bare, p50, p99, thread_p50, thread_p99;
};

HopRuns measure_hops(int repeats, void* dev, void* pinned, cudaStream_t s) {
    const std::size_t hop_n = 4096;
    const int trips = 2000;
    HopRuns h;
    for (int rep = 0; rep < repeats; ++rep) {
        std::vector<double> lat;
        for (int i = 0; i < trips; ++i) {
            const auto t0 = Clock::now();
            CU(cudaMemcpyAsync(pinned, dev, hop_n, cudaMemcpyDeviceToHost, s));
            CU(cudaStreamSynchronize(s));
            CU(cudaMemcpyAsync(dev, pinned, hop_n, cudaMemcpyHostToDevice, s));
            CU(cudaStreamSynchronize(s));
            lat.push_back(seconds_since(t0) * 1e6);
        }
        h.bare.push_back(median(lat));
        for (const bool in_process : {false, true}) {
            const std::string tagname = std::to_string(rep) + (in_process ? "t" : "p");
            const std::string ping = seg_name("ping") + "-" + tagname;
            const std::string pong = seg_name("pong") + "-" + tagname;
            SegmentOptions so;
            so.capacity = 1 << 20;
            WriterOptions wo;
            wo.wait = spinning();
            Writer w = Writer::create(ping, so, wo);
            pid_t echo = -1;
            std::thread echo_thread;
            if (in_process) {
                echo_thread = std::thread([&] { (void)echo_role(ping, pong, hop_n); });
            } else {
                echo = spawn_self({"--echo", ping, pong, std::to_string(hop_n)});
            }
            ReaderOptions ro;
            ro.create_timeout = 30s;
            ro.wait = spinning();
            Reader r = Reader::attach(pong, 0, ro);
            std::vector<double> hops;
            {
                DeviceWriter dw(w, cuda());
                DeviceReader dr(r, cuda());
                void* back = nullptr;
                CU(cudaMalloc(&back, hop_n));
                for (int i = -100; i < trips; ++i) {  // 100 warm-up trips
                    const auto t0 = Clock::now();
                    if (dw.publish(dev, hop_n, s, 10s, std::uint64_t(i)) != Status::ok) std::exit(4);
                    if (dr.receive(back, hop_n, s, 10s).status != Status::ok) std::exit(4);
                    if (i >= 0) hops.push_back(seconds_since(t0) * 1e6 / 2);
                }
                CU(cudaFree(back));
            }
            w.close();
            if (in_process) {
                echo_thread.join();
            } else {
                wait_exit(echo);
            }
            std::sort(hops.begin(), hops.end());
            (in_process ? h.thread_p50 : h.p50).push_back(hops[hops.size() / 2]);
            (in_process ? h.thread_p99 : h.p99).push_back(hops[hops.size() * 99 / 100]);
        }
    }
    return h;
}

void print_hops(const HopRuns& h, const std::string& setup, bool header) {
    if (header) {
        std::printf("\n## 4 KiB hop device -> ring -> other process -> device, µs (per repeat)\n");
        std::printf("# setup 'default': the processes as they are. A row 'MPS ...' (device_run.sh appends it) runs the same\n"
                    "# benchmark with the CUDA MPS daemon started first (nvidia-cuda-mps-control -d; docs/gpu.md): the\n"
                    "# processes then share one GPU context instead of the GPU switching between theirs.\n");
        std::printf("| setup | repeat | hop p50 | hop p99 | hop p50, echo in a thread | its p99 | two bare copies + syncs p50 | "
                    "hop / (2 x bare) | thread hop / (2 x bare) |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    for (std::size_t rep = 0; rep < h.p50.size(); ++rep)
        std::printf("| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx |\n", setup.c_str(), rep, h.p50[rep],
                    h.p99[rep], h.thread_p50[rep], h.thread_p99[rep], h.bare[rep], h.p50[rep] / (2 * h.bare[rep]),
                    h.thread_p50[rep] / (2 * h.bare[rep]));
}

// The setup label of the rows: what the user did, plus the env knobs of this run.
std::string setup_label(std::string base) {
    if (const char* v = std::getenv("RINGCAST_GPU_BENCH_SCHED")) base += std::string(", cudaDeviceSchedule ") + v;
    if (const char* v = std::getenv("RINGCAST_GPU_BENCH_PRIORITY")) base += std::string(", stream priority ") + v;
    return base;
}

// ---- large messages: device -> ring -> device, writer and reader threads --------------------------
enum class ReceiveWay { records, reassembled };

double pipe_gbps(std::size_t ring_capacity, std::size_t n, int iters, ReceiveWay way, void* src, void* dst) {
    static int serial = 0;
    const std::string name = seg_name("pipe") + "-" + std::to_string(serial++);
    SegmentOptions so;
    so.capacity = ring_capacity;
    WriterOptions wo;
    wo.wait = spinning();
    Writer w = Writer::create(name, so, wo);
    ReaderOptions ro;
    ro.wait = spinning();
    Reader r = Reader::attach(name, 0, ro);
    std::thread writer([&] {
        cudaStream_t ws = make_stream();
        {
            DeviceWriter dw(w, cuda());
            for (int i = 0; i <= iters; ++i)
                if (dw.publish(src, n, ws, 60s, std::uint64_t(i)) != Status::ok) std::exit(5);
        }
        CU(cudaStreamDestroy(ws));
    });
    cudaStream_t rs = make_stream();
    double secs = 0;
    {
        DeviceReader dr(r, cuda());
        const auto one = [&] {
            if (way == ReceiveWay::records) {
                if (dr.receive(dst, n, rs, 60s).status != Status::ok) std::exit(5);
                return;
            }
            const Message m = r.peek(60s);  // fragments reassembled into the Reader's heap buffer
            if (m.status != Status::ok) std::exit(5);
            CU(cudaMemcpyAsync(dst, m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice, rs));
            CU(cudaStreamSynchronize(rs));
            r.release();
        };
        one();  // warm-up (and the writer's registration)
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) one();
        secs = seconds_since(t0);
    }
    writer.join();
    CU(cudaStreamDestroy(rs));
    return double(n) * iters / secs / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::string(argv[1]) == "--drain") return drain_role(argv[2]);
    if (argc >= 5 && std::string(argv[1]) == "--echo") return echo_role(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10));
    const int repeats = argc >= 2 ? std::atoi(argv[1]) : 3;
    const bool hop_only = argc >= 4 && std::string(argv[2]) == "--hop-only";

    const Capabilities caps = probe(cuda());
    if (!caps.usable) {
        std::printf("ringcast_gpu_bench: no usable GPU, nothing measured: %s\n", caps.summary().c_str());
        return 0;
    }
    apply_scheduling();
    if (hop_only) {
        cudaStream_t s = make_stream();
        void* dev = nullptr;
        void* pinned = nullptr;
        CU(cudaMalloc(&dev, 4096));
        CU(cudaMallocHost(&pinned, 4096));
        print_hops(measure_hops(repeats, dev, pinned, s), setup_label(argv[3]), false);
        CU(cudaFreeHost(pinned));
        CU(cudaFree(dev));
        return 0;
    }
    std::printf("# %s\n# repeats %d; each value: ~1 GB of copies (>= 20), GB/s = 1e9 B/s\n", caps.summary().c_str(), repeats);

    const std::vector<std::size_t> sizes = {64 << 10, 1 << 20, 16 << 20, 256 << 20};
    const std::size_t max_n = sizes.back();
    cudaStream_t s = make_stream();
    void* dev = nullptr;
    void* pinned = nullptr;
    CU(cudaMalloc(&dev, max_n));
    CU(cudaMemset(dev, 0x5a, max_n));
    CU(cudaMallocHost(&pinned, max_n));
    std::vector<std::byte> pageable(max_n, std::byte{1});  // touched: no first-fault cost in the numbers

    // The ring for raw copies (registered, no reader) and the one publish() writes with a drainer.
    SegmentOptions raw_so;
    raw_so.capacity = 512ull << 20;
    Writer raw = Writer::create(seg_name("raw"), raw_so);
    const HostRegistration raw_reg = HostRegistration::of(cuda(), raw.segment());
    std::byte* ring = raw.segment().data();

    SegmentOptions pub_so;
    // Records up to 512 MiB - 16 B: every size is one record, one DMA. (With a 1 GiB ring, 256 MiB
    // went in 2 fragments and ran at 5.9-10.9 GB/s: the reader's reassembly copy, not the DMA, bounds
    // fragmented messages.)
    pub_so.capacity = 2ull << 30;
    WriterOptions pub_wo;
    pub_wo.wait = spinning();
    const std::string pub_name = seg_name("pub");
    Writer pub = Writer::create(pub_name, pub_so, pub_wo);
    const pid_t drainer = spawn_self({"--drain", pub_name});
    Table t;
    {
        DeviceWriter dw(pub, cuda());
        for (int rep = 0; rep < repeats; ++rep) {
            for (const std::size_t n : sizes) {
                const std::string L = size_label(n);
                t.add("d2h " + L + " pinned", copy_gbps(pinned, dev, n, cudaMemcpyDeviceToHost, s));
                t.add("d2h " + L + " pageable", copy_gbps(pageable.data(), dev, n, cudaMemcpyDeviceToHost, s));
                t.add("d2h " + L + " ring", copy_gbps(ring, dev, n, cudaMemcpyDeviceToHost, s));
                const int iters = iterations_for(n);
                if (dw.publish(dev, n, s, 60s) != Status::ok) return 3;  // warm-up
                const auto t0 = Clock::now();
                for (int i = 0; i < iters; ++i)
                    if (dw.publish(dev, n, s, 60s, i) != Status::ok) return 3;
                t.add("d2h " + L + " publish", double(n) * iters / seconds_since(t0) / 1e9);
                t.add("h2d " + L + " pinned", copy_gbps(dev, pinned, n, cudaMemcpyHostToDevice, s));
                t.add("h2d " + L + " pageable", copy_gbps(dev, pageable.data(), n, cudaMemcpyHostToDevice, s));
                t.add("h2d " + L + " ring", copy_gbps(dev, ring, n, cudaMemcpyHostToDevice, s));
            }
        }
    }
    pub.close();
    const int drain_rc = wait_exit(drainer);

    // ---- large messages through a small ring ---------------------------------------------------------
    const std::size_t pipe_n = 128 << 20;
    void* dev_dst = nullptr;
    CU(cudaMalloc(&dev_dst, pipe_n));
    std::vector<double> pipe_one, pipe_records, pipe_reassembled;
    for (int rep = 0; rep < repeats; ++rep) {
        pipe_one.push_back(pipe_gbps(1ull << 30, pipe_n, 8, ReceiveWay::records, dev, dev_dst));
        pipe_records.push_back(pipe_gbps(32 << 20, pipe_n, 8, ReceiveWay::records, dev, dev_dst));
        pipe_reassembled.push_back(pipe_gbps(32 << 20, pipe_n, 4, ReceiveWay::reassembled, dev, dev_dst));
    }
    CU(cudaFree(dev_dst));

    // ---- latency: 4 KiB hop ---------------------------------------------------------------------
    const HopRuns hops = measure_hops(repeats, dev, pinned, s);

    // ---- report ------------------------------------------------------------------------------------
    const auto runs_of = [&](const std::string& k) {
        std::string s2;
        for (double v : t.runs[k]) {
            char b[32];
            std::snprintf(b, sizeof b, "%s%.2f", s2.empty() ? "" : " ", v);
            s2 += b;
        }
        return s2;
    };
    for (const char* dir : {"d2h", "h2d"}) {
        std::printf("\n## %s bandwidth, GB/s: median (every repeat)\n", dir);
        std::printf("| size | pinned (ceiling) | pageable | ring (registered) | publish() | ring/pinned | ring/pageable | publish/pinned | publish/pageable |\n|---|---|---|---|---|---|---|---|---|\n");
        for (const std::size_t n : sizes) {
            const std::string L = size_label(n);
            const std::string k = std::string(dir) + " " + L;
            const double pin = median(t.runs[k + " pinned"]), pg = median(t.runs[k + " pageable"]),
                         rg = median(t.runs[k + " ring"]);
            const bool has_pub = t.runs.count(k + " publish") != 0;
            const double pb = has_pub ? median(t.runs[k + " publish"]) : 0;
            std::printf("| %s | %.2f (%s) | %.2f (%s) | %.2f (%s) | ", L.c_str(), pin, runs_of(k + " pinned").c_str(), pg,
                        runs_of(k + " pageable").c_str(), rg, runs_of(k + " ring").c_str());
            if (has_pub) std::printf("%.2f (%s) | ", pb, runs_of(k + " publish").c_str()); else std::printf("- | ");
            std::printf("%.2fx | %.2fx | ", rg / pin, rg / pg);
            if (has_pub) std::printf("%.2fx | %.2fx |\n", pb / pin, pb / pg); else std::printf("- | - |\n");
        }
    }
    const auto list = [](const std::vector<double>& v) {
        std::string out;
        for (double x : v) {
            char b[32];
            std::snprintf(b, sizeof b, "%s%.2f", out.empty() ? "" : " ", x);
            out += b;
        }
        return out;
    };
    std::printf("\n## 128 MiB messages device -> ring -> device (writer and reader threads), GB/s: median (every repeat)\n");
    std::printf("| ring | reader | GB/s | / one record |\n|---|---|---|---|\n");
    const double one = median(pipe_one);
    std::printf("| 1 GiB (one record) | receive() | %.2f (%s) | 1.00x |\n", one, list(pipe_one).c_str());
    std::printf("| 32 MiB (17 records of 8 MiB) | receive(): one DMA per record, window %zu | %.2f (%s) | %.2fx |\n",
                DeviceReader::kCopyWindow, median(pipe_records), list(pipe_records).c_str(), median(pipe_records) / one);
    std::printf("| 32 MiB (17 records of 8 MiB) | Reader::peek reassembly + one copy (the old receive) | %.2f (%s) | %.2fx |\n",
                median(pipe_reassembled), list(pipe_reassembled).c_str(), median(pipe_reassembled) / one);
    std::printf("\n# drainer exit %d; targets: ring and publish >= 0.95x pinned and >= 1.5x pageable at >= 1 MiB; hop <= 2x two bare copies\n",
                drain_rc);
    // Last, so that device_run.sh can append the rows of the setups a user chooses (MPS) to this table.
    print_hops(hops, setup_label("default: two processes, each its own CUDA context"), true);
    CU(cudaFreeHost(pinned));
    CU(cudaFree(dev));
    return 0;
}
