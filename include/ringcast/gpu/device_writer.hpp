// ringcast/gpu/device_writer.hpp — publish from device memory straight into the ring.
//
// publish(): reserve in the ring → one cudaMemcpyAsync / hipMemcpyAsync device → reservation on the
// caller's stream → an event behind it → commit only once the event completed. The stream is never
// blocked (only the calling thread waits, for the copy and the work queued before it on the stream),
// and readers never see a record whose bytes have not landed: commit's seq_cst exchange of the tail
// (ring.hpp, publish step 3) happens after the event was observed complete, and the DMA's writes are
// visible to the CPU once its completion is observed (the runtime's event-completion guarantee).
// Messages beyond Writer::max_reserve() go through the core fragment path (Writer::write_filled):
// one DMA per fragment, each fragment committed after its own copy landed.
// publish_async(): the same for a message of one record, but returns with the copy in flight; the
// record is committed by the next poll() / flush() / publish*() call once the copy landed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "ringcast/gpu/copy.hpp"
#include "ringcast/gpu/registration.hpp"
#include "ringcast/ring.hpp"

namespace ringcast::gpu {

// Thread-safety: as the Writer it wraps: one thread at a time. While a publish_async is pending the
// Writer belongs to this object (its reservation is open): write through it only after flush().
class DeviceWriter {
public:
    // Registers writer.segment()'s mapping. `writer` must outlive this object. Throws DeviceError
    // (no_driver, no_device, registration_unsupported, runtime).
    DeviceWriter(Writer& writer, const Runtime& rt, int device = 0);
    DeviceWriter(DeviceWriter&&) = delete;
    DeviceWriter& operator=(DeviceWriter&&) = delete;
    ~DeviceWriter();  // waits for a pending copy, commits it (its message was accepted) if it landed
    // In a child fork() made while its parent held this object (its Writer a copy of the parent's:
    // ring.hpp, ~Writer): publish, publish_async, poll and flush throw Error(protocol) before any
    // device call, and the destructor commits nothing.

    // Publishes `n` bytes of device memory at `src` as one message. `timeout` bounds the waits for
    // ring space; a copy once started is waited for to completion (a reservation must not be reused
    // while a DMA still writes into it). Status as Writer::write; throws DeviceError (src not device
    // memory: invalid_argument; a failed copy: nothing of that record is published) and what
    // Writer::write throws.
    [[nodiscard]] Status publish(const void* src, std::size_t n, Stream stream,
                                 std::chrono::nanoseconds timeout = kForever, std::uint64_t tag = 0);
    // n <= max_reserve(): returns with the copy in flight. ok: accepted (published by poll()/flush()).
    [[nodiscard]] Status publish_async(const void* src, std::size_t n, Stream stream,
                                       std::chrono::nanoseconds timeout = kForever, std::uint64_t tag = 0);
    // Commits the pending message if its copy landed. True: nothing is pending any more.
    [[nodiscard]] bool poll();
    // Waits (up to `timeout`) for the pending copy and commits it. ok also when nothing was pending.
    [[nodiscard]] Status flush(std::chrono::nanoseconds timeout = kForever);
    [[nodiscard]] bool pending() const noexcept { return pending_; }

    [[nodiscard]] Writer& writer() noexcept { return writer_; }
    [[nodiscard]] const HostRegistration& registration() const noexcept { return registration_; }

private:
    static void fill_from_device(void* self, std::span<std::byte> dst, std::uint64_t offset);
    void check_source(const void* src, std::size_t n) const;
    void refuse_forked_copy(const char* call) const;  // Error(protocol) in a fork()ed child

    Writer& writer_;
    HostRegistration registration_;
    CopyCompletion copy_;
    // The message of the fill in progress (write_filled calls fill_from_device per record).
    const std::byte* fill_src_ = nullptr;
    Stream fill_stream_ = nullptr;
    // publish_async's reservation: committed once copy_ completed.
    bool pending_ = false;
    std::size_t pending_size_ = 0;
    std::uint64_t pending_tag_ = 0;
};

}  // namespace ringcast::gpu
