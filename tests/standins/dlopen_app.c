/* A program that links no CUDA library and loads the libcuda stand-in late with dlopen, then resolves and
 * calls entry points through dlsym and cuGetProcAddress_v2 (the way PyTorch and the CUDA runtime do). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                         void **);
typedef int (*query_fn)(void *);
typedef int (*free_fn)(unsigned long long);

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "libcuda.so.1";
    usleep(20000); /* loaded well after start: only a module observer sees it */
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    if (argc > 2 && strcmp(argv[2], "dlclose") == 0) {
        /* The library goes away before the fork: the child must not get bytes written where it was. */
        dlclose(h);
        usleep(50000);
        pid_t pid = fork();
        if (pid == 0) {
            printf("child done\n");
            fflush(stdout);
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    init_fn init = (init_fn)dlsym(h, "cuInit");
    gpa_fn gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    init(0);
    init(0);
    int kernel = 0, st = 0;
    launch_fn launch = 0;
    query_fn query = 0;
    gpa("cuLaunchKernel", (void **)&launch, 12000, 0, &st);
    gpa("cuStreamQuery", (void **)&query, 12000, 0, &st);
    for (int i = 0; i < 6; i++) launch(&kernel, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    query(0);
    query(&kernel); /* -> 600 CUDA_ERROR_NOT_READY */
    query(&kernel);
    if (argc > 2 && strcmp(argv[2], "fork") == 0) {
        /* The child calls what the parent's agent patched inside the dlopen hook: cuInit (prologue patched by
         * the agent itself), cuMemFree_v2 (9 bytes, copied whole), and the pointers from cuGetProcAddress_v2. */
        free_fn mem_free = (free_fn)dlsym(h, "cuMemFree_v2");
        mem_free(0);
        pid_t pid = fork();
        if (pid == 0) {
            init(0);
            mem_free(1);
            mem_free(0);
            launch(&kernel, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
            query(&kernel);
            printf("child done\n");
            fflush(stdout);
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        init(0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (argc > 2 && strcmp(argv[2], "vfork") == 0) {
        /* vfork and exec: the parent's counters must stay the parent's (under Frida the child gets memory of its
         * own; a child sharing it must not map anything over them). */
        pid_t pid = vfork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)0);
            _exit(127);
        }
        int status;
        waitpid(pid, &status, 0);
        init(0);
        init(0);
        init(0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (argc > 2 && strcmp(argv[2], "nested") == 0) {
        /* A child that forks a grandchild: each keeps the hooks of the process it was forked from. */
        pid_t pid = fork();
        if (pid == 0) {
            pid_t grandchild = fork();
            if (grandchild == 0) {
                init(0);
                launch(&kernel, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
                query(&kernel);
                _exit(0);
            }
            int status;
            waitpid(grandchild, &status, 0);
            init(0);
            _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
        }
        int status;
        waitpid(pid, &status, 0);
        init(0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
}
