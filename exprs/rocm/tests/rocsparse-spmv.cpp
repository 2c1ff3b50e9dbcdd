// rocSPARSE: y = A x for a 4x4 CSR matrix (a tridiagonal -1 2 -1 stencil)
// and x all ones: the row sums, 1 0 0 1.
#include <hip/hip_runtime.h>
#include <rocsparse/rocsparse.h>
#include <cstdio>

int main() {
    const rocsparse_int m = 4, nnz = 10;
    const rocsparse_int h_ptr[] = {0, 2, 5, 8, 10};
    const rocsparse_int h_col[] = {0, 1, 0, 1, 2, 1, 2, 3, 2, 3};
    const double h_val[] = {2, -1, -1, 2, -1, -1, 2, -1, -1, 2};
    const double h_x[] = {1, 1, 1, 1};
    const double want[] = {1, 0, 0, 1};
    rocsparse_int *ptr, *col;
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
    rocsparse_handle handle;
    rocsparse_mat_descr descr;
    if (rocsparse_create_handle(&handle) != rocsparse_status_success ||
        rocsparse_create_mat_descr(&descr) != rocsparse_status_success) {
        std::puts("no rocsparse handle");
        return 1;
    }
    const double one = 1.0, zero = 0.0;
    if (rocsparse_dcsrmv(handle, rocsparse_operation_none, m, m, nnz, &one, descr, val, ptr, col,
                         nullptr, x, &zero, y) != rocsparse_status_success) {
        std::puts("rocsparse_dcsrmv failed");
        return 1;
    }
    double h_y[4];
    if (hipMemcpy(h_y, y, sizeof h_y, hipMemcpyDeviceToHost) != hipSuccess) { std::puts("hipMemcpy failed"); return 1; }
    for (int i = 0; i < m; i++)
        if (h_y[i] != want[i]) { std::printf("y[%d] = %f, expected %f\n", i, h_y[i], want[i]); return 1; }
    std::puts("rocsparse_dcsrmv 4x4: ok");
    rocsparse_destroy_mat_descr(descr);
    rocsparse_destroy_handle(handle);
    return 0;
}
