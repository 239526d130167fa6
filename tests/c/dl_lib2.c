/* A second dlopen()ed library for dl_main swap: same exported names as
 * dl_lib.c but a different code layout (a filler function comes first), so
 * that once dl_lib is unloaded and this one is mapped at the same address,
 * its lock call sits at a different offset and in a different function. */
#include <pthread.h>

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_uses;
volatile int dl_lib2_sink;

void dl_lib2_filler(void)
{
    for (int i = 0; i < 100; i++) {
        dl_lib2_sink += i * 3;
        dl_lib2_sink ^= i;
        dl_lib2_sink -= i / 7;
        dl_lib2_sink += i % 5;
    }
}

void *dl_lib_lock_address(void)
{
    return &lib_lock;
}

static int take_in_lib2(int n)
{
    for (int i = 0; i < n; i++) {
        if (pthread_mutex_lock(&lib_lock) != 0) /* @dl-lib2-lock */
            return -1;
        lib_uses++;
        pthread_mutex_unlock(&lib_lock);
    }
    return lib_uses;
}

int dl_lib_take(int n)
{
    return take_in_lib2(n);
}
