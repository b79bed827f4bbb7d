// ringcast/gpu/device_reader.hpp — receive ring messages into device memory, or let kernels read them
// where they lie.
//
// receive(): record by record (Reader::peek_fragment), one cudaMemcpyAsync / hipMemcpyAsync per record
// from the registered ring straight into its offset of the device buffer, on the caller's stream, an
// event behind each; a record is released (Reader::release_fragments) only once ITS event completed:
// the writer may overwrite the bytes only after the DMA read them (the release's seq_cst exchange of
// the head, ring.hpp release step 2, follows the observed completion). Up to kCopyWindow records are
// in flight at once, so the copies of a large message run back to back while the writer publishes
// its next records; the ring may be far smaller than the message. Whenever the next record is not
// there yet, the oldest copy is waited for and its record released before any wait for the writer:
// this reader never sleeps holding ring space (the writer may need it for that very record).
// peek(): zero copy where the device maps registered host memory: device_bytes is the address kernels
// read the record at, over the bus; release_after(stream) frees it once the work queued on that
// stream (those kernels) completed.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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
    ~DeviceReader();  // waits for copies or kernels still reading the ring; gives up a half-received message
    // In a child fork() made while its parent held this object (its Reader a copy of the parent's:
    // ring.hpp, ~Reader): receive, peek and release_after throw Error(protocol) before any device
    // call, and the destructor releases nothing.

    // Copies the next message to device memory at `dst` (room for `capacity` bytes) on `stream` and
    // returns once every copy completed and every record is released. `timeout` bounds the waits for
    // the writer (a copy once started is waited for). Status as Reader::peek; timed_out in the middle
    // of a fragmented message keeps what arrived: call receive again with the same dst and capacity
    // to finish it (another buffer: Error(protocol)). A message the writer withdrew part way is
    // dropped and the next one received.
    // Failures, decided before anything of the message is released, leave it unconsumed (the next
    // receive or peek gets it): Error(message_too_large) for a message beyond `capacity`,
    // DeviceError(invalid_argument) for a dst that is not device memory. A copy that fails (the
    // runtime reports an error) consumes the message: the copies in flight are waited for, what was
    // handed out is released, the rest of its records are skipped, and the DeviceError says so.
    // Throws what Reader::peek_fragment throws (Error(protocol) while a peek()ed message is not released).
    [[nodiscard]] Received receive(void* dst, std::size_t capacity, Stream stream,
                                   std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] DevicePeek peek(std::chrono::nanoseconds timeout = kForever);
    // Releases the peeked message once the work queued on `stream` so far has completed (waits).
    void release_after(Stream stream);
    void release() { reader_.release(); }

    // Records in flight at once in receive(): enough to keep the copy engine busy between the reader's
    // polls, few enough that a ring of 4 maximal records never waits on them for long.
    static constexpr std::size_t kCopyWindow = 4;

    [[nodiscard]] bool zero_copy() const noexcept { return registration_.mapped(); }
    // A fragmented message half received (receive timed out in its middle).
    [[nodiscard]] bool receiving() const noexcept { return receiving_; }
    [[nodiscard]] Reader& reader() noexcept { return reader_; }
    [[nodiscard]] const HostRegistration& registration() const noexcept { return registration_; }

private:
    void start_copy(const Fragment& f, Stream stream);
    void retire_oldest();   // waits for the oldest copy in flight, then releases its record
    void retire_all();
    void give_up_message() noexcept;  // after a failed copy: wait, release, skip the rest
    void refuse_forked_copy(const char* call) const;  // Error(protocol) in a fork()ed child

    Reader& reader_;
    HostRegistration registration_;
    CopyCompletion copy_;  // peek()/release_after
    // receive()'s window: copies in flight, oldest first, each with the release_mark of its record.
    std::vector<CopyCompletion> window_;  // kCopyWindow of them (one event each)
    std::array<std::uint64_t, kCopyWindow> window_marks_{};
    std::size_t window_oldest_ = 0;
    std::size_t window_count_ = 0;
    // The message receive() is in the middle of (a timeout part way).
    bool receiving_ = false;
    void* receive_dst_ = nullptr;
    Stream receive_stream_ = nullptr;
    std::size_t receive_capacity_ = 0;
};

}  // namespace ringcast::gpu
