// rocThrust: sort a reversed sequence on the device and check the order.
#include <thrust/device_vector.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/reduce.h>
#include <thrust/host_vector.h>
#include <cstdio>

int main() {
    const int n = 1 << 16;
    thrust::device_vector<int> v(n);
    thrust::sequence(v.begin(), v.end(), n, -1);   // n, n-1, …, 1
    thrust::sort(v.begin(), v.end());
    thrust::host_vector<int> h = v;
    for (int i = 0; i < n; i++)
        if (h[i] != i + 1) { std::printf("sorted[%d] = %d, expected %d\n", i, h[i], i + 1); return 1; }
    long long sum = thrust::reduce(v.begin(), v.end(), 0ll);
    std::printf("thrust::sort of %d ints: ok (sum %lld)\n", n, sum);
    return 0;
}
