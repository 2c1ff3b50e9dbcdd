// hipSPARSE (over rocSPARSE): y = A x for a 4x4 CSR matrix (a tridiagonal -1 2 -1 stencil)
// and x all ones: the row sums, 1 0 0 1.
#include <hip/hip_runtime.h>
#include <hipsparse/hipsparse.h>
#include <cstdio>

int main() {
    const int m = 4, nnz = 10;
    const int h_ptr[] = {0, 2, 5, 8, 10};
    const int h_col[] = {0, 1, 0, 1, 2, 1, 2, 3, 2, 3};
    const double h_val[] = {2, -1, -1, 2, -1, -1, 2, -1, -1, 2};
    const double h_x[] = {1, 1, 1, 1};
    const double want[] = {1, 0, 0, 1};
    int *ptr, *col;
    double *val, *x, *y;
    if (hipMalloc(&ptr, sizeof h_ptr) != hipSuccess || hipMalloc(&col, sizeof h_col) != hipSuccess ||
        hipMalloc(&val, sizeof h_val) != hipSuccess || hipMalloc(&x, sizeof h_x) != hipSuccess ||
        hipMalloc(&y, sizeof h_x) != hipSuccess ||
        hipMemcpy(ptr, h_ptr, sizeof h_ptr, hipMemcpyHostToDevice) != hipSuccess ||
        hipMemcpy(col, h_col, sizeof h_col, hipMemcpyHostToDevice) != hipSuccess ||
        hipMemcpy(val, h_val, sizeof h_val, hipMemcpyHostToDevice) != hipSuccess ||
        hipMemcpy(x, h_x, sizeof h_x, hipMemcpyHostToDevice) != hipSuccess) {
        std::puts("hipMalloc/hipMemcpy failed");
        return 1;
    }
    hipsparseHandle_t handle;
    hipsparseMatDescr_t descr;
    if (hipsparseCreate(&handle) != HIPSPARSE_STATUS_SUCCESS ||
        hipsparseCreateMatDescr(&descr) != HIPSPARSE_STATUS_SUCCESS) {
        std::puts("no hipsparse handle");
        return 1;
    }
    const double one = 1.0, zero = 0.0;
    if (hipsparseDcsrmv(handle, HIPSPARSE_OPERATION_NON_TRANSPOSE, m, m, nnz, &one, descr, val, ptr, col,
                        x, &zero, y) != HIPSPARSE_STATUS_SUCCESS) {
        std::puts("hipsparseDcsrmv failed");
        return 1;
    }
    double h_y[4];
    if (hipMemcpy(h_y, y, sizeof h_y, hipMemcpyDeviceToHost) != hipSuccess) { std::puts("hipMemcpy failed"); return 1; }
    for (int i = 0; i < m; i++)
        if (h_y[i] != want[i]) { std::printf("y[%d] = %f, expected %f\n", i, h_y[i], want[i]); return 1; }
    std::puts("hipsparseDcsrmv 4x4: ok");
    hipsparseDestroyMatDescr(descr);
    hipsparseDestroy(handle);
    return 0;
}
