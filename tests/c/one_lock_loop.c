/* One thread takes one lock N times (argv[1]); every acquisition is
 * uncontended. Prints the lock's address and the count on stdout. Used for
 * full tracing (LOCKSUIT_EVENTS=all) and the flight recorder
 * (LOCKSUIT_FLIGHT=1): release i leaves the lock's sequence at i. */
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++) {
        CHECK(pthread_mutex_lock(&lock));
        counter++;
        CHECK(pthread_mutex_unlock(&lock));
    }
    printf("lock %p\ncount %ld\n", (void *)&lock, counter);
    return 0;
}
