/* A burst of events just before exit, for `--follow`: prints "ready", waits
 * for a line on standard input, then two threads take one lock ROUNDS times
 * each (argv[1], default 100000) as fast as they can, and the process exits
 * at once. A follower that read the trace mid-burst and then saw the
 * process gone must read it once more, or it loses the burst's tail.
 *
 * With "exit-handler" (argv[2]) the process ends with exit(3), whose hook
 * marks the trace complete, and an exit handler then takes the lock 200
 * times, 1 ms apart: events written after the mark, which a follower
 * must not stop before. Run with LOCKSUIT_EVENTS=all. */
#include "common.h"


static pthread_mutex_t burst_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static long rounds = 100000;

static void late_locks(void)
{
    for (int i = 0; i < 200; i++) {
        CHECK(pthread_mutex_lock(&burst_lock));
        counter++;
        CHECK(pthread_mutex_unlock(&burst_lock));
        sleep_ms(1);
    }
}

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
    int exit_handler = argc > 2 && strcmp(argv[2], "exit-handler") == 0;
    if (exit_handler)
        atexit(late_locks);
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
    fflush(stdout);
    int status = counter == 2 * rounds ? 0 : 1;
    if (exit_handler)
        exit(status);
    return status;
}
