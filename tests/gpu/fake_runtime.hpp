// A Runtime table whose "device" is a host arena and whose copies land LATE: each memcpy_async is done
// by a worker thread after a delay, and an event completes only when the copies queued before it are
// done — the asynchrony of a real DMA, on a machine without a GPU. `lying_events` makes every event
// report completion at once: the negative control (code that trusts it commits unlanded bytes).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "ringcast/gpu/runtime.hpp"

namespace ringcast::gpu::test {

struct FakeDevice {
    static constexpr int kNotReady = 600;
    std::vector<std::byte> arena = std::vector<std::byte>(64 << 20);  // "device memory"
    std::chrono::microseconds delay{1500};
    std::atomic<bool> lying_events{false};
    std::atomic<std::uint64_t> queued{0}, done{0}, registered{0}, unregistered{0};
    // memcpy_async number `fail_copy_number` (1-based, 0: none) is refused with kCopyFailed.
    static constexpr int kCopyFailed = 601;
    std::atomic<std::uint64_t> fail_copy_number{0}, copy_calls{0};
    // The most copies queued and not yet done at once (a reader's window of copies in flight).
    std::atomic<std::uint64_t> max_in_flight{0};
    // Copies whose host side lies outside [host_lo, host_hi) (a staged copy, not one from the ring).
    const std::byte* host_lo = nullptr;
    const std::byte* host_hi = nullptr;
    std::atomic<std::uint64_t> host_side_outside{0};

    struct Copy {
        void* dst;
        const void* src;
        std::size_t n;
    };
    std::mutex m;
    std::condition_variable cv;
    std::deque<Copy> copies;
    bool stop = false;
    std::thread worker{[this] { run(); }};

    ~FakeDevice() {
        {
            std::lock_guard g(m);
            stop = true;
        }
        cv.notify_all();
        worker.join();
    }
    void run() {
        std::unique_lock g(m);
        for (;;) {
            cv.wait(g, [&] { return stop || !copies.empty(); });
            if (copies.empty()) return;
            const Copy c = copies.front();
            g.unlock();
            std::this_thread::sleep_for(delay);
            std::memcpy(c.dst, c.src, c.n);
            g.lock();
            copies.pop_front();
            done.fetch_add(1, std::memory_order_release);
        }
    }
    bool is_device(const void* p) const {
        const auto* b = static_cast<const std::byte*>(p);
        return b >= arena.data() && b < arena.data() + arena.size();
    }
};

inline FakeDevice* g_fake = nullptr;  // the tables below are plain function pointers

struct FakeEvent {
    std::uint64_t target = 0;
};

inline const Runtime& fake_runtime() {
    static const Runtime table{
        "FAKE",
        FakeDevice::kNotReady,
        712,
        713,
        [](int* n) { *n = 1; return 0; },
        [](int* v) { *v = 13000; return 0; },
        [](int* v) { *v = 13000; return 0; },
        [](int) { return 0; },
        [](int* d) { *d = 0; return 0; },
        [](int* v, Attribute, int, bool* supported) { *v = 1; *supported = true; return 0; },
        [](char* out, std::size_t n, int) { std::snprintf(out, n, "fake"); return 0; },
        [](void*, std::size_t, bool) { g_fake->registered++; return 0; },
        [](void*) { g_fake->unregistered++; return 0; },
        [](void** d, void* h) { *d = h; return 0; },
        [](void* dst, const void* src, std::size_t n, CopyKind kind, Stream) {
            if (++g_fake->copy_calls == g_fake->fail_copy_number.load()) return FakeDevice::kCopyFailed;
            const auto* host = static_cast<const std::byte*>(kind == CopyKind::host_to_device ? src : dst);
            if (g_fake->host_lo != nullptr && (host < g_fake->host_lo || host + n > g_fake->host_hi))
                g_fake->host_side_outside++;
            {
                std::lock_guard g(g_fake->m);
                g_fake->copies.push_back({dst, src, n});
                g_fake->queued++;
                const std::uint64_t ahead = g_fake->queued.load() - g_fake->done.load();
                if (ahead > g_fake->max_in_flight.load()) g_fake->max_in_flight = ahead;
            }
            g_fake->cv.notify_all();
            return 0;
        },
        [](Event* e) { *e = new FakeEvent; return 0; },
        [](Event e, Stream) { static_cast<FakeEvent*>(e)->target = g_fake->queued.load(); return 0; },
        [](Event e) {
            if (g_fake->lying_events.load()) return 0;
            return g_fake->done.load(std::memory_order_acquire) >= static_cast<FakeEvent*>(e)->target
                       ? 0 : FakeDevice::kNotReady;
        },
        [](Event e) { delete static_cast<FakeEvent*>(e); return 0; },
        [](void**, std::size_t) { return 2; },
        [](void*) { return 0; },
        [](void*, int, std::size_t) { return 0; },
        [](void**, std::size_t) { return 2; },
        [](void*) { return 0; },
        [](Stream) { return 0; },
        [](const void* p, bool* d) { *d = g_fake->is_device(p); return 0; },
        [] { return 0; },
        [](int) { return "fakeError"; },
        [](int) { return "fake error"; },
        [](int) { return Reason::runtime; },
    };
    return table;
}

}  // namespace ringcast::gpu::test
