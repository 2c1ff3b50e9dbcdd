// hipFFT: the forward DFT of a length-8 unit impulse at index 1 through the
// HIP (cuFFT-style) interface, double precision, in place:
// X[k] = exp(-2 pi i k / 8).
#include <hip/hip_runtime.h>
#include <hipfft/hipfft.h>
#include <cmath>
#include <cstdio>

int main() {
    const int n = 8;
    hipfftDoubleComplex h[n] = {};
    h[1].x = 1.0;
    hipfftDoubleComplex *d;
    if (hipMalloc(&d, sizeof h) != hipSuccess || hipMemcpy(d, h, sizeof h, hipMemcpyHostToDevice) != hipSuccess) {
        std::puts("hipMalloc/hipMemcpy failed");
        return 1;
    }
    hipfftHandle plan;
    if (hipfftPlan1d(&plan, n, HIPFFT_Z2Z, 1) != HIPFFT_SUCCESS) { std::puts("hipfftPlan1d failed"); return 1; }
    if (hipfftExecZ2Z(plan, d, d, HIPFFT_FORWARD) != HIPFFT_SUCCESS || hipDeviceSynchronize() != hipSuccess ||
        hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost) != hipSuccess) {
        std::puts("hipfftExecZ2Z failed");
        return 1;
    }
    const double pi = std::acos(-1.0);
    for (int k = 0; k < n; k++) {
        double re = std::cos(2 * pi * k / n), im = -std::sin(2 * pi * k / n);
        if (std::fabs(h[k].x - re) > 1e-12 || std::fabs(h[k].y - im) > 1e-12) {
            std::printf("X[%d] = %g%+gi, expected %g%+gi\n", k, h[k].x, h[k].y, re, im);
            return 1;
        }
    }
    std::puts("hipfft forward DFT, n = 8: ok");
    hipfftDestroy(plan);
    return 0;
}
