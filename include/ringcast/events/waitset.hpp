// ringcast/events/waitset.hpp — one wait over many endpoints: readers waiting for data, writers
// waiting for space, gather collectors waiting for replies.
//
//   ringcast::WaitSet set;                      // io_uring if the kernel has its futex opcodes, else epoll
//   auto a = set.add(reader_a), b = set.add(reader_b), c = set.add(collector, tag, ranks);
//   for (std::size_t id : set.wait(1s)) ...     // the ids that are ready now; empty: timed out
//
// Every endpoint is armed with wait.hpp's handshake (announce its bit, fence, re-check; only an
// announced endpoint is ever woken), then the set sleeps in ONE kernel wait:
//   epoll     the endpoints' eventfds (events/eventfd.hpp; registered by add(), so from then on the
//             endpoint's own blocking calls sleep on its eventfd too)
//   io_uring  one IORING_OP_FUTEX_WAIT per endpoint on the endpoint's own futex word (the value read at
//             arm time, after the announcement: wait.hpp step 3c), each with a linked timeout (a
//             backstop, 8 x recheck); an endpoint that already has an eventfd gets a POLL_ADD on it
//             instead. Futex-mode endpoints need no fd at all. liburing 2.3 has no futex helpers: the
//             SQEs are built by hand (src/events/waitset_uring.cpp).
// A kernel wake is a hint: the set re-checks the endpoint's condition and reports only endpoints that
// are ready (data or closed; room; a pending reply, a closed reply ring, or every rank's reply kept for
// the member's tag; cancelled), re-arming the
// others. Every WaitSetOptions::recheck — counted across wait() calls, so a loop of short waits or a
// member woken often does not put it off — every armed endpoint's condition is re-checked without
// re-arming it (a peer killed between its publish and its wake costs one interval) and its peer's
// liveness checked (Error peer_dead, as the endpoint's own blocking calls). An endpoint's own blocking
// calls may be used between waits: each wait() first re-announces every armed endpoint (a blocking
// call withdraws the announcement they share when it returns).
//
// Back-end choice (run time): WaitSetBackend::automatic takes io_uring when built with liburing, the
// kernel lets this process create a ring, and the ring's probe lists IORING_OP_FUTEX_WAIT; otherwise
// epoll, with one line on stderr saying why. RINGCAST_WAITSET=epoll in the environment forces epoll.
//
// Thread-safety: one thread uses a WaitSet and the endpoints in it (it may be built in another). The
// io_uring ring is single-issuer (IORING_SETUP_DEFER_TASKRUN: completions run inside our own wait): the
// first thread that waits is its issuer, and a wait() from another thread throws Error(system) saying
// so. The endpoints must outlive their membership (remove() or the WaitSet's destruction).
//
// fork(): a child's copy of a set shares the parent's kernel objects — the epoll instance, the io_uring
// rings (their submission queue is memory both map) — and its members' announcement bits are the
// parent's endpoints' own. So the child may only let its copy go: its destructor and remove() then
// free memory and nothing else (no EPOLL_CTL_DEL, no cancel, no retract: each would take a wait away
// from the parent, whose set would then be woken only by the re-check). add() and wait() in the child
// throw Error(protocol): build a new WaitSet there, over endpoints of the child's own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ringcast/detail/process.hpp"
#include "ringcast/gather.hpp"
#include "ringcast/ring.hpp"

namespace ringcast {

enum class WaitSetBackend : std::uint8_t { automatic, epoll, io_uring };
[[nodiscard]] const char* to_string(WaitSetBackend b) noexcept;

struct WaitSetOptions {
    WaitSetBackend backend = WaitSetBackend::automatic;  // io_uring: throw if it is unavailable
    // The longest kernel wait (see above). A huge value (nanoseconds::max()) means "never": the
    // deadlines it makes saturate, it never overflows into a wait that does not sleep.
    std::chrono::nanoseconds recheck = std::chrono::seconds(1);
};

// Is the io_uring back end usable here? "" if so, else the reason (for logs and tests).
[[nodiscard]] std::string io_uring_futex_unavailable_reason();

class WaitSet {
public:
    explicit WaitSet(const WaitSetOptions& options = {});
    WaitSet(const WaitSet&) = delete;
    WaitSet& operator=(const WaitSet&) = delete;
    ~WaitSet();  // withdraws every announcement (and cancels io_uring waits); in a forked child: nothing

    // Members; each returns an id for wait()'s results and remove(). Ids are small numbers: the id of a
    // removed member goes to a later add(), as a closed file descriptor's number does (forget it once
    // removed). One member per endpoint (its announcement bit is its own): adding one twice throws
    // Error(invalid_argument).
    [[nodiscard]] std::size_t add(Reader& reader);
    // A writer waiting for room for a message of `message_bytes` (Writer::arm_wake_fd, the same room
    // test): with the `progress` of a resumable write that stopped part way (write_parts), room for
    // its next fragment. `progress` is read at every look, so it must outlive the membership (or the
    // next set_message_bytes()); the caller updates it by resuming the write.
    [[nodiscard]] std::size_t add_space(Writer& writer, std::size_t message_bytes,
                                        const WriteProgress* progress = nullptr);
    // A collector waiting for the replies to `tag` from `ranks` (empty: all): GatherCollector::arm_wake_fd's
    // condition. The tag decides which kept replies count as taken (gather.hpp, collect()).
    [[nodiscard]] std::size_t add(GatherCollector& collector, std::uint64_t tag,
                                  std::span<const std::uint32_t> ranks = {});
    void remove(std::size_t id);
    // Changes what a writer member waits for (the next message's size, and its progress as add_space).
    void set_message_bytes(std::size_t id, std::size_t message_bytes, const WriteProgress* progress = nullptr);
    // Changes the tag a collector member waits for (the next step's request).
    void set_tag(std::size_t id, std::uint64_t tag);

    // Waits until at least one member is ready or `timeout` passed; returns the ready ids (empty:
    // timed out). A member reported ready is re-armed on the next wait(): consume what it has first
    // (level-triggered: one still ready is reported again). Throws Error(peer_dead) as the members'
    // own blocking calls would, naming the member ("(WaitSet member N)"), and again from every later
    // wait() until that member is removed — but a wait() with members ready returns them first, so
    // live members are never starved; Error(permission_denied) when a peer cannot take an eventfd;
    // Error(system) when an io_uring member wait failed.
    [[nodiscard]] std::vector<std::size_t> wait(std::chrono::nanoseconds timeout);

    [[nodiscard]] WaitSetBackend backend() const noexcept;
    [[nodiscard]] std::size_t size() const noexcept;
    [[nodiscard]] std::uint64_t kernel_waits() const noexcept;  // epoll_wait / io_uring waits made

    struct Member;  // (waitset.cpp)
    class Backend;  // epoll or io_uring (waitset.cpp, waitset_uring.cpp)

private:
    std::size_t add_member(Member member);
    void check_peer_if_due(Member& m, std::size_t id, Deadline now);
    [[nodiscard]] bool in_forked_child() const noexcept;
    void refuse_in_forked_child(const char* what) const;

    std::vector<std::unique_ptr<Member>> members_;  // index = id; null: free (its id is in free_ids_)
    std::vector<std::size_t> free_ids_;             // removed members' ids, for the next add()
    std::unordered_map<const void*, std::size_t> by_endpoint_;  // endpoint -> its member's id
    std::unique_ptr<Backend> backend_;
    std::chrono::nanoseconds recheck_;
    Deadline next_recheck_{};  // when every armed member is next re-checked: kept across wait() calls, so
                               // neither short waits nor a busy member put it off (waitset.cpp)
    std::uint64_t kernel_waits_ = 0;
    bool withheld_dead_ = false;  // the last wait() found a dead peer but returned ready members instead
    detail::MadeInProcess made_in_;  // the process whose kernel objects these are (the fork rule above)
};

}  // namespace ringcast
