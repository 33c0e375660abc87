/* A program linked against the libcuda and libcublas stand-ins. argv[1] picks what it does; the calls it makes
 * are fixed so tests can assert exact counts (see tests/standins/__init__.py for the table). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef struct { unsigned char bytes[16]; } CUuuid;
extern int cuStandinDataExport[4];
CUresult cuInit(unsigned int);
CUresult cuDeviceGet(int *, int);
CUresult cuCtxGetDevice(int *);
CUresult cuCtxGetDevice_v2(int *);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemFree_v2(unsigned long long);
CUresult cuLaunchKernel(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                        void **);
CUresult cuMemAdvise(unsigned long long, size_t, int, int);
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
CUresult cuCtxSynchronize(void);
CUresult cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
CUresult cuGetExportTable(const void **, const CUuuid *);
int cublasCreate_v2(void **);
int cublasSgemm_v2(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
                   const float *, float *, int);
int cublasSetMathMode(void *, int);

static int kernel;
static long thread_calls;
static CUresult (*thread_mem_get_info)(size_t *, size_t *);

/* "threads": each thread calls cuCtxGetDevice thread_calls times (hooked by a whole copy), and a tenth as often
 * the cuGetProcAddress pointer, cuLaunchKernel (relocated prologue) and cuDeviceGet (through Frida's trampoline). */
static void *hammer(void *arg) {
    int dev;
    size_t f, t;
    (void)arg;
    for (long i = 0; i < thread_calls; i++) {
        cuCtxGetDevice(&dev);
        if (i % 10 == 0) {
            thread_mem_get_info(&f, &t);
            cuLaunchKernel(&kernel, 1, 1, 1, 64, 1, 1, 0, 0, 0, 0);
            cuDeviceGet(&dev, 0);
        }
    }
    return 0;
}

static void on_usr1(int sig) { (void)sig; }

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* "crowd": take every free byte within 3 GB of libcuda (PROT_NONE, nothing committed), as CUDA's address space
 * reservations do in a real process, so no thunk can be mapped within branch range of the stand-in libraries:
 * each gap between the mappings /proc/self/maps lists is mapped whole. */
static void crowd(void) {
    Dl_info info;
    const uintptr_t reach = (uintptr_t)3 << 30;
    if (!dladdr((void *)cuInit, &info)) return;
    uintptr_t base = (uintptr_t)info.dli_fbase;
    uintptr_t lo = base > reach + 0x10000 ? base - reach : 0x10000, hi = base + reach;
    for (int pass = 0; pass < 2; pass++) { /* the first pass's own mappings may split a gap: once more */
        FILE *maps = fopen("/proc/self/maps", "r");
        if (!maps) return;
        uintptr_t prev_end = lo, start, end;
        char line[512];
        while (fgets(line, sizeof line, maps)) {
            if (sscanf(line, "%lx-%lx", &start, &end) != 2) continue;
            if (end <= lo) continue;
            if (start >= hi) break;
            if (start > prev_end)
                mmap((void *)prev_end, start - prev_end, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
            if (end > prev_end) prev_end = end;
        }
        if (prev_end < hi)
            mmap((void *)prev_end, hi - prev_end, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        fclose(maps);
    }
}

static void launch(int n) {
    for (int i = 0; i < n; i++) cuLaunchKernel(&kernel, 1, 1, 1, 64, 1, 1, 0, 0, 0, 0);
}

/* The fixed workload: every mode starts with it. */
static void workload(void) {
    int dev;
    unsigned long long p;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    cuDeviceGet(&dev, 3); /* -> 101 CUDA_ERROR_INVALID_DEVICE */
    cuCtxGetDevice(&dev);
    cuCtxGetDevice_v2(&dev);
    for (int i = 0; i < 3; i++) cuMemAlloc_v2(&p, 4096);
    cuMemFree_v2(p);
    launch(10);
    cuMemAdvise(p, 4096, 1, 0); /* -> 801 CUDA_ERROR_NOT_SUPPORTED */
    cuMemAdvise(p, 4096, 2, 0);
    cuProfilerStart();
    cuProfilerStop();
    cuCtxSynchronize();
    /* resolve through cuGetProcAddress: a non-exported function, called 5 times */
    CUresult (*mem_get_info)(size_t *, size_t *) = 0;
    int st;
    cuGetProcAddress_v2("cuMemGetInfo", (void **)&mem_get_info, 12000, 0, &st);
    size_t f, t;
    for (int i = 0; i < 5; i++) mem_get_info(&f, &t);
    void *missing = 0;
    cuGetProcAddress_v2("cuNoSuchThing", &missing, 12000, 0, &st); /* -> 500 */
    const void *table = 0;
    CUuuid known = {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}};
    CUuuid unknown = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
    cuGetExportTable(&table, &known);
    cuGetExportTable(&table, &unknown); /* -> 1 */
    void *h;
    float a = 1, b = 0, x[4] = {0};
    cublasCreate_v2(&h);
    for (int i = 0; i < 4; i++) cublasSgemm_v2(h, 0, 0, 2, 2, 2, &a, x, 2, x, 2, &b, x, 2);
    cublasSgemm_v2(h, 0, 0, 0, 2, 2, &a, x, 2, x, 2, &b, x, 2); /* -> 7 CUBLAS_STATUS_INVALID_VALUE */
    cublasSetMathMode(h, 1); /* -> 15 CUBLAS_STATUS_NOT_SUPPORTED */
    if (cuStandinDataExport[0] != 1) abort();
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (strcmp(mode, "child") == 0) { /* the exec'd child of "forkexec" */
        launch(7);
        return 0;
    }
    if (strcmp(mode, "bench") == 0) { /* used by scripts/bench_overhead_micro.py: ns per call */
        long n = argc > 2 ? atol(argv[2]) : 10000000;
        int dev;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++) cuCtxGetDevice(&dev);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
                printf("ns_per_call=%.3f\n", ns / n);
        if (argc > 3) { /* the figure also goes to a file, for scripts/bench_overhead_micro.py */
            FILE *f = fopen(argv[3], "w");
            if (f) { fprintf(f, "%.4f\n", ns / n); fclose(f); }
        }
        return 0;
    }
    workload();
    fflush(stdout);
    if (strcmp(mode, "exit") == 0) return 0;
    if (strcmp(mode, "code") == 0) return 3;
    if (strcmp(mode, "segv") == 0) { volatile int *np = 0; *np = 1; }
    if (strcmp(mode, "abort") == 0) abort();
    if (strcmp(mode, "_exit") == 0) _exit(5);
    if (strcmp(mode, "loop") == 0) {
        printf("ready\n");
        fflush(stdout);
        for (;;) { launch(1); usleep(1000); }
    }
    if (strcmp(mode, "crowd") == 0) { /* crowd N CALLS: the address space around libcuda taken, then "threads" */
        crowd();
        mode = "threads";
    }
    if (strcmp(mode, "threads") == 0) { /* threads N CALLS: N threads at once, signalled while they run */
        int n = argc > 2 ? atoi(argv[2]) : 8;
        thread_calls = argc > 3 ? atol(argv[3]) : 1000000;
        int st;
        cuGetProcAddress_v2("cuMemGetInfo", (void **)&thread_mem_get_info, 12000, 0, &st);
        signal(SIGUSR1, on_usr1);
        pthread_t th[64];
        if (n > 64) n = 64;
        for (int i = 0; i < n; i++) pthread_create(&th[i], 0, hammer, 0);
        /* Signals interrupt the counting sequences: the kernel restarts an interrupted one. */
        for (int k = 0; k < 2000; k++) {
            for (int i = 0; i < n; i++) pthread_kill(th[i], SIGUSR1);
            usleep(50);
        }
        for (int i = 0; i < n; i++) pthread_join(th[i], 0);
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) { launch(3); cuMemFree_v2(0); _exit(0); } /* cuMemFree_v2: 9 bytes, hooked by copy */
        int status;
        waitpid(pid, &status, 0);
        launch(1);
        return 0;
    }
    if (strcmp(mode, "forkexec") == 0) {
        pid_t pid = fork();
        if (pid == 0) { execl(argv[0], argv[0], "child", (char *)0); _exit(127); }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 2;
}
