/* Trylocks with known results: main holds `m` while a thread's trylock
 * fails BUSY times; then the thread takes it with trylock TAKEN times
 * (unlocking each). main's own lock is the one other acquisition.
 *
 * Output: "m <addr>", "busy <n>", "taken <n>". */
#include "common.h"

#define BUSY 7
#define TAKEN 11

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void *trier(void *arg)
{
    (void)arg;
    for (int i = 0; i < BUSY; i++)
        if (pthread_mutex_trylock(&m) != EBUSY)
            exit(3);
    return NULL;
}

int main(void)
{
    CHECK(pthread_mutex_lock(&m));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, trier, NULL));
    CHECK(pthread_join(t, NULL));
    CHECK(pthread_mutex_unlock(&m));
    for (int i = 0; i < TAKEN; i++) {
        CHECK(pthread_mutex_trylock(&m));
        CHECK(pthread_mutex_unlock(&m));
    }
    printf("m %p\nbusy %d\ntaken %d\n", (void *)&m, BUSY, TAKEN);
    return 0;
}
