// Capability probe and the clear errors for a machine that cannot do the GPU path.
#include "ringcast/gpu/capabilities.hpp"

namespace ringcast::gpu {

std::string Capabilities::summary() const {
    if (!usable) return std::string("GPU path unusable (") + to_string(why_not) + "): " + why_not_text;
    auto yes = [](bool b) { return b ? "yes" : "no"; };
    return "device " + std::to_string(device) + " of " + std::to_string(device_count) + " '" + device_name +
           "', driver " + std::to_string(driver_version) + ", runtime " + std::to_string(runtime_version) +
           ", host register " + (host_register_supported ? yes(*host_register_supported) : "unknown") +
           ", map host memory " + yes(can_map_host_memory) + ", same address on device " +
           yes(host_pointer_is_device_ptr) + ", pageable access " + yes(pageable_memory_access);
}

Capabilities probe(const Runtime& rt, int device) noexcept {
    Capabilities c;
    c.device = device;
    try {
        (void)rt.driver_version(&c.driver_version);  // 0 when there is no driver; not an error by itself
        (void)rt.runtime_version(&c.runtime_version);
        const int r = rt.get_device_count(&c.device_count);
        if (r != 0) {
            (void)rt.clear_last_error();
            c.why_not = rt.classify(r);
            c.why_not_text = std::string(rt.name) + " GetDeviceCount: " + describe(rt, r);
            return c;
        }
        if (c.device_count == 0) {
            c.why_not = Reason::no_device;
            c.why_not_text = std::string(rt.name) + ": the driver reports 0 devices";
            return c;
        }
        if (device < 0 || device >= c.device_count) {
            c.why_not = Reason::no_device;
            c.why_not_text = std::string(rt.name) + ": device " + std::to_string(device) + " does not exist (" +
                             std::to_string(c.device_count) + " present)";
            return c;
        }
        char name[256] = {};
        if (rt.device_name(name, sizeof name, device) == 0) c.device_name = name;
        const auto attr = [&](Attribute a) -> std::optional<bool> {
            int v = 0;
            bool supported = false;
            if (rt.device_attribute(&v, a, device, &supported) != 0 || !supported) {
                (void)rt.clear_last_error();
                return std::nullopt;
            }
            return v != 0;
        };
        c.host_register_supported = attr(Attribute::host_register_supported);
        c.can_map_host_memory = attr(Attribute::can_map_host_memory).value_or(false);
        c.host_pointer_is_device_ptr = attr(Attribute::host_pointer_is_device_ptr).value_or(false);
        c.pageable_memory_access = attr(Attribute::pageable_memory_access).value_or(false);
        c.usable = true;
    } catch (...) {  // std::bad_alloc from the strings: report, never throw from a probe
        c.usable = false;
        c.why_not = Reason::runtime;
        c.why_not_text = "probe failed";
    }
    return c;
}

void require_registration(const Runtime& rt, int device) {
    const Capabilities c = probe(rt, device);
    if (!c.usable) throw DeviceError(c.why_not, 0, c.why_not_text);
    if (c.host_register_supported == false)
        throw DeviceError(Reason::registration_unsupported, 0,
                          std::string(rt.name) + " device " + std::to_string(device) + " '" + c.device_name +
                              "' does not support host memory registration (HostRegisterSupported = 0); the "
                              "ring cannot be pinned for DMA on it");
}

}  // namespace ringcast::gpu
