// src/remote/zmq_util.hpp — the ZeroMQ plumbing the remote endpoints share (private to src/remote).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "ringcast/error.hpp"
#include "ringcast/remote/security.hpp"
#include "ringcast/remote/wire.hpp"
#include "ringcast/detail/process.hpp"
#include "ringcast/wait.hpp"

namespace ringcast::remote::detail {

using Clock = std::chrono::steady_clock;

// Error(system) naming what failed, for a zmq::error_t.
[[noreturn]] void throw_zmq(const char* what, const zmq::error_t& e);

// Binds `socket` where `listen` says (literal address only), sets CURVE server options; returns the
// bound endpoint with the real port.
std::string bind_listener(zmq::socket_t& socket, const ListenOptions& listen);
// CURVE client options (if security.curve_server_key is set) and IPv6 for a "[...]" endpoint.
void configure_connector(zmq::socket_t& socket, std::string_view endpoint, const ConnectSecurity& security);
// TCP keepalive probes: an IDLE connection whose peer host stops answering (vanished, cable pulled;
// no reset ever comes) is dropped by the kernel within about `timeout` (whole seconds, at least 3 s).
// `user_timeout` adds TCP_USER_TIMEOUT: a connection with bytes unacknowledged for `timeout` is
// dropped too (a busy one to a vanished host) — and so is a peer stopped behind a zero window.
// Not ZeroMQ's own ZMTP heartbeats: libzmq 4.3.4 aborts (assert !_io_error in out_event) when a
// heartbeat timer fires on a connection that failed while its receive queue was full — exactly a slow
// reader whose publisher died. A stopped (SIGSTOP) peer still answers keepalives: it stays connected,
// like a stopped local reader.
void set_keepalive(zmq::socket_t& socket, std::chrono::nanoseconds timeout, bool user_timeout = false);

[[nodiscard]] inline zmq::message_t header_frame(const wire::Header& h) { return zmq::message_t(&h, sizeof h); }

// Outcome of a non-blocking send from a ROUTER with ROUTER_MANDATORY.
enum class SendResult : std::uint8_t { sent, full, unreachable };

// Sends [routing id][header][body?] without waiting. `body` is shared, not copied (zmq_msg_copy).
[[nodiscard]] SendResult route(zmq::socket_t& router, std::string_view routing_id, const wire::Header& h,
                               zmq::message_t* body);

// Refuses a peer's hello (or what it sent): writer_dead with kRefused, `code` in value, `why` as the
// body. The peer raises Error(code, ... why). Not waiting: a peer gone or full meanwhile is not told.
inline void refuse(zmq::socket_t& router, std::string_view routing_id, ErrorCode code, const std::string& why) {
    zmq::message_t body(why.data(), why.size());
    (void)route(router, routing_id,
                wire::Header{.kind = wire::Kind::writer_dead, .flags = wire::kRefused, .value = static_cast<std::uint64_t>(code)},
                &body);
}
// The ErrorCode a refusal carries (a value that is none: invalid_argument, what every refusal was).
[[nodiscard]] inline ErrorCode refusal_code(const wire::Header& h) noexcept {
    switch (static_cast<ErrorCode>(h.value)) {
        case ErrorCode::rank_in_use:
        case ErrorCode::protocol:
        case ErrorCode::invalid_argument: return static_cast<ErrorCode>(h.value);
        default: return ErrorCode::invalid_argument;
    }
}
// A connecting peer's routing id: its own per instance (per nonce), stable across ZeroMQ's reconnects,
// so that another instance claiming the same rank never takes its connection over (wire.hpp).
[[nodiscard]] inline std::string peer_routing_id(const char* prefix, std::uint32_t rank, std::uint64_t nonce) {
    char buf[64];
    const int n = std::snprintf(buf, sizeof buf, "%s-%u-%016llx", prefix, rank, static_cast<unsigned long long>(nonce));
    return std::string(buf, static_cast<std::size_t>(n));
}

// The claimants of ranks whose holder is still connected: hellos with another nonce than the holder's
// (another process, or a second reader / worker object of that rank in one process). A claimant is
// not refused at its first hello: a holder that is closing (its bye on its way, read after this hello)
// would refuse its own replacement. It says hello again within its liveness_interval / 4 while it
// waits, and is refused at that second hello if the holder is still connected. Every claimant is
// remembered (a set: two claimants' alternating hellos each found the other's nonce and neither was
// ever refused, both timing out on a silent listener). The listener's thread only.
class HeldRankClaims {
public:
    // True at the claimant's second hello (refuse it now; it is forgotten), false at its first.
    [[nodiscard]] bool second_hello(std::uint32_t rank, std::uint64_t nonce) {
        auto& claimants = by_rank_[rank];
        if (claimants.insert(nonce).second) return false;
        claimants.erase(nonce);
        return true;
    }
    // The rank has a new holder: its earlier claimants start over.
    void forget(std::uint32_t rank) noexcept { by_rank_.erase(rank); }
    // The refusal's text; `peer` is "reader" or "worker", `endpoint` where the holder is connected.
    [[nodiscard]] static std::string refusal(std::string_view peer, std::uint32_t rank, std::string_view endpoint) {
        const std::string who(peer);
        return "remote " + who + " rank " + std::to_string(rank) + " is already held by a live remote " + who +
               " (another process, or another " + who + " object of that rank in one process, still connected to " +
               std::string(endpoint) + "): a second " + who + " of the same rank is refused and the first one keeps " +
               "it; a replacement is served once that " + who + " has closed or its process is gone";
    }

private:
    std::map<std::uint32_t, std::set<std::uint64_t>> by_rank_;
};

// Receives one whole message without waiting: false if none. `frames` gets its parts.
struct Received {
    std::string routing_id;  // ROUTER only
    wire::Header header;
    zmq::message_t body;     // empty when the message had no body
    bool valid = false;      // false: not this protocol (ignored by listeners, an error for readers)
    int fd = -1;             // ROUTER only: the connection's socket (ZMQ_SRCFD), what its monitor events name
};
[[nodiscard]] bool receive(zmq::socket_t& socket, bool from_router, Received& out);

// The ZAP handler of a CURVE listener with allowed_client_keys: answers pending requests (no waiting).
void answer_zap(zmq::socket_t& zap, const std::vector<std::string>& allowed_z85);

// nullopt for kForever; Error(invalid_argument) for a negative timeout.
[[nodiscard]] inline std::optional<Clock::time_point> deadline_after(std::chrono::nanoseconds timeout) {
    if (timeout < std::chrono::nanoseconds::zero()) throw Error(ErrorCode::invalid_argument, "negative timeout");
    std::optional<Clock::time_point> d;
    if (timeout != kForever) d.emplace(Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout));
    return d;
}

// A whole-milliseconds poll timeout (rounded up, so a wait never returns before its deadline); -1 = forever.
[[nodiscard]] long poll_ms(std::optional<Clock::time_point> deadline);

// zmq_poll of every wait here: a signal that interrupts it (EINTR) ends it like a wake — the caller's
// loop looks again and checks its deadline (a Python caller runs its handlers between its slices);
// any other failure throws Error(system) naming `what`.
void poll(std::vector<zmq::pollitem_t>& items, long ms, const char* what);

// The fork rule of the remote endpoints (each State has a `made_in`): a fork()ed child holds the
// parent's ZeroMQ context, sockets and thread as memory only. Closing the context there waits for I/O
// threads the child does not have (it hangs), a send would put the child's bytes on the parent's
// connection, and the thread to stop and join is not the child's. So the child's copy lets its State go
// unfreed and does nothing else; true when it did.
template <class State>
[[nodiscard]] bool let_go_in_forked_child(std::unique_ptr<State>& state) noexcept {
    if (!state || !state->made_in.in_forked_child()) return false;
    (void)state.release();  // intentionally leaked: see above
    return true;
}

// Every other call of a child's copy is refused (Error(protocol)): a peek or reply would use the
// parent's socket from a second process, a wait or drain could block on a mutex copied while held.
template <class State>
void refuse_in_forked_child(const std::unique_ptr<State>& state, const char* what) {
    if (state && state->made_in.in_forked_child())
        state->made_in.refuse_copy(what, "this endpoint",
                                   "Make a new one in this process (its ZeroMQ context, socket and thread are the parent's)");
}

}  // namespace ringcast::remote::detail
