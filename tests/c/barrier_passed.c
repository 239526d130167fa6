/* A barrier arrival the shim cannot record. Thread A arrives from a key
 * destructor in glibc's last round of destructors, after the shim closed
 * the thread, so the call passes through unrecorded. Main meets it there
 * (round 1), then meets thread B twice (rounds 2 and 3), all recorded.
 * Prints how many times the destructor ran. */
#include "common.h"

#include <limits.h>

static pthread_barrier_t meet;
static pthread_key_t key;
static int destructor_runs;

static void destructor(void *value)
{
    /* Set again until glibc's last round, which comes after the shim's
     * own key has closed the thread. */
    if (++destructor_runs < PTHREAD_DESTRUCTOR_ITERATIONS) {
        CHECK(pthread_setspecific(key, value));
        return;
    }
    int rc = pthread_barrier_wait(&meet);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        die_rc("pthread_barrier_wait", rc, __LINE__);
}

static void *thread_a(void *arg)
{
    CHECK(pthread_setspecific(key, arg));
    return NULL;
}

static void meet_once(void)
{
    int rc = pthread_barrier_wait(&meet);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        die_rc("pthread_barrier_wait", rc, __LINE__);
}

static void *thread_b(void *arg)
{
    (void)arg;
    meet_once();
    meet_once();
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    CHECK(pthread_barrier_init(&meet, NULL, 2));
    CHECK(pthread_key_create(&key, destructor));
    CHECK(pthread_create(&a, NULL, thread_a, &meet));
    meet_once();
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    meet_once();
    meet_once();
    CHECK(pthread_join(b, NULL));
    CHECK(pthread_barrier_destroy(&meet));
    printf("destructor runs %d\n", destructor_runs);
    return 0;
}
