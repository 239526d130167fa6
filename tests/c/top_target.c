/* A running program for `locksuit top`: two workers take turns on
 * hot_lock, each holding it 2 ms (asleep) at a time, until SIGTERM (or
 * 60 s). Prints "ready" once both have taken it. With an argument N, main
 * first takes cold_lock N times alone (under LOCKSUIT_EVENTS=all, two
 * events each: a large trace from the start). */
#include "common.h"


static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cold_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t stop;
static volatile int started;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void *worker(void *arg)
{
    (void)arg;
    long long until = now_ns() + 60LL * 1000000000LL;
    int first = 1;
    while (!stop && now_ns() < until) {
        CHECK(pthread_mutex_lock(&hot_lock));
        if (first) {
            __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
            first = 0;
        }
        sleep_ms(2);
        CHECK(pthread_mutex_unlock(&hot_lock));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    catch_sigterm(on_term);
    long alone = argc > 1 ? atol(argv[1]) : 0;
    for (long i = 0; i < alone; i++) {
        CHECK(pthread_mutex_lock(&cold_lock));
        CHECK(pthread_mutex_unlock(&cold_lock));
    }
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, NULL));
    CHECK(pthread_create(&b, NULL, worker, NULL));
    while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < 2)
        sleep_ms(1);
    printf("ready\n");
    fflush(stdout);
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    return 0;
}
