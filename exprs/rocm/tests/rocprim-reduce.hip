// rocPRIM device reduce: the sum of 1..n on the GPU, checked on the host.
#include <hip/hip_runtime.h>
#include <rocprim/rocprim.hpp>
#include <cstdio>
#include <vector>

#define CHECK(x) do { hipError_t e = (x); if (e != hipSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, hipGetErrorString(e)); return 1; } } while (0)

int main() {
    const size_t n = 1 << 20;
    std::vector<unsigned long long> host(n);
    for (size_t i = 0; i < n; i++) host[i] = i + 1;
    unsigned long long *in, *out;
    CHECK(hipMalloc(&in, n * sizeof(*in)));
    CHECK(hipMalloc(&out, sizeof(*out)));
    CHECK(hipMemcpy(in, host.data(), n * sizeof(*in), hipMemcpyHostToDevice));
    size_t bytes = 0;
    CHECK(rocprim::reduce(nullptr, bytes, in, out, 0ull, n, rocprim::plus<unsigned long long>()));
    void* tmp;
    CHECK(hipMalloc(&tmp, bytes));
    CHECK(rocprim::reduce(tmp, bytes, in, out, 0ull, n, rocprim::plus<unsigned long long>()));
    unsigned long long got = 0;
    CHECK(hipMemcpy(&got, out, sizeof(got), hipMemcpyDeviceToHost));
    const unsigned long long want = (unsigned long long)n * (n + 1) / 2;
    std::printf("rocprim::reduce of 1..%zu = %llu (expected %llu)\n", n, got, want);
    return got == want ? 0 : 1;
}
