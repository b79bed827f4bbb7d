// Fast path: the cost of one publish with 1, 2, 4, 8 readers attached and none asleep. The protocol
// promises it does not grow with N: a release store of the tail, a fence and one load of
// reader_sleepers, no system call; the reader heads are scanned only when the writer's cached free
// space runs out (once per ~capacity of bytes). Readers are drained outside the timed region.
#include <array>
#include <chrono>

#include <benchmark/benchmark.h>

#include "micro_common.hpp"

namespace ringcast::bench {
namespace {

using namespace std::chrono_literals;
constexpr int kDrainEvery = 4096;  // 4096 x 80 B records = 320 KiB of a 1 MiB ring

void drain(std::vector<Reader>& readers) {
    for (auto& r : readers)
        for (;;) {
            const Message m = r.peek(0ns);
            if (m.status != Status::ok) break;
            r.release();
        }
}

template <class Publish>
void run_fast_path(benchmark::State& state, Publish&& publish) {
    const auto n = static_cast<std::uint32_t>(state.range(0));
    BenchName name("fast");
    auto w = Writer::create(name, {.readers = n, .capacity = 1 << 20}, writer_options(WaitKind::hybrid));
    std::vector<Reader> readers;
    for (std::uint32_t r = 0; r < n; ++r) readers.push_back(Reader::attach(name, r, reader_options(WaitKind::hybrid)));
    int since_drain = 0;
    for (auto _ : state) {
        if (!publish(w)) {
            state.SkipWithError("publish did not succeed at once: the ring should never be full here");
            break;
        }
        if (++since_drain == kDrainEvery) {
            state.PauseTiming();
            drain(readers);
            since_drain = 0;
            state.ResumeTiming();
        }
    }
    // "None asleep" is part of what is measured: a wake syscall here would be a protocol bug.
    state.counters["wake_syscalls"] = double(w.wake_calls());
    if (w.wake_calls() != 0) state.SkipWithError("the writer made a wake system call with no reader asleep");
    state.SetItemsProcessed(state.iterations());
}

void BM_PublishFastPath(benchmark::State& state) {
    std::array<std::byte, 64> msg{};
    run_fast_path(state, [&](Writer& w) { return w.write(msg, 1s) == Status::ok; });
}
void BM_ReserveCommitFastPath(benchmark::State& state) {
    run_fast_path(state, [](Writer& w) {
        const Reservation r = w.reserve(64, 1s);
        if (r.status != Status::ok) return false;
        r.bytes[0] = std::byte{1};
        w.commit(64);
        return true;
    });
}

BENCHMARK(BM_PublishFastPath)->ArgName("readers")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ReserveCommitFastPath)->ArgName("readers")->Arg(1)->Arg(8)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace ringcast::bench
