// ringcast/gpu/device_reader.hpp — receive ring messages into device memory, or let kernels read them
// where they lie.
//
// receive(): Reader::peek → one cudaMemcpyAsync / hipMemcpyAsync ring → device on the caller's stream →
// an event behind it → Reader::release only once the event completed: the writer may overwrite the
// bytes only after the DMA read them (release's seq_cst exchange of the head, ring.hpp release step 2,
// follows the observed completion). A message that came in fragments was already reassembled by the
// core Reader in its own (pageable) buffer, and is copied from there.
// peek(): zero copy where the device maps registered host memory: device_bytes is the address kernels
// read the record at, over the bus; release_after(stream) frees it once the work queued on that
// stream (those kernels) completed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ringcast/gpu/copy.hpp"
#include "ringcast/gpu/registration.hpp"
#include "ringcast/ring.hpp"

namespace ringcast::gpu {

struct Received {
    Status status = Status::timed_out;
    std::size_t size = 0;  // bytes copied (status ok)
    std::uint64_t tag = 0;
};

struct DevicePeek {
    Status status = Status::timed_out;
    const std::byte* device_bytes = nullptr;   // for kernels; nullptr where no zero-copy (see above)
    std::span<const std::byte> host_bytes{};   // the same bytes for the CPU
    std::uint64_t tag = 0;
};

// Thread-safety: as the Reader it wraps: one thread at a time.
class DeviceReader {
public:
    // Registers reader.segment()'s mapping. `reader` must outlive this object. Throws DeviceError.
    DeviceReader(Reader& reader, const Runtime& rt, int device = 0);
    DeviceReader(DeviceReader&&) = delete;
    DeviceReader& operator=(DeviceReader&&) = delete;
    ~DeviceReader();  // waits for a copy or kernels still reading the ring

    // Copies the next message to device memory at `dst` (room for `capacity` bytes) on `stream`,
    // waits for the copy, then releases the message. `timeout` bounds the wait for a message.
    // Status as Reader::peek. Throws Error(message_too_large) for a message beyond `capacity` (left
    // unconsumed: peek() tells its size), DeviceError (dst not device memory, a failed copy: the
    // message stays unconsumed), and what Reader::peek throws.
    [[nodiscard]] Received receive(void* dst, std::size_t capacity, Stream stream,
                                   std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] DevicePeek peek(std::chrono::nanoseconds timeout = kForever);
    // Releases the peeked message once the work queued on `stream` so far has completed (waits).
    void release_after(Stream stream);
    void release() { reader_.release(); }

    [[nodiscard]] bool zero_copy() const noexcept { return registration_.mapped(); }
    [[nodiscard]] Reader& reader() noexcept { return reader_; }
    [[nodiscard]] const HostRegistration& registration() const noexcept { return registration_; }

private:
    Reader& reader_;
    HostRegistration registration_;
    CopyCompletion copy_;
};

}  // namespace ringcast::gpu
