// rocBLAS sgemm: C = A * B for 64x64 matrices of ones; every element is 64.
#include <hip/hip_runtime.h>
#include <rocblas/rocblas.h>
#include <cstdio>
#include <vector>

int main() {
    const int n = 64;
    std::vector<float> h(n * n, 1.0f), c(n * n, 0.0f);
    float *a, *b, *d;
    const size_t bytes = n * n * sizeof(float);
    if (hipMalloc(&a, bytes) != hipSuccess || hipMalloc(&b, bytes) != hipSuccess || hipMalloc(&d, bytes) != hipSuccess ||
        hipMemcpy(a, h.data(), bytes, hipMemcpyHostToDevice) != hipSuccess ||
        hipMemcpy(b, h.data(), bytes, hipMemcpyHostToDevice) != hipSuccess) {
        std::puts("hipMalloc/hipMemcpy failed");
        return 1;
    }
    rocblas_handle handle;
    if (rocblas_create_handle(&handle) != rocblas_status_success) { std::puts("no rocblas handle"); return 1; }
    const float one = 1.0f, zero = 0.0f;
    if (rocblas_sgemm(handle, rocblas_operation_none, rocblas_operation_none, n, n, n, &one, a, n, b, n, &zero, d, n) != rocblas_status_success) {
        std::puts("rocblas_sgemm failed");
        return 1;
    }
    if (hipMemcpy(c.data(), d, bytes, hipMemcpyDeviceToHost) != hipSuccess) { std::puts("hipMemcpy failed"); return 1; }
    for (float x : c) if (x != (float)n) { std::printf("element %f, expected %d\n", x, n); return 1; }
    std::puts("rocblas_sgemm 64x64: ok");
    rocblas_destroy_handle(handle);
    return 0;
}
