/* T threads (argv[1]) each take one shared mutex OPS/T times (argv[2]),
 * incrementing a counter inside. Prints nanoseconds per operation
 * (elapsed / total operations): the throughput under contention. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long per_thread;

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < per_thread; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    long ops = argc > 2 ? atol(argv[2]) : 4000000L;
    if (threads < 1 || threads > 64)
        return 2;
    per_thread = ops / threads;
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            return 1;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    if (counter != per_thread * threads)
        return 1;
    printf("%.2f\n", ns / (double)counter);
    return 0;
}
