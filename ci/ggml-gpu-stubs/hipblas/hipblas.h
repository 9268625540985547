// Stand-in for hipBLAS's header, for compiling ggml-cuda's MMVQ and q8_1 quantizer
// device code only (ci/ggml-gpu): ggml's common.cuh names these types and functions in
// host code that the device-only build never runs. Nothing here reaches device code.
#pragma once
typedef enum {
    HIPBLAS_STATUS_SUCCESS,
    HIPBLAS_STATUS_NOT_INITIALIZED,
    HIPBLAS_STATUS_ALLOC_FAILED,
    HIPBLAS_STATUS_INVALID_VALUE,
    HIPBLAS_STATUS_ARCH_MISMATCH,
    HIPBLAS_STATUS_MAPPING_ERROR,
    HIPBLAS_STATUS_EXECUTION_FAILED,
    HIPBLAS_STATUS_INTERNAL_ERROR,
    HIPBLAS_STATUS_NOT_SUPPORTED
} hipblasStatus_t;
typedef void * hipblasHandle_t;
hipblasStatus_t hipblasCreate(hipblasHandle_t * handle);
hipblasStatus_t hipblasDestroy(hipblasHandle_t handle);
template <class Stream> hipblasStatus_t hipblasSetStream(hipblasHandle_t handle, Stream stream);
