/* Ground truth for locks taken inside dlopen()ed libraries that are
 * dlclose()d (and unmapped) before the process exits.
 *
 *   dl_main one LIB        dlopen(LIB), call dl_lib_take(N) through dlsym,
 *                          dlclose.
 *   dl_main swap LIB LIB2  the same for LIB, then for LIB2 (which the
 *                          loader usually maps where LIB was) with
 *                          dl_lib_take(M).
 *
 * Each library is checked to be gone from /proc/self/maps after dlclose.
 *
 * Output: "pid <pid>", then per library i (1, 2): "lock<i> <addr>",
 * "base<i> <addr>", "uses<i> <n>", "unloaded<i> 1|0". */
#include "common.h"

#include <dlfcn.h>
#include <unistd.h>

#define N 37
#define M 23

static int mapped(const char *path)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, path))
            found = 1;
    fclose(f);
    return found;
}

static int use_library(int i, const char *lib, int n)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    void *(*addr)(void) = (void *(*)(void))dlsym(h, "dl_lib_lock_address");
    int (*take)(int) = (int (*)(int))dlsym(h, "dl_lib_take");
    if (!addr || !take) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    Dl_info info;
    if (!dladdr((void *)take, &info)) {
        fprintf(stderr, "dladdr failed\n");
        return 1;
    }
    printf("lock%d %p\n", i, addr());
    printf("base%d %p\n", i, info.dli_fbase);
    printf("uses%d %d\n", i, take(n));
    if (dlclose(h) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        return 1;
    }
    printf("unloaded%d %d\n", i, mapped(lib) == 0);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    if (argc == 3 && strcmp(argv[1], "one") == 0)
        return use_library(1, argv[2], N);
    if (argc == 4 && strcmp(argv[1], "swap") == 0) {
        if (use_library(1, argv[2], N))
            return 1;
        return use_library(2, argv[3], M);
    }
    fprintf(stderr, "usage: dl_main one LIB | swap LIB LIB2\n");
    return 2;
}
