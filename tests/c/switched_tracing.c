/* One thread takes one lock in three phases of PAIRS acquisitions each
 * (argv[1]), uncontended; between phases it prints a line and waits for
 * one on stdin, so that a test can switch full tracing on (and off again)
 * through the trace's control word meanwhile. Release i leaves the lock's
 * sequence at i, so the traced releases say which part of the run was
 * traced. Prints the lock's address and the count at the end. */
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void phase(long pairs)
{
    for (long i = 0; i < pairs; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
    }
}

static void wait_for_line(const char *said)
{
    char line[64];
    printf("%s\n", said);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        exit(3);
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 10000;
    phase(pairs);
    wait_for_line("ready");
    phase(pairs);
    wait_for_line("traced");
    phase(pairs);
    printf("lock %p\ncount %ld\n", (void *)&lock, counter);
    return 0;
}
