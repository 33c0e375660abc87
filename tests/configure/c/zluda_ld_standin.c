/* Stand-in for ZLUDA's zluda_ld: an rtld-audit module (LD_AUDIT) with la_version and la_objsearch that redirects
 * a fixed list of CUDA sonames to the file of the same name in the module's own folder, when that file exists,
 * the way ZLUDA documents zluda_ld. Built by the configure tests. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *REDIRECTED[] = {
    "libcuda.so", "libcuda.so.1", "libcublas.so", "libcublas.so.11", "libcublas.so.12", "libcublas.so.13",
    "libcublasLt.so", "libcublasLt.so.11", "libcublasLt.so.12", "libcublasLt.so.13", "libcudnn.so",
    "libcudnn.so.8", "libcudnn.so.9", "libcufft.so", "libcufft.so.10", "libcufft.so.11", "libcufft.so.12",
    "libcusparse.so", "libcusparse.so.11", "libcusparse.so.12", "libcusparse.so.13", "libnvidia-ml.so",
    "libnvidia-ml.so.1", NULL};

unsigned int la_version(unsigned int version) { return version < LAV_CURRENT ? version : LAV_CURRENT; }

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
    (void)cookie;
    if (flag != LA_SER_ORIG) return (char *)name;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    for (int i = 0; REDIRECTED[i]; i++) {
        if (strcmp(base, REDIRECTED[i]) != 0) continue;
        Dl_info info;
        if (!dladdr((void *)&la_version, &info) || !info.dli_fname) return (char *)name;
        const char *slash = strrchr(info.dli_fname, '/');
        if (!slash) return (char *)name;
        size_t dir = (size_t)(slash - info.dli_fname);
        size_t len = dir + 1 + strlen(base) + 1;
        char *path = malloc(len);
        if (!path) return (char *)name;
        snprintf(path, len, "%.*s/%s", (int)dir, info.dli_fname, base);
        if (access(path, F_OK) == 0) return path;
        free(path);
        return (char *)name;
    }
    return (char *)name;
}
