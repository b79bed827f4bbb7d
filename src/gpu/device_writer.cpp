// DeviceWriter: device memory → ring (the ordering rule is in ringcast/gpu/device_writer.hpp).
#include "ringcast/gpu/device_writer.hpp"

namespace ringcast::gpu {

DeviceWriter::DeviceWriter(Writer& writer, const Runtime& rt, int device)
    : writer_(writer), registration_(HostRegistration::of(rt, writer.segment(), device)), copy_(rt) {}

DeviceWriter::~DeviceWriter() {
    if (writer_.in_forked_child()) return;  // a copy fork() gave a child: the reservation is the parent's
    try {
        if (pending_) (void)flush(kForever);
    } catch (...) {  // a failed copy: its record stays unpublished (the next reserve replaces it)
    }
}

// A copy fork() gave a child: refused before any device call (CUDA is not usable after fork either)
// and before its Writer's own refusal would come, with the same rule (ring.hpp, ~Writer).
void DeviceWriter::refuse_forked_copy(const char* call) const {
    if (writer_.in_forked_child())
        writer_.made_in_.refuse_copy(call, "this DeviceWriter's Writer of '" + writer_.segment().name() + "'",
                                      "Publish through a Writer and DeviceWriter this process makes");
}

void DeviceWriter::check_source(const void* src, std::size_t n) const {
    if (n == 0) return;
    const Runtime& rt = registration_.runtime();
    bool is_device = false;
    check(rt, rt.pointer_is_device(src, &is_device), "PointerGetAttributes");
    if (!is_device)
        throw DeviceError(Reason::runtime, 0,
                          std::string(rt.name) + " publish: the source is not device memory (use Writer::write for "
                                                 "host bytes)",
                          ErrorCode::invalid_argument);
}

// Writer::write_filled calls this between a record's reservation and its commit: the commit follows
// only once the event behind this record's copy completed (copy_.wait() below).
void DeviceWriter::fill_from_device(void* self, std::span<std::byte> dst, std::uint64_t offset) {
    auto& w = *static_cast<DeviceWriter*>(self);
    if (dst.empty()) return;
    w.copy_.start(dst.data(), w.fill_src_ + offset, dst.size(), CopyKind::device_to_host, w.fill_stream_);
    w.copy_.wait();  // unbounded: the reservation must not be left while the DMA writes into it
}

Status DeviceWriter::publish(const void* src, std::size_t n, Stream stream, std::chrono::nanoseconds timeout,
                             std::uint64_t tag) {
    refuse_forked_copy("DeviceWriter::publish");
    if (pending_) {
        if (const Status s = flush(timeout); s != Status::ok) return s;
    }
    check_source(src, n);
    fill_src_ = static_cast<const std::byte*>(src);
    fill_stream_ = stream;
    return writer_.write_filled(n, &DeviceWriter::fill_from_device, this, timeout, tag);
}

Status DeviceWriter::publish_async(const void* src, std::size_t n, Stream stream, std::chrono::nanoseconds timeout,
                                   std::uint64_t tag) {
    refuse_forked_copy("DeviceWriter::publish_async");
    if (pending_) {
        if (const Status s = flush(timeout); s != Status::ok) return s;
    }
    check_source(src, n);
    const Reservation r = writer_.reserve(n, timeout);  // Error(message_too_large) beyond max_reserve()
    if (r.status != Status::ok) return r.status;
    if (n != 0) copy_.start(r.bytes.data(), src, n, CopyKind::device_to_host, stream);
    pending_ = true;
    pending_size_ = n;
    pending_tag_ = tag;
    return Status::ok;
}

bool DeviceWriter::poll() {
    refuse_forked_copy("DeviceWriter::poll");
    if (!pending_) return true;
    if (copy_.wait(kPollOnly) != Status::ok) return false;
    pending_ = false;
    writer_.commit(pending_size_, pending_tag_);  // after the observed completion: never unlanded bytes
    return true;
}

Status DeviceWriter::flush(std::chrono::nanoseconds timeout) {
    refuse_forked_copy("DeviceWriter::flush");
    if (!pending_) return Status::ok;
    Timeout t(timeout);
    if (const Status s = copy_.wait(t.deadline()); s != Status::ok) return s;
    pending_ = false;
    writer_.commit(pending_size_, pending_tag_);
    return Status::ok;
}

}  // namespace ringcast::gpu
