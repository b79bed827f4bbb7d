// Device-side content and checksums for the GPU tests and benchmarks: bytes are generated and verified
// on the GPU, so a check never depends on a host copy of what it checks. Host launchers (kernels.cu is
// compiled by nvcc alone); both return the launch's cudaError_t as an int.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringcast::gpu::kernels {

// Random-looking bytes, a function of (seed, position) only, queued on `stream` (a cudaStream_t).
int fill(void* device_p, std::size_t n, std::uint64_t seed, void* stream);
// Adds a position-sensitive sum of the n bytes at `p` to *device_out (zero it first): a byte changed,
// moved or missing changes it; the same value whatever p's alignment. `p` may be any address the device
// reads (device memory, or mapped registered host memory: the zero-copy peek).
int checksum(const void* p, std::size_t n, unsigned long long* device_out, void* stream);

}  // namespace ringcast::gpu::kernels
