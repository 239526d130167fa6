/* A heap block freed by one thread and allocated again by another, under
 * one lock (built with `locksuit cc`): `first` fills its block at fill()'s
 * line a hundred times and frees it; then `second` allocates a block of
 * the same size (the same address: one arena, and the test turns the
 * per-thread cache off) and fills it at the same line. Both also bump a
 * shared counter under the same lock. Each block was only ever one
 * thread's: fill()'s line guards private data, bump()'s shared data.
 * Then `second` frees its block and allocates it again AGAIN times,
 * filling each once.
 *
 * Prints "reused yes" (or "no" if the allocator gave another address)
 * and "counter 200". */
#include "common.h"
#include <malloc.h>
#include <semaphore.h>

#define ROUNDS 100
#define WORDS 6
#define AGAIN 100

static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static sem_t first_done;
static void *first_block;
static int reused;

static void fill(long *block, long v)
{
    CHECK(pthread_mutex_lock(&big_lock));
    for (int i = 0; i < WORDS; i++)
        block[i] = v + i;
    CHECK(pthread_mutex_unlock(&big_lock));
}

static void bump(void)
{
    CHECK(pthread_mutex_lock(&big_lock));
    counter++;
    CHECK(pthread_mutex_unlock(&big_lock));
}

static void use(long *block)
{
    for (int r = 0; r < ROUNDS; r++) {
        fill(block, r);
        bump();
    }
}

static void *first(void *arg)
{
    (void)arg;
    long *block = malloc(WORDS * sizeof(long));
    if (!block)
        exit(3);
    first_block = block;
    use(block);
    free(block);
    CHECK(sem_post(&first_done));
    return NULL;
}

static void *second(void *arg)
{
    (void)arg;
    CHECK(sem_wait(&first_done));
    long *block = malloc(WORDS * sizeof(long));
    if (!block)
        exit(3);
    reused = (void *)block == first_block;
    use(block);
    /* The same address freed and taken again, many times over: each
     * block is a resource of its own, and the shim's table has room for
     * them all (a freed block's slots are free again). */
    for (int r = 0; r < AGAIN; r++) {
        free(block);
        block = malloc(WORDS * sizeof(long));
        if (!block)
            exit(3);
        fill(block, r);
    }
    free(block);
    return NULL;
}

int main(void)
{
    mallopt(M_ARENA_MAX, 1);
    CHECK(sem_init(&first_done, 0, 0));
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, first, NULL));
    CHECK(pthread_create(&b, NULL, second, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    printf("reused %s\ncounter %ld\n", reused ? "yes" : "no", counter);
    return 0;
}
