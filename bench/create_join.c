/* Creates and joins one thread at a time, N times (argv[1]). Prints
 * nanoseconds per create + join. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000L;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0)
            return 1;
        pthread_join(t, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.0f\n", ns / (double)n);
    return 0;
}
