// ringcast/gpu/copy.hpp — one asynchronous device copy and the event that says it has landed.
//
// The ring's rule for device copies: a record is committed (writer) or released (reader) only after
// the copy into or out of it COMPLETED — an event recorded on the copy's stream right after it, and
// that event observed complete. Never the stream position, never a guess: bytes still in flight are
// neither published nor overwritten.
#pragma once

#include <cstddef>

#include "ringcast/error.hpp"
#include "ringcast/futex.hpp"
#include "ringcast/gpu/runtime.hpp"

namespace ringcast::gpu {

// Thread-safety: one thread at a time.
class CopyCompletion {
public:
    explicit CopyCompletion(const Runtime& rt);  // creates the event; throws DeviceError
    CopyCompletion(CopyCompletion&& other) noexcept;
    CopyCompletion& operator=(CopyCompletion&&) = delete;
    CopyCompletion(const CopyCompletion&) = delete;
    CopyCompletion& operator=(const CopyCompletion&) = delete;
    ~CopyCompletion();  // waits for a copy still in flight (its target may be freed right after)

    // Queues the copy on `stream` (after the work already queued there) and the event behind it.
    // Throws DeviceError (nothing is in flight then).
    void start(void* dst, const void* src, std::size_t n, CopyKind kind, Stream stream);
    // Marks the work queued on `stream` so far (e.g. kernels reading a peeked message).
    void mark(Stream stream);
    // ok: landed (or nothing in flight); timed_out: still in flight at `deadline` (call again).
    // Polls the event: yields for the first 2 ms (a record's DMA), then 20 µs naps (a long wait).
    // Throws DeviceError if the copy failed.
    [[nodiscard]] Status wait(Deadline deadline);
    void wait();  // without a deadline
    [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }

private:
    const Runtime* rt_;
    Event event_ = nullptr;
    bool in_flight_ = false;
};

}  // namespace ringcast::gpu
