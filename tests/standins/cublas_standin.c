/* Stand-in for libcublas.so.12: calls into libcublasLt and libcuda internally, as NVIDIA's does. */
typedef int cublasStatus_t;
typedef void *cublasHandle_t;
typedef void *cublasLtHandle_t;
extern cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
extern cublasStatus_t cublasLtSSSMatmul(void *handle, int m, int n, int k);
extern int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shmem, void *stream, void **params, void **extra);
static cublasLtHandle_t lt;
static int kernel_stub;
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { *h = &lt; return cublasLtCreate(&lt); }
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc) {
    (void)ta; (void)tb; (void)alpha; (void)a; (void)lda; (void)b; (void)ldb; (void)beta; (void)c; (void)ldc;
    if (!h) return 1;
    cublasStatus_t s = cublasLtSSSMatmul(lt, m, n, k);
    if (s != 0) return s;
    return cuLaunchKernel(&kernel_stub, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0) == 0 ? 0 : 13; /* EXECUTION_FAILED */
}
/* Unsupported math mode, answered the way ZLUDA's cuBLAS answers what it lacks: CUBLAS_STATUS_NOT_SUPPORTED. */
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode) { (void)h; return mode == 0 ? 0 : 15; }
