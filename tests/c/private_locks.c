/* Ground truth for the unnecessary-lock finding.
 *
 * NWORKERS threads. Each has a private mutex that only it ever takes
 * (ITER times, in work_private) and all share one mutex that protects a
 * shared counter (ITER times per worker, in work_shared).
 *
 * Output:  "shared <addr>", "private<i> <addr>" for each worker,
 *          "counter <value>" (must be NWORKERS * ITER). */
#include "common.h"

#define NWORKERS 4
#define ITER 10000

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static long shared_counter;

struct worker {
    pthread_t thread;
    pthread_mutex_t private_lock;
    long private_counter;
};

static struct worker workers[NWORKERS];

void work_private(struct worker *w)
{
    for (int i = 0; i < ITER; i++) {
        CHECK(pthread_mutex_lock(&w->private_lock)); /* @private-lock */
        w->private_counter++;
        CHECK(pthread_mutex_unlock(&w->private_lock));
    }
}

void work_shared(void)
{
    for (int i = 0; i < ITER; i++) {
        CHECK(pthread_mutex_lock(&shared_lock)); /* @shared-lock */
        shared_counter++;
        CHECK(pthread_mutex_unlock(&shared_lock));
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    work_private(w);
    work_shared();
    return NULL;
}

int main(void)
{
    printf("shared %p\n", (void *)&shared_lock);
    for (int i = 0; i < NWORKERS; i++) {
        CHECK(pthread_mutex_init(&workers[i].private_lock, NULL));
        printf("private%d %p\n", i, (void *)&workers[i].private_lock);
    }
    for (int i = 0; i < NWORKERS; i++)
        CHECK(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]));
    for (int i = 0; i < NWORKERS; i++)
        CHECK(pthread_join(workers[i].thread, NULL));
    for (int i = 0; i < NWORKERS; i++) {
        if (workers[i].private_counter != ITER) {
            fprintf(stderr, "worker %d counted %ld\n", i, workers[i].private_counter);
            return 1;
        }
        CHECK(pthread_mutex_destroy(&workers[i].private_lock));
    }
    printf("counter %ld\n", shared_counter);
    return shared_counter == (long)NWORKERS * ITER ? 0 : 1;
}
