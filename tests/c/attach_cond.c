/* A condition wait inside a hold, for `locksuit attach --locks`: once the
 * file named by argv[1] exists, a waiter takes the mutex, waits on the
 * condition until the signaller (after WAIT_MS of its own) sets `ready`,
 * and unlocks; ROUNDS times. The waiter's holds, measured around the
 * condition wait (lock to wait, wake to unlock), are short; the wait is
 * long and must not be counted as holding. Prints "held-ns" (the waiter's
 * holds), "cond-wait-ns" (its waits) and "acquisitions" (the waiter's);
 * exits 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 5
#define WAIT_MS 40

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int ready;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *signaller(void *arg) {
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        usleep(WAIT_MS * 1000);
        pthread_mutex_lock(&m); /* cond-signal */
        ready = 1;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
        while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
            usleep(100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    while (access(argv[1], F_OK) != 0)
        usleep(1000);
    pthread_t t;
    pthread_create(&t, NULL, signaller, NULL);
    uint64_t held = 0, waited = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&m); /* cond-hold */
        uint64_t t0 = now_ns();
        while (!ready) {
            uint64_t w0 = now_ns();
            held += w0 - t0;
            pthread_cond_wait(&c, &m);
            t0 = now_ns();
            waited += t0 - w0;
        }
        __atomic_store_n(&ready, 0, __ATOMIC_RELEASE);
        held += now_ns() - t0;
        pthread_mutex_unlock(&m);
    }
    pthread_join(t, NULL);
    printf("lock %p\n", (void *)&m);
    printf("acquisitions %d\n", ROUNDS);
    printf("held-ns %llu\n", (unsigned long long)held);
    printf("cond-wait-ns %llu\n", (unsigned long long)waited);
    return 0;
}
