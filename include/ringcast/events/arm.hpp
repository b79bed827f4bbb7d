// ringcast/events/arm.hpp — steps 3a'..3d of wait.hpp for a waiter whose sleep (3e) belongs to an
// event loop: the one arm() behind Reader/Writer/GatherCollector::arm_wake_fd and the WaitSet.
#pragma once

#include <atomic>

#include "ringcast/events/eventfd.hpp"
#include "ringcast/wait.hpp"

namespace ringcast {

// Drains `fd` (3a': before the announcement, never after the re-check), announces on `site` (3a),
// fences (3b), re-checks `ready` and the endpoint's cancel flag (3d). true: ready or cancelled —
// announcement withdrawn, do not wait, look now (a look with a zero timeout returns what is there, or
// Status::cancelled). false: armed — the fd becomes readable once a waker ran w2..w3 after our 3a (or
// a close/cancel poked it); the caller retracts (disarm) when it stops waiting. Throws
// Error(permission_denied) if a waker recorded that it cannot take the fd. Thread-safety: the
// endpoint's one waiting thread.
//
// Why a cancel cannot be lost: cancel() stores the flag (seq_cst) and then pokes the fd. Our drain
// comes before our load of the flag (after the fence 3b): a flag stored after that load is followed by
// a poke after our drain, so the fd is readable; a flag stored before it is seen. (Without the flag in
// 3d the drain ate a poke made just before the arm, and the arm reported "armed" to a loop that then
// slept past the cancel.) Model-checked: tests/model/arm.pml (BUG_ARM_IGNORES_CANCEL, BUG_POKE_BEFORE_FLAG).
template <class Ready>
[[nodiscard]] bool arm_eventfd(EventfdWaiter& fd, const SleepSite& site, const std::atomic<bool>& cancelled,
                               Ready&& ready) {
    fd.check_refused();
    fd.drain();                                           // 3a'
    announce(site);                                       // 3a
    std::atomic_thread_fence(std::memory_order_seq_cst);  // 3b
    if (cancelled.load(std::memory_order_seq_cst) || ready()) {  // 3d
        retract(site);
        return true;
    }
    return false;
}

}  // namespace ringcast
