/* Stand-in for libcublasLt.so.12: a public entry point and an internal one that libcublas calls inward. */
typedef int cublasStatus_t;
typedef void *cublasLtHandle_t;
static int lt_handle_storage;
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = &lt_handle_storage; return 0; }
/* Internal kernel selector NVIDIA's libcublas calls (never reached under ZLUDA, which replaces libcublas). */
cublasStatus_t cublasLtSSSMatmul(void *handle, int m, int n, int k) {
    if (!handle) return 1;           /* CUBLAS_STATUS_NOT_INITIALIZED */
    return (m > 0 && n > 0 && k > 0) ? 0 : 7; /* CUBLAS_STATUS_INVALID_VALUE */
}
