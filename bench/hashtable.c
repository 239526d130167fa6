/* A chained hash table with striped locks, the usual shape of a
 * concurrent cache: BUCKETS buckets, one mutex per STRIPE buckets, nodes
 * from malloc. T threads (argv[1]) each make OPS operations (argv[2]) on
 * random keys: 80 % lookups, 10 % inserts, 10 % deletes (freed nodes are
 * reused by the allocator, often by another thread). Every access to the
 * table happens under its stripe's lock. Prints nanoseconds per operation
 * and a checksum (so the work cannot be optimised away).
 *
 *   hashtable [THREADS] [OPS] [padded]   with "padded", each stripe's mutex
 *                                        sits in a 48-byte struct with a
 *                                        word beside it, as in an array of
 *                                        buckets (40 bytes apart otherwise) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 4096
#define STRIPES 64
#define KEYS 16384

struct node {
    struct node *next;
    uint64_t key;
    uint64_t value;
};

static struct node *bucket[BUCKETS];
static pthread_mutex_t stripe[STRIPES];
static struct {
    pthread_mutex_t lock;
    uint64_t word;
} padded_stripe[STRIPES];
static int padded;
static long ops;

static uint64_t next_random(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static pthread_mutex_t *lock_of(unsigned b) {
    return padded ? &padded_stripe[b % STRIPES].lock : &stripe[b % STRIPES];
}

static void *work(void *arg) {
    uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    uint64_t sum = 0;
    for (long i = 0; i < ops; i++) {
        uint64_t r = next_random(&rng);
        uint64_t key = r % KEYS;
        unsigned b = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 52) % BUCKETS;
        unsigned what = (unsigned)(r >> 40) % 10;
        pthread_mutex_lock(lock_of(b));
        struct node **at = &bucket[b];
        while (*at && (*at)->key != key)
            at = &(*at)->next;
        if (what < 8) {
            if (*at)
                sum += (*at)->value;
        } else if (what == 8) {
            if (*at) {
                (*at)->value += 1;
            } else {
                struct node *n = malloc(sizeof *n);
                if (n) {
                    n->next = NULL;
                    n->key = key;
                    n->value = key;
                    *at = n;
                }
            }
        } else if (*at) {
            struct node *gone = *at;
            *at = gone->next;
            free(gone);
        }
        pthread_mutex_unlock(lock_of(b));
    }
    return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    ops = argc > 2 ? atol(argv[2]) : 1000000;
    padded = argc > 3 && strcmp(argv[3], "padded") == 0;
    if (threads < 1 || threads > 64 || ops < 1 || (argc > 3 && !padded)) {
        fprintf(stderr, "usage: hashtable [THREADS 1-64] [OPS] [padded]\n");
        return 2;
    }
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(lock_of(i), NULL);
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    uint64_t checksum = 0;
    for (int i = 0; i < threads; i++) {
        void *sum;
        pthread_join(t[i], &sum);
        checksum += (uintptr_t)sum;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f ns per operation, checksum %llu\n", ns / ((double)threads * ops),
           (unsigned long long)checksum);
    return 0;
}
