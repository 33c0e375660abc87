/* dlopen_cuda.c: reaches the CUDA driver only at run time (dlopen + dlsym), as many loaders do. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*cuInit_t)(unsigned);
typedef int (*cuDeviceGetCount_t)(int *);

int main(void) {
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    if (!driver) {
        printf("CUDA driver not found\n");
        return 1;
    }
    cuInit_t init = (cuInit_t)dlsym(driver, "cuInit");
    cuDeviceGetCount_t count = (cuDeviceGetCount_t)dlsym(driver, "cuDeviceGetCount");
    void *alloc = dlsym(driver, "cuMemAlloc_v2");
    int n = 0;
    if (init && count && init(0) == 0 && count(&n) == 0) printf("%d CUDA device(s), cuMemAlloc_v2 at %p\n", n, alloc);
    return 0;
}
