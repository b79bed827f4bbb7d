// ringcast/gpu/capabilities.hpp — what this machine's GPU runtime can do for the ring, probed once.
//
// probe() never throws: "no driver" (error 35 on a machine with the toolkit but no GPU driver) and "no
// device" are answers, not failures, so callers (and the tests) can skip with the reason printed.
// require_registration() is the throwing form the constructors of the GPU endpoints use.
#pragma once

#include <optional>
#include <string>

#include "ringcast/gpu/runtime.hpp"

namespace ringcast::gpu {

struct Capabilities {
    bool usable = false;        // a driver and the device exist (everything below is filled only then)
    Reason why_not = Reason::runtime;
    std::string why_not_text;   // e.g. "CUDA: cudaGetDeviceCount: cudaErrorInsufficientDriver (35): ..."
    int device_count = 0;
    int device = 0;
    std::string device_name;
    int driver_version = 0;
    int runtime_version = 0;
    std::optional<bool> host_register_supported;  // nullopt: the runtime cannot say (HIP 5.2)
    bool can_map_host_memory = false;             // registered memory Mapped: the zero-copy peek
    bool host_pointer_is_device_ptr = false;      // the mapped address is the host address
    bool pageable_memory_access = false;          // the device reads unregistered host memory
    [[nodiscard]] std::string summary() const;    // one line for logs and test output
};

// Thread-safety: any thread (the runtimes are thread-safe). Initializes the runtime (a process that
// probes and then fork()s cannot use the GPU in the child: CUDA forbids it; exec instead).
[[nodiscard]] Capabilities probe(const Runtime& rt, int device = 0) noexcept;

// Throws DeviceError: no_driver, no_device (also a device index past the count), registration_unsupported.
void require_registration(const Runtime& rt, int device);

}  // namespace ringcast::gpu
