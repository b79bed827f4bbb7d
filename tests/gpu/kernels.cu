// The device code of kernels.hpp (compiled by nvcc alone: no ringcast header reaches it).
#include "kernels.hpp"

#include <cuda_runtime.h>

namespace ringcast::gpu::kernels {
namespace {


__host__ __device__ inline std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Random-looking bytes, a function of (seed, position) only.
__global__ void fill_kernel(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
    const std::size_t words = n / 8;
    const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
    const std::size_t id = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (std::size_t i = id; i < words; i += stride) reinterpret_cast<std::uint64_t*>(p)[i] = mix64(seed ^ (i * 0x2545f4914f6cdd1dULL));
    for (std::size_t j = words * 8 + id; j < n; j += stride) p[j] = static_cast<std::uint8_t>(mix64(seed + j));
}

// Position-sensitive sum: a byte changed, moved or missing changes it. *out must start at 0. The
// same value whatever the alignment of `p` (8-byte loads where aligned, bytes assembled otherwise).
__global__ void checksum_kernel(const std::uint8_t* p, std::size_t n, unsigned long long* out) {
    const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
    const std::size_t id = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    std::uint64_t sum = 0;
    const bool aligned = (reinterpret_cast<std::uintptr_t>(p) & 7) == 0;
    const std::size_t words = n / 8;
    for (std::size_t i = id; i < words; i += stride) {
        std::uint64_t w = 0;
        if (aligned) {
            w = reinterpret_cast<const std::uint64_t*>(p)[i];
        } else {
            for (int b = 7; b >= 0; --b) w = (w << 8) | p[i * 8 + b];  // little-endian, as the aligned load
        }
        sum += mix64(w ^ mix64(i));
    }
    for (std::size_t j = words * 8 + id; j < n; j += stride) sum += mix64((std::uint64_t(p[j]) << 48) ^ j);
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if ((threadIdx.x & 31) == 0 && sum != 0) atomicAdd(out, static_cast<unsigned long long>(sum));
}



unsigned blocks_for(std::size_t n) {
    const std::size_t b = (n / 8 + 255) / 256;
    return static_cast<unsigned>(b < 1 ? 1 : (b > 2048 ? 2048 : b));
}

}  // namespace

int fill(void* p, std::size_t n, std::uint64_t seed, void* stream) {
    if (n == 0) return 0;
    fill_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<std::uint8_t*>(p), n, seed);
    return static_cast<int>(cudaGetLastError());
}

int checksum(const void* p, std::size_t n, unsigned long long* out, void* stream) {
    if (n == 0) return 0;
    checksum_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const std::uint8_t*>(p), n, out);
    return static_cast<int>(cudaGetLastError());
}

}  // namespace ringcast::gpu::kernels
