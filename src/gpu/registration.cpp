// HostRegistration: the RAII registration of a mapping (the rules are in ringcast/gpu/registration.hpp).
#include "ringcast/gpu/registration.hpp"

#include <cerrno>
#include <cstdio>
#include <utility>

#include "ringcast/gpu/capabilities.hpp"

namespace ringcast::gpu {

namespace {

std::string hex(const void* p) {
    char b[32];
    std::snprintf(b, sizeof b, "%p", p);
    return b;
}

// Restores the caller's current device: registration happens on `device`'s behalf without changing
// which device the calling thread works on.
class DeviceScope {
public:
    DeviceScope(const Runtime& rt, int device) : rt_(rt) {
        check(rt, rt.get_device(&previous_), "GetDevice");
        if (previous_ != device) check(rt, rt.set_device(device), "SetDevice", "device " + std::to_string(device));
    }
    ~DeviceScope() { (void)rt_.set_device(previous_); }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    const Runtime& rt_;
    int previous_ = 0;
};

}  // namespace

HostRegistration HostRegistration::of(const Runtime& rt, const Segment& segment, int device) {
    if (!segment.valid()) throw DeviceError(Reason::runtime, 0, "HostRegistration::of: an empty Segment", ErrorCode::invalid_argument);
    return of_range(rt, segment.base(), segment.size(), device, "segment '" + segment.name() + "'");
}

HostRegistration HostRegistration::of_range(const Runtime& rt, void* base, std::size_t size, int device,
                                            const std::string& what) {
    if (base == nullptr || size == 0)
        throw DeviceError(Reason::runtime, 0, "HostRegistration of " + what + ": empty range", ErrorCode::invalid_argument);
    require_registration(rt, device);  // no driver / no device / unsupported: the clear errors first
    const Capabilities caps = probe(rt, device);
    DeviceScope scope(rt, device);
    const bool mapped = caps.can_map_host_memory;
    const int r = rt.host_register(base, size, mapped);
    if (r != 0) {
        (void)rt.clear_last_error();
        const std::string where = what + " at " + hex(base) + ", " + std::to_string(size) + " bytes";
        if (r == rt.already_registered)
            throw DeviceError(Reason::runtime, r,
                              std::string(rt.name) + " HostRegister of " + where +
                                  ": already registered in this process (one registration per mapping)");
        const Reason reason = rt.classify(r) == Reason::runtime ? Reason::registration_unsupported : rt.classify(r);
        throw DeviceError(reason, r, std::string(rt.name) + " HostRegister of " + where + ": " + describe(rt, r));
    }
    std::byte* device_base = nullptr;
    if (mapped) {
        void* d = nullptr;
        const int g = rt.host_get_device_pointer(&d, base);
        if (g != 0) {
            (void)rt.clear_last_error();  // no zero-copy address: the copy paths still work
        } else {
            device_base = static_cast<std::byte*>(d);
        }
    }
    return HostRegistration(rt, static_cast<std::byte*>(base), size, device_base, device);
}

HostRegistration HostRegistration::of_mapping_containing(const Runtime& rt, const void* address, int device) {
    std::FILE* maps = std::fopen("/proc/self/maps", "re");
    if (maps == nullptr) throw_system_error("fopen(/proc/self/maps)", errno);
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    std::uintmax_t lo = 0, hi = 0;
    bool found = false;
    char line[4096];
    while (std::fgets(line, sizeof line, maps) != nullptr) {
        if (std::sscanf(line, "%jx-%jx", &lo, &hi) == 2 && lo <= a && a < hi) {
            found = true;
            break;
        }
    }
    std::fclose(maps);
    if (!found)
        throw DeviceError(Reason::runtime, 0, "no mapping of this process contains " + hex(address),
                          ErrorCode::invalid_argument);
    return of_range(rt, reinterpret_cast<void*>(static_cast<std::uintptr_t>(lo)), static_cast<std::size_t>(hi - lo),
                    device, "the mapping containing " + hex(address));
}

HostRegistration::HostRegistration(HostRegistration&& other) noexcept
    : rt_(other.rt_), base_(std::exchange(other.base_, nullptr)), size_(other.size_),
      device_base_(other.device_base_), device_(other.device_) {}

HostRegistration::~HostRegistration() {
    if (base_ == nullptr) return;
    if (rt_->host_unregister(base_) != 0) (void)rt_->clear_last_error();
}

bool HostRegistration::contains(const void* p, std::size_t n) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    return base_ != nullptr && b >= base_ && n <= size_ && static_cast<std::size_t>(b - base_) <= size_ - n;
}

const void* HostRegistration::device_pointer(const void* p) const noexcept {
    if (device_base_ == nullptr || !contains(p, 0)) return nullptr;
    return device_base_ + (static_cast<const std::byte*>(p) - base_);
}

}  // namespace ringcast::gpu
