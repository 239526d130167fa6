/* Contends on one pthread mutex from four threads once the file named by
 * argv[1] exists (so `locksuit attach` is ready before the first wait),
 * measuring the time each lock call takes and each hold (from the lock
 * call's return to the unlock call). Prints those totals, the mutex's
 * address and the acquisitions; exits 3 so a test sees its status kept. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 300

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static uint64_t waited_ns[THREADS];
static uint64_t held_ns[THREADS];
static long acquisitions;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *worker(void *arg) {
    long i = (long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = now_ns();
        pthread_mutex_lock(&m); /* attach-wait */
        uint64_t t1 = now_ns();
        waited_ns[i] += t1 - t0;
        acquisitions++;
        uint64_t until = t1 + 100000; /* hold 100 us, running */
        while (now_ns() < until) {
        }
        held_ns[i] += now_ns() - t1;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    while (access(argv[1], F_OK) != 0)
        usleep(1000);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    uint64_t total = 0, held = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += waited_ns[i];
        held += held_ns[i];
    }
    printf("lock %p\n", (void *)&m);
    printf("acquisitions %ld\n", acquisitions);
    printf("waited-ns %llu\n", (unsigned long long)total);
    printf("held-ns %llu\n", (unsigned long long)held);
    return 3;
}
