// ringcast/gpu/runtime.hpp — the GPU runtime shim: the dozen CUDA / HIP runtime calls ringcast uses,
// behind one table of function pointers, so that registration, publish and receive are written once
// (src/gpu/*.cpp, plain C++, no CUDA or HIP header) and each backend is one instantiation of
// src/gpu/runtime_backend.inc (src/gpu/runtime_cuda.cpp, src/gpu/runtime_hip.cpp).
//
// Handles cross the shim as void*: a cudaStream_t / hipStream_t converts to gpu::Stream implicitly
// (both are pointers to an opaque struct); nullptr is the legacy default stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ringcast/error.hpp"

namespace ringcast::gpu {

using Stream = void*;  // cudaStream_t / hipStream_t
using Event = void*;   // cudaEvent_t / hipEvent_t

enum class CopyKind : std::uint8_t { host_to_device, device_to_host };

// Device properties the GPU path depends on (probed with device_attribute).
enum class Attribute : std::uint8_t {
    host_register_supported,    // cudaHostRegister works on this device (not on some virtualized setups)
    can_map_host_memory,        // registered memory can be Mapped: kernels read it (zero-copy peek)
    host_pointer_is_device_ptr, // a mapped host pointer is valid on the device as it is (same address)
    pageable_memory_access,     // the device reads pageable host memory directly (HMM / ATS)
};

// Why a GPU call failed, for callers that branch (DeviceError::reason()).
enum class Reason : std::uint8_t {
    no_driver,                 // no (or a too old) driver: cudaErrorInsufficientDriver, 35
    no_device,                 // a driver but no device: cudaErrorNoDevice (100) / hipErrorNoDevice
    registration_unsupported,  // the device cannot register host memory (attribute or the call says so)
    not_built,                 // this ringcast was built without the backend (RINGCAST_CUDA / RINGCAST_HIP)
    runtime,                   // any other runtime error: the message names the call and the error
};

[[nodiscard]] const char* to_string(Reason r) noexcept;

// Every GPU failure. code() is ErrorCode::system (invalid_argument for bad pointers or sizes);
// reason() says which of the cases above; runtime_error_code() is the backend's own number.
class DeviceError : public Error {
public:
    DeviceError(Reason reason, int runtime_code, const std::string& what,
                ErrorCode code = ErrorCode::system)
        : Error(code, what), reason_(reason), runtime_code_(runtime_code) {}
    [[nodiscard]] Reason reason() const noexcept { return reason_; }
    [[nodiscard]] int runtime_error_code() const noexcept { return runtime_code_; }

private:
    Reason reason_;
    int runtime_code_;
};

// The backend table. Every entry returns the runtime's own error number, 0 for success. Filled by
// runtime_backend.inc; callers go through the checked helpers below, never the raw table.
// Thread-safety: the table is immutable; the runtimes themselves are thread-safe.
struct Runtime {
    const char* name;  // "CUDA" / "HIP"
    // Error numbers the logic branches on (they differ between backends in places).
    int not_ready;
    int already_registered;
    int not_registered;
    int (*get_device_count)(int* count);
    int (*driver_version)(int* version);
    int (*runtime_version)(int* version);
    int (*set_device)(int device);
    int (*get_device)(int* device);
    // 0 and *supported set: the device answered; 1: the backend has no such attribute.
    int (*device_attribute)(int* value, Attribute attr, int device, bool* supported);
    int (*device_name)(char* out, std::size_t size, int device);
    int (*host_register)(void* p, std::size_t n, bool mapped);  // Portable, plus Mapped if asked
    int (*host_unregister)(void* p);
    int (*host_get_device_pointer)(void** device_ptr, void* host_ptr);
    int (*memcpy_async)(void* dst, const void* src, std::size_t n, CopyKind kind, Stream stream);
    int (*event_create)(Event* event);  // timing disabled: a completion marker only
    int (*event_record)(Event event, Stream stream);
    int (*event_query)(Event event);     // 0: completed; not_ready: still in flight
    int (*event_destroy)(Event event);
    int (*device_malloc)(void** p, std::size_t n);
    int (*device_free)(void* p);
    int (*device_memset)(void* p, int value, std::size_t n);
    int (*host_malloc_pinned)(void** p, std::size_t n);
    int (*host_free_pinned)(void* p);
    int (*stream_synchronize)(Stream stream);
    int (*pointer_is_device)(const void* p, bool* is_device);  // device or managed memory of any device
    int (*clear_last_error)();
    const char* (*error_name)(int code);
    const char* (*error_string)(int code);
    Reason (*classify)(int code);  // no_driver / no_device / runtime
};

// The backends this build has. Throws DeviceError(not_built) for one that was not compiled in.
[[nodiscard]] const Runtime& cuda();
[[nodiscard]] const Runtime& hip();
[[nodiscard]] bool cuda_built() noexcept;
[[nodiscard]] bool hip_built() noexcept;

// Throws DeviceError for a non-zero result, naming the runtime, the call and what it was doing:
// e.g. "CUDA cudaHostRegister(0x7f.., 67174400 bytes) of segment 'q': cudaErrorInsufficientDriver (35):
// no NVIDIA driver is loaded (CUDA driver too old or missing)".
void check(const Runtime& rt, int result, const char* call, const std::string& context = {});
[[nodiscard]] std::string describe(const Runtime& rt, int result);

}  // namespace ringcast::gpu
