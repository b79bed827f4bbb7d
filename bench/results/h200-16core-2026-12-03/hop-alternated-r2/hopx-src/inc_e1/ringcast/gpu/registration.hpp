// ringcast/gpu/registration.hpp — a segment's mapping registered with the GPU runtime (page-locked and
// known to the driver), so device copies into and out of the ring are one DMA, not a staged copy.
//
// Every process registers its OWN mapping (registration is per virtual range, per process); the
// HostRegistration must be destroyed before the mapping is unmapped (unregister first: the runtime
// keeps the pages locked and its tables point at them). The GPU endpoints hold one and the Writer /
// Reader they wrap must outlive them, which gives that order.
// Flags: Portable (valid in every context of the process) + Mapped where the device can map host
// memory (the zero-copy peek); the reasons are next to the call (src/gpu/runtime_backend.inc).
#pragma once

#include <cstddef>
#include <string>

#include "ringcast/gpu/runtime.hpp"
#include "ringcast/segment.hpp"

namespace ringcast::gpu {

// Thread-safety: immutable after construction; destroy it in one thread after all copies through it.
class HostRegistration {
public:
    // Registers the segment's whole mapping on `device`'s behalf. Throws DeviceError: no_driver,
    // no_device, registration_unsupported, runtime (e.g. already registered in this process).
    [[nodiscard]] static HostRegistration of(const Runtime& rt, const Segment& segment, int device = 0);
    // Any page-aligned range this process mapped; `what` names it in errors.
    [[nodiscard]] static HostRegistration of_range(const Runtime& rt, void* base, std::size_t size, int device,
                                                   const std::string& what);
    // The whole mapping that contains `address` (found in /proc/self/maps): for callers that hold a
    // pointer into a segment but not the Segment (the Python binding's raw chunks).
    [[nodiscard]] static HostRegistration of_mapping_containing(const Runtime& rt, const void* address, int device);

    HostRegistration(HostRegistration&& other) noexcept;
    HostRegistration& operator=(HostRegistration&&) = delete;
    HostRegistration(const HostRegistration&) = delete;
    HostRegistration& operator=(const HostRegistration&) = delete;
    ~HostRegistration();  // unregisters (an error then is ignored: the driver may be gone)

    [[nodiscard]] bool contains(const void* p, std::size_t n) const noexcept;
    // The address a kernel uses for host address `p` inside the range; nullptr unless mapped().
    [[nodiscard]] const void* device_pointer(const void* p) const noexcept;
    [[nodiscard]] bool mapped() const noexcept { return device_base_ != nullptr; }
    [[nodiscard]] std::byte* base() const noexcept { return base_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] int device() const noexcept { return device_; }
    [[nodiscard]] const Runtime& runtime() const noexcept { return *rt_; }

private:
    HostRegistration(const Runtime& rt, std::byte* base, std::size_t size, std::byte* device_base, int device) noexcept
        : rt_(&rt), base_(base), size_(size), device_base_(device_base), device_(device) {}
    const Runtime* rt_;
    std::byte* base_;  // nullptr: moved from
    std::size_t size_;
    std::byte* device_base_;
    int device_;
};

}  // namespace ringcast::gpu
