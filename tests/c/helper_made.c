/* Locks made and taken through helpers, as pigz's yarn does: new_lock()
 * initialises every lock of the program at one line, possess() takes
 * every one at one line. Two kinds of lock come out of it:
 *
 *   - two shared locks, made by main (@make-shared), each taken by four
 *     workers in turn;
 *   - a lock of each worker's own, made by the worker (@make-own) and
 *     taken only by it.
 *
 * Locks made at one line are one family, unless that line is a helper's
 * that several lines call: then each caller's locks are a family, named by
 * the caller's line. So the workers' own locks are one thread's each, the
 * shared ones are shared, and the two kinds are never compared.
 *
 * Output: "own <address>" per worker, "shared <address>" per shared lock,
 * "total <n>". */
#include "common.h"

#define WORKERS 4
#define ROUNDS 3000

struct lock {
    pthread_mutex_t mutex;
    long count;
};

static struct lock *new_lock(void)
{
    struct lock *l = calloc(1, sizeof *l);
    if (!l)
        exit(3);
    CHECK(pthread_mutex_init(&l->mutex, NULL)); /* @new-lock */
    return l;
}

static void possess(struct lock *l)
{
    CHECK(pthread_mutex_lock(&l->mutex)); /* @possess */
}

static void release(struct lock *l)
{
    CHECK(pthread_mutex_unlock(&l->mutex));
}

static struct lock *shared[2];
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg)
{
    (void)arg;
    struct lock *own = new_lock(); /* @make-own */
    CHECK(pthread_mutex_lock(&print_lock));
    printf("own %p\n", (void *)&own->mutex);
    CHECK(pthread_mutex_unlock(&print_lock));
    for (int i = 0; i < ROUNDS; i++) {
        possess(own);
        own->count++;
        release(own);
        struct lock *s = shared[i % 2];
        possess(s);
        s->count++;
        release(s);
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 2; i++) {
        shared[i] = new_lock(); /* @make-shared */
        printf("shared %p\n", (void *)&shared[i]->mutex);
    }
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&t[i], NULL, work, NULL));
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_join(t[i], NULL));
    printf("total %ld\n", shared[0]->count + shared[1]->count);
    return 0;
}
