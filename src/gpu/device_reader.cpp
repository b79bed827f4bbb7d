// DeviceReader: ring → device memory (the ordering rule is in ringcast/gpu/device_reader.hpp).
#include "ringcast/gpu/device_reader.hpp"

#include <algorithm>
#include <string>

namespace ringcast::gpu {

DeviceReader::DeviceReader(Reader& reader, const Runtime& rt, int device)
    : reader_(reader), registration_(HostRegistration::of(rt, reader.segment(), device)), copy_(rt) {
    window_.reserve(kCopyWindow);
    for (std::size_t i = 0; i < kCopyWindow; ++i) window_.emplace_back(rt);
}

// Then the members: the window's copies and copy_ wait in their destructors for work still reading the
// ring, before registration_ (declared before them) unregisters it.
DeviceReader::~DeviceReader() {
    if (reader_.in_forked_child()) return;  // the records are the parent's, still being received there
    if (receiving_ || window_count_ != 0) give_up_message();  // a half-received message: hand its records back
}

// A copy fork() gave a child: refused before any device call, with the rule of its Reader (ring.hpp).
void DeviceReader::refuse_forked_copy(const char* call) const {
    if (reader_.in_forked_child())
        reader_.attached_in_.refuse_copy(
            call, "this DeviceReader's Reader of '" + reader_.segment().name() + "', rank " + std::to_string(reader_.rank()) + ",",
            "Receive through a Reader and DeviceReader this process makes");
}

namespace {
// What is left of `deadline` as a timeout for Reader::peek_fragment.
std::chrono::nanoseconds remaining(Deadline deadline) {
    if (deadline == kNoDeadline) return kForever;
    if (deadline == kPollOnly) return std::chrono::nanoseconds::zero();
    return std::max(std::chrono::nanoseconds::zero(),
                    std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()));
}
}  // namespace

// One DMA ring → device for the record, its event behind it; the record stays held (unreleased) until
// retire_oldest() observed that event complete.
void DeviceReader::start_copy(const Fragment& f, Stream stream) {
    if (window_count_ == kCopyWindow) retire_oldest();
    const std::size_t slot = (window_oldest_ + window_count_) % kCopyWindow;
    window_[slot].start(static_cast<std::byte*>(receive_dst_) + f.offset, f.bytes.data(), f.bytes.size(),
                        CopyKind::host_to_device, stream);
    window_marks_[slot] = f.release_mark;
    ++window_count_;
}

// The copies run in stream order, so the oldest completes first; its record — and the records before
// it, whose copies were retired earlier — may go back to the writer only now: the release's seq_cst
// head exchange follows the observed completion of the DMA that read the bytes.
void DeviceReader::retire_oldest() {
    CopyCompletion& c = window_[window_oldest_];
    c.wait();  // throws DeviceError if the copy failed (the record stays held: give_up_message decides)
    reader_.release_fragments(window_marks_[window_oldest_]);
    window_oldest_ = (window_oldest_ + 1) % kCopyWindow;
    --window_count_;
}

void DeviceReader::retire_all() {
    while (window_count_ != 0) retire_oldest();
}

// After a failed copy: no DMA may still read a record we hand back, so every copy in flight is waited
// for (their own errors ignored: the first one is being reported), then everything handed out is
// released and the rest of the message skipped.
void DeviceReader::give_up_message() noexcept {
    // A copy whose event could not be recorded is in flight unseen by the window: the stream knows it.
    (void)registration_.runtime().stream_synchronize(receive_stream_);
    for (; window_count_ != 0; --window_count_, window_oldest_ = (window_oldest_ + 1) % kCopyWindow) {
        try {
            window_[window_oldest_].wait();
        } catch (...) {
        }
    }
    try {
        reader_.abandon_fragments();
    } catch (...) {  // only a peek() message could be open, and receive never opens one
    }
    receiving_ = false;
}

Received DeviceReader::receive(void* dst, std::size_t capacity, Stream stream, std::chrono::nanoseconds timeout) {
    refuse_forked_copy("DeviceReader::receive");
    if (receiving_ && (dst != receive_dst_ || capacity != receive_capacity_))
        throw Error(ErrorCode::protocol, "receive: a message is half received into another device buffer (an earlier "
                                         "receive timed out in its middle); call receive with the same dst and "
                                         "capacity to finish it");
    receive_stream_ = stream;  // every copy of this call goes on it (the window is empty between calls)
    const Deadline deadline = deadline_after(timeout);
    const Runtime& rt = registration_.runtime();
    try {
        for (;;) {
            // With copies in flight, only look (no wait): see device_reader.hpp.
            const Fragment f = reader_.peek_fragment(window_count_ != 0 ? std::chrono::nanoseconds::zero()
                                                                        : remaining(deadline));
            if (f.status == Status::timed_out && window_count_ != 0) {
                retire_oldest();
                continue;
            }
            if (f.status != Status::ok) {
                retire_all();  // (closed or cancelled while copies ran) every record handed out goes back
                if (f.status == Status::closed) receiving_ = false;  // an unfinished message never completes
                return {f.status, 0, 0};
            }
            if (f.withdrawn) {  // the writer gave it up: drop it, receive the next message
                retire_all();
                reader_.release_fragments(f.release_mark);
                receiving_ = false;
                continue;
            }
            if (!receiving_) {
                // The message's first record: the checks that leave it unconsumed come before any copy.
                if (f.total > capacity) {
                    reader_.rewind_fragments();
                    throw Error(ErrorCode::message_too_large,
                                "receive: the next message has " + std::to_string(f.total) + " bytes, the device buffer " +
                                    std::to_string(capacity) + " (the message is left unconsumed)");
                }
                if (f.total != 0) {
                    bool is_device = false;
                    const int r = rt.pointer_is_device(dst, &is_device);
                    if (r != 0 || !is_device) {
                        reader_.rewind_fragments();
                        check(rt, r, "PointerGetAttributes");
                        throw DeviceError(Reason::runtime, 0,
                                          std::string(rt.name) + " receive: the destination is not device memory (the "
                                                                 "message is left unconsumed)",
                                          ErrorCode::invalid_argument);
                    }
                }
                receiving_ = true;
                receive_dst_ = dst;
                receive_capacity_ = capacity;
            }
            if (f.bytes.empty()) {  // a message of 0 bytes: nothing to copy, nothing else in flight
                retire_all();
                reader_.release_fragments(f.release_mark);
            } else {
                start_copy(f, stream);
            }
            if (f.last()) {
                retire_all();
                receiving_ = false;
                return {Status::ok, static_cast<std::size_t>(f.total), f.tag};
            }
        }
    } catch (const DeviceError& e) {
        if (!receiving_) throw;  // refused before anything was copied: the message is left as it was
        give_up_message();
        throw DeviceError(e.reason(), e.runtime_error_code(),
                          std::string(e.what()) + " (receive: the message was consumed: the copies in flight were "
                                                  "waited for and the rest of it skipped)",
                          e.code());
    } catch (const Error&) {
        // The Reader refused (corrupt record, dead writer, ...): no DMA may outlive this call reading a
        // record, so the copies in flight are waited for and their records released; the message
        // stays open (receiving()).
        try {
            retire_all();
        } catch (...) {
            give_up_message();
        }
        throw;
    }
}

DevicePeek DeviceReader::peek(std::chrono::nanoseconds timeout) {
    refuse_forked_copy("DeviceReader::peek");
    if (receiving_)
        throw Error(ErrorCode::protocol, "peek: a message is half received by receive() (it timed out in its middle); "
                                         "finish it with receive first");
    const Message m = reader_.peek(timeout);
    if (m.status != Status::ok) return {m.status, nullptr, {}, 0};
    // A reassembled (fragmented) message lies in the Reader's own heap buffer, outside the registration.
    const auto* device = static_cast<const std::byte*>(registration_.device_pointer(m.bytes.data()));
    if (!registration_.contains(m.bytes.data(), m.bytes.size())) device = nullptr;
    return {Status::ok, device, m.bytes, m.tag};
}

void DeviceReader::release_after(Stream stream) {
    refuse_forked_copy("DeviceReader::release_after");
    copy_.mark(stream);
    copy_.wait();
    reader_.release();
}

}  // namespace ringcast::gpu
