// Remote replies (reply.hpp): the bridge thread (ROUTER → the remote ranks' reply rings) and the
// remote worker (DEALER).
#include "ringcast/remote/reply.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "ringcast/gather.hpp"
#include "zmq_util.hpp"

namespace ringcast::remote {

using detail::Clock;
using detail::SendResult;

// ===================================================================================================
struct RemoteReplyBridge::State {
    ringcast::detail::MadeInProcess made_in;  // a fork()ed child's copy is let go (let_go_in_forked_child)
    RemoteReplyOptions options;
    std::string gather_name;
    std::string endpoint, curve_public;

    mutable std::mutex mutex;  // guards the members up to `stop_requested`
    std::condition_variable changed;
    std::set<std::uint32_t> connected;  // said hello (ever)
    std::vector<std::uint32_t> lost;  // connection gone (erased when the rank reconnects)
    std::vector<std::uint32_t> left;  // said bye (erased when the rank reconnects)
    std::uint64_t replies = 0;
    std::exception_ptr failure;
    bool finished = false;
    std::atomic<bool> stop_requested{false};
    // stop()'s poke: the thread's poll watches it, so stop() returns at once rather than after up to a
    // heartbeat interval (liveness_interval / 5: seconds, for a long liveness interval). Never drained:
    // once written the thread only leaves.
    int stop_fd = -1;
    State() : stop_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (stop_fd < 0) throw Error(ErrorCode::system, std::string("eventfd failed: ") + std::strerror(errno));
    }
    ~State() { ::close(stop_fd); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    // the thread's own
    zmq::context_t context;
    zmq::socket_t router;
    std::optional<zmq::socket_t> zap;
    // The router's disconnect events (zmq_socket_monitor): a connection ended — a worker's process
    // died, keepalive gave up on its vanished host, or any other client of the port left (a health
    // check, a refused handshake). The event names the connection's fd, and only the worker whose
    // frames came on that fd is probed (heartbeats(), case 2): one whose connection is gone is
    // unreachable to the probe. (Declared after router: closed before it and the context.)
    std::optional<zmq::socket_t> monitor;
    std::thread thread;
    // A reply received that its ring has no room for yet (its rank is not being collected): kept, in
    // arrival order, and written on as the collector makes room — resumed where it stopped when it is
    // larger than the ring (`progress`), so that it never starts over.
    struct Backlogged {
        std::uint64_t tag = 0;
        zmq::message_t body;
        WriteProgress progress;
        std::uint64_t nonce = 0;  // the worker process that sent it (its window counts it until written)
        bool counted = true;      // false: it came after a later reply or hello had counted it as lost
    };
    struct Worker {
        std::optional<GatherWorker> ring;  // nullopt: closed after its connection was lost
        std::string routing_id;
        std::uint64_t nonce = 0;
        bool present = false;
        // The last frame sent to it, and the last one heard from it (a hello or a reply of the holder):
        // heartbeats() sends only to a worker heard since its last frame, so an idle one's unread
        // queue holds at most one (see heartbeats()).
        Clock::time_point last_sent{}, last_heard{};
        // Its connection's socket in the bridge (the fd its last frame came on), and until when it is
        // probed after the router's monitor said a connection on that fd ended (heartbeats(), case 2).
        int fd = -1;
        Clock::time_point probe_until{};
        std::deque<Backlogged> backlog;  // its replies not yet (whole) in its ring; front: the one being written
        bool room_by_fd = true;  // waits for room on its ring's eventfd (false: the collector cannot take it)
        bool close_when_written = false;  // gone (bye, or its connection lost): close the ring once the backlog is in
        // Credit (wire.hpp): replies of the process `nonce` written whole into the ring, the last such
        // count sent to it, and how many of its replies the backlog holds (at most the window).
        std::uint64_t taken = 0, told = 0, held = 0;
        // The highest reply number (wire.hpp) received from the process `nonce`: a reply numbered past
        // it + 1, or a hello saying more were sent, shows replies lost with a broken connection.
        std::uint64_t received = 0;
    };
    std::map<std::uint32_t, Worker> workers;
    std::uint64_t lost_replies = 0;  // bridge thread only: replies sent by workers that never arrived
    // Hellos of another instance for a rank whose worker is present, judged once the socket was read
    // up to now (judge_claims): what the holder sent before it went — replies, a bye — is taken first.
    struct Claim {
        std::uint32_t rank = 0;
        std::string routing_id;
        std::uint64_t nonce = 0;
        int fd = -1;
    };
    std::vector<Claim> claims;
    detail::HeldRankClaims held_rank_claims;  // what judge_claims() found of them while the holder was connected

    // How many replies a worker may have sent beyond those written into its ring (told in the welcome).
    [[nodiscard]] std::uint64_t window() const noexcept {
        return static_cast<std::uint64_t>(std::max(1, options.high_water_mark));
    }

    void run() noexcept;
    void handle(detail::Received& r);
    // The claims of the loop turn: a holder whose connection is gone is lost and the claimant
    // welcomed; one still connected keeps its rank (the claimant is refused at its next hello).
    void judge_claims();
    // The answer to the hello of process `nonce` at `routing_id` for `rank` (not held by another).
    // `sent`: how many replies the process says it sent (its hello's count; 0 from a new process).
    // `fd`: the connection's socket its hello came on (-1: unknown).
    void welcome(std::uint32_t rank, Worker& w, const std::string& routing_id, std::uint64_t nonce,
                 std::uint64_t sent, int fd);
    // Replies of `w`'s process numbered up to `number` that never arrived were lost with a connection
    // that broke (one connection is ordered): counted as taken, or each would hold a unit of its window
    // for good and, 16 lost, wedge its reply() with no error anywhere.
    void count_lost_replies(Worker& w, std::uint64_t number);
    // Heartbeats (with its credit) each worker that is due one — heard from since its last frame, probed
    // after a disconnect, or owed credit news (the cases at the definition); one found unreachable is
    // lost — called once the socket was read up to now (what it sent before it went is handled first).
    void heartbeats();
    // A frame of `w`'s holder came, on the connection `fd` (-1: unknown): it calls in (heartbeats()).
    static void heard(Worker& w, int fd) {
        w.last_heard = Clock::now();
        if (fd >= 0) w.fd = fd;
    }
    // Reads the router's monitor events (each two frames) and starts the probe of the worker whose
    // connection's fd an event names.
    void drain_monitor();
    // Sends `w` its credit when half a window of its replies went into the ring since it was last told
    // (so a worker waiting for credit hears at once; one that is not pays one frame per half window).
    void tell_taken(Worker& w);
    // Arms `w`'s backlog front for room on its ring's eventfd: room now (nothing armed), armed, or no
    // fd (the collector cannot take it: from then on room is looked for every 1 ms).
    enum class Room : std::uint8_t { now, armed, no_fd };
    [[nodiscard]] Room arm_for_room(Worker& w);
    // How far `w`'s backlog got (replies left, bytes of the front one written): whether a write moved.
    [[nodiscard]] static std::pair<std::size_t, std::uint64_t> backlog_position(const Worker& w) {
        return {w.backlog.size(), w.backlog.empty() ? 0 : w.backlog.front().progress.written};
    }
    void lose(std::uint32_t rank, Worker& w, bool clean);
    void close_if_written(Worker& w);  // a gone worker's ring, once nothing of it waits to be written
    // Writes `w`'s backlog into its ring, front first, each write waiting up to `slice`; false once
    // one did not finish (no room yet: it stays at the front, its progress kept).
    bool write_backlog(Worker& w, std::chrono::nanoseconds slice);
    // Before the loop's poll: writes what has room now and arms the rest of each backlog for room
    // (its ring's eventfd, in `items`, listed in `armed`); returns the poll's timeout, `ms` or shorter.
    long arm_backlogs(std::vector<zmq::pollitem_t>& items, std::vector<Worker*>& armed, long ms);
    // The reply rings' writer options: the bridge waits for room only for a rank whose replies are
    // not being collected, in short slices (run), so a hybrid wait's spin stays fixed (spin_for): an
    // adaptive one learns those slices as its waits and spins through every one of them (a core).
    [[nodiscard]] WriterOptions ring_options() const {
        WriterOptions wo = options.ring;
        if (wo.wait.kind == WaitKind::hybrid) wo.wait.spin_max = std::min(wo.wait.spin_max, wo.wait.spin_for);
        return wo;
    }
};

void RemoteReplyBridge::State::lose(std::uint32_t rank, Worker& w, bool clean) {
    w.present = false;
    {  // listed before the ring closes: a collector woken by the close already sees it in lost/left_ranks()
        std::lock_guard lock(mutex);
        (clean ? left : lost).push_back(rank);
        changed.notify_all();
    }
    // The replies it sent that the bridge holds still reach the collector (a bye follows the replies
    // before it on the connection; a local worker's published replies outlive it too); the ring
    // closes once they are in — at once when none waits — so that a collect waiting for more from
    // this rank sees `closed` instead of waiting forever. A replacement's hello meanwhile keeps it open.
    w.close_when_written = true;
    close_if_written(w);
}

void RemoteReplyBridge::State::close_if_written(Worker& w) {
    if (!w.close_when_written || !w.backlog.empty() || !w.ring) return;
    w.close_when_written = false;
    w.ring->close();
    w.ring.reset();
}

bool RemoteReplyBridge::State::write_backlog(Worker& w, std::chrono::nanoseconds slice) {
    bool all = true;
    while (!w.backlog.empty() && w.ring) {
        Backlogged& b = w.backlog.front();
        const std::span<const std::byte> bytes{static_cast<const std::byte*>(b.body.data()), b.body.size()};
        if (w.ring->reply(b.tag, bytes, slice, b.progress) != Status::ok) {
            all = false;
            break;
        }
        if (b.nonce == w.nonce && b.counted) {  // (a gone process's reply: its credit is nobody's any more)
            ++w.taken;
            --w.held;
        }
        w.backlog.pop_front();
        std::lock_guard lock(mutex);
        ++replies;
    }
    tell_taken(w);
    if (all) close_if_written(w);
    return all;
}

void RemoteReplyBridge::State::tell_taken(Worker& w) {
    if (!w.present || w.taken - w.told < std::max<std::uint64_t>(1, window() / 2)) return;
    // No wake is lost: the worker waits for credit in a poll on its socket; this frame (or, if its queue
    // is full now, the next heartbeat, which carries the same count) makes that socket readable.
    if (detail::route(router, w.routing_id, wire::Header{.kind = wire::Kind::heartbeat, .seq = w.taken}, nullptr) ==
        SendResult::sent) {
        w.told = w.taken;
        w.last_sent = Clock::now();
    }  // unreachable: heartbeats() loses it after the socket was read; full: the next heartbeat tells it
}

long RemoteReplyBridge::State::arm_backlogs(std::vector<zmq::pollitem_t>& items, std::vector<Worker*>& armed, long ms) {
    // The wait for room of a backlog: the collector's release of ring space signals the ring's
    // eventfd (the wake path of every event-loop writer, events/eventfd.hpp), so the bridge sleeps in
    // its one poll until a worker's message or a ring's room — no CPU while a rank is not collected,
    // and its reply goes on as soon as the collector reads. Cases:
    long timeout = ms;
    for (auto& [rank, w] : workers) {
        if (w.backlog.empty() || !w.ring) continue;
        const Room room = arm_for_room(w);
        if (room == Room::armed) {  // (2) the eventfd turns readable when the collector makes room
            items.push_back({nullptr, w.ring->wake_fd(), ZMQ_POLLIN, 0});
            armed.push_back(&w);
            continue;
        }
        // (1) no eventfd (the collector could not take it): room is looked for every 1 ms. (3) room
        // now: write; what is left is looked at again at once — unless nothing moved (the room arm
        // saw was not enough for the record the write needed): then in 1 ms, never a spin.
        const auto before = backlog_position(w);
        (void)write_backlog(w, std::chrono::milliseconds(0));
        if (!w.backlog.empty()) timeout = std::min(timeout, room == Room::now && backlog_position(w) != before ? 0L : 1L);
    }
    return timeout;
}

void RemoteReplyBridge::State::judge_claims() {
    for (const Claim& c : claims) {
        Worker& w = workers.at(c.rank);
        if (w.present && w.nonce != c.nonce) {
            // The probe: a heartbeat to the holder's routing id. ROUTER_MANDATORY answers from the
            // socket's table of connections, brought up to date by the send (the I/O thread's queued
            // commands, in order): unreachable once the holder's connection ended — and, as the socket
            // was read up to now, what it sent before it ended is in (libzmq reads a closing
            // connection's frames out before it drops it, and reports that closing one unreachable).
            const auto res = detail::route(router, w.routing_id,
                                           wire::Header{.kind = wire::Kind::heartbeat, .seq = w.taken}, nullptr);
            if (res == SendResult::unreachable) {
                lose(c.rank, w, false);  // gone: the claimant replaces it, as after any loss
            } else {
                if (res == SendResult::sent) {
                    w.told = w.taken;
                    w.last_sent = Clock::now();
                }
                // Still connected: refused at the claimant's second hello (HeldRankClaims says why not
                // at its first; the claimant sends no reply before its welcome).
                if (held_rank_claims.second_hello(c.rank, c.nonce))
                    detail::refuse(router, c.routing_id, ErrorCode::rank_in_use,
                                   detail::HeldRankClaims::refusal("worker", c.rank, endpoint));
                continue;
            }
        }
        welcome(c.rank, w, c.routing_id, c.nonce, 0, c.fd);
    }
    claims.clear();
}

void RemoteReplyBridge::State::count_lost_replies(Worker& w, std::uint64_t number) {
    if (number <= w.received) return;
    w.taken += number - w.received;
    lost_replies += number - w.received;
    w.received = number;
}

void RemoteReplyBridge::State::welcome(std::uint32_t rank, Worker& w, const std::string& routing_id,
                                       std::uint64_t nonce, std::uint64_t sent, int fd) {
    if (!w.present || w.nonce != nonce) {
        held_rank_claims.forget(rank);
        if (w.nonce != nonce) {  // another instance: its own credit (a gone one's replies still kept are
            w.taken = w.told = w.held = w.received = 0;  // written first, counted for nobody)
            // Counted for nobody even if their process holds the rank again later (X, then Y, then X
            // reconnected): its credit started over at this hello, and its old replies counted against
            // it would take `held` below zero and refuse its next reply as beyond its window.
            for (Backlogged& b : w.backlog) b.counted = false;
        }
        w.routing_id = routing_id;
        w.nonce = nonce;
        w.present = true;
        w.close_when_written = false;  // a replacement: its replies follow the gone one's still kept
        if (!w.ring) {  // a replacement after a lost connection: reopen the closed reply ring
            w.ring.emplace(GatherWorker::attach(gather_name, rank, ring_options()));
        }
        std::lock_guard lock(mutex);
        connected.insert(rank);
        std::erase(lost, rank);
        std::erase(left, rank);
        changed.notify_all();
    }
    count_lost_replies(w, sent);  // its hello left after every reply it counts
    heard(w, fd);
    // The welcome carries the window and the credit so far (a repeated hello of the same process: its
    // count goes on).
    if (detail::route(router, w.routing_id, wire::Header{.kind = wire::Kind::welcome, .seq = w.taken, .value = window()},
                      nullptr) == SendResult::sent)
        w.told = w.taken;
    w.last_sent = Clock::now();
}

void RemoteReplyBridge::State::handle(detail::Received& r) {
    if (!r.valid) return;
    const auto rank = static_cast<std::uint32_t>(r.header.value);
    auto it = workers.find(rank);
    if (r.header.kind == wire::Kind::hello) {
        if (it == workers.end()) {
            detail::refuse(router, r.routing_id, ErrorCode::invalid_argument,
                           "rank " + std::to_string(rank) + " is not a remote worker rank of this gather");
            return;
        }
        Worker& w = it->second;
        if (w.present && w.nonce != r.header.tag) {  // another instance for a held rank: judge_claims()
            const auto same = [&](const Claim& c) { return c.rank == rank && c.nonce == r.header.tag; };
            if (std::none_of(claims.begin(), claims.end(), same)) claims.push_back({rank, r.routing_id, r.header.tag, r.fd});
            return;  // (a repeat within one turn is one hello: the claimant is judged at a later one)
        }
        welcome(rank, w, r.routing_id, r.header.tag, r.header.seq, r.fd);
        return;
    }
    if (r.header.kind == wire::Kind::bye) {  // a clean close: only from the connection that said hello
        if (it != workers.end() && it->second.present && it->second.routing_id == r.routing_id &&
            it->second.nonce == r.header.tag)
            lose(rank, it->second, true);
        return;
    }
    // Replies only from the rank's holder (a refused or replaced process's are not its).
    if (r.header.kind != wire::Kind::reply || it == workers.end() || !it->second.present ||
        it->second.routing_id != r.routing_id)
        return;
    Worker& w = it->second;
    heard(w, r.fd);
    if (w.held >= window()) {
        // Beyond its credit: no ringcast worker sends that (it waits for credit). Refused and given up,
        // so that what the bridge keeps stays bounded; what it kept still reaches the ring.
        detail::refuse(router, r.routing_id, ErrorCode::protocol,
                       "remote worker rank " + std::to_string(rank) + " sent more than " + std::to_string(window()) +
                           " replies beyond those written into its reply ring (the bridge's window)");
        lose(rank, w, false);
        return;
    }
    // Written now if its ring has room (and nothing of this rank waits before it); else kept, and the
    // loop (run, arm_backlogs) writes it on as room comes while it goes on serving the socket: a rank
    // whose replies are not being collected holds up no other rank's, nor anyone's hello or handshake.
    // What it keeps stays bounded without a wait here: a worker sends at most window() replies beyond
    // those written (credit, wire.hpp) and then waits in its own reply() for the credit that
    // write_backlog() sends as the collector makes room.
    // Replies are numbered from 1 by their process. One numbered at or below what was already counted
    // came late (from a connection that closed after a later frame arrived on its successor): delivered,
    // but its credit was given when it was counted lost.
    const bool late = r.header.seq != 0 && r.header.seq <= w.received;
    if (!late && r.header.seq != 0) {
        count_lost_replies(w, r.header.seq - 1);
        w.received = r.header.seq;
    }
    w.backlog.push_back({r.header.tag, std::move(r.body), {}, w.nonce, !late});
    if (!late) ++w.held;
    (void)write_backlog(w, std::chrono::nanoseconds::zero());
}

RemoteReplyBridge::State::Room RemoteReplyBridge::State::arm_for_room(Worker& w) {
    if (!w.room_by_fd) return Room::no_fd;
    try {
        return w.ring->arm_wake_fd(w.backlog.front().body.size(), &w.backlog.front().progress) ? Room::now : Room::armed;
    } catch (const Error& e) {
        if (e.code() != ErrorCode::permission_denied) throw;
        w.room_by_fd = false;  // from now on
        return Room::no_fd;
    }
}

// Who gets a heartbeat, every heartbeat_interval at most:
//   1. a worker heard since its last frame (it calls in: it reads what it is sent);
//   2. a worker whose connection's fd a disconnect event named, until its probe_until (at least
//      250 ms: libzmq reports the event before the router has dropped the routing id, and a loaded
//      machine's I/O thread may take a while): the probe of a gone one is unreachable, and it is lost
//      (an fd reused by a new connection meanwhile costs that worker a few frames, nothing more);
//   3. a worker owed credit news (taken > told: tell_taken could not send it).
// Not an idle one otherwise: a worker that does not call in (it waits for its next request, for
// hours) reads nothing, and frames sent to it pile up in its ZeroMQ queue (1000), then in its
// kernel's receive buffer, until its TCP window closes and TCP_USER_TIMEOUT (connection_timeout)
// drops the live connection — measured: an idle live worker lost after 8 s with 1 ms heartbeats.
// An idle worker's death still ends its connection — a process's at once (its kernel closes it),
// a vanished host's by keepalive, which probes an idle connection (no frames in flight) — and the
// disconnect event starts the probe (2). A worker that listens without replying (check_liveness,
// a wait for credit or for room) says hello every quarter of its liveness interval: heard (1).
void RemoteReplyBridge::State::heartbeats() {
    const auto now = Clock::now();
    for (auto& [rank, w] : workers) {
        if (!w.present || now - w.last_sent < options.heartbeat_interval) continue;
        if (!(w.last_heard >= w.last_sent || now < w.probe_until || w.taken != w.told)) continue;
        switch (detail::route(router, w.routing_id, wire::Header{.kind = wire::Kind::heartbeat, .seq = w.taken},
                              nullptr)) {
            case SendResult::sent:
                w.last_sent = now;
                w.told = w.taken;
                break;
            case SendResult::unreachable: lose(rank, w, false); break;
            case SendResult::full: break;
        }
    }
}

void RemoteReplyBridge::State::drain_monitor() {
    zmq::message_t frame;
    while (monitor->recv(frame, zmq::recv_flags::dontwait)) {
        // The event's first frame: its id (16 bits) and value (32 bits: the fd); its last: the endpoint.
        if (!frame.more()) continue;
        std::uint32_t fd = 0;
        if (frame.size() >= 6) std::memcpy(&fd, static_cast<const char*>(frame.data()) + 2, sizeof fd);
        const auto now = Clock::now();
        for (auto& [rank, w] : workers) {
            // (a worker whose fd is unknown — ZMQ_SRCFD gave none — is probed at every event)
            if (!w.present || (w.fd >= 0 && w.fd != static_cast<int>(fd))) continue;
            w.probe_until = now + std::max<std::chrono::nanoseconds>(5 * options.heartbeat_interval,
                                                                    std::chrono::milliseconds(250));
            w.last_sent = {};  // probed at this turn's heartbeats()
        }
    }
}

void RemoteReplyBridge::State::run() noexcept {
    try {
        std::vector<zmq::pollitem_t> items{{router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, stop_fd, ZMQ_POLLIN, 0}};
        if (zap) items.push_back({zap->handle(), 0, ZMQ_POLLIN, 0});
        items.push_back({monitor->handle(), 0, ZMQ_POLLIN, 0});
        const auto ms = std::max<long>(
            1, static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(options.heartbeat_interval).count()));
        const std::size_t sockets = items.size();
        std::vector<Worker*> armed;
        while (!stop_requested.load(std::memory_order_acquire)) {
            items.resize(sockets);
            armed.clear();
            const long timeout = arm_backlogs(items, armed, ms);
            detail::poll(items, timeout, "reply bridge: zmq_poll");
            for (Worker* w : armed)
                if (w->ring) w->ring->disarm_wake_fd();  // (a ring a lose() closed meanwhile: gone)
            if (zap) detail::answer_zap(*zap, options.listen.curve_allowed_clients);
            drain_monitor();
            detail::Received r;
            while (detail::receive(router, true, r)) handle(r);
            judge_claims();  // the socket was read up to now
            heartbeats();
        }
    } catch (...) {
        std::lock_guard lock(mutex);
        failure = std::current_exception();
    }
    for (auto& [rank, w] : workers)
        if (w.ring) w.ring->close();
    std::lock_guard lock(mutex);
    finished = true;
    changed.notify_all();
}

RemoteReplyBridge RemoteReplyBridge::start(std::string_view gather_name, const RemoteReplyOptions& options) {
    if (options.high_water_mark < 1 || options.heartbeat_interval <= std::chrono::nanoseconds::zero())
        throw Error(ErrorCode::invalid_argument, "remote reply bridge: high_water_mark >= 1 and heartbeat_interval > 0 required");
    auto s = std::make_unique<State>();
    s->options = options;
    s->gather_name = std::string(gather_name);
    try {
        s->router = zmq::socket_t(s->context, zmq::socket_type::router);
        s->router.set(zmq::sockopt::router_mandatory, 1);
        s->router.set(zmq::sockopt::router_handover, 1);
        s->router.set(zmq::sockopt::rcvhwm, options.high_water_mark);
        s->router.set(zmq::sockopt::linger, static_cast<int>(options.linger.count()));
        // TCP_USER_TIMEOUT too: a worker that calls in is heartbeated, so a vanished worker host may
        // leave unacknowledged bytes, which keepalive alone never ends (zmq_util.hpp); an idle one is
        // sent nothing (heartbeats()), and keepalive covers its connection.
        detail::set_keepalive(s->router, options.connection_timeout, /*user_timeout=*/true);
        // (the bridge's own context: one fixed inproc name per bridge)
        if (::zmq_socket_monitor(s->router.handle(), "inproc://ringcast-reply-bridge-monitor", ZMQ_EVENT_DISCONNECTED) != 0)
            throw zmq::error_t();
        s->monitor.emplace(s->context, zmq::socket_type::pair);
        s->monitor->set(zmq::sockopt::linger, 0);
        s->monitor->connect("inproc://ringcast-reply-bridge-monitor");
        if (!options.listen.curve_allowed_clients.empty()) {
            s->zap.emplace(s->context, zmq::socket_type::rep);
            s->zap->set(zmq::sockopt::linger, 0);
            s->zap->bind("inproc://zeromq.zap.01");
        }
        s->endpoint = detail::bind_listener(s->router, options.listen);
    } catch (const zmq::error_t& e) {
        detail::throw_zmq("remote reply bridge set-up", e);
    }
    if (!options.listen.curve_secret_key.empty()) s->curve_public = remote::curve_public_key(options.listen.curve_secret_key);
    for (const auto rank : options.ranks) {
        auto [it, fresh] = s->workers.try_emplace(rank);
        if (!fresh) throw Error(ErrorCode::invalid_argument, "remote reply bridge: rank " + std::to_string(rank) + " listed twice");
        it->second.ring.emplace(GatherWorker::attach(gather_name, rank, s->ring_options()));
    }
    State* raw = s.get();
    s->thread = std::thread([raw] { raw->run(); });
    return RemoteReplyBridge(std::move(s));
}

RemoteReplyBridge::RemoteReplyBridge(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
RemoteReplyBridge::RemoteReplyBridge(RemoteReplyBridge&&) noexcept = default;
RemoteReplyBridge::~RemoteReplyBridge() {
    if (detail::let_go_in_forked_child(state_)) return;
    stop();
}
const std::string& RemoteReplyBridge::endpoint() const noexcept { return state_->endpoint; }
const std::string& RemoteReplyBridge::curve_public_key() const noexcept { return state_->curve_public; }

Status RemoteReplyBridge::wait_ready(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemoteReplyBridge::wait_ready");
    std::unique_lock lock(state_->mutex);
    const auto ready = [&] {
        if (state_->finished) return true;
        for (const auto& [rank, w] : state_->workers)
            if (!state_->connected.contains(rank)) return false;
        return true;
    };
    if (timeout == kForever) {
        state_->changed.wait(lock, ready);
    } else if (!state_->changed.wait_for(lock, timeout, ready)) {
        return Status::timed_out;
    }
    if (state_->failure) std::rethrow_exception(state_->failure);
    // Stopped (or stopping): never reported ready (finished is stored under the mutex, then notified).
    return state_->finished || state_->stop_requested.load(std::memory_order_acquire) ? Status::closed : Status::ok;
}

std::vector<std::uint32_t> RemoteReplyBridge::missing_ranks() const {
    detail::refuse_in_forked_child(state_, "RemoteReplyBridge::missing_ranks");
    std::lock_guard lock(state_->mutex);
    std::vector<std::uint32_t> missing;
    for (const auto r : state_->options.ranks)
        if (!state_->connected.contains(r)) missing.push_back(r);
    return missing;
}

std::vector<std::uint32_t> RemoteReplyBridge::lost_ranks() const {
    detail::refuse_in_forked_child(state_, "RemoteReplyBridge::lost_ranks");
    std::lock_guard lock(state_->mutex);
    return state_->lost;
}

std::vector<std::uint32_t> RemoteReplyBridge::left_ranks() const {
    detail::refuse_in_forked_child(state_, "RemoteReplyBridge::left_ranks");
    std::lock_guard lock(state_->mutex);
    return state_->left;
}

std::uint64_t RemoteReplyBridge::replies() const {
    detail::refuse_in_forked_child(state_, "RemoteReplyBridge::replies");
    std::lock_guard lock(state_->mutex);
    return state_->replies;
}

void RemoteReplyBridge::stop() noexcept {
    if (!state_ || !state_->thread.joinable() || state_->made_in.in_forked_child()) return;
    state_->stop_requested.store(true, std::memory_order_release);
    const std::uint64_t one = 1;  // after the flag: the thread woken by it sees the flag
    [[maybe_unused]] const ssize_t n = ::write(state_->stop_fd, &one, sizeof one);
    state_->thread.join();
    state_->workers.clear();
    state_->zap.reset();
    state_->monitor.reset();  // (its socket open, the context's close would wait for it for good)
    state_->router.close();
    state_->context.close();
}

// ===================================================================================================
struct RemoteGatherWorker::State {
    ringcast::detail::MadeInProcess made_in;  // a fork()ed child's copy is let go (let_go_in_forked_child)
    RemoteWorkerOptions options;
    std::string endpoint;
    std::uint32_t rank = 0;
    std::uint64_t nonce = 0;
    zmq::context_t context;
    zmq::socket_t socket;
    bool welcomed = false;
    bool closed = false;
    bool sent_reply = false;  // a reply was queued: close() must let it leave (linger)
    // last_said: its last hello or reply. A welcomed worker that said nothing for a quarter of its
    // liveness interval says hello when it next calls in (pump): the bridge heartbeats only a worker
    // it hears from (RemoteReplyBridge::State::heartbeats), and this one listens.
    // The bridge's silence is counted from the first frame it sent that nothing answered since
    // (asked_since, while asking): a hello is answered by a welcome at once, a reply by a heartbeat
    // within the bridge's heartbeat interval. Not from the last frame heard: an idle worker hears
    // nothing, by design, however long it stays idle.
    Clock::time_point last_heard, last_hello{}, last_said{}, asked_since{};
    bool asking = false;

    void said() {
        last_said = Clock::now();
        if (!asking) {
            asking = true;
            asked_since = last_said;
        }
    }
    [[nodiscard]] bool bridge_silent(Clock::time_point now) const {
        return asking && now - asked_since >= options.liveness_interval;
    }
    // When a waiting call must look again: the bridge's silence would be judged, or a hello is due.
    [[nodiscard]] Clock::time_point next_look() const {
        const auto hello_due = (welcomed ? last_said : last_hello) + options.liveness_interval / 4;
        return asking ? std::min(asked_since + options.liveness_interval, hello_due) : hello_due;
    }
    // Credit (wire.hpp): replies queued on this connection, how many of them the bridge has written
    // into the rank's ring (its latest welcome/heartbeat; counts only grow), and the window it gave.
    std::uint64_t sent = 0, taken = 0, window = 0;

    void hello() {
        // seq: how many replies it sent (the bridge counts those that never came as taken: credit resync).
        zmq::message_t m = detail::header_frame({.kind = wire::Kind::hello, .seq = sent, .tag = nonce, .value = rank});
        // Counted as said only once it went (a full queue to the bridge: the bridge never heard it,
        // and its silence must not be counted from it); tried again at the next look either way.
        if (socket.send(m, zmq::send_flags::dontwait)) said();
        last_hello = Clock::now();
    }
    // Takes what the bridge sent; throws peer_dead after liveness_interval of silence.
    void pump() {
        detail::Received r;
        while (detail::receive(socket, false, r)) {
            if (!r.valid) continue;
            last_heard = Clock::now();
            asking = false;
            const auto& h = r.header;
            if (h.kind == wire::Kind::welcome) {
                welcomed = true;
                window = std::max<std::uint64_t>(1, h.value);
            }
            if (h.kind == wire::Kind::welcome || h.kind == wire::Kind::heartbeat) taken = std::max(taken, h.seq);
            if (h.kind == wire::Kind::writer_dead && (h.flags & wire::kRefused) != 0)
                throw Error(detail::refusal_code(h), "remote gather worker rank " + std::to_string(rank) +
                                                         ": refused by the bridge: " + r.body.to_string());
        }
        const auto now = Clock::now();
        if (now - (welcomed ? last_said : last_hello) >= options.liveness_interval / 4) hello();
        if (bridge_silent(now))
            throw Error(ErrorCode::peer_dead,
                        "remote gather worker rank " + std::to_string(rank) + ": nothing from the reply bridge at " +
                            endpoint + " for " + std::to_string(std::chrono::duration<double>(now - asked_since).count()) +
                            " s: the collector or its host is gone");
    }
};

RemoteGatherWorker RemoteGatherWorker::connect(std::string_view endpoint, std::uint32_t rank,
                                               const RemoteWorkerOptions& options) {
    if (options.high_water_mark < 1 || options.liveness_interval <= std::chrono::nanoseconds::zero())
        throw Error(ErrorCode::invalid_argument, "remote gather worker: high_water_mark >= 1 and liveness_interval > 0 required");
    auto s = std::make_unique<State>();
    s->options = options;
    s->endpoint = std::string(endpoint);
    s->rank = rank;
    s->nonce = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
    try {
        s->socket = zmq::socket_t(s->context, zmq::socket_type::dealer);
        // Its own routing id (per instance, wire.hpp): another instance of the same rank never takes its
        // connection over; the bridge refuses that one instead.
        s->socket.set(zmq::sockopt::routing_id, detail::peer_routing_id("worker", rank, s->nonce));
        s->socket.set(zmq::sockopt::sndhwm, options.high_water_mark);
        s->socket.set(zmq::sockopt::linger, 2000);  // the last replies still leave after destruction
        detail::set_keepalive(s->socket, std::chrono::seconds(10));
        detail::configure_connector(s->socket, endpoint, options.security);
        s->socket.connect(s->endpoint);
    } catch (const zmq::error_t& e) {
        throw Error(ErrorCode::invalid_argument, "remote gather worker: cannot connect to '" + s->endpoint + "': " + e.what());
    }
    s->last_heard = Clock::now();
    s->hello();
    return RemoteGatherWorker(std::move(s));
}

RemoteGatherWorker::RemoteGatherWorker(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
RemoteGatherWorker::RemoteGatherWorker(RemoteGatherWorker&&) noexcept = default;
RemoteGatherWorker::~RemoteGatherWorker() {
    if (detail::let_go_in_forked_child(state_)) return;
    close();
}

void RemoteGatherWorker::close() noexcept {
    if (!state_ || state_->closed || state_->made_in.in_forked_child()) return;
    state_->closed = true;
    try {
        // Nothing but hellos queued for a bridge that never answered, or a bridge silent for the
        // liveness interval: nothing worth delivering, so the destructor must not linger 2 s on it.
        try {
            state_->pump();  // a welcome that arrived meanwhile
        } catch (const Error&) {
            // silent bridge: handled below
        }
        if ((!state_->welcomed && !state_->sent_reply) ||
            state_->bridge_silent(Clock::now()))
            state_->socket.set(zmq::sockopt::linger, 0);
        // Replies already queued leave first (one connection: ZeroMQ keeps the order), then the bye.
        zmq::message_t m = detail::header_frame({.kind = wire::Kind::bye, .tag = state_->nonce, .value = state_->rank});
        (void)state_->socket.send(m, zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
        // the bridge is gone or the queue full: the dropped connection tells it instead (lost_ranks)
    }
}
std::uint32_t RemoteGatherWorker::rank() const noexcept { return state_->rank; }
void RemoteGatherWorker::check_liveness() {
    detail::refuse_in_forked_child(state_, "RemoteGatherWorker::check_liveness");
    state_->pump();
}

Status RemoteGatherWorker::wait_ready(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemoteGatherWorker::wait_ready");
    auto& s = *state_;
    const auto deadline = detail::deadline_after(timeout);
    if (s.closed) return Status::closed;  // never ready after close() (it reported ok, or said hello again)
    std::vector<zmq::pollitem_t> items{{s.socket.handle(), 0, ZMQ_POLLIN, 0}};
    for (;;) {
        s.pump();
        if (s.welcomed) return Status::ok;
        if (deadline && Clock::now() >= *deadline) return Status::timed_out;
        auto wake = s.next_look();
        if (deadline) wake = std::min(wake, *deadline);
        detail::poll(items, detail::poll_ms(wake), "remote gather worker: zmq_poll");
    }
}

std::string RemoteGatherWorker::blocked_on() const {
    const auto& s = *state_;
    if (!s.welcomed) return "the reply bridge's welcome (no answer to this worker's hello from " + s.endpoint + ")";
    if (s.sent - s.taken >= s.window)
        return "credit from the reply bridge at " + s.endpoint + ": " + std::to_string(s.sent - s.taken) + " replies of rank " +
               std::to_string(s.rank) + " are not yet written into its reply ring (the window is " +
               std::to_string(s.window) + "): the ring stays full until the executor collects this rank";
    return "room in the connection's queue to the reply bridge at " + s.endpoint + " (its high-water mark of " +
           std::to_string(s.options.high_water_mark) + " messages)";
}

Status RemoteGatherWorker::reply(std::uint64_t tag, std::span<const std::byte> bytes, std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemoteGatherWorker::reply");
    auto& s = *state_;
    const auto deadline = detail::deadline_after(timeout);
    if (s.closed) return Status::closed;
    std::vector<zmq::pollitem_t> items{{s.socket.handle(), 0, ZMQ_POLLIN, 0}};
    for (;;) {
        s.pump();
        const wire::Header h{.kind = wire::Kind::reply, .seq = s.sent + 1, .tag = tag, .value = s.rank};  // numbered
        // Sent only with credit: once welcomed (the welcome gives the window), and while fewer than
        // `window` of its replies are not yet written into its ring. Else it waits here, for the bridge's
        // credit, its welcome, or room in the connection's queue — not the bridge for it.
        const bool credit = s.welcomed && s.sent - s.taken < s.window;
        if (credit) {
            // A DEALER takes a message when its queue to the bridge is below the high-water mark; the
            // two frames then go together (ZeroMQ queues a multipart message whole).
            zmq::message_t head = detail::header_frame(h);
            if (s.socket.send(head, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
                zmq::message_t body(bytes.data(), bytes.size());
                (void)s.socket.send(body, zmq::send_flags::none);
                ++s.sent;
                s.sent_reply = true;
                s.said();
                return Status::ok;
            }
        }
        if (deadline && Clock::now() >= *deadline) return Status::timed_out;
        // No wake lost: credit and the welcome arrive as frames on the socket (POLLIN); room in the
        // queue is POLLOUT, asked for only when credit is there (else it would be ready at once: a spin).
        items[0].events = static_cast<short>(ZMQ_POLLIN | (credit ? ZMQ_POLLOUT : 0));
        // Without credit it says hello again every liveness_interval / 4 (pump() does before the welcome):
        // the hello counts its replies, so replies lost with a broken connection give their credit back.
        const auto now = Clock::now();
        if (s.welcomed && !credit && now - s.last_hello >= s.options.liveness_interval / 4) s.hello();
        auto wake = std::min(s.next_look(), s.last_hello + s.options.liveness_interval / 4);
        if (deadline) wake = std::min(wake, *deadline);
        detail::poll(items, detail::poll_ms(wake), "remote gather worker: zmq_poll");
    }
}

}  // namespace ringcast::remote
