/* One thread, many locks, many rounds: initialises LOCKS mutexes
 * (argv[1]) and takes each once per round, ROUNDS times (argv[2]), from one
 * line. Prints "locks N" and "rounds R". A thread engaging far more
 * (lock, line) pairs than the shim's first per-thread index holds must
 * still keep one counter record per pair. */
#include "common.h"

int main(int argc, char **argv)
{
    long locks = argc > 1 ? atol(argv[1]) : 20000;
    long rounds = argc > 2 ? atol(argv[2]) : 10;
    pthread_mutex_t *m = calloc((size_t)locks, sizeof *m);
    if (!m)
        return 1;
    for (long i = 0; i < locks; i++)
        CHECK(pthread_mutex_init(&m[i], NULL));
    for (long r = 0; r < rounds; r++)
        for (long i = 0; i < locks; i++) {
            CHECK(pthread_mutex_lock(&m[i])); /* @round-lock */
            CHECK(pthread_mutex_unlock(&m[i]));
        }
    printf("locks %ld\nrounds %ld\n", locks, rounds);
    return 0;
}
