// hipSOLVER: the LU factorisation (getrf, partial pivoting) of a 3x3 matrix
// through the HIP (cuSOLVER-style) dense interface, single precision,
// column-major. A = [[2,1,1],[4,3,3],[8,7,9]] (rows) pivots on 8 first;
// P*A = L*U is checked by multiplying the factors back.
#include <hip/hip_runtime.h>
#include <hipsolver/hipsolver.h>
#include <cmath>
#include <cstdio>

int main() {
    const int n = 3;
    const float a[n * n] = {2, 4, 8, 1, 3, 7, 1, 3, 9}; // column-major
    float *d_a, *d_work;
    int *d_piv, *d_info;
    if (hipMalloc(&d_a, sizeof a) != hipSuccess || hipMalloc(&d_piv, n * sizeof(int)) != hipSuccess ||
        hipMalloc(&d_info, sizeof(int)) != hipSuccess ||
        hipMemcpy(d_a, a, sizeof a, hipMemcpyHostToDevice) != hipSuccess) {
        std::puts("hipMalloc/hipMemcpy failed");
        return 1;
    }
    hipsolverHandle_t h;
    if (hipsolverCreate(&h) != HIPSOLVER_STATUS_SUCCESS) { std::puts("hipsolverCreate failed"); return 1; }
    int lwork = 0;
    if (hipsolverSgetrf_bufferSize(h, n, n, d_a, n, &lwork) != HIPSOLVER_STATUS_SUCCESS ||
        hipMalloc(&d_work, (lwork > 0 ? lwork : 1) * sizeof(float)) != hipSuccess) {
        std::puts("hipsolverSgetrf_bufferSize failed");
        return 1;
    }
    float lu[n * n];
    int piv[n], info = -1;
    if (hipsolverSgetrf(h, n, n, d_a, n, d_work, lwork, d_piv, d_info) != HIPSOLVER_STATUS_SUCCESS ||
        hipMemcpy(lu, d_a, sizeof lu, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(piv, d_piv, sizeof piv, hipMemcpyDeviceToHost) != hipSuccess ||
        hipMemcpy(&info, d_info, sizeof info, hipMemcpyDeviceToHost) != hipSuccess || info != 0) {
        std::printf("hipsolverSgetrf failed (info %d)\n", info);
        return 1;
    }
    // P*A: apply the row interchanges (1-based, in order) to a copy of A.
    float pa[n * n];
    for (int i = 0; i < n * n; i++) pa[i] = a[i];
    for (int i = 0; i < n; i++) {
        int p = piv[i] - 1;
        for (int j = 0; j < n; j++) { float t = pa[i + j * n]; pa[i + j * n] = pa[p + j * n]; pa[p + j * n] = t; }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0; // (L*U)[i][j], L unit lower, U upper, both in lu
            for (int k = 0; k <= (i < j ? i : j); k++) s += (k == i ? 1.0f : lu[i + k * n]) * lu[k + j * n];
            if (std::fabs(s - pa[i + j * n]) > 1e-5f) {
                std::printf("(L*U)[%d][%d] = %g, (P*A)[%d][%d] = %g\n", i, j, s, i, j, pa[i + j * n]);
                return 1;
            }
        }
    if (piv[0] != 3) { std::printf("first pivot row %d, expected 3\n", piv[0]); return 1; }
    std::puts("hipsolver getrf, n = 3: ok");
    hipsolverDestroy(h);
    return 0;
}
