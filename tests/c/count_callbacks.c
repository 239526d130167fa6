/* Preloaded into a program built with `locksuit cc`: the load and store
 * callbacks, counting their calls, and at exit "callbacks N" and "loads L
 * stores S" on stderr. Run without the shim, behind the access gate (whose
 * words liblocksuit_cov.so keeps equal), the program should make none.
 * Preloaded before the shim, each call goes on to the shim's callback. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_long loads, stores;

typedef void (*callback)(void *);

static const char *const names[10] = {
    "__sanitizer_cov_load1",  "__sanitizer_cov_load2",  "__sanitizer_cov_load4",
    "__sanitizer_cov_load8",  "__sanitizer_cov_load16", "__sanitizer_cov_store1",
    "__sanitizer_cov_store2", "__sanitizer_cov_store4", "__sanitizer_cov_store8",
    "__sanitizer_cov_store16",
};
/* The next library's callbacks (the shim's, or liblocksuit_cov.so's). */
static callback next[10];

__attribute__((constructor)) static void resolve(void)
{
    for (int i = 0; i < 10; i++)
        next[i] = (callback)dlsym(RTLD_NEXT, names[i]);
}

#define CALLBACK(name, index, counter)                                       \
    void name(void *address)                                                 \
    {                                                                        \
        atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);        \
        if (next[index])                                                     \
            next[index](address);                                            \
    }
CALLBACK(__sanitizer_cov_load1, 0, loads)
CALLBACK(__sanitizer_cov_load2, 1, loads)
CALLBACK(__sanitizer_cov_load4, 2, loads)
CALLBACK(__sanitizer_cov_load8, 3, loads)
CALLBACK(__sanitizer_cov_load16, 4, loads)
CALLBACK(__sanitizer_cov_store1, 5, stores)
CALLBACK(__sanitizer_cov_store2, 6, stores)
CALLBACK(__sanitizer_cov_store4, 7, stores)
CALLBACK(__sanitizer_cov_store8, 8, stores)
CALLBACK(__sanitizer_cov_store16, 9, stores)

__attribute__((destructor)) static void report(void)
{
    long l = atomic_load(&loads), s = atomic_load(&stores);
    fprintf(stderr, "callbacks %ld\nloads %ld stores %ld\n", l + s, l, s);
}
