// ringcast/remote/reader.hpp — a reader rank on another machine: the Reader API over ZeroMQ.
//
// Connects a DEALER socket (routing id "rank-<rank>-<nonce>": this reader's own) to a RemotePublisher's
// endpoint and says hello; the publisher answers welcome and then sends the ring's messages in order. peek() hands out the
// received ZeroMQ frame itself (no copy) until release().
//
// Errors, all thrown from peek()/read()/wait_ready():
//   Error(peer_dead)   nothing (not even a heartbeat) arrived for liveness_interval while this reader
//                      waited, counted across calls; or the publisher reported that the ring's writer
//                      died or that it stopped before it forwarded the queue's close.
//   Error(fell_behind) a message this reader should have got was not delivered (a sequence gap: it was
//                      cut off past the high-water mark under SlowReaderPolicy::drop_after, or it joined
//                      after messages had been sent). Sticky: every later call throws it again.
//   Error(corrupt)     a frame that is not this protocol (another program on that port).
//   Error(rank_in_use) another live reader process holds this rank at that publisher (it keeps it; this
//                      one is refused at its second hello, within liveness_interval / 4 of waiting).
//                      A rank whose reader closed or whose process is gone is served as a replacement.
//   Error(invalid_argument) refused for another reason (a rank the publisher does not expect, ...).
// Status closed: the writer closed the ring and every message before the close was read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/error.hpp"
#include "ringcast/remote/security.hpp"
#include "ringcast/ring.hpp"

namespace ringcast::remote {

struct RemoteReaderOptions {
    // The publisher's silence (no frame at all) this long, while this reader waits, is its death.
    // Keep it several times the publisher's heartbeat_interval.
    std::chrono::nanoseconds liveness_interval = std::chrono::seconds(1);
    int high_water_mark = 16;  // ZeroMQ RCVHWM: messages buffered on this side
    ConnectSecurity security;
};

// Thread-safety: one thread at a time uses a RemoteReader, except cancel()/clear_cancel() (any thread).
// After fork(): a child's copy refuses every call (Error(protocol)) but cancel(), clear_cancel() and the
// destructor, which do nothing there (the socket and context are the parent's; its reader goes on).
class RemoteReader {
public:
    // Connects (ZeroMQ connects in the background: an unreachable endpoint shows as peer_dead after
    // liveness_interval, or timed_out from wait_ready). Throws Error(invalid_argument) for a malformed
    // endpoint or CURVE key.
    [[nodiscard]] static RemoteReader connect(std::string_view endpoint, std::uint32_t rank,
                                              const RemoteReaderOptions& options = {});
    RemoteReader(RemoteReader&&) noexcept;
    RemoteReader& operator=(RemoteReader&&) = delete;
    RemoteReader(const RemoteReader&) = delete;
    RemoteReader& operator=(const RemoteReader&) = delete;
    ~RemoteReader();  // says bye (the publisher stops sending to this rank), closes the socket

    // Waits for the publisher's welcome (the handshake): ok, or timed_out. Also done by the first peek.
    [[nodiscard]] Status wait_ready(std::chrono::nanoseconds timeout = kForever);

    // The next message, valid until release(); peek() again before release() returns the same one.
    [[nodiscard]] Message peek(std::chrono::nanoseconds timeout = kForever);
    void release();
    [[nodiscard]] Status read(std::vector<std::byte>& into, std::chrono::nanoseconds timeout = kForever,
                              std::uint64_t* tag = nullptr);

    // Until clear_cancel(): the blocking call in progress and every later one that has to wait return
    // Status::cancelled. Safe from any thread.
    void cancel() noexcept;
    void clear_cancel() noexcept;

    [[nodiscard]] std::uint32_t rank() const noexcept;
    [[nodiscard]] const std::string& endpoint() const noexcept;
    [[nodiscard]] std::uint64_t received() const noexcept;  // data messages taken so far

    struct State;

private:
    explicit RemoteReader(std::unique_ptr<State> state) noexcept;
    std::unique_ptr<State> state_;
};

}  // namespace ringcast::remote
