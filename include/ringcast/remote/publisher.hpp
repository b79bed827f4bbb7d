// ringcast/remote/publisher.hpp — forwards every message of a broadcast ring to remote readers.
//
//   Writer ──ring──► local readers (ranks 0..L-1, shared memory, untouched)
//                └─► RemotePublisher (ring rank L, a thread) ──ZeroMQ TCP──► RemoteReader × R
//
// The publisher is an ordinary reader rank of the ring, so the ring's back-pressure covers it: the
// writer never gets more than the ring's capacity ahead of the slowest remote reader it waits for.
// A ring without a publisher rank is exactly the local ring (no remote code on its path).
//
// Order and framing: the publisher takes the ring's messages in order (Reader::peek reassembles
// fragmented ones) and sends each, whole, with its tag and a sequence number, to every remote reader:
// the bytes a remote reader gets are the bytes a local reader gets.
//
// Start: nothing is forwarded until every expected remote rank has said hello (a late remote reader
// misses nothing, as a local rank that has not attached yet misses nothing). wait_ready() waits for
// that, naming the ranks still missing on timeout. Once the writer is done (drain()), the ranks still
// missing are waited for only missing_ranks_grace more (none if no message was written); then the
// connected ranks get every message and the close, and a missing rank that connects later is told it
// joined late (Error(fell_behind)) while the publisher still runs.
//
// Slow remote readers (SlowReaderPolicy): each remote reader has a ZeroMQ queue of high_water_mark
// messages on each side of its connection. When it is full:
//   block      the publisher waits for that reader (so the ring fills and the writer waits: bounded
//              back-pressure, the same as a slow local reader);
//   drop_after a reader that stayed full for slow_reader_timeout is cut off: it gets no further data,
//              and once it has read what it was sent it gets Error(fell_behind) (the heartbeats carry
//              the next sequence number). The others go on.
// One reader process per rank: another process that says hello for a rank whose reader is still
// connected is refused (Error(rank_in_use) naming the rank, on that process's side); the holder keeps
// its rank and its connection. A rank whose reader said bye, was cut off or whose connection is gone is
// taken by the next process that says hello (a replacement, told where it starts; see below).
// A remote reader whose connection is gone (its process died; its host vanished while the line was
// idle: TCP keepalive drops the connection) is dropped at once and listed in lost_ranks(): it never
// holds the writer. A host that vanishes while bytes are in flight to it is only given up by the
// kernel's retransmissions (~15 min): under `block` that holds the writer, `drop_after` bounds it.
// (TCP_USER_TIMEOUT would end it sooner, but also drops a reader stopped behind a zero window, which
// `block` must keep; tests/remote checks both.) A reader that detaches cleanly says bye and is dropped.
//
// Liveness: the publisher sends a heartbeat to every reader whose line was quiet for
// heartbeat_interval, so a remote reader whose publisher (or whose writer's host) died gets
// Error(peer_dead) within its liveness interval. When the ring's writer dies without closing, the
// publisher says so (writer_dead) and its readers raise Error(peer_dead) at once.
// Close: once the ring is closed and drained, every reader gets `close` after the last message.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/remote/security.hpp"
#include "ringcast/ring.hpp"

namespace ringcast::remote {

enum class SlowReaderPolicy : std::uint8_t { block, drop_after };

struct RemotePublisherOptions {
    ListenOptions listen;
    // The remote ranks to expect (their numbers as the readers give them to RemoteReader::connect).
    std::vector<std::uint32_t> ranks;
    // Messages queued per remote reader on each side of its connection (ZeroMQ SNDHWM / RCVHWM).
    // Memory per slow reader is bounded by about 2 x high_water_mark x the largest message.
    int high_water_mark = 16;
    SlowReaderPolicy slow_reader = SlowReaderPolicy::block;
    std::chrono::nanoseconds slow_reader_timeout = std::chrono::seconds(5);  // drop_after only
    // A quiet line gets a heartbeat this often; readers' liveness_interval must be several of these.
    std::chrono::nanoseconds heartbeat_interval = std::chrono::milliseconds(200);
    // An idle connection whose peer host stops answering TCP keepalive probes is dropped after about
    // this long (whole seconds, at least 3). (Bytes in flight to a vanished host: see above.) A stopped (SIGSTOP) reader process still answers: it holds the writer, as a
    // stopped local reader does (drop_after bounds that too).
    std::chrono::nanoseconds connection_timeout = std::chrono::seconds(10);
    // drain() before every expected rank connected: how much longer the ranks still missing are waited
    // for (at most half of drain's timeout; not at all when the closed ring holds no message) before
    // the connected ranks are sent everything and the close. A rank connecting after that is too late.
    std::chrono::nanoseconds missing_ranks_grace = std::chrono::seconds(1);
    // On stop(): how long unsent frames (the final close) may still flush to the readers.
    std::chrono::milliseconds linger = std::chrono::seconds(5);
    ReaderOptions ring;  // the publisher's ring rank (wait strategy, writer liveness)
};

struct RemotePublisherStats {
    std::uint64_t forwarded = 0;                  // ring messages sent on (to every reader still in)
    std::vector<std::uint32_t> connected_ranks;   // said hello and still served
    std::vector<std::uint32_t> lost_ranks;        // connection gone (died / unreachable)
    std::vector<std::uint32_t> fell_behind_ranks; // cut off by drop_after
    std::vector<std::uint32_t> left_ranks;        // detached cleanly (bye)
    std::uint64_t back_pressure_waits = 0;        // times a full reader made the publisher wait
};

// Thread-safety: every method may be called from any thread, stop() by one thread at a time (the
// destructor calls it). The ZeroMQ sockets and the ring rank are used only by the publisher's thread;
// the shared counters and flags sit under one mutex (changes notify one condition variable). After
// fork(): a child's copy refuses every call (Error(protocol)) but stop() and the destructor, which do
// nothing there (the thread, sockets and ring rank are the parent's; the parent's publisher goes on).
class RemotePublisher {
public:
    // Attaches to ring `ring_name` as reader rank `ring_rank`, binds the listener (errors are thrown
    // here: bad address, port in use, rank in use, ...), and starts the forwarding thread.
    [[nodiscard]] static RemotePublisher start(std::string_view ring_name, std::uint32_t ring_rank,
                                               const RemotePublisherOptions& options);
    RemotePublisher(RemotePublisher&&) noexcept;
    RemotePublisher& operator=(RemotePublisher&&) = delete;
    RemotePublisher(const RemotePublisher&) = delete;
    RemotePublisher& operator=(const RemotePublisher&) = delete;
    ~RemotePublisher();  // stop()

    // "tcp://127.0.0.1:41234": what remote readers connect to (the chosen port when port was 0).
    [[nodiscard]] const std::string& endpoint() const noexcept;
    // The Z85 public key readers need (empty without CURVE).
    [[nodiscard]] const std::string& curve_public_key() const noexcept;

    // Waits until every expected rank said hello. ok; timed_out (missing_ranks() names the ranks still
    // missing); or closed once stop() was called — before or during the wait, whether or not every rank
    // had connected: a stopped publisher forwards nothing, so it never reports ready (missing_ranks()
    // names the ranks that never connected; Python raises ClosedError saying so).
    // Rethrows the error that stopped the publisher's thread, if one did.
    [[nodiscard]] Status wait_ready(std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] std::vector<std::uint32_t> missing_ranks() const;
    // After the ring's writer closed it: waits until every message and the close have been handed to
    // ZeroMQ for every reader still served (then stop() lets them flush for up to `linger`). ok, or
    // timed_out (a reader is still full under `block`). If an expected reader has not connected yet,
    // it is waited for up to min(missing_ranks_grace, timeout / 2) (not at all when no message was
    // written), then forwarding starts for the readers that did connect (missing_ranks() names the
    // others).
    [[nodiscard]] Status drain(std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] RemotePublisherStats stats() const;

    // Stops forwarding and joins the thread. Readers that have not seen `close` get writer_dead
    // ("the publisher stopped", naming the ranks that never connected if forwarding never started):
    // they raise Error(peer_dead) instead of waiting. The ring rank is
    // released (the writer stops waiting for it). Idempotent.
    void stop() noexcept;

    struct State;  // shared with the thread (src/remote/publisher.cpp)

private:
    explicit RemotePublisher(std::unique_ptr<State> state) noexcept;
    std::unique_ptr<State> state_;
};

}  // namespace ringcast::remote
