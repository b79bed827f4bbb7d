// The inside of WaitSet (include/ringcast/events/waitset.hpp), shared by its two back ends.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringcast/events/waitset.hpp"

namespace ringcast {

// One endpoint in the set. Its condition, sleep site and eventfd are the endpoint's own (the same
// ones its blocking calls use), reached through WaitSet's friendship.
struct WaitSet::Member {
    enum class Kind : std::uint8_t { reader, writer_space, collector };
    Kind kind = Kind::reader;
    Reader* reader = nullptr;
    Writer* writer = nullptr;
    GatherCollector* collector = nullptr;
    std::size_t message_bytes = 0;      // writer_space: the message it waits to write ...
    const WriteProgress* progress = nullptr;  // ... and the resumable write it resumes (or null)
    std::vector<std::uint32_t> ranks;   // collector: the ranks whose replies it waits for
    std::uint64_t tag = 0;              // collector: the request those replies answer
    bool armed = false;                 // announced; a kernel wait (fd readiness / SQE) may report it
    bool armed_on_eventfd = false;      // armed while its endpoint had an eventfd (else on its futex word)
    Deadline next_check{};              // when check_peer() is due next (kNoDeadline: never)

    [[nodiscard]] const void* endpoint() const noexcept;  // the endpoint object (one member each)
    [[nodiscard]] const detail::MadeInProcess& made_in() const noexcept;  // the endpoint's maker (fork rule)
    [[nodiscard]] SleepSite site() const noexcept;        // the waiter's view (its own bit)
    [[nodiscard]] EventfdWaiter* eventfd() const noexcept;  // registered eventfd, or null
    [[nodiscard]] int ensure_eventfd();                   // registers one (the endpoint's wake_fd())
    [[nodiscard]] bool condition();                       // the endpoint's wait condition (loads only)
    [[nodiscard]] const std::atomic<bool>& cancelled() const noexcept;  // the endpoint's cancel() flag
    [[nodiscard]] bool ready();                           // cancelled, or the condition: look now
    void check_peer();                                    // its liveness check (may throw peer_dead)
    [[nodiscard]] bool arm_with_eventfd();                // events/arm.hpp on its eventfd
};

class WaitSet::Backend {
public:
    virtual ~Backend() = default;
    [[nodiscard]] virtual WaitSetBackend kind() const noexcept = 0;
    virtual void added(std::size_t id, Member& m) = 0;
    virtual void removed(std::size_t id, Member& m) noexcept = 0;
    // Steps 3a..3d (plus what the back end's sleep needs). true: ready now, nothing armed.
    [[nodiscard]] virtual bool arm(std::size_t id, Member& m) = 0;
    // Step 3f: withdraw the announcement of a member whose kernel wait ended (or is abandoned).
    virtual void disarm(std::size_t id, Member& m) noexcept = 0;
    // Withdraws an armed member whose kernel wait has NOT ended (found ready by the periodic re-check,
    // removed, or the set destroyed): cancels that wait, then retracts.
    virtual void abandon(std::size_t id, Member& m) noexcept = 0;
    // One kernel wait until `until` (or an interruption); appends the ids the kernel reported. The set
    // looks at the clock itself (WaitSet::wait): how the wait ended is not needed.
    virtual void wait(Deadline until, std::vector<std::size_t>& woken) = 0;
    // Throws Error(system) if a member's kernel wait reported in the last wait() failed (rather than
    // woke, timed out or was cancelled); that member was reported woken all the same. Once per failure.
    virtual void throw_if_failed() {}
};

// waitset_uring.cpp (or the stub in waitset.cpp without liburing): null with `why` set if io_uring
// futex waits are unavailable here.
[[nodiscard]] std::unique_ptr<WaitSet::Backend> make_io_uring_backend(std::chrono::nanoseconds recheck,
                                                                      std::string& why);

}  // namespace ringcast
