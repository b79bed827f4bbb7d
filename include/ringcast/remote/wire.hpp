// ringcast/remote/wire.hpp — the frames a remote publisher and its remote readers exchange over
// ZeroMQ (ROUTER on the publisher, one DEALER per remote rank; TCP, optionally CURVE-encrypted).
//
// Every ZeroMQ message is [Header (32 bytes)] or [Header][body]. ZeroMQ delivers a multipart message
// whole or not at all, in order per connection, so a reader never sees a torn message; a body may be
// any size (one ZeroMQ frame; no limit beyond memory).
//
//   reader → publisher:  hello(value = rank, tag = instance nonce)   until welcomed (a repeat with the
//                        same nonce is a duplicate; another nonce is another instance — another
//                        process, or a second reader object of that rank — a replacement once the
//                        rank's holder is gone, refused while the holder is live)
//                        bye(value = rank)           clean detach: stop sending to this rank
//   publisher → reader:  welcome(seq = first)        answer to hello: the first message it will get
//                        data(seq, tag, value = n)   + body of n bytes: message `seq` of the ring
//                        heartbeat(seq = next)       every heartbeat interval the line was quiet
//                        close(seq = next)           the ring was closed after message seq-1
//                        writer_dead(seq = next)     + text: the ring's writer died / the publisher stopped
//                        writer_dead(flags = kRefused, value = ErrorCode) + text: this hello is refused
//   worker → bridge:     hello(seq = replies sent, value = rank, tag = nonce), reply(seq = its number,
//                        from 1; tag, value = rank) + body, bye
//   bridge → worker:     welcome(seq = taken, value = window), heartbeat(seq = taken), refusals as above
//
// Each peer instance's DEALER has a routing id of its own ("rank-<r>-<nonce>", "worker-<r>-<nonce>"; the
// nonce is drawn per reader / worker object), stable across ZeroMQ's reconnects of that object: a second
// instance claiming a rank never takes the first one's connection over (ROUTER_HANDOVER applies to
// one instance's reconnect only); the listener
// maps a rank to its holder's routing id from the hello.
//
// Replies are flow-controlled by credit (version 2): `taken` counts the replies of this worker process
// that the bridge has written whole into the rank's reply ring, `window` (the bridge's
// high_water_mark) is how many the worker may have sent beyond that. A worker whose replies are not
// being collected therefore waits in its own reply() — the bridge never stops reading its socket for
// one rank, so every other worker's hello, handshake and replies are served meanwhile — and what the
// bridge keeps for a rank stays bounded by the window.
//
// Sequence numbers are the loss detector: a reader expects seq 0, 1, 2, ... and every frame that
// carries a seq tells it the number of the next data message. A larger one than it expects means
// messages were not delivered to it (it fell behind the high-water mark, or joined late): the reader
// raises Error(fell_behind) — never silent loss.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>

namespace ringcast::remote::wire {

inline constexpr std::uint32_t kMagic = 0x315a4352;  // "RCZ1" little-endian
// 2: replies flow-controlled by credit (welcome.value = window, welcome/heartbeat.seq = taken; replies
// numbered, a hello counting them: replies lost with a broken connection give their credit back); a
// refusal's value is the ErrorCode; routing ids per process. A peer of another version is ignored by
// a listener (its hello unanswered: timed_out, then peer_dead), and its frames are Error(corrupt) naming
// the version for a reader: both ends must be rebuilt together.
inline constexpr std::uint16_t kVersion = 2;

enum class Kind : std::uint8_t {
    hello = 1,
    bye = 2,
    welcome = 3,
    data = 4,
    heartbeat = 5,
    close = 6,
    writer_dead = 7,
    reply = 8,
};

// welcome.flags: the reader joined after messages were already sent (it cannot get them).
inline constexpr std::uint8_t kJoinedLate = 1;
// heartbeat.flags: the publisher cut this reader off (drop_after); seq is the first message it missed.
inline constexpr std::uint8_t kCutOff = 2;
// writer_dead.flags: not a death but a refusal of this hello (unknown rank, a rank held by another live
// process, ...); the body says why and `value` carries the ErrorCode the peer raises it as.
inline constexpr std::uint8_t kRefused = 4;

struct Header {
    std::uint32_t magic = kMagic;
    std::uint16_t version = kVersion;
    Kind kind = Kind::heartbeat;
    std::uint8_t flags = 0;
    std::uint64_t seq = 0;
    std::uint64_t tag = 0;
    std::uint64_t value = 0;  // data: body size; hello, bye, reply: the sender's rank (< 2^32);
                              // bridge's welcome: the reply window; a refusal: its ErrorCode
};
static_assert(sizeof(Header) == 32 && std::is_trivially_copyable_v<Header>,
              "the header is sent as raw bytes between hosts of the same byte order (x86-64, aarch64)");

// nullopt unless `frame` is exactly one header of this protocol version.
[[nodiscard]] inline std::optional<Header> parse(std::span<const std::byte> frame) noexcept {
    if (frame.size() != sizeof(Header)) return std::nullopt;
    Header h;
    std::memcpy(&h, frame.data(), sizeof h);
    if (h.magic != kMagic || h.version != kVersion) return std::nullopt;
    if (h.kind < Kind::hello || h.kind > Kind::reply) return std::nullopt;
    // A rank is 32 bits wide: a larger value is no rank (2^32 + r must not pass for rank r).
    const bool names_a_rank = h.kind == Kind::hello || h.kind == Kind::bye || h.kind == Kind::reply;
    if (names_a_rank && h.value > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    return h;
}

}  // namespace ringcast::remote::wire
