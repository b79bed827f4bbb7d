// The remote publisher's thread: one ring reader rank in, one ZeroMQ ROUTER out (publisher.hpp).
//
// Everything below runs on the publisher's thread except the members marked "shared" (under `mutex`)
// and `stop_requested` / the ring Reader's cancel(), which the Reader allows from any thread.
#include "ringcast/remote/publisher.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include "zmq_util.hpp"

namespace ringcast::remote {

using detail::Clock;
using detail::SendResult;

namespace {

enum class PeerState : std::uint8_t { active, fell_behind, lost, left };

struct Peer {
    std::string routing_id;
    std::uint64_t nonce = 0;          // the reader process's hello nonce (another one: a replacement)
    PeerState state = PeerState::active;
    std::uint64_t next = 0;           // seq of the next data message this reader gets
    std::uint64_t welcome_seq = 0;
    bool welcome_late = false;
    bool end_sent = false;            // close / writer_dead reached it
    bool cut_off_told = false;        // a kCutOff heartbeat reached it
    Clock::time_point last_sent{};
    std::optional<Clock::time_point> full_since;
};

struct Pending {
    std::uint64_t seq = 0;
    std::uint64_t tag = 0;
    zmq::message_t body;
};

}  // namespace

struct RemotePublisher::State {
    ringcast::detail::MadeInProcess made_in;  // a fork()ed child's copy is let go (let_go_in_forked_child)
    // ---- fixed after start() -------------------------------------------------------------------
    RemotePublisherOptions options;
    std::string endpoint;
    std::string curve_public;
    std::set<std::uint32_t> expected;

    // ---- shared (under mutex) -----------------------------------------------------------------
    mutable std::mutex mutex;
    std::condition_variable changed;
    std::set<std::uint32_t> hello_seen;  // expected ranks that said hello
    RemotePublisherStats stats;
    std::exception_ptr failure;
    bool finished = false;
    bool drained = false;  // the ring ended and every served reader was handed the end frame
    bool forwarding = false;  // forwarding runs (the thread's `started`, shared)
    // Set by drain() while forwarding has not started: when the thread stops waiting for the expected
    // ranks that never said hello and forwards to those that did (at once if the ring holds only its
    // close: then nobody can miss a message).
    std::optional<Clock::time_point> give_up_missing_at;
    std::optional<Reader> ring;  // reset by the thread on exit (under mutex: stop() may cancel it)
    std::atomic<bool> stop_requested{false};
    // The thread's poll watches it beside its sockets: drain() and stop() write it after storing what
    // they ask (under the mutex / stop_requested), so a thread asleep in wait_control() wakes now, not
    // one heartbeat later (a drain shorter than that lost the delivery it asked for). Drained by the
    // thread when it wakes; a write before its poll leaves it readable, so no request is missed.
    int wake_fd = -1;
    State() : wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (wake_fd < 0) throw Error(ErrorCode::system, std::string("eventfd failed: ") + std::strerror(errno));
    }
    ~State() { ::close(wake_fd); }
    void poke() const noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
    }

    // ---- the thread's own ----------------------------------------------------------------------
    zmq::context_t context;
    zmq::socket_t router;
    std::optional<zmq::socket_t> zap;
    std::thread thread;
    std::map<std::uint32_t, Peer> peers;
    detail::HeldRankClaims claims;  // hellos for a held rank from another instance (claim_of_a_held_rank)
    std::uint64_t next_seq = 0;  // seq the next ring message gets
    bool started = false;        // every expected rank said hello (or drain() gave the rest up): forwarding runs
    bool ring_has_data = false;  // seen while waiting to give the missing ranks up (peek without release)
    std::optional<Pending> pending;
    std::optional<wire::Header> end;  // close / writer_dead, once the ring ended
    std::string end_text;

    void run() noexcept;
    void loop();
    void service_control();
    void handle_hello(const detail::Received& r);
    [[nodiscard]] bool claim_of_a_held_rank(std::uint32_t rank, Peer& peer, const detail::Received& r);
    void wait_control(std::chrono::nanoseconds timeout);
    void take_from_ring();
    void deliver();
    void heartbeats(bool force);
    void send_end(Peer& peer, std::uint32_t rank);
    void mark(Peer& peer, std::uint32_t rank, PeerState state);
    void note_drained();
    [[nodiscard]] bool give_up_missing(Clock::duration& wait);
    [[nodiscard]] std::string missing_text() const;
    [[nodiscard]] Clock::time_point next_heartbeat_due() const;
};

namespace {
std::string rank_list(const std::vector<std::uint32_t>& ranks) {
    std::string s;
    for (const auto r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
}
}  // namespace

// ---- the thread --------------------------------------------------------------------------------
void RemotePublisher::State::run() noexcept {
    try {
        loop();
    } catch (...) {
        std::string what = "unknown error";
        try {
            throw;
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        {
            std::lock_guard lock(mutex);
            failure = std::current_exception();
        }
        if (!end) {
            // Numbered as stop()'s below: readers still waiting for a message half sent when it failed
            // get writer_dead (PeerDeadError), not a gap (FellBehindError).
            end = wire::Header{.kind = wire::Kind::writer_dead, .seq = pending ? pending->seq : next_seq};
            end_text = "the remote publisher failed: " + what;
            try {
                for (auto& [rank, peer] : peers) send_end(peer, rank);
            } catch (...) {
            }
        }
    }
    if (!end) {  // stopped before the ring ended: the readers must not wait for more
        end = wire::Header{.kind = wire::Kind::writer_dead, .seq = pending ? pending->seq : next_seq};
        end_text = started ? "the remote publisher was stopped before it forwarded its queue's close"
                           : "the remote publisher was stopped before forwarding started (remote reader rank(s) " +
                                 missing_text() + " never connected): nothing was forwarded";
        try {
            for (auto& [rank, peer] : peers) send_end(peer, rank);
        } catch (...) {
        }
    }
    std::lock_guard lock(mutex);
    ring.reset();  // releases the ring rank: the writer stops waiting for it
    finished = true;
    changed.notify_all();
}

void RemotePublisher::State::loop() {
    while (!stop_requested.load(std::memory_order_acquire)) {
        service_control();
        if (!started) {
            Clock::duration wait = options.heartbeat_interval;
            if (std::includes(hello_seen.begin(), hello_seen.end(), expected.begin(), expected.end()) ||
                give_up_missing(wait)) {
                started = true;
                std::lock_guard lock(mutex);
                forwarding = true;
                changed.notify_all();
            } else {
                heartbeats(false);
                wait_control(wait);
                continue;
            }
        }
        if (end) {  // the ring ended: keep telling (late joiners, and readers whose queue was full)
            heartbeats(false);
            note_drained();
            wait_control(options.heartbeat_interval);
            continue;
        }
        if (!pending) take_from_ring();
        if (pending) deliver();
        heartbeats(false);
    }
}

void RemotePublisher::State::service_control() {
    if (zap) detail::answer_zap(*zap, options.listen.curve_allowed_clients);
    detail::Received r;
    while (detail::receive(router, true, r)) {
        if (!r.valid) continue;  // not our protocol: ignored (a port scanner, another program)
        if (r.header.kind == wire::Kind::hello) {
            handle_hello(r);
        } else if (r.header.kind == wire::Kind::bye) {
            const auto rank = static_cast<std::uint32_t>(r.header.value);
            auto it = peers.find(rank);
            if (it != peers.end() && it->second.routing_id == r.routing_id && it->second.nonce == r.header.tag)
                mark(it->second, rank, PeerState::left);
        }
    }
}

void RemotePublisher::State::handle_hello(const detail::Received& r) {
    const auto rank = static_cast<std::uint32_t>(r.header.value);
    if (!expected.contains(rank)) {
        detail::refuse(router, r.routing_id, ErrorCode::invalid_argument,
                       "rank " + std::to_string(rank) + " is not a remote rank of this publisher (expected: " +
                           rank_list({expected.begin(), expected.end()}) + ")");
        return;
    }
    if (const auto held = peers.find(rank);
        held != peers.end() && held->second.nonce != r.header.tag && !claim_of_a_held_rank(rank, held->second, r))
        return;  // refused, or its answer deferred to its next hello
    auto [it, fresh] = peers.try_emplace(rank);
    Peer& peer = it->second;
    if (fresh || peer.nonce != r.header.tag) {  // a new reader process for this rank (its holder is gone)
        claims.forget(rank);
        peer = Peer{};
        peer.routing_id = r.routing_id;
        peer.nonce = r.header.tag;
        // Its first message: the one being delivered, or the next one from the ring.
        peer.next = pending ? pending->seq : next_seq;
        peer.welcome_seq = peer.next;
        peer.welcome_late = started && peer.next > 0;
        std::lock_guard lock(mutex);
        hello_seen.insert(rank);
        auto& s = stats;
        for (auto* v : {&s.lost_ranks, &s.fell_behind_ranks, &s.left_ranks}) std::erase(*v, rank);
        if (std::find(s.connected_ranks.begin(), s.connected_ranks.end(), rank) == s.connected_ranks.end())
            s.connected_ranks.push_back(rank);
        changed.notify_all();
    } else if (peer.state == PeerState::lost) {
        // The same reader process saying hello again: it re-sends hello until welcomed, so its
        // connection dropped before our welcome reached it, and a send on the old connection found it
        // gone (lost). ZeroMQ re-made the connection; the reader still expects message welcome_seq.
        // It can be served only if it missed nothing: no data went to it, and none went to the others
        // while it was lost (those messages are not kept). Welcoming it otherwise would leave it
        // waiting for data that never comes (deliver() and heartbeats() skip a lost peer).
        const std::uint64_t now_at = pending ? pending->seq : next_seq;
        if (peer.next != peer.welcome_seq || peer.next != now_at) {
            detail::refuse(router, r.routing_id, ErrorCode::invalid_argument,
                           "rank " + std::to_string(rank) +
                               ": this reader's connection dropped before the publisher's welcome reached it, and "
                               "messages " + std::to_string(peer.welcome_seq) + ".." + std::to_string(now_at - 1) +
                               " were sent meanwhile; a dropped connection is not resumed (a new reader process for "
                               "this rank joins late)");
            return;
        }
        peer.routing_id = r.routing_id;
        peer.state = PeerState::active;
        peer.full_since.reset();
        std::lock_guard lock(mutex);
        std::erase(stats.lost_ranks, rank);
        stats.connected_ranks.push_back(rank);
        changed.notify_all();
    }
    const wire::Header welcome{.kind = wire::Kind::welcome,
                               .flags = peer.welcome_late ? wire::kJoinedLate : std::uint8_t{0},
                               .seq = peer.welcome_seq};
    const auto res = detail::route(router, peer.routing_id, welcome, nullptr);
    if (res == SendResult::unreachable) mark(peer, rank, PeerState::lost);
    peer.last_sent = Clock::now();
    if (end) send_end(peer, rank);
}

// Another process (another nonce) says hello for a rank whose holder is `peer`. The holder gone —
// said bye, cut off, found lost, or its connection gone now (the probe below finds no such peer) —
// the claimant is its replacement: true, and handle_hello() serves it as before. The holder still
// served and connected: the claimant is refused (rank_in_use) at its next hello if the holder is still
// connected then; the holder keeps the rank and its connection (each process has a routing id of its
// own: nothing is handed over).
bool RemotePublisher::State::claim_of_a_held_rank(std::uint32_t rank, Peer& peer, const detail::Received& r) {
    if (peer.state != PeerState::active) return true;
    // The probe: a heartbeat (seq = what it expects next, as every heartbeat) to the holder's routing
    // id. ROUTER_MANDATORY answers from the socket's table of connections, which the send brings up to
    // date first (the I/O thread's queued commands): a connection that ended before this hello's
    // connection was attached is gone by then (one mailbox, in order), and one ending with frames
    // still unread is reported unreachable too (libzmq: a closing pipe that is not full).
    const wire::Header probe{.kind = wire::Kind::heartbeat, .seq = peer.next};
    const auto res = detail::route(router, peer.routing_id, probe, nullptr);
    if (res == SendResult::unreachable) {
        mark(peer, rank, PeerState::lost);
        return true;
    }
    if (res == SendResult::sent) peer.last_sent = Clock::now();
    // Still connected: refused at its second hello (HeldRankClaims says why not at its first).
    if (claims.second_hello(rank, r.header.tag))
        detail::refuse(router, r.routing_id, ErrorCode::rank_in_use, detail::HeldRankClaims::refusal("reader", rank, endpoint));
    return false;
}

void RemotePublisher::State::mark(Peer& peer, std::uint32_t rank, PeerState state) {
    if (peer.state == state) return;
    peer.state = state;
    peer.full_since.reset();
    std::lock_guard lock(mutex);
    std::erase(stats.connected_ranks, rank);
    if (state == PeerState::lost) stats.lost_ranks.push_back(rank);
    if (state == PeerState::fell_behind) stats.fell_behind_ranks.push_back(rank);
    if (state == PeerState::left) stats.left_ranks.push_back(rank);
    changed.notify_all();
}

void RemotePublisher::State::note_drained() {
    for (const auto& [rank, peer] : peers)
        if (peer.state == PeerState::active && !peer.end_sent) return;
    std::lock_guard lock(mutex);
    if (!drained) {
        drained = true;
        changed.notify_all();
    }
}

// drain() was called before every expected rank said hello: the writer is done, so the ranks still
// missing are waited for only until give_up_missing_at (and not at all while the ring holds nothing but
// its close: then no reader can miss a message). After that the connected ranks get everything and the
// close; a missing rank that connects later while the publisher still runs is told it joined late.
bool RemotePublisher::State::give_up_missing(Clock::duration& wait) {
    Clock::time_point at;
    {
        std::lock_guard lock(mutex);
        if (!give_up_missing_at) return false;
        at = *give_up_missing_at;
    }
    const auto now = Clock::now();
    if (now >= at) return true;
    wait = std::min(wait, at - now);
    if (ring_has_data) return false;
    try {
        const Message m = ring->peek(std::chrono::nanoseconds::zero());  // not released: peek() gives it again
        if (m.status == Status::ok) ring_has_data = true;
        return m.status == Status::closed;
    } catch (const Error& e) {
        if (e.code() != ErrorCode::peer_dead) throw;
        return true;  // the writer died: take_from_ring() tells the connected readers
    }
}

std::string RemotePublisher::State::missing_text() const {
    std::vector<std::uint32_t> missing;
    std::lock_guard lock(mutex);
    for (const auto r : expected)
        if (!hello_seen.contains(r)) missing.push_back(r);
    return rank_list(missing);
}

void RemotePublisher::State::wait_control(std::chrono::nanoseconds timeout) {
    std::vector<zmq::pollitem_t> items{{router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd, ZMQ_POLLIN, 0}};
    if (zap) items.push_back({zap->handle(), 0, ZMQ_POLLIN, 0});
    const auto ms = std::max<long>(1, static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(timeout).count()));
    detail::poll(items, ms, "zmq_poll");
    if ((items[1].revents & ZMQ_POLLIN) != 0) {  // drain()/stop() asked: the caller's loop looks now
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t n = ::read(wake_fd, &count, sizeof count);
    }
}

Clock::time_point RemotePublisher::State::next_heartbeat_due() const {
    auto due = Clock::now() + options.heartbeat_interval;
    for (const auto& [rank, peer] : peers)
        if (peer.state == PeerState::active || peer.state == PeerState::fell_behind)
            due = std::min(due, peer.last_sent + options.heartbeat_interval);
    return due;
}

void RemotePublisher::State::take_from_ring() {
    const auto wait = std::max(Clock::duration::zero(), next_heartbeat_due() - Clock::now());
    Message m;
    try {
        m = ring->peek(std::chrono::duration_cast<std::chrono::nanoseconds>(wait));
    } catch (const Error& e) {
        if (e.code() != ErrorCode::peer_dead) throw;
        // The ring's writer died without closing: say so, so remote readers fail at once.
        end = wire::Header{.kind = wire::Kind::writer_dead, .seq = next_seq};
        end_text = e.what();
        for (auto& [rank, peer] : peers) send_end(peer, rank);
        return;
    }
    if (m.status == Status::closed) {
        end = wire::Header{.kind = wire::Kind::close, .seq = next_seq};
        for (auto& [rank, peer] : peers) send_end(peer, rank);
        return;
    }
    if (m.status != Status::ok) return;  // timed out (heartbeats due) or cancelled (stop)
    // One copy out of the ring; then the ring space is released at once. At most this one message is
    // held outside the ring, so the ring's back-pressure still bounds what the writer may run ahead.
    pending = Pending{next_seq++, m.tag, zmq::message_t(m.bytes.data(), m.bytes.size())};
    ring->release();
}

void RemotePublisher::State::deliver() {
    bool all = true;
    const auto now = Clock::now();
    for (auto& [rank, peer] : peers) {
        if (peer.state != PeerState::active || peer.next != pending->seq) continue;
        const wire::Header h{.kind = wire::Kind::data, .seq = pending->seq, .tag = pending->tag,
                             .value = pending->body.size()};
        switch (detail::route(router, peer.routing_id, h, &pending->body)) {
            case SendResult::sent:
                ++peer.next;
                peer.last_sent = now;
                peer.full_since.reset();
                break;
            case SendResult::unreachable: mark(peer, rank, PeerState::lost); break;
            case SendResult::full:
                if (!peer.full_since) {
                    peer.full_since = now;
                    std::lock_guard lock(mutex);
                    ++stats.back_pressure_waits;
                }
                if (options.slow_reader == SlowReaderPolicy::drop_after &&
                    now - *peer.full_since >= options.slow_reader_timeout) {
                    mark(peer, rank, PeerState::fell_behind);  // it gets a kCutOff heartbeat (heartbeats())
                } else {
                    all = false;
                }
                break;
        }
    }
    if (all) {
        pending.reset();
        std::lock_guard lock(mutex);
        ++stats.forwarded;
        return;
    }
    // A reader's queue is full: ZeroMQ offers no "writable again" event per peer on a ROUTER, so
    // retry every millisecond (the slow path; control messages are served meanwhile).
    heartbeats(false);
    wait_control(std::chrono::milliseconds(1));
    service_control();
}

void RemotePublisher::State::send_end(Peer& peer, std::uint32_t rank) {
    if (peer.state != PeerState::active || peer.end_sent) return;
    zmq::message_t body(end_text.data(), end_text.size());
    switch (detail::route(router, peer.routing_id, *end, end_text.empty() ? nullptr : &body)) {
        case SendResult::sent:
            peer.end_sent = true;
            peer.last_sent = Clock::now();
            break;
        case SendResult::unreachable: mark(peer, rank, PeerState::lost); break;
        case SendResult::full: break;  // retried by heartbeats()
    }
}

void RemotePublisher::State::heartbeats(bool force) {
    const auto now = Clock::now();
    for (auto& [rank, peer] : peers) {
        if (peer.state == PeerState::fell_behind && !peer.cut_off_told) {
            // Cut off: tell it which message it missed first, as soon as its queue has room.
            const wire::Header h{.kind = wire::Kind::heartbeat, .flags = wire::kCutOff, .seq = peer.next};
            const auto r = detail::route(router, peer.routing_id, h, nullptr);
            if (r == SendResult::sent) peer.cut_off_told = true;
            continue;
        }
        if (peer.state != PeerState::active) continue;
        if (end && !peer.end_sent) {
            send_end(peer, rank);
            continue;
        }
        if (!force && now - peer.last_sent < options.heartbeat_interval) continue;
        const wire::Header h{.kind = end ? end->kind : wire::Kind::heartbeat, .seq = peer.next};
        zmq::message_t body(end_text.data(), end_text.size());
        const bool with_text = end && !end_text.empty();
        switch (detail::route(router, peer.routing_id, end ? *end : h, with_text ? &body : nullptr)) {
            case SendResult::sent: peer.last_sent = now; break;
            case SendResult::unreachable: mark(peer, rank, PeerState::lost); break;
            case SendResult::full: break;  // it has data queued: it is not starved of frames
        }
    }
}

// ---- the public side ---------------------------------------------------------------------------
RemotePublisher RemotePublisher::start(std::string_view ring_name, std::uint32_t ring_rank,
                                       const RemotePublisherOptions& options) {
    if (options.high_water_mark < 1)
        throw Error(ErrorCode::invalid_argument, "remote publisher: high_water_mark must be >= 1");
    if (options.heartbeat_interval <= std::chrono::nanoseconds::zero() ||
        options.connection_timeout <= std::chrono::nanoseconds::zero())
        throw Error(ErrorCode::invalid_argument, "remote publisher: heartbeat_interval and connection_timeout must be > 0");
    auto state = std::make_unique<State>();
    state->options = options;
    for (const auto r : options.ranks)
        if (!state->expected.insert(r).second)
            throw Error(ErrorCode::invalid_argument, "remote publisher: rank " + std::to_string(r) + " listed twice");
    try {
        state->router = zmq::socket_t(state->context, zmq::socket_type::router);
        auto& s = state->router;
        s.set(zmq::sockopt::router_mandatory, 1);  // full / gone peers are reported, never silently skipped
        // A reader process's reconnect takes its own routing id back (each process has its own, wire.hpp).
        s.set(zmq::sockopt::router_handover, 1);
        // Readers send control frames only (a header, a refusal's text): a peer that sends more is no
        // reader of ours, and is disconnected before anything of it is allocated past this bound.
        s.set(zmq::sockopt::maxmsgsize, std::int64_t{64} * 1024);
        s.set(zmq::sockopt::sndhwm, options.high_water_mark);
        s.set(zmq::sockopt::linger, static_cast<int>(options.linger.count()));
        detail::set_keepalive(s, options.connection_timeout);
        if (!options.listen.curve_allowed_clients.empty()) {
            // The ZAP handler must be bound before the listener accepts anyone (libzmq asks it per handshake).
            state->zap.emplace(state->context, zmq::socket_type::rep);
            state->zap->set(zmq::sockopt::linger, 0);
            state->zap->bind("inproc://zeromq.zap.01");
        }
        state->endpoint = detail::bind_listener(s, options.listen);
    } catch (const zmq::error_t& e) {
        detail::throw_zmq("remote publisher set-up", e);
    }
    if (!options.listen.curve_secret_key.empty()) state->curve_public = remote::curve_public_key(options.listen.curve_secret_key);
    // Last: a bad address or key must not cost the ring rank (a clean detach would release it for good).
    state->ring.emplace(Reader::attach(ring_name, ring_rank, options.ring));
    State* raw = state.get();
    state->thread = std::thread([raw] { raw->run(); });
    return RemotePublisher(std::move(state));
}

RemotePublisher::RemotePublisher(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
RemotePublisher::RemotePublisher(RemotePublisher&&) noexcept = default;
RemotePublisher::~RemotePublisher() {
    if (detail::let_go_in_forked_child(state_)) return;
    stop();
}

const std::string& RemotePublisher::endpoint() const noexcept { return state_->endpoint; }
const std::string& RemotePublisher::curve_public_key() const noexcept { return state_->curve_public; }

Status RemotePublisher::wait_ready(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemotePublisher::wait_ready");
    std::unique_lock lock(state_->mutex);
    const auto ready = [&] {
        return state_->finished || std::includes(state_->hello_seen.begin(), state_->hello_seen.end(),
                                                 state_->expected.begin(), state_->expected.end());
    };
    if (timeout == kForever) {
        state_->changed.wait(lock, ready);
    } else if (!state_->changed.wait_for(lock, timeout, ready)) {
        return Status::timed_out;
    }
    if (state_->failure) std::rethrow_exception(state_->failure);
    // Stopped (or stopping): it forwards nothing any more, so it is not ready, whoever had connected.
    // (finished is stored under the mutex before notify_all: a waiter woken by stop() sees it.)
    if (state_->finished || state_->stop_requested.load(std::memory_order_acquire)) return Status::closed;
    return Status::ok;
}

Status RemotePublisher::drain(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemotePublisher::drain");
    std::unique_lock lock(state_->mutex);
    // Before every expected reader connected nothing was forwarded: the missing ones are waited for a
    // bounded while (give_up_missing), then the connected ones get everything and the close.
    if (!state_->forwarding && !state_->give_up_missing_at) {
        auto grace = std::max(std::chrono::nanoseconds::zero(), state_->options.missing_ranks_grace);
        if (timeout != kForever) grace = std::min(grace, std::max(std::chrono::nanoseconds::zero(), timeout / 2));
        const auto now = Clock::now();  // (a grace past the clock's range: never given up)
        state_->give_up_missing_at = grace >= Clock::time_point::max() - now
                                         ? Clock::time_point::max()
                                         : now + std::chrono::duration_cast<Clock::duration>(grace);
        state_->poke();  // the thread may sleep a heartbeat in wait_control(): it looks now
    }
    const auto done = [&] { return state_->drained || state_->finished; };
    if (timeout == kForever) {
        state_->changed.wait(lock, done);
    } else if (!state_->changed.wait_for(lock, timeout, done)) {
        return Status::timed_out;
    }
    if (state_->failure) std::rethrow_exception(state_->failure);
    return Status::ok;
}

std::vector<std::uint32_t> RemotePublisher::missing_ranks() const {
    detail::refuse_in_forked_child(state_, "RemotePublisher::missing_ranks");
    std::lock_guard lock(state_->mutex);
    std::vector<std::uint32_t> missing;
    for (const auto r : state_->expected)
        if (!state_->hello_seen.contains(r)) missing.push_back(r);
    return missing;
}

RemotePublisherStats RemotePublisher::stats() const {
    detail::refuse_in_forked_child(state_, "RemotePublisher::stats");
    std::lock_guard lock(state_->mutex);
    return state_->stats;
}

void RemotePublisher::stop() noexcept {
    if (!state_ || !state_->thread.joinable() || state_->made_in.in_forked_child()) return;
    state_->stop_requested.store(true, std::memory_order_release);
    {
        std::lock_guard lock(state_->mutex);
        if (state_->ring) state_->ring->cancel();  // wakes a peek() in progress
    }
    state_->poke();  // ... and a wait_control() in progress
    state_->thread.join();
    // Closing the context waits up to `linger` for queued frames (the final close) to reach the readers.
    state_->zap.reset();
    state_->router.close();
    state_->context.close();
}

}  // namespace ringcast::remote
