// y = a*x + y on the GPU, checked against the CPU reference of libsaxpyref.
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "saxpyref.h"

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main(void) {
    const int n = 1 << 20;
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    float *ref = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) { x[i] = (float)i; y[i] = 1.0f; ref[i] = 1.0f; }
    float *dx, *dy;
    if (hipMalloc(&dx, n * sizeof(float)) != hipSuccess || hipMalloc(&dy, n * sizeof(float)) != hipSuccess) {
        fprintf(stderr, "no usable GPU\n");
        return 2;
    }
    hipMemcpy(dx, x, n * sizeof(float), hipMemcpyHostToDevice);
    hipMemcpy(dy, y, n * sizeof(float), hipMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    hipMemcpy(y, dy, n * sizeof(float), hipMemcpyDeviceToHost);
    saxpy_ref(n, 2.0f, x, ref);
    for (int i = 0; i < n; i++) {
        if (y[i] != ref[i]) { fprintf(stderr, "mismatch at %d: %f != %f\n", i, y[i], ref[i]); return 1; }
    }
    printf("saxpy ok (%d elements)\n", n);
    return 0;
}
