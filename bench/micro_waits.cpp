// Writer-side and reader-side waits, per strategy. A thread stands in for the peer process (the
// futex words are in the shared mapping, so the kernel path is the cross-process one).
//
// BM_WriterSpaceWait: the ring is full; a reader thread releases one message every `interval_us`.
//   Each iteration is one publish that must wait for that release. Reported: time per publish
//   (≈ the interval) and the writer thread's CPU per publish and CPU% — what waiting costs.
// BM_ReaderWakeLatency: the reader is blocked (the writer pauses 200 us first, past hybrid's spin
//   budget); the writer publishes a message carrying its CLOCK_MONOTONIC send time; the time is from
//   that stamp to the reader's return from peek(). Manual time = that latency; p50/p99 as counters.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "micro_common.hpp"

namespace ringcast::bench {
namespace {

using namespace std::chrono_literals;

void BM_WriterSpaceWait(benchmark::State& state, WaitKind kind) {
    const auto interval = std::chrono::microseconds(state.range(0));
    BenchName name("space");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024}, writer_options(kind));
    auto r = Reader::attach(name, 0, reader_options(kind));
    std::array<std::byte, 64> msg{};
    while (w.write(msg, 0ns) == Status::ok) {  // fill the ring: every later write waits for a release
    }
    std::atomic<bool> stop{false};
    std::thread reader([&] {
        auto next = std::chrono::steady_clock::now();
        while (!stop.load(std::memory_order_relaxed)) {
            next += interval;
            std::this_thread::sleep_until(next);
            const Message m = r.peek(100ms);
            if (m.status != Status::ok) continue;
            r.release();
        }
    });
    const std::uint64_t waits0 = w.space_waits();
    const std::int64_t cpu0 = thread_cpu_ns(), wall0 = mono_ns();
    for (auto _ : state) {
        if (w.write(msg, 5s) != Status::ok) {
            state.SkipWithError("write timed out: the reader thread stopped releasing");
            break;
        }
    }
    const std::int64_t cpu = thread_cpu_ns() - cpu0, wall = mono_ns() - wall0;
    stop.store(true);
    reader.join();
    const double n = double(std::max<benchmark::IterationCount>(state.iterations(), 1));
    state.counters["writer_cpu_ns_per_publish"] = double(cpu) / n;
    state.counters["writer_cpu_pct"] = wall > 0 ? 100.0 * double(cpu) / double(wall) : 0.0;
    state.counters["futex_waits_per_publish"] = double(w.space_waits() - waits0) / n;
    state.SetItemsProcessed(state.iterations());
}

void BM_ReaderWakeLatency(benchmark::State& state, WaitKind kind) {
    BenchName name("wake");
    auto w = Writer::create(name, {.readers = 1, .capacity = 64 * 1024}, writer_options(kind));
    auto r = Reader::attach(name, 0, reader_options(kind));
    std::atomic<std::uint64_t> done{0};
    std::atomic<std::int64_t> latency{0};
    std::thread reader([&] {
        for (std::uint64_t seq = 1;; ++seq) {
            const Message m = r.peek(10s);
            const std::int64_t t = mono_ns();
            if (m.status != Status::ok) return;
            std::int64_t sent = 0;
            std::memcpy(&sent, m.bytes.data(), sizeof sent);
            r.release();
            latency.store(t - sent, std::memory_order_relaxed);
            done.store(seq, std::memory_order_release);
        }
    });
    std::vector<double> samples;
    std::uint64_t seq = 0;
    for (auto _ : state) {
        std::this_thread::sleep_for(200us);  // let the reader fall asleep (hybrid spins 10 us)
        const std::int64_t now = mono_ns();
        if (w.write({reinterpret_cast<const std::byte*>(&now), sizeof now}, 5s) != Status::ok) {
            state.SkipWithError("write failed");
            break;
        }
        ++seq;
        while (done.load(std::memory_order_acquire) != seq) std::this_thread::yield();
        const double lat = double(latency.load(std::memory_order_relaxed));
        samples.push_back(lat);
        state.SetIterationTime(lat * 1e-9);
    }
    w.close();
    reader.join();
    std::sort(samples.begin(), samples.end());
    if (!samples.empty()) {
        state.counters["p50_ns"] = samples[samples.size() / 2];
        state.counters["p99_ns"] = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
    }
    state.counters["reader_futex_waits"] = double(r.waits());
}

BENCHMARK_CAPTURE(BM_WriterSpaceWait, spin, WaitKind::spin)->ArgName("interval_us")->Arg(100)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_WriterSpaceWait, spin_yield, WaitKind::spin_yield)->ArgName("interval_us")->Arg(100)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_WriterSpaceWait, futex, WaitKind::futex)->ArgName("interval_us")->Arg(100)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_WriterSpaceWait, hybrid, WaitKind::hybrid)->ArgName("interval_us")->Arg(100)->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_CAPTURE(BM_ReaderWakeLatency, spin, WaitKind::spin)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ReaderWakeLatency, spin_yield, WaitKind::spin_yield)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ReaderWakeLatency, futex, WaitKind::futex)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ReaderWakeLatency, hybrid, WaitKind::hybrid)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ringcast::bench
