/* The CPU reference of saxpy: a library that compiles no GPU code, so its
   store path is the same for every choice of gfx targets. */
#ifdef __cplusplus
extern "C" {
#endif
void saxpy_ref(int n, float a, const float *x, float *y);
#ifdef __cplusplus
}
#endif
