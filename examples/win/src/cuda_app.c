/* A small Windows CUDA program for cudatrace's examples: it reaches CUDA in every way a real one does.
 *   - import table: nvcuda.dll (driver API), cublas64_12.dll, cudnn64_9.dll
 *   - delay-import table: cufft64_11.dll (loaded on first call)
 *   - run-time loading by name: LoadLibraryA("cublasLt64_12.dll") + GetProcAddress
 *   - embedded GPU code: a fatbin built by nvcc (SASS sm_80 + PTX compute_80) in section .nv_fatbin (.nv_fatb)
 * Built by scripts/build_pe_examples.sh with mingw-w64; no CUDA DLL is needed to build or scan it. */
#include <windows.h>
#include <stdio.h>

typedef int CUresult;
typedef void *CUmodule;
CUresult cuInit(unsigned flags);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuCtxCreate_v2(void **ctx, unsigned flags, int dev);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleGetFunction(void **fn, CUmodule module, const char *name);
CUresult cuMemAlloc_v2(unsigned long long *ptr, size_t size);
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra);
int cublasCreate_v2(void **handle);
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cudnnCreate(void **handle);
int cufftPlan1d(int *plan, int nx, int type, int batch);
int cufftExecC2C(int plan, void *in, void *out, int direction);

extern const unsigned char cudatrace_example_fatbin[];

typedef int (*lt_create_t)(void **);

int main(int argc, char **argv) {
  if (argc < 2) {
    printf("usage: %s run   (needs a CUDA driver: nvcuda.dll, or ZLUDA's)\n", argv[0]);
    return 0;
  }
  int dev = 0, plan = 0;
  void *ctx = 0, *fn = 0, *blas = 0, *dnn = 0, *lt = 0;
  CUmodule mod = 0;
  unsigned long long buf = 0;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) return 1;
  if (cuModuleLoadData(&mod, cudatrace_example_fatbin) || cuModuleGetFunction(&fn, mod, "_Z5scalePffi")) return 2;
  if (cuMemAlloc_v2(&buf, 1024 * sizeof(float))) return 3;
  float a = 2.0f;
  int n = 1024;
  void *params[] = {&buf, &a, &n};
  if (cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, 0, params, 0)) return 4;
  cublasCreate_v2(&blas);
  cublasSgemm_v2(blas, 0, 0, 0, 0, 0, &a, 0, 1, 0, 1, &a, 0, 1);
  cudnnCreate(&dnn);
  cufftPlan1d(&plan, 256, 0x29, 1);
  cufftExecC2C(plan, 0, 0, -1);
  HMODULE h = LoadLibraryA("cublasLt64_12.dll");
  lt_create_t create = h ? (lt_create_t)GetProcAddress(h, "cublasLtCreate") : 0;
  if (create) create(&lt);
  puts("done");
  return 0;
}
