/* sample.c - a small program for trying out locksuit.
 *
 *   cc -g -O1 -pthread examples/sample.c -o target/sample
 *   target/release/locksuit run -- target/sample
 *
 * Four worker threads each:
 *   - count their own items under a mutex that no other thread ever touches
 *     (an unnecessary lock: locksuit reports it), and
 *   - add to a shared total under a mutex that all four share, doing a little
 *     work inside the critical section, so the threads really contend for it.
 * At the end each worker hands its result to main through a condition
 * variable, and main prints the totals. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 4
#define ITEMS 20000

struct worker {
    pthread_t thread;
    int index;
    pthread_mutex_t own_lock; /* only this worker uses it */
    long own_count;
};

static pthread_mutex_t total_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long total;

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_workers;

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", what, strerror(rc));
        exit(1);
    }
}

/* A little arithmetic, so the shared critical section is not empty. */
static unsigned long mix(unsigned long x)
{
    for (int i = 0; i < 20; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x >> 33;
}

void count_own_item(struct worker *w)
{
    check(pthread_mutex_lock(&w->own_lock), "lock own_lock");
    w->own_count++;
    check(pthread_mutex_unlock(&w->own_lock), "unlock own_lock");
}

void add_to_total(unsigned long item)
{
    check(pthread_mutex_lock(&total_lock), "lock total_lock");
    total += mix(item) % 100;
    check(pthread_mutex_unlock(&total_lock), "unlock total_lock");
}

void report_done(void)
{
    check(pthread_mutex_lock(&done_lock), "lock done_lock");
    done_workers++;
    check(pthread_cond_signal(&done_cond), "signal done_cond");
    check(pthread_mutex_unlock(&done_lock), "unlock done_lock");
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (unsigned long i = 0; i < ITEMS; i++) {
        count_own_item(w);
        add_to_total(i * WORKERS + (unsigned long)w->index);
    }
    report_done();
    return NULL;
}

int main(void)
{
    struct worker workers[WORKERS];

    for (int i = 0; i < WORKERS; i++) {
        workers[i].index = i;
        workers[i].own_count = 0;
        check(pthread_mutex_init(&workers[i].own_lock, NULL), "init own_lock");
        check(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]),
              "pthread_create");
    }

    /* Wait until every worker has reported in. */
    check(pthread_mutex_lock(&done_lock), "lock done_lock");
    while (done_workers < WORKERS)
        check(pthread_cond_wait(&done_cond, &done_lock), "wait done_cond");
    check(pthread_mutex_unlock(&done_lock), "unlock done_lock");

    long items = 0;
    for (int i = 0; i < WORKERS; i++) {
        check(pthread_join(workers[i].thread, NULL), "pthread_join");
        items += workers[i].own_count;
        check(pthread_mutex_destroy(&workers[i].own_lock), "destroy own_lock");
    }
    printf("items %ld, total %lu\n", items, total);
    return items == (long)WORKERS * ITEMS ? 0 : 1;
}
