// Does the hypervisor's pause-loop exiting (PLE) cost a pause-based spin anything on this VM?
//   g++ -O2 -std=c++20 ple_probe.cpp -o ple_probe && ./ple_probe [cpu_a cpu_b]
// 1. The latency of one `pause`, in TSC ticks.
// 2. A loop that reads the TSC for ~1 s in three modes (pause every step; no pause; pause only when
//    >= 300 ticks passed since the last one) and counts the gaps of > 2 us between two reads: time
//    the vCPU did not run. PLE would show as gaps that only the pausing modes have.
// 3. Cross-process detection: a writer process stores its TSC into a shared line every 20 us or every
//    1 ms; the reader spins in each mode and records (TSC when seen - TSC stored). Pinned to cpu_a and
//    cpu_b. The TSC is invariant and synchronised across CPUs on this machine (constant_tsc, nonstop_tsc).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <x86intrin.h>

namespace {

enum class Mode { pause_each, no_pause, pause_spaced };
const char* name(Mode m) {
    return m == Mode::pause_each ? "pause each step" : m == Mode::no_pause ? "no pause" : "pause spaced >=300 ticks";
}

void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) std::perror("sched_setaffinity");
}

double ticks_per_us() {
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::uint64_t c1 = __rdtsc();
    const auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(c1 - c0) / us;
}

inline void step(Mode m, std::uint64_t now, std::uint64_t& last_pause) {
    if (m == Mode::pause_each) {
        _mm_pause();
    } else if (m == Mode::pause_spaced && now - last_pause >= 300) {
        _mm_pause();
        last_pause = now;
    }
}

void gaps(Mode m, double tpu) {
    const std::uint64_t threshold = static_cast<std::uint64_t>(2 * tpu);
    const std::uint64_t start = __rdtsc();
    const std::uint64_t end = start + static_cast<std::uint64_t>(1e6 * tpu);
    std::vector<std::uint64_t> at, len;
    std::uint64_t prev = start, last_pause = start, lost = 0;
    for (;;) {
        const std::uint64_t now = __rdtsc();
        if (now - prev > threshold) {
            at.push_back(now);
            len.push_back(now - prev);
            lost += now - prev;
        }
        prev = now;
        if (now >= end) break;
        step(m, now, last_pause);
    }
    std::vector<double> us;
    for (auto l : len) us.push_back(static_cast<double>(l) / tpu);
    std::sort(us.begin(), us.end());
    double period = 0;
    if (at.size() > 1) {
        std::vector<double> d;
        for (std::size_t i = 1; i < at.size(); ++i) d.push_back(static_cast<double>(at[i] - at[i - 1]) / tpu);
        std::sort(d.begin(), d.end());
        period = d[d.size() / 2];
    }
    const auto q = [&](double f) { return us.empty() ? 0.0 : us[static_cast<std::size_t>(f * (us.size() - 1))]; };
    std::printf("  %-26s gaps>2us: %zu in 1 s, length p50 %.1f p90 %.1f max %.1f us, median spacing %.0f us, "
                "time lost %.2f %%\n",
                name(m), us.size(), q(0.5), q(0.9), us.empty() ? 0.0 : us.back(), period,
                100.0 * static_cast<double>(lost) / (1e6 * tpu));
}

struct alignas(64) Shared {
    std::atomic<std::uint64_t> stamp{0};  // the writer's TSC at the store; its own line
    char pad[56];
    std::atomic<int> phase{0};
    char pad2[60];
    std::atomic<int> acked{0};  // the reader's count of stamps seen: the writer stores the next one only after
};

void detection(Mode m, double tpu, int cpu_w, int cpu_r, int gap_us, int samples) {
    auto* sh = static_cast<Shared*>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (sh) Shared;
    const pid_t pid = fork();
    if (pid == 0) {
        pin(cpu_w);
        while (sh->phase.load() == 0) {
        }
        for (int i = 0; i < samples; ++i) {
            const std::uint64_t until = __rdtsc() + static_cast<std::uint64_t>(gap_us * tpu);
            while (__rdtsc() < until) _mm_pause();
            _mm_lfence();
            sh->stamp.store(__rdtsc(), std::memory_order_release);
            while (sh->acked.load(std::memory_order_acquire) != i + 1) _mm_pause();
        }
        _exit(0);
    }
    pin(cpu_r);
    std::vector<double> lat;
    lat.reserve(samples);
    std::uint64_t seen = 0, last_pause = 0;
    sh->phase.store(1);
    for (int i = 0; i < samples; ++i) {
        for (;;) {
            const std::uint64_t s = sh->stamp.load(std::memory_order_acquire);
            _mm_lfence();  // rdtsc is not ordered after the load without it
            const std::uint64_t now = __rdtsc();
            if (s != seen) {
                // signed: TSCs of two CPUs may disagree by a few ticks
                lat.push_back(static_cast<double>(static_cast<std::int64_t>(now - s)) / tpu * 1000.0);
                seen = s;
                sh->acked.store(i + 1, std::memory_order_release);
                break;
            }
            step(m, now, last_pause);
        }
    }
    waitpid(pid, nullptr, 0);
    munmap(sh, sizeof(Shared));
    std::sort(lat.begin(), lat.end());
    const auto q = [&](double f) { return lat[static_cast<std::size_t>(f * (lat.size() - 1))]; };
    std::printf("  %-26s gap %5d us, %d samples: seen after min %.0f p50 %.0f p90 %.0f p99 %.0f max %.0f ns\n", name(m),
                gap_us, samples, lat.front(), q(0.5), q(0.9), q(0.99), lat.back());
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const int cpu_a = argc > 2 ? std::atoi(argv[1]) : 2;
    const int cpu_b = argc > 2 ? std::atoi(argv[2]) : 3;
    pin(cpu_a);
    const double tpu = ticks_per_us();
    std::printf("TSC %.1f ticks/us; CPUs %d (reader, loops) and %d (writer)\n", tpu, cpu_a, cpu_b);
    for (int round = 0; round < 3; ++round) {
        const std::uint64_t t0 = __rdtsc();
        for (int i = 0; i < 1000000; ++i) _mm_pause();
        std::printf("pause: %.1f ticks each (1e6 in a row, round %d)\n", static_cast<double>(__rdtsc() - t0) / 1e6,
                    round);
    }
    std::printf("gaps in a TSC loop (vCPU not running):\n");
    for (int round = 0; round < 2; ++round)
        for (Mode m : {Mode::pause_each, Mode::no_pause, Mode::pause_spaced}) gaps(m, tpu);
    std::printf("cross-process detection latency:\n");
    for (int gap : {20, 1000})
        for (Mode m : {Mode::pause_each, Mode::no_pause, Mode::pause_spaced})
            detection(m, tpu, cpu_b, cpu_a, gap, gap == 20 ? 20000 : 1000);
    return 0;
}
