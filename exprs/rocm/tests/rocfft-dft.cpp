// rocFFT: the forward DFT of a length-8 unit impulse at index 1, in double
// precision, in place: X[k] = exp(-2 pi i k / 8), which checks the sign
// convention as well as the arithmetic. rocFFT compiles this size's kernel at
// run time (hipRTC) on first use; the build's own code objects are its helpers.
#include <hip/hip_runtime.h>
#include <rocfft/rocfft.h>
#include <cmath>
#include <cstdio>

int main() {
    const size_t n = 8;
    double h[2 * n] = {0};
    h[2] = 1.0; // x[1] = 1 + 0i
    double *d;
    if (hipMalloc(&d, sizeof h) != hipSuccess || hipMemcpy(d, h, sizeof h, hipMemcpyHostToDevice) != hipSuccess) {
        std::puts("hipMalloc/hipMemcpy failed");
        return 1;
    }
    if (rocfft_setup() != rocfft_status_success) { std::puts("rocfft_setup failed"); return 1; }
    rocfft_plan plan;
    size_t len = n;
    if (rocfft_plan_create(&plan, rocfft_placement_inplace, rocfft_transform_type_complex_forward,
                           rocfft_precision_double, 1, &len, 1, nullptr) != rocfft_status_success) {
        std::puts("rocfft_plan_create failed");
        return 1;
    }
    void *bufs[] = {d};
    if (rocfft_execute(plan, bufs, nullptr, nullptr) != rocfft_status_success ||
        hipDeviceSynchronize() != hipSuccess ||
        hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost) != hipSuccess) {
        std::puts("rocfft_execute failed");
        return 1;
    }
    const double pi = std::acos(-1.0);
    for (size_t k = 0; k < n; k++) {
        double re = std::cos(2 * pi * k / n), im = -std::sin(2 * pi * k / n);
        if (std::fabs(h[2 * k] - re) > 1e-12 || std::fabs(h[2 * k + 1] - im) > 1e-12) {
            std::printf("X[%zu] = %g%+gi, expected %g%+gi\n", k, h[2 * k], h[2 * k + 1], re, im);
            return 1;
        }
    }
    std::puts("rocfft forward DFT, n = 8: ok");
    rocfft_plan_destroy(plan);
    rocfft_cleanup();
    return 0;
}
