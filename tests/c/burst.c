/* A burst of events just before exit, for `--follow`: prints "ready", waits
 * for a line on standard input, then two threads take one lock ROUNDS times
 * each (argv[1], default 100000) as fast as they can, and the process exits
 * at once. A follower that
 * read the trace mid-burst and then saw the process gone must read it once
 * more, or it loses the burst's tail. Run with LOCKSUIT_EVENTS=all. */
#include "common.h"


static pthread_mutex_t burst_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long rounds = 100000;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        CHECK(pthread_mutex_lock(&burst_lock));
        counter++;
        CHECK(pthread_mutex_unlock(&burst_lock));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, NULL));
    CHECK(pthread_create(&b, NULL, worker, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("counter %ld\n", counter);
    return counter == 2 * rounds ? 0 : 1;
}
