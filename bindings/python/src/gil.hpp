// The GIL and the blocking calls of ringcast._core: the Gil holder, the GIL probe, signal checks and the
// Endpoint base class with its sliced wait.
//
// GIL rules, kept by every blocking call of the binding:
//  * Ready data (or free space) is probed first with a zero timeout while the GIL is held: the fast path
//    never drops and re-takes the GIL (re-taking it can cost a whole 5 ms switch interval when the main
//    thread is busy in Python). A gather collect probes with a look that reads no clock
//    (GatherCollector::has_ready) and polls only where it found something.
//  * Only then is the GIL released for the wait. In the main thread the kernel wait ends when a signal
//    handler runs (WaitOptions::end_on_signal: the kernel delivers a process-wide signal such as Ctrl-C's
//    SIGINT to the main thread when it does not block it), and the GIL is re-taken just long enough for
//    PyErr_CheckSignals: KeyboardInterrupt at once. A signal that came while the thread was not in the
//    kernel (while it spun, between slices) or that went to another thread is seen at the end of the
//    slice: kSignalPollInterval for a slice that spins (a spin or spin_yield wait, a hybrid wait's
//    first slice), kMainThreadSlice for one that sleeps from the start; an idle main-thread wait
//    wakes only that often. Other threads wait in slices of the liveness interval (signals are only
//    handled in the main thread).
//  * Copies of large payloads (>= kNoGilCopy) run without the GIL; a message that spans several ring
//    records is received and sent entirely inside one GIL-released region, re-taking the GIL only to
//    allocate its destination objects and to check signals.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // every translation unit sees the same type casters

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "errors.hpp"
#include "ringcast/detail/process.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;

namespace ringcast::python::detail {

// Ctrl-C's latency when the signal missed a sleeping wait's kernel wait (see above); each slice wakes
// an idle wait.
inline constexpr std::chrono::nanoseconds kMainThreadSlice = std::chrono::milliseconds(250);
// Waits that no signal ends — spinning slices, the remote endpoints' ZeroMQ polls, wait_until_ready's
// sleeps — check for signals this often in the main thread.
inline constexpr std::chrono::nanoseconds kSignalPollInterval = std::chrono::milliseconds(50);
inline constexpr std::size_t kNoGilCopy = 256 * 1024;  // smaller copies take less than a GIL hand-off costs

// ---- the deterministic GIL probe (tests) -----------------------------------------------------------
// WaitOptions::before_sleep runs in the waiting thread right before the kernel wait: it records whether
// that thread holds the GIL at that moment. PyGILState_Check is safe to call without the GIL.
extern std::atomic<std::uint64_t> g_sleeps;
extern std::atomic<std::uint64_t> g_sleeps_holding_gil;
// Test-only negative control: false keeps the GIL during waits, so the probe is shown to detect it.
extern std::atomic<bool> g_release_gil;

void gil_probe(void*);

// threading.main_thread().ident, set at module import.
extern unsigned long g_main_thread_ident;

bool in_main_thread();

// Holds or has released the GIL; re-takes it when destroyed (so exceptions reach pybind11 with it).
class Gil {
public:
    Gil() = default;
    Gil(const Gil&) = delete;
    Gil& operator=(const Gil&) = delete;
    ~Gil() { acquire(); }
    void release() {
        if (saved_ == nullptr && g_release_gil.load(std::memory_order_relaxed)) saved_ = PyEval_SaveThread();
    }
    void acquire() {
        if (saved_ != nullptr) {
            PyEval_RestoreThread(saved_);
            saved_ = nullptr;
        }
    }
    [[nodiscard]] bool held() const { return saved_ == nullptr; }

private:
    PyThreadState* saved_ = nullptr;
};

// A copy that drops the GIL when it is large (and we hold it).
inline void copy_bytes(Gil& gil, void* dst, const void* src, std::size_t n) {
    if (n >= kNoGilCopy && gil.held()) {
        gil.release();
        std::memcpy(dst, src, n);
        gil.acquire();
    } else if (n != 0) {
        std::memcpy(dst, src, n);
    }
}

// Re-takes the GIL and raises a pending signal's exception (KeyboardInterrupt) as py::error_already_set.
void check_signals(Gil& gil);

// ---- common endpoint machinery ---------------------------------------------------------------------
class Endpoint {
public:
    explicit Endpoint(std::chrono::nanoseconds liveness);
    virtual ~Endpoint() = default;
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;

protected:
    // One thread at a time per endpoint (the core's rule); a second one is told so instead of
    // corrupting the cursor state. shutdown() is exempt: it only sets atomics and wakes (and, for an
    // endpoint that releases_on_shutdown_, takes the endpoint itself when no call is in it).
    class Busy {
    public:
        explicit Busy(Endpoint& e) : e_(e) {
            if (e_.busy_.exchange(true, std::memory_order_seq_cst)) {
                // A forked child inherits the flag of a call its parent had in progress: say fork.
                if (e_.forked_child()) e_.check_usable("this call");
                if (e_.shut_.load(std::memory_order_acquire)) throw Closed{"this ringcast endpoint was shut down"};
                throw Failure{PyExc_RuntimeError,
                              "this ringcast endpoint is already in use by another thread; use one "
                              "MessageQueue or ReplyGather endpoint per thread"};
            }
        }
        ~Busy() {
            if (!e_.releases_on_shutdown_) {
                e_.busy_.store(false, std::memory_order_release);
                return;
            }
            // With shutdown() from another thread (release_when_idle): it stores shut_, then tries
            // busy_; this call clears busy_, then loads shut_ — all seq_cst, so in their one order
            // either its try comes after our clear (it takes the endpoint and releases), or our load
            // comes after its store (we release): the release is never left undone.
            e_.busy_.store(false, std::memory_order_seq_cst);
            if (e_.shut_.load(std::memory_order_seq_cst)) e_.release_when_idle();
        }
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;

    private:
        Endpoint& e_;
    };

    // What a shut-down endpoint gives back before its object goes (a reader's rank): run with the
    // endpoint held, at most once at a time, possibly more than once (idempotent), by whichever of
    // shutdown() and the call in progress is last (Busy's destructor). Only endpoints that set
    // releases_on_shutdown_ are ever asked.
    virtual void release_after_shutdown() noexcept {}
    // Runs release_after_shutdown() now unless a call is in the endpoint; that call then runs it on its
    // way out. shut_ must be set (seq_cst) before.
    void release_when_idle() noexcept {
        if (busy_.exchange(true, std::memory_order_seq_cst)) return;
        release_after_shutdown();
        busy_.store(false, std::memory_order_seq_cst);
    }
    bool releases_on_shutdown_ = false;  // set once by the derived constructor
    const char* shut_text_ = "the queue was shut down";  // what check_usable says once shut down (a
                                                         // ReplyGather's constructors say their own)
    // A reader's release_raw(), the endpoint held: shut down while its acquire_read chunk was out,
    // release_after_shutdown() left the release to this call (a view still showed the chunk's bytes,
    // which the writer, or for a remote reader the goodbye, would take away); it runs it now.
    void release_left_to_the_chunk(bool& raw_peeked) {
        if (!shut_.load(std::memory_order_acquire) || !raw_peeked || forked_child()) return;
        raw_peeked = false;
        release_after_shutdown();
    }

    // Raises unless this process created the endpoint (not a forked child) and it is not shut down.
    void check_usable(const char* what) const;
    [[nodiscard]] bool forked_child() const;

    // Repeats attempt(slice) (a core call with a timeout, returning Status) until it returns anything
    // but timed_out or the deadline passes. Slices: see the file comment. The dead-peer check is the
    // core's, counted across calls per endpoint, so it runs on schedule however the wait is sliced
    // (and however short the caller's timeouts are); it throws PeerDead out of attempt().
    template <class Core, class Attempt>
    Status wait_sliced(Gil& gil, Deadline deadline, Core& core, Attempt&& attempt) {
        const bool main = in_main_thread();
        // A hybrid wait spins only in the first slice: the later slices resume the same wait, and
        // spinning again at every slice boundary would cost CPU while idle (up to spin_max per slice:
        // 2 ms, a gather collect's 10 ms).
        struct RestoreWait {
            Core& core;
            WaitOptions original;
            ~RestoreWait() { core.set_wait(original); }
        } restore{core, core.wait_options()};
        if (main) {
            WaitOptions on_signal = restore.original;
            on_signal.end_on_signal = true;
            core.set_wait(on_signal);
        }
        // Main thread: a signal that comes while the wait spins (no kernel wait to interrupt) is seen
        // at the end of the slice, so a slice that spins is short — every slice of a spin or
        // spin_yield wait, the first of a hybrid one — and only slices that sleep from the start are
        // long (an idle wait wakes only that often).
        const bool always_spins = restore.original.kind == WaitKind::spin || restore.original.kind == WaitKind::spin_yield;
        const auto slice_of = [&](bool first) {
            if (!main) return liveness_;
            const bool spins = always_spins || (first && restore.original.kind == WaitKind::hybrid);
            return std::min(spins ? kSignalPollInterval : kMainThreadSlice, liveness_);
        };
        for (bool first = true;; first = false) {
            const Deadline now = Clock::now();
            if (now >= deadline) return Status::timed_out;
            const Deadline until = std::min(deadline, now + slice_of(first));
            gil.release();
            if (!first && restore.original.kind == WaitKind::hybrid) {
                WaitOptions sleep_only = core.wait_options();
                sleep_only.kind = WaitKind::futex;
                core.set_wait(sleep_only);
            }
            const Status s = attempt(std::max(std::chrono::nanoseconds(until - now), std::chrono::nanoseconds(1)));
            if (s != Status::timed_out) return s;
            if (main) check_signals(gil);
        }
    }

    std::chrono::nanoseconds liveness_;
    ringcast::detail::MadeInProcess made_in_;  // the fork rule: a child's copy refuses every call
    std::atomic<bool> busy_{false};
    std::atomic<bool> shut_{false};
};

}  // namespace ringcast::python::detail
