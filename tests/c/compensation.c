/* Overhead compensation: thread A holds L while B waits for it, and inside
 * that critical section engages 100 locks from 100 distinct lines, each seen
 * for the first time, so the shim does slow-path work (unwinding, new
 * records) inside A's hold. The compensated hold and wait must be shorter
 * than the raw ones by that work. Prints L's address on stderr. */
#include "common.h"

#include <stdatomic.h>

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m[100];
static atomic_int holding, asking;

#define TOUCH(i)                              \
    do {                                      \
        CHECK(pthread_mutex_lock(&m[i]));     \
        CHECK(pthread_mutex_unlock(&m[i]));   \
    } while (0)
#define TOUCH10(b)                                                    \
    TOUCH(b + 0); TOUCH(b + 1); TOUCH(b + 2); TOUCH(b + 3); TOUCH(b + 4); \
    TOUCH(b + 5); TOUCH(b + 6); TOUCH(b + 7); TOUCH(b + 8); TOUCH(b + 9)

static void *thread_a(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&L));
    atomic_store(&holding, 1);
    /* B is waiting by now: it said it was about to ask, and had 50 ms (its
     * first call at that line is the shim's first sight of it, which
     * unwinds before the wait begins). */
    while (!atomic_load(&asking))
        sleep_ms(1);
    sleep_ms(50);
    TOUCH10(0); TOUCH10(10); TOUCH10(20); TOUCH10(30); TOUCH10(40);
    TOUCH10(50); TOUCH10(60); TOUCH10(70); TOUCH10(80); TOUCH10(90);
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    while (!atomic_load(&holding))
        ;
    atomic_store(&asking, 1);
    CHECK(pthread_mutex_lock(&L));
    CHECK(pthread_mutex_unlock(&L));
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 100; i++)
        CHECK(pthread_mutex_init(&m[i], NULL));
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    fprintf(stderr, "lock %p\n", (void *)&L);
    return 0;
}
