// The backend-independent half of the runtime shim: backend lookup and error text.
#include "ringcast/gpu/runtime.hpp"

#include <cstdio>

namespace ringcast::gpu {

namespace detail {
#ifdef RINGCAST_GPU_HAVE_CUDA
const Runtime& cuda_table();
#endif
#ifdef RINGCAST_GPU_HAVE_HIP
const Runtime& hip_table();
#endif
}  // namespace detail

const char* to_string(Reason r) noexcept {
    switch (r) {
        case Reason::no_driver: return "no driver";
        case Reason::no_device: return "no device";
        case Reason::registration_unsupported: return "registration unsupported";
        case Reason::not_built: return "not built";
        case Reason::runtime: return "runtime error";
    }
    return "?";
}

bool cuda_built() noexcept {
#ifdef RINGCAST_GPU_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

bool hip_built() noexcept {
#ifdef RINGCAST_GPU_HAVE_HIP
    return true;
#else
    return false;
#endif
}

const Runtime& cuda() {
#ifdef RINGCAST_GPU_HAVE_CUDA
    return detail::cuda_table();
#else
    throw DeviceError(Reason::not_built, 0,
                      "ringcast was built without CUDA (configure with -DRINGCAST_CUDA=ON and a CUDA toolkit)");
#endif
}

const Runtime& hip() {
#ifdef RINGCAST_GPU_HAVE_HIP
    return detail::hip_table();
#else
    throw DeviceError(Reason::not_built, 0,
                      "ringcast was built without HIP (configure with -DRINGCAST_HIP=ON and libamdhip64-dev)");
#endif
}

std::string describe(const Runtime& rt, int result) {
    std::string s = std::string(rt.error_name(result)) + " (" + std::to_string(result) + "): " + rt.error_string(result);
    switch (rt.classify(result)) {
        case Reason::no_driver:
            s += std::string(" — no usable ") + (rt.name[0] == 'C' ? "NVIDIA" : "AMD") +
                 " driver on this machine (none loaded, or older than the runtime)";
            break;
        case Reason::no_device: s += " — no GPU device visible to the driver"; break;
        default: break;
    }
    return s;
}

void check(const Runtime& rt, int result, const char* call, const std::string& context) {
    if (result == 0) return;
    (void)rt.clear_last_error();  // a sticky last error must not surface in an unrelated later call
    std::string what = std::string(rt.name) + " " + call;
    if (!context.empty()) what += " (" + context + ")";
    throw DeviceError(rt.classify(result), result, what + ": " + describe(rt, result));
}

}  // namespace ringcast::gpu
