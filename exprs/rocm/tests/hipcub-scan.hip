// hipCUB device inclusive scan of ones: element i must be i + 1.
#include <hip/hip_runtime.h>
#include <hipcub/hipcub.hpp>
#include <cstdio>
#include <vector>

#define CHECK(x) do { hipError_t e = (x); if (e != hipSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, hipGetErrorString(e)); return 1; } } while (0)

int main() {
    const int n = 100000;
    std::vector<int> host(n, 1);
    int *in, *out;
    CHECK(hipMalloc(&in, n * sizeof(int)));
    CHECK(hipMalloc(&out, n * sizeof(int)));
    CHECK(hipMemcpy(in, host.data(), n * sizeof(int), hipMemcpyHostToDevice));
    size_t bytes = 0;
    CHECK(hipcub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, n));
    void* tmp;
    CHECK(hipMalloc(&tmp, bytes));
    CHECK(hipcub::DeviceScan::InclusiveSum(tmp, bytes, in, out, n));
    CHECK(hipMemcpy(host.data(), out, n * sizeof(int), hipMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (host[i] != i + 1) { std::printf("scan[%d] = %d, expected %d\n", i, host[i], i + 1); return 1; }
    std::printf("hipcub::DeviceScan::InclusiveSum of %d ones: ok\n", n);
    return 0;
}
