/* A shared library loaded with dlopen by dl_main: its exported function
 * takes the library's own lock n times. */
#include <pthread.h>

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_uses;

void *dl_lib_lock_address(void)
{
    return &lib_lock;
}

int dl_lib_take(int n)
{
    for (int i = 0; i < n; i++) {
        if (pthread_mutex_lock(&lib_lock) != 0) /* @dl-lib-lock */
            return -1;
        lib_uses++;
        pthread_mutex_unlock(&lib_lock);
    }
    return lib_uses;
}
