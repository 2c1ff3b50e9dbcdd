// rocRAND: uniform floats from the default device generator (XORWOW) must lie
// in (0, 1] and have a mean near 0.5.
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>
#include <cstdio>
#include <vector>

int main() {
    const size_t n = 1 << 20;
    float* d;
    if (hipMalloc(&d, n * sizeof(float)) != hipSuccess) { std::puts("hipMalloc failed"); return 1; }
    rocrand_generator g;
    if (rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_DEFAULT) != ROCRAND_STATUS_SUCCESS) { std::puts("no generator"); return 1; }
    rocrand_set_seed(g, 1234);
    if (rocrand_generate_uniform(g, d, n) != ROCRAND_STATUS_SUCCESS) { std::puts("generate failed"); return 1; }
    std::vector<float> h(n);
    if (hipMemcpy(h.data(), d, n * sizeof(float), hipMemcpyDeviceToHost) != hipSuccess) { std::puts("hipMemcpy failed"); return 1; }
    double sum = 0;
    for (float x : h) { if (!(x > 0.0f && x <= 1.0f)) { std::printf("out of range: %f\n", x); return 1; } sum += x; }
    double mean = sum / n;
    std::printf("rocrand uniform mean of %zu = %f\n", n, mean);
    rocrand_destroy_generator(g);
    return (mean > 0.49 && mean < 0.51) ? 0 : 1;
}
