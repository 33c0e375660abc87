/* Loads GPU code built by nvcc the ways CUDA's runtime and libraries do, through the stand-in libcuda:
 *   gpu_app sass     SASS-only fatbin (sm_80, sm_90) by cuLibraryLoadData; cuLibraryGetKernel "scale" twice,
 *                    cuLibraryGetModule, cuModuleGetFunction "scale"
 *   gpu_app ptx      fatbin with PTX (compute_80) and SASS (sm_80) by cuModuleLoadData; cuModuleGetFunction x2
 *   gpu_app wrapper  the SASS-only fatbin through its __fatBinC_Wrapper_t by cuModuleLoadFatBinary; one lookup
 *   gpu_app cubin    a cubin (sm_80) by cuModuleLoadDataEx; no lookup
 *   gpu_app text     PTX text from the heap by cuModuleLoadData; one lookup
 *   gpu_app bad      an image pointer into no mapping (0x10) by cuModuleLoadData, which the stand-in accepts
 *   gpu_app file P   the module file P by cuModuleLoad; cuModuleGetFunction "scale" twice
 *   gpu_app lib P    the module file P by cuLibraryLoadFromFile; cuLibraryGetKernel "scale" once
 * The images are nvcc's own output, included at build time (SASS_FATBIN, PTX_FATBIN, CUBIN, PTX_TEXT). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define EMBED(sym, path) __asm__(".section .rodata\n.balign 16\n.global " #sym "\n" #sym ":\n.incbin \"" path "\"\n.byte 0\n.previous\n")
EMBED(sass_fatbin, STR(SASS_FATBIN));
EMBED(ptx_fatbin, STR(PTX_FATBIN));
EMBED(cubin_image, STR(CUBIN));
EMBED(ptx_text, STR(PTX_TEXT));
extern const unsigned char sass_fatbin[], ptx_fatbin[], cubin_image[], ptx_text[];

typedef int CUresult;
CUresult cuModuleLoadData(void **module, const void *image);
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, void *options, void **values);
CUresult cuModuleLoadFatBinary(void **module, const void *fatbin);
CUresult cuLibraryLoadData(void **library, const void *code, void *jo, void **jv, unsigned nj, void *lo, void **lv,
                           unsigned nl);
CUresult cuLibraryGetModule(void **module, void *library);
CUresult cuModuleGetFunction(void **function, void *module, const char *name);
CUresult cuLibraryGetKernel(void **kernel, void *library, const char *name);
CUresult cuModuleLoad(void **module, const char *fname);
CUresult cuLibraryLoadFromFile(void **library, const char *fname, void *jo, void **jv, unsigned nj, void *lo,
                               void **lv, unsigned nl);

struct wrapper { int magic; int version; const void *data; void *filename_or_fatbins; };

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "sass";
    void *lib = 0, *mod = 0, *fn = 0;
    int bad = 0;
    if (strcmp(mode, "sass") == 0) {
        bad |= cuLibraryLoadData(&lib, sass_fatbin, 0, 0, 0, 0, 0, 0);
        bad |= cuLibraryGetKernel(&fn, lib, "scale");
        bad |= cuLibraryGetKernel(&fn, lib, "scale");
        bad |= cuLibraryGetModule(&mod, lib);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
    } else if (strcmp(mode, "ptx") == 0) {
        bad |= cuModuleLoadData(&mod, ptx_fatbin);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
        bad |= cuModuleGetFunction(&fn, mod, "scale");
    } else if (strcmp(mode, "wrapper") == 0) {
        static struct wrapper w = {0x466243b1, 1, 0, 0};
        w.data = sass_fatbin;
        bad |= cuModuleLoadFatBinary(&mod, &w);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
    } else if (strcmp(mode, "cubin") == 0) {
        bad |= cuModuleLoadDataEx(&mod, cubin_image, 0, 0, 0);
    } else if (strcmp(mode, "text") == 0) {
        char *copy = strdup((const char *)ptx_text);
        bad |= cuModuleLoadData(&mod, copy);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
        free(copy);
    } else if (strcmp(mode, "file") == 0 && argc > 2) {
        bad |= cuModuleLoad(&mod, argv[2]);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
        bad |= cuModuleGetFunction(&fn, mod, "scale");
    } else if (strcmp(mode, "lib") == 0 && argc > 2) {
        bad |= cuLibraryLoadFromFile(&lib, argv[2], 0, 0, 0, 0, 0, 0);
        bad |= cuLibraryGetKernel(&fn, lib, "scale");
    } else if (strcmp(mode, "bad") == 0) {
        bad |= cuModuleLoadData(&mod, (const void *)0x10);
        bad |= cuModuleGetFunction(&fn, mod, "scale");
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("%s %s\n", mode, bad ? "failed" : "ok");
    return bad ? 1 : 0;
}
