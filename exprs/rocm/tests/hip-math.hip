// A HIP kernel that calls device-library math (sinf, sqrtf from ocml), so
// the device libraries built here are linked into the code object.
#include <hip/hip_runtime.h>
#include <cmath>
#include <cstdio>

__global__ void kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sinf(x[i]) * sinf(x[i]) + sqrtf(x[i] * x[i]) - fabsf(x[i]);
}

int main() {
    const int n = 4096;
    float hx[n], hy[n];
    for (int i = 0; i < n; i++) hx[i] = i * 0.001f;
    float *x, *y;
    if (hipMalloc(&x, sizeof hx) != hipSuccess || hipMalloc(&y, sizeof hy) != hipSuccess) { std::puts("hipMalloc failed"); return 1; }
    hipMemcpy(x, hx, sizeof hx, hipMemcpyHostToDevice);
    kernel<<<(n + 255) / 256, 256>>>(x, y, n);
    hipMemcpy(hy, y, sizeof hy, hipMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) {
        float want = std::sin(hx[i]) * std::sin(hx[i]);
        if (std::fabs(hy[i] - want) > 1e-4f) { std::printf("y[%d] = %f, expected %f\n", i, hy[i], want); return 1; }
    }
    std::puts("sin^2 + |x| - |x| on the GPU: ok");
    return 0;
}
