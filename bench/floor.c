/* The floor under any per-lock profiler: a preloaded interposer that does
 * the least a profiler must, so the shim's figures can be read against what
 * is possible at all (docs/performance.md, "Issue 18's targets").
 *
 *   cc -O2 -shared -fPIC -o floor.so bench/floor.c -ldl
 *   FLOOR_MODE=M LD_PRELOAD=./floor.so PROGRAM...
 *
 * FLOOR_MODE (default 0):
 *   0  forward pthread_mutex_lock / unlock to glibc, nothing else;
 *   1  and count each lock at its line: a per-thread direct-mapped table of
 *      (lock, return address, count) entries at the lock address's own
 *      place (so a sweep over an array of locks walks it in order), with no
 *      call path, owner, hold or contention;
 *   2  the same counters, placed by a hash of (lock, return address), as a
 *      table that does not know the program's layout must;
 *   3  a bare 8-byte count at the lock address's own place, with no key:
 *      wrong when two locks share a place, so only a lower bound.
 * Counts are kept, never printed: only the cost matters here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef int (*mutex_fn)(pthread_mutex_t *);

struct entry {
    uint64_t lock, ret, count, unused;
};

/* Entries per thread (32 MiB of address space, touched where used). */
#define ENTRIES (1u << 20)

static mutex_fn real_lock, real_unlock;
static int mode;
/* Initial-exec: one load off the thread pointer, as the shim's own state. */
static __thread struct entry *table __attribute__((tls_model("initial-exec")));

static void resolve(void)
{
    const char *m = getenv("FLOOR_MODE");
    mode = m ? atoi(m) : 0;
    real_unlock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_unlock");
    real_lock = (mutex_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
}

static __attribute__((noinline)) struct entry *map_table(void)
{
    void *p = mmap(NULL, ENTRIES * sizeof(struct entry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        abort();
    table = p;
    return table;
}

static void count(uint64_t lock, uint64_t ret)
{
    struct entry *t = table ? table : map_table();
    /* Each line's counters start at a place of their own. */
    uint64_t local = (lock >> 3) + (ret & 7) * 8191;
    if (mode == 3) {
        ((uint64_t *)t)[local & (4 * ENTRIES - 1)]++;
        return;
    }
    uint64_t at = mode == 1 ? local & (ENTRIES - 1)
                            : ((lock ^ ret) * 0x9e3779b97f4a7c15ull) >> 44;
    struct entry *e = &t[at];
    if (e->lock != lock || e->ret != ret) {
        e->lock = lock;
        e->ret = ret;
        e->count = 0;
    }
    e->count++;
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (__builtin_expect(!real_lock, 0))
        resolve();
    if (mode)
        count((uint64_t)m, (uint64_t)__builtin_return_address(0));
    return real_lock(m);
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (__builtin_expect(!real_unlock, 0))
        resolve();
    return real_unlock(m);
}
