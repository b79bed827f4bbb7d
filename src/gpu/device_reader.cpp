// DeviceReader: ring → device memory (the ordering rule is in ringcast/gpu/device_reader.hpp).
#include "ringcast/gpu/device_reader.hpp"

namespace ringcast::gpu {

DeviceReader::DeviceReader(Reader& reader, const Runtime& rt, int device)
    : reader_(reader), registration_(HostRegistration::of(rt, reader.segment(), device)), copy_(rt) {}

DeviceReader::~DeviceReader() = default;  // copy_'s destructor waits for work still reading the ring

Received DeviceReader::receive(void* dst, std::size_t capacity, Stream stream, std::chrono::nanoseconds timeout) {
    const Message m = reader_.peek(timeout);
    if (m.status != Status::ok) return {m.status, 0, 0};
    if (m.bytes.size() > capacity)
        throw Error(ErrorCode::message_too_large,
                    "receive: the next message has " + std::to_string(m.bytes.size()) +
                        " bytes, the device buffer " + std::to_string(capacity) + " (the message is left unconsumed)");
    if (!m.bytes.empty()) {
        const Runtime& rt = registration_.runtime();
        bool is_device = false;
        check(rt, rt.pointer_is_device(dst, &is_device), "PointerGetAttributes");
        if (!is_device)
            throw DeviceError(Reason::runtime, 0, std::string(rt.name) + " receive: the destination is not device memory",
                              ErrorCode::invalid_argument);
        copy_.start(dst, m.bytes.data(), m.bytes.size(), CopyKind::host_to_device, stream);
        copy_.wait();  // the release below happens only after the DMA read the ring bytes
    }
    reader_.release();
    return {Status::ok, m.bytes.size(), m.tag};
}

DevicePeek DeviceReader::peek(std::chrono::nanoseconds timeout) {
    const Message m = reader_.peek(timeout);
    if (m.status != Status::ok) return {m.status, nullptr, {}, 0};
    // A reassembled (fragmented) message lies in the Reader's own heap buffer, outside the registration.
    const auto* device = static_cast<const std::byte*>(registration_.device_pointer(m.bytes.data()));
    if (!registration_.contains(m.bytes.data(), m.bytes.size())) device = nullptr;
    return {Status::ok, device, m.bytes, m.tag};
}

void DeviceReader::release_after(Stream stream) {
    copy_.mark(stream);
    copy_.wait();
    reader_.release();
}

}  // namespace ringcast::gpu
