/* Ground truth for a program that never joins its threads.
 *
 * T workers each lock work_lock N times, then block forever in sem_wait on
 * `never` (value 0, never posted). One more thread, the holder, locks
 * held_lock and then blocks on `never` too; a last thread, the blocked
 * one, blocks in pthread_mutex_lock(held_lock) forever. Once every worker
 * is done with work_lock and the holder holds held_lock, main
 * returns 0 (or calls exit(0) with the argument "exit") while all of them
 * are still blocked.
 *
 * Output: "pid <pid>", "work_lock <addr>", "held_lock <addr>",
 * "never <addr>", "work-uses <T*N>". */
#include "common.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <unistd.h>

#define T 4
#define N 150

static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t never;
static sem_t progress;
static int work_uses;

static void block_forever(void)
{
    for (;;)
        sem_wait(&never); /* @never-wait */
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&work_lock)); /* @work-lock */
        work_uses++;
        CHECK(pthread_mutex_unlock(&work_lock));
    }
    sem_post(&progress); /* @progress-post */
    block_forever();
    return NULL;
}

static void *holder(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&held_lock)); /* @holder-lock */
    sem_post(&progress);
    block_forever();
    return NULL;
}

static _Atomic int blocked_tid;

static void *blocked(void *arg)
{
    (void)arg;
    blocked_tid = gettid_now();
    CHECK(pthread_mutex_lock(&held_lock)); /* @blocked-lock */
    fprintf(stderr, "blocked thread got held_lock\n");
    return NULL;
}

int main(int argc, char **argv)
{
    if (sem_init(&never, 0, 0) != 0 || sem_init(&progress, 0, 0) != 0) {
        perror("sem_init");
        return 1;
    }
    printf("pid %d\n", (int)getpid());
    printf("work_lock %p\n", (void *)&work_lock);
    printf("held_lock %p\n", (void *)&held_lock);
    printf("never %p\n", (void *)&never);
    printf("progress %p\n", (void *)&progress);
    fflush(stdout);
    pthread_t t;
    for (int i = 0; i < T; i++)
        CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_create(&t, NULL, holder, NULL));
    for (int i = 0; i < T + 1; i++)
        while (sem_wait(&progress) != 0) /* @progress-wait */
            ;
    CHECK(pthread_create(&t, NULL, blocked, NULL));
    /* Until the blocked thread is in its lock's futex wait: on a busy
     * machine it may not have run at all for a while. */
    while (!blocked_tid || !in_futex_wait(blocked_tid))
        sleep_ms(1);
    CHECK(pthread_mutex_lock(&work_lock));
    printf("work-uses %d\n", work_uses);
    CHECK(pthread_mutex_unlock(&work_lock));
    fflush(stdout);
    if (argc == 2 && strcmp(argv[1], "exit") == 0)
        exit(0);
    return 0;
}
