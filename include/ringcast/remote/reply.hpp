// ringcast/remote/reply.hpp — replies from workers on other machines into a local GatherCollector.
//
//   remote worker rank 2 ──ZeroMQ──┐                        ┌─ reply ring G.r2 ─┐
//   remote worker rank 3 ──ZeroMQ──┴─► RemoteReplyBridge ───┴─ reply ring G.r3 ─┴─► GatherCollector
//   local worker rank 0/1 ───────────────── reply rings G.r0 / G.r1 ──────────────┘   collect(tag, ...)
//
// The bridge (a thread in the collector's process, usually) is the writer of the reply rings of the
// remote ranks: every reply that arrives over ZeroMQ is written into its rank's ring with its tag,
// ringing the gather doorbell like a local worker. So collect() is unchanged — one wait over local and
// remote ranks, the same tag check (stale_reply), timeouts, cancel and kept replies.
//
// No lost wake: the bridge's thread writes a remote reply with GatherWorker::reply, the very call a local
// worker makes: the reply ring's Writer publishes it and rings the gather doorbell on its publish path
// (gather.hpp; the announce/ring handshake checked in tests/model/gather.pml). So a collect() that saw
// no reply before it slept is woken exactly as by a local worker — no new wait or wake path. Being a
// thread of the collector's process changes nothing: the futex words live in the shared mapping.
//
// Liveness: the bridge heartbeats every heartbeat_interval each connected worker that calls in (one it
// heard from since its last frame; a worker that listens without replying says hello every quarter of
// its liveness interval), never an idle one — frames it does not read would pile up until its TCP
// window closed and TCP_USER_TIMEOUT dropped it, alive. When a connection ends (the router's monitor
// reports it, naming its fd) the worker whose frames came on it is probed for a while. A worker whose
// connection is gone (process died; a vanished host after connection_timeout: TCP keepalive on an idle
// connection, TCP_USER_TIMEOUT where frames are in flight) is listed in lost_ranks() and THEN has its
// reply ring closed — once the replies it sent that the bridge holds are in (a reply its ring had no
// room for waits in the bridge, written on as the collector makes room) — so a collect() waiting for
// more of it returns status closed with that rank in `missing` (never a hang) and already finds it in
// lost_ranks(). A worker that detaches cleanly (close(), or its destructor) says bye: listed in
// left_ranks(), ring closed after its replies — as a local worker's close. A worker that reconnects (a replacement process) reopens its
// ring. A worker whose bridge went silent for its liveness_interval — counted from the first hello or
// reply nothing answered since; an idle worker hears nothing and says nothing — gets Error(peer_dead)
// from reply() / check_liveness().
//
// One worker process per rank: another process that says hello for a rank whose worker is still
// connected is refused (Error(rank_in_use) naming the rank, from its wait_ready() / reply(), at its
// second hello: within liveness_interval / 4 of waiting); the holder keeps the rank, its connection and
// its replies. A rank whose worker closed or whose connection is gone is taken by the next hello.
//
// Never held up by one rank: a reply its ring has no room for (the rank is not being collected) is kept
// by the bridge and written on as the collector makes room, while the bridge goes on serving its socket
// — every other worker's hello, CURVE handshake (ZAP) and replies — sleeping in one poll on the socket
// and the full rings' eventfds (no CPU while a ring stays full). What it keeps per rank is bounded by
// credit: a worker sends at most high_water_mark replies beyond those written into its ring, then
// waits in its own reply() until the bridge tells it that the collector made room (wire.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/error.hpp"
#include "ringcast/remote/security.hpp"
#include "ringcast/ring.hpp"

namespace ringcast::remote {

struct RemoteReplyOptions {
    ListenOptions listen;
    std::vector<std::uint32_t> ranks;  // the gather's worker ranks that reply from other machines
    // Replies buffered per worker connection, and each worker's window: how many replies it may have
    // sent beyond those written into its ring (what the bridge keeps for a rank not being collected).
    int high_water_mark = 16;
    std::chrono::nanoseconds heartbeat_interval = std::chrono::milliseconds(200);
    std::chrono::nanoseconds connection_timeout = std::chrono::seconds(10);
    std::chrono::milliseconds linger = std::chrono::seconds(1);
    WriterOptions ring;  // the bridge's writers of the remote ranks' reply rings
};

// Thread-safety: every method from any thread; the sockets and ring writers belong to its thread.
// After fork(): a child's copy refuses every call (Error(protocol)) but stop() and the destructor, which
// do nothing there (the thread, sockets and ring writers are the parent's; its bridge goes on).
class RemoteReplyBridge {
public:
    // Becomes the writer of the reply rings of `options.ranks` of gather `gather_name` (created by
    // GatherCollector::create), binds the listener, starts the thread. Throws on a bad address, a
    // rank out of range or already written by a live worker.
    [[nodiscard]] static RemoteReplyBridge start(std::string_view gather_name, const RemoteReplyOptions& options);
    RemoteReplyBridge(RemoteReplyBridge&&) noexcept;
    RemoteReplyBridge& operator=(RemoteReplyBridge&&) = delete;
    ~RemoteReplyBridge();  // stop()

    [[nodiscard]] const std::string& endpoint() const noexcept;
    [[nodiscard]] const std::string& curve_public_key() const noexcept;
    // Until every remote rank has connected: ok or timed_out (missing_ranks() names them); closed once
    // stop() was called, before or during the wait (a stopped bridge is never reported ready).
    [[nodiscard]] Status wait_ready(std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] std::vector<std::uint32_t> missing_ranks() const;
    // Connection gone / said bye (clean close); the ring closes once the replies it sent are in.
    [[nodiscard]] std::vector<std::uint32_t> lost_ranks() const;
    [[nodiscard]] std::vector<std::uint32_t> left_ranks() const;
    [[nodiscard]] std::uint64_t replies() const;                 // replies written into the rings
    void stop() noexcept;  // closes the remote ranks' reply rings; idempotent

    struct State;

private:
    explicit RemoteReplyBridge(std::unique_ptr<State> state) noexcept;
    std::unique_ptr<State> state_;
};

struct RemoteWorkerOptions {
    std::chrono::nanoseconds liveness_interval = std::chrono::seconds(1);
    // Replies queued in ZeroMQ towards the bridge before reply() waits. (reply() also waits while the
    // bridge's window — its own high_water_mark — of replies are not yet written into the ring.)
    int high_water_mark = 16;
    ConnectSecurity security;
};

// Thread-safety: one thread at a time. After fork(): a child's copy refuses every call (Error(protocol))
// but close() and the destructor, which do nothing there (the socket and context are the parent's; its
// worker goes on).
class RemoteGatherWorker {
public:
    [[nodiscard]] static RemoteGatherWorker connect(std::string_view endpoint, std::uint32_t rank,
                                                    const RemoteWorkerOptions& options = {});
    RemoteGatherWorker(RemoteGatherWorker&&) noexcept;
    RemoteGatherWorker& operator=(RemoteGatherWorker&&) = delete;
    ~RemoteGatherWorker();  // close()

    // Waits for the bridge's welcome: ok or timed_out; closed after close(). Throws Error(rank_in_use) when another live
    // worker process holds this rank at the bridge, Error(invalid_argument) for a rank it does not take.
    [[nodiscard]] Status wait_ready(std::chrono::nanoseconds timeout = kForever);
    // Sends one reply for request `tag` (any size). Waits (up to `timeout`) for the bridge's welcome,
    // and while the bridge's window (its high_water_mark) of this worker's replies are not yet written
    // into its reply ring — the rank is not being collected — or the connection's queue is full.
    // Throws Error(peer_dead) when the bridge has been silent for the liveness interval, and the
    // refusals of wait_ready().
    [[nodiscard]] Status reply(std::uint64_t tag, std::span<const std::byte> bytes,
                               std::chrono::nanoseconds timeout = kForever);
    // What a reply() that returned timed_out waited for, in words (for its error): the bridge's
    // welcome, its credit (how many replies wait to be written into the rank's full ring), or room in
    // the connection's queue. As of the last reply() or wait_ready(); same thread as those.
    [[nodiscard]] std::string blocked_on() const;
    void check_liveness();
    // Clean detach: tells the bridge (bye), which closes this rank's reply ring (a collect waiting for
    // it returns closed; the rank is in left_ranks(), not lost_ranks()). Later reply() returns
    // Status::closed. Idempotent; never waits.
    void close() noexcept;
    [[nodiscard]] std::uint32_t rank() const noexcept;

    struct State;

private:
    explicit RemoteGatherWorker(std::unique_ptr<State> state) noexcept;
    std::unique_ptr<State> state_;
};

}  // namespace ringcast::remote
