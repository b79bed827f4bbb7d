// CopyCompletion: an async copy and its completion event (the rule is in ringcast/gpu/copy.hpp).
#include "ringcast/gpu/copy.hpp"

#include <chrono>
#include <thread>
#include <utility>

#include <sched.h>

namespace ringcast::gpu {

CopyCompletion::CopyCompletion(const Runtime& rt) : rt_(&rt) {
    check(rt, rt.event_create(&event_), "EventCreateWithFlags(DisableTiming)");
}

CopyCompletion::CopyCompletion(CopyCompletion&& other) noexcept
    : rt_(other.rt_), event_(std::exchange(other.event_, nullptr)), in_flight_(std::exchange(other.in_flight_, false)) {}

CopyCompletion::~CopyCompletion() {
    if (event_ == nullptr) return;
    try {
        if (in_flight_) wait();
    } catch (...) {  // a failed copy: nothing left to wait for
    }
    (void)rt_->event_destroy(event_);
}

void CopyCompletion::start(void* dst, const void* src, std::size_t n, CopyKind kind, Stream stream) {
    if (in_flight_) wait();  // one copy at a time per completion
    check(*rt_, rt_->memcpy_async(dst, src, n, kind, stream), "MemcpyAsync",
          std::to_string(n) + " bytes " + (kind == CopyKind::device_to_host ? "device -> ring" : "ring -> device"));
    check(*rt_, rt_->event_record(event_, stream), "EventRecord");
    in_flight_ = true;
}

void CopyCompletion::mark(Stream stream) {
    if (in_flight_) wait();
    check(*rt_, rt_->event_record(event_, stream), "EventRecord");
    in_flight_ = true;
}

Status CopyCompletion::wait(Deadline deadline) {
    using namespace std::chrono;
    const auto start = steady_clock::now();
    for (;;) {
        const int r = rt_->event_query(event_);
        if (r == 0) {
            in_flight_ = false;
            return Status::ok;
        }
        if (r != rt_->not_ready) {
            in_flight_ = false;
            check(*rt_, r, "EventQuery", "the copy failed");
        }
        const auto now = Clock::now();
        if (deadline == kPollOnly || now >= deadline) return Status::timed_out;
        // Yield-poll through the first 2 ms: a record's DMA lands within that at ~50 GB/s up to ~100
        // MiB, and a nap overshoots (a 20 µs sleep takes 50+ µs here: 16 MiB publishes ran at 0.87x
        // the pinned ceiling with a 50 µs yield phase). Longer waits (the stream's earlier kernels)
        // sleep in short naps instead of burning a core.
        if (steady_clock::now() - start < milliseconds(2)) {
            sched_yield();
        } else {
            std::this_thread::sleep_for(microseconds(20));
        }
    }
}

void CopyCompletion::wait() { (void)wait(kNoDeadline); }

}  // namespace ringcast::gpu
