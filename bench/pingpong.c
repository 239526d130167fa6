/* Two threads hand a turn back and forth through one mutex and one
 * condition variable, ROUNDS times (argv[1]). Prints nanoseconds per round
 * trip (ping and pong). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static int turn; /* 0: ping's turn, 1: pong's */
static long rounds;

static void play(int me) {
    for (long i = 0; i < rounds; i++) {
        pthread_mutex_lock(&lock);
        while (turn != me)
            pthread_cond_wait(&turn_changed, &lock);
        turn = !me;
        pthread_cond_signal(&turn_changed);
        pthread_mutex_unlock(&lock);
    }
}

static void *pong(void *arg) {
    (void)arg;
    play(1);
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atol(argv[1]) : 100000L;
    pthread_t t;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (pthread_create(&t, NULL, pong, NULL) != 0)
        return 1;
    play(0);
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.0f\n", ns / (double)rounds);
    return 0;
}
