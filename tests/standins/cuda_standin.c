/* Stand-in for libcuda.so.1 / nvcuda.dll: a few driver entry points with the real names and signatures.
 * Statuses follow CUresult: 0 success, 101 CUDA_ERROR_INVALID_DEVICE, 801 CUDA_ERROR_NOT_SUPPORTED (what
 * ZLUDA's unimplemented stubs return), 500 CUDA_ERROR_NOT_FOUND. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned char bytes[16]; } CUuuid;

/* A data export: must never be hooked. */
int cuStandinDataExport[4] = {1, 2, 3, 4};

static unsigned long long next_ptr = 0x100000;

CUresult cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int *v) { if (v) *v = 13000; return 0; }
CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (ordinal != 0) return 101;
    *dev = 0;
    return 0;
}
/* Short enough to be hooked by a whole copy; 16-byte aligned like real libraries' functions, so the jump to it can
 * be written atomically while other threads run it (the library is built with -falign-functions=1). */
__attribute__((aligned(16))) CUresult cuCtxGetDevice(CUdevice *dev) { if (dev) *dev = 0; return 0; }
/* Two names, one address: hooked once. */
CUresult cuCtxGetDevice_v2(CUdevice *dev) __attribute__((alias("cuCtxGetDevice")));
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (n == 0) return 1;
    *p = next_ptr; next_ptr += (n + 255) & ~(size_t)255;
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { return p ? 0 : 1; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra) {
    (void)gy; (void)gz; (void)by; (void)bz; (void)shmem; (void)stream; (void)params; (void)extra;
    return (f != NULL && gx > 0 && bx > 0) ? 0 : 1;
}
/* An unimplemented entry point, the way ZLUDA's stubs answer. */
CUresult cuMemAdvise(CUdeviceptr p, size_t n, int advice, CUdevice dev) {
    (void)p; (void)n; (void)advice; (void)dev;
    return 801;
}
/* A tiny function (3 bytes at -O2: xor eax,eax; ret) packed right before another one (-falign-functions=1). */
__attribute__((noinline)) CUresult cuProfilerStart(void) { return 0; }
__attribute__((noinline)) CUresult cuProfilerStop(void) { return 0; }

/* An IFUNC export: the symbol's address is a resolver. */
static volatile int synced;
static CUresult ctx_sync_impl(void) { synced++; return synced > 0 ? 0 : 999; }
static CUresult (*resolve_ctx_sync(void))(void) { return ctx_sync_impl; }
CUresult cuCtxSynchronize(void) __attribute__((ifunc("resolve_ctx_sync")));

/* Entry points reachable only through cuGetProcAddress: not exported (static). */
static CUresult hidden_mem_get_info(size_t *free_b, size_t *total) {
    if (free_b) *free_b = 1 << 20;
    if (total) *total = 1 << 21;
    return 0;
}
static CUresult hidden_stream_query(void *stream) { return stream ? 600 : 0; } /* 600 CUDA_ERROR_NOT_READY */

static void *lookup(const char *symbol) {
    if (strcmp(symbol, "cuMemGetInfo") == 0) return (void *)hidden_mem_get_info;
    if (strcmp(symbol, "cuStreamQuery") == 0) return (void *)hidden_stream_query;
    if (strcmp(symbol, "cuInit") == 0) return (void *)cuInit;
    if (strcmp(symbol, "cuLaunchKernel") == 0) return (void *)cuLaunchKernel;
    return NULL;
}
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, uint64_t flags, int *symbolStatus) {
    (void)cudaVersion; (void)flags;
    void *p = lookup(symbol);
    if (pfn) *pfn = p;
    if (symbolStatus) *symbolStatus = p ? 0 : 1;
    return p ? 0 : 500;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
/* The undocumented export tables: one known UUID answers, others get CUDA_ERROR_INVALID_VALUE (1). */
static const void *table_one[4] = {(void *)(uintptr_t)(4 * sizeof(void *)), 0, 0, 0};
static const unsigned char known_uuid[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                             0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
CUresult cuGetExportTable(const void **table, const CUuuid *id) {
    if (id && memcmp(id->bytes, known_uuid, 16) == 0) { *table = table_one; return 0; }
    if (table) *table = NULL;
    return 1;
}
/* Modules of GPU code: a load hands out a handle (0 for a NULL image: 1 CUDA_ERROR_INVALID_VALUE); a lookup finds
 * any kernel name but "missing" (500 CUDA_ERROR_NOT_FOUND). What the image holds is the tracer's to read. */
static uintptr_t next_handle = 0x1000;
static CUresult new_handle(void **out, const void *image) {
    if (!out || !image) return 1;
    *out = (void *)(next_handle += 16);
    return 0;
}
CUresult cuModuleLoadData(void **module, const void *image) { return new_handle(module, image); }
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void **values) {
    (void)n; (void)options; (void)values;
    return new_handle(module, image);
}
CUresult cuModuleLoadFatBinary(void **module, const void *fatbin) { return new_handle(module, fatbin); }
CUresult cuLibraryLoadData(void **library, const void *code, void *jo, void **jv, unsigned nj, void *lo, void **lv,
                           unsigned nl) {
    (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
    return new_handle(library, code);
}
CUresult cuLibraryGetModule(void **module, void *library) { return library ? new_handle(module, library) : 1; }
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    if (!function || !module || !name) return 1;
    if (strcmp(name, "missing") == 0) return 500;
    *function = (void *)(next_handle += 16);
    return 0;
}
CUresult cuLibraryGetKernel(void **kernel, void *library, const char *name) {
    if (!kernel || !library || !name) return 1;
    if (strcmp(name, "missing") == 0) return 500;
    *kernel = (void *)(next_handle += 32);
    return 0;
}
CUresult cuModuleLoad(void **module, const char *fname) { return fname ? new_handle(module, fname) : 1; }
CUresult cuLibraryLoadFromFile(void **library, const char *fname, void *jo, void **jv, unsigned nj, void *lo,
                               void **lv, unsigned nl) {
    (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
    return fname ? new_handle(library, fname) : 1;
}
