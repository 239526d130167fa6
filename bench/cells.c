/* A fluidanimate-like kernel: a grid of CELLS cells, each with its own
 * mutex; T threads (argv[1]) sweep their band of the grid STEPS times
 * (argv[2]), and for each cell lock it and its right-hand neighbour in turn
 * to exchange a little "mass". Many fine-grained locks, rare contention at
 * band edges. Prints nanoseconds per lock operation.
 *
 *   cells [THREADS] [STEPS] [held]   with "held", each thread holds a lock
 *                                    of its own through its sweep: every
 *                                    cell lock is a nested acquisition. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CELLS 65536

static pthread_mutex_t cell_lock[CELLS];
static double mass[CELLS];
static int threads;
static long steps;
static int held;
static pthread_mutex_t band_lock[64];

static void *sweep(void *arg) {
    long band = (long)arg;
    long from = band * (CELLS / threads), to = from + CELLS / threads;
    if (held)
        pthread_mutex_lock(&band_lock[band]);
    for (long s = 0; s < steps; s++) {
        for (long c = from; c < to; c++) {
            long right = (c + 1) % CELLS;
            pthread_mutex_lock(&cell_lock[c]);
            double give = mass[c] * 0.01;
            mass[c] -= give;
            pthread_mutex_unlock(&cell_lock[c]);
            pthread_mutex_lock(&cell_lock[right]);
            mass[right] += give;
            pthread_mutex_unlock(&cell_lock[right]);
        }
    }
    if (held)
        pthread_mutex_unlock(&band_lock[band]);
    return NULL;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 2;
    steps = argc > 2 ? atol(argv[2]) : 20;
    held = argc > 3;
    if (threads < 1 || threads > 64)
        return 2;
    for (int i = 0; i < 64; i++)
        pthread_mutex_init(&band_lock[i], NULL);
    for (int c = 0; c < CELLS; c++) {
        pthread_mutex_init(&cell_lock[c], NULL);
        mass[c] = 1.0;
    }
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, sweep, (void *)i) != 0)
            return 1;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    double ops = 2.0 * (double)(CELLS / threads * threads) * (double)steps;
    printf("%.2f\n", ns / ops);
    return 0;
}
