// ringcast/detail/crash_point.hpp — named crash points at the protocol's steps, for the fault tests.
//
// RINGCAST_CRASH_POINT(id) marks the moment right AFTER the named step (ring.hpp: publish steps 1-5,
// release steps 1-3, ownership C1/C2/E1/E2/D1 and the Writer's claim; wait.hpp: sleep steps 3a-3f
// and the waker's w3). In the library everyone links it expands to nothing: the enum below is the
// only thing compiled. Only a build that defines RINGCAST_TEST_CRASH_POINTS for the library AND for
// every file including these headers (tests/fault/CMakeLists.txt builds such a second copy of the
// library, ringcast_crashpoints, for the fault suites) gets the hook, which
//   * stores the point's id into a registered trace word (a random-time kill reports the last step
//     its victim passed), and
//   * raises SIGKILL on the k-th pass of an armed point (arm_crash_point, or the environment
//     variable RINGCAST_CRASH_AT=<name>:<k>, read once on the first pass of any point).
// The trace word and the kill are all it does: no step's order or outcome changes.
// State is per process; a fork()ed child inherits its parent's arming and re-arms for itself.
#pragma once

#include <cstdint>

#ifdef RINGCAST_TEST_CRASH_POINTS
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <signal.h>
#include <unistd.h>
#endif

namespace ringcast::detail {

// X(name): one per named step. The name is the step it follows.
#define RINGCAST_CRASH_POINTS_LIST(X)                                                                 \
    X(none)                                                                                           \
    /* publish order, Writer::commit_record (ring.hpp) */                                             \
    X(publish_1_payload)       /* payload written, header not yet */                                  \
    X(publish_2_header)        /* header's length and tag written, not yet stamped */                 \
    X(publish_2_stamped)       /* stamped (caught-up readers may take it), tail not yet exchanged */  \
    X(publish_3_tail)          /* tail exchanged (w1), readers not yet looked at */                   \
    X(publish_4_readers_woken) /* readers' w2..w3 done, the bell (step 5) not yet */                  \
    X(publish_5_bell)          /* the bell's w2..w3 done (runs only with a publish bell) */           \
    X(publish_padding)         /* a padding header written before the record that wraps */            \
    X(fragment_between)        /* a fragment (not the last) published, the next not yet reserved */   \
    /* release order, Reader::store_head (ring.hpp) */                                                \
    X(release_1_done)          /* the reader is done with the bytes, head not yet exchanged */        \
    X(release_2_head)          /* head exchanged (w1), writer_sleeping not yet looked at */           \
    X(release_3_woken)         /* the writer's w2..w3 done */                                         \
    /* ownership (ring.hpp header, src/ring.cpp) */                                                   \
    X(claim_c1)                /* Reader: owner CAS won, our sleeping bit not yet cleared */          \
    X(claim_c2)                /* Reader: sleeping bit cleared, head not yet read */                  \
    X(writer_claim)            /* Writer ctor: writer_owner CAS won, writer_sleeping not cleared */   \
    X(writer_c2)               /* Writer ctor: writer_sleeping cleared (the takeover's C2) */         \
    X(evict_e1)                /* Writer: E1 CAS won, the evicted rank's bit not yet cleared */       \
    X(evict_e2)                /* Writer: E2 done */                                                  \
    X(detach_d1)               /* Reader: D1 CAS won, a sleeping writer not yet woken */              \
    /* the sleep path, wait.hpp block_until case 3 (any waiter: reader, writer, collector) */         \
    X(sleep_3a)                /* own bits announced */                                               \
    X(sleep_3b)                /* fence done */                                                       \
    X(sleep_3c)                /* seq snapshot taken */                                               \
    X(sleep_3d)                /* re-check found nothing: about to enter the kernel */                \
    X(sleep_3e)                /* back from the kernel wait */                                        \
    X(sleep_3f)                /* own bits retracted */                                               \
    /* the waker, wait.hpp notify_sleepers */                                                         \
    X(wake_w3_seq)             /* seq bumped, futex_wake not yet called */

enum class CrashPoint : std::uint8_t {
#define RINGCAST_CP_ENUM(n) n,
    RINGCAST_CRASH_POINTS_LIST(RINGCAST_CP_ENUM)
#undef RINGCAST_CP_ENUM
    count_
};

[[nodiscard]] constexpr const char* crash_point_name(CrashPoint p) noexcept {
    constexpr const char* names[] = {
#define RINGCAST_CP_NAME(n) #n,
        RINGCAST_CRASH_POINTS_LIST(RINGCAST_CP_NAME)
#undef RINGCAST_CP_NAME
    };
    const auto i = static_cast<std::uint8_t>(p);
    return i < static_cast<std::uint8_t>(CrashPoint::count_) ? names[i] : "?";
}

#ifdef RINGCAST_TEST_CRASH_POINTS
inline constexpr bool kCrashPointsCompiled = true;

[[nodiscard]] inline CrashPoint crash_point_from_name(std::string_view name) noexcept {
    for (std::uint8_t i = 0; i < static_cast<std::uint8_t>(CrashPoint::count_); ++i)
        if (name == crash_point_name(static_cast<CrashPoint>(i))) return static_cast<CrashPoint>(i);
    return CrashPoint::none;
}

// Atomics (relaxed): a test process may run several endpoints in threads (and TSan watches).
struct CrashPointState {
    std::atomic<CrashPoint> armed{CrashPoint::none};
    std::atomic<std::uint64_t> kth{0};                     // SIGKILL on this pass (1 = the first)
    std::atomic<std::uint64_t> passes{0};                  // passes of the armed point so far
    std::atomic<std::atomic<std::uint32_t>*> trace{nullptr};  // gets the id of every point passed
    CrashPointState() noexcept {
        if (const char* e = std::getenv("RINGCAST_CRASH_AT")) {  // "<name>:<k>"
            const std::string_view v(e);
            const auto colon = v.find(':');
            armed.store(crash_point_from_name(v.substr(0, colon)), std::memory_order_relaxed);
            kth.store(colon == std::string_view::npos ? 1 : std::strtoull(e + colon + 1, nullptr, 10),
                      std::memory_order_relaxed);
        }
    }
};
inline CrashPointState& crash_point_state() noexcept {
    static CrashPointState state;  // the environment is read once, on first use
    return state;
}

// SIGKILL self on the k-th pass of `p` from now on (k >= 1); CrashPoint::none disarms.
inline void arm_crash_point(CrashPoint p, std::uint64_t k) noexcept {
    auto& s = crash_point_state();
    s.armed.store(CrashPoint::none, std::memory_order_relaxed);
    s.kth.store(k, std::memory_order_relaxed);
    s.passes.store(0, std::memory_order_relaxed);
    s.armed.store(p, std::memory_order_relaxed);
}
// Every point passed stores its id into `word` (shared memory; nullptr: stop). Read after the death.
inline void trace_crash_points(std::atomic<std::uint32_t>* word) noexcept {
    crash_point_state().trace.store(word, std::memory_order_relaxed);
}

inline void crash_point_hit(CrashPoint p) noexcept {
    auto& s = crash_point_state();
    if (auto* t = s.trace.load(std::memory_order_relaxed)) t->store(static_cast<std::uint32_t>(p), std::memory_order_relaxed);
    if (p != s.armed.load(std::memory_order_relaxed) || p == CrashPoint::none) return;
    if (s.passes.fetch_add(1, std::memory_order_relaxed) + 1 == s.kth.load(std::memory_order_relaxed))
        ::kill(::getpid(), SIGKILL);
}

#define RINGCAST_CRASH_POINT(id) ::ringcast::detail::crash_point_hit(::ringcast::detail::CrashPoint::id)
#define RINGCAST_CRASH_POINT_VAR(var) ::ringcast::detail::crash_point_hit(var)
#else
inline constexpr bool kCrashPointsCompiled = false;
#define RINGCAST_CRASH_POINT(id) ((void)0)
#define RINGCAST_CRASH_POINT_VAR(var) ((void)0)
#endif

}  // namespace ringcast::detail
