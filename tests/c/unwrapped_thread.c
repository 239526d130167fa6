/* Ground truth for a thread the shim did not see being created.
 *
 * The "unwrapped" thread is started with the C library's own pthread_create,
 * looked up with dlsym in libc itself, so the shim's pthread_create hook is
 * bypassed (like a thread that existed before the shim started). It locks
 * lock UNWRAPPED_USES times. A second thread, created normally (through the
 * hook), then locks the same lock WRAPPED_USES times.
 *
 * Output: "lock <addr>", "main-tid <tid>", "unwrapped-tid <tid>",
 * "wrapped-tid <tid>", "real-create-is-libc <0|1>". */
#include "common.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNWRAPPED_USES 70
#define WRAPPED_USES 45

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long unwrapped_tid, wrapped_tid;

static long my_tid(void)
{
    return (long)syscall(SYS_gettid);
}

static void *unwrapped(void *arg)
{
    (void)arg;
    unwrapped_tid = my_tid();
    for (int i = 0; i < UNWRAPPED_USES; i++) {
        CHECK(pthread_mutex_lock(&lock)); /* @unwrapped-lock */
        CHECK(pthread_mutex_unlock(&lock));
    }
    return NULL;
}

static void *wrapped(void *arg)
{
    (void)arg;
    wrapped_tid = my_tid();
    for (int i = 0; i < WRAPPED_USES; i++) {
        CHECK(pthread_mutex_lock(&lock)); /* @wrapped-lock */
        CHECK(pthread_mutex_unlock(&lock));
    }
    return NULL;
}

int main(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libc) {
        fprintf(stderr, "dlopen libc.so.6: %s\n", dlerror());
        return 1;
    }
    create_fn real_create = (create_fn)dlsym(libc, "pthread_create");
    if (!real_create) {
        fprintf(stderr, "dlsym pthread_create: %s\n", dlerror());
        return 1;
    }
    /* The real one lives in libc, not in whatever pthread_create resolves
     * to for the program (the shim's hook under LD_PRELOAD). */
    Dl_info info;
    int in_libc = dladdr((void *)real_create, &info) && info.dli_fname &&
                  strstr(info.dli_fname, "libc.so") != NULL;

    pthread_t th;
    CHECK(real_create(&th, NULL, unwrapped, NULL));
    CHECK(pthread_join(th, NULL));
    CHECK(pthread_create(&th, NULL, wrapped, NULL));
    CHECK(pthread_join(th, NULL));

    printf("lock %p\n", (void *)&lock);
    printf("main-tid %ld\n", my_tid());
    printf("unwrapped-tid %ld\n", unwrapped_tid);
    printf("wrapped-tid %ld\n", wrapped_tid);
    printf("real-create-is-libc %d\n", in_libc);
    return 0;
}
