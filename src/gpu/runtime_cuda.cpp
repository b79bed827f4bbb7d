// The CUDA instantiation of the runtime shim (runtime_backend.inc holds the code).
#include <cstdio>

#include <cuda_runtime_api.h>

#include "ringcast/gpu/runtime.hpp"

#define RC(x) cuda##x
#define RC_NAME "CUDA"
#define RC_TABLE cuda_table
#define RC_ATTR_HOST_REGISTER_SUPPORTED cudaDevAttrHostRegisterSupported
#define RC_ATTR_CAN_MAP_HOST_MEMORY cudaDevAttrCanMapHostMemory
#define RC_ATTR_HOST_POINTER_FOR_REGISTERED cudaDevAttrCanUseHostPointerForRegisteredMem
#define RC_ATTR_PAGEABLE_MEMORY_ACCESS cudaDevAttrPageableMemoryAccess
#define RC_HOST_ALLOC(p, n) cudaMallocHost(p, n)
#define RC_DEVICE_PROP cudaDeviceProp
#define RC_HOST_FREE(p) cudaFreeHost(p)
#define RC_POINTER_ATTRIBUTES cudaPointerAttributes
#define RC_POINTER_IS_DEVICE(a) ((a).type == cudaMemoryTypeDevice || (a).type == cudaMemoryTypeManaged)
#include "runtime_backend.inc"
