// The HIP instantiation of the runtime shim (runtime_backend.inc holds the code). Compiled with the host
// compiler against Debian's libamdhip64-dev headers (__HIP_PLATFORM_AMD__ set by the build).
#include <cstdio>

#include <hip/hip_runtime_api.h>

#include "ringcast/gpu/runtime.hpp"

#define RC(x) hip##x
#define RC_NAME "HIP"
#define RC_TABLE hip_table
// HIP 5.2 has no host-register-supported attribute: registration itself is the probe there.
#define RC_ATTR_CAN_MAP_HOST_MEMORY hipDeviceAttributeCanMapHostMemory
#define RC_ATTR_HOST_POINTER_FOR_REGISTERED hipDeviceAttributeCanUseHostPointerForRegisteredMem
#define RC_ATTR_PAGEABLE_MEMORY_ACCESS hipDeviceAttributePageableMemoryAccess
#define RC_HOST_ALLOC(p, n) hipHostMalloc(p, n, hipHostMallocDefault)
#define RC_DEVICE_PROP hipDeviceProp_t
#define RC_HOST_FREE(p) hipHostFree(p)
#define RC_POINTER_ATTRIBUTES hipPointerAttribute_t
#define RC_POINTER_IS_DEVICE(a) ((a).memoryType == hipMemoryTypeDevice || (a).isManaged != 0)
#include "runtime_backend.inc"
