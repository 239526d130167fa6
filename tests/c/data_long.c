/* Data-level sampling, built with `locksuit cc`: long engagements. One
 * thread takes `outer` ROUNDS times at one line and, holding it, reads
 * every entry of `table` (N loads); halfway through each scan it takes
 * `inner`, reads one entry under it and releases it.
 *
 * With LOCKSUIT_DATA_SAMPLE set, each engagement recorded keeps only its
 * first 4096 accesses, however many locks are taken inside it.
 *
 * Prints "sum S" (ROUNDS * the sum of 0..N-1). */
#include "common.h"

#define ROUNDS 3
#define N 5000

static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t inner = PTHREAD_MUTEX_INITIALIZER;
static long table[N];
static volatile long inner_reads;

int main(void)
{
    for (long i = 0; i < N; i++)
        table[i] = i;
    long sum = 0;
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(pthread_mutex_lock(&outer));
        for (long i = 0; i < N; i++) {
            if (i == N / 2) {
                CHECK(pthread_mutex_lock(&inner));
                inner_reads += table[0];
                CHECK(pthread_mutex_unlock(&inner));
            }
            sum += table[i];
        }
        CHECK(pthread_mutex_unlock(&outer));
    }
    printf("sum %ld\n", sum);
    return 0;
}
