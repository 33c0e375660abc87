/* Linked into the ZLUDA stand-in libraries of the configure tests: when the library loads, it appends
 * "<name> <path it was loaded from>" to the file named by $ZLUDA_STANDIN_MARKER, so a test can prove which file
 * the dynamic loader picked. MARK_NAME is the library's soname, given with -D. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef MARK_NAME
#define MARK_NAME "unknown"
#endif

__attribute__((constructor)) static void zluda_standin_mark(void) {
    const char *out = getenv("ZLUDA_STANDIN_MARKER");
    Dl_info info;
    if (!out || !dladdr((void *)&zluda_standin_mark, &info) || !info.dli_fname) return;
    FILE *f = fopen(out, "a");
    if (!f) return;
    fprintf(f, "%s %s\n", MARK_NAME, info.dli_fname);
    fclose(f);
}
