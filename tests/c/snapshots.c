/* Recording-policy rules with known ground truth.
 *
 * Phase 1: main holds `pile_lock` while eight threads pile onto it, one at
 * a time: main starts the next only once the last really blocks (it is
 * in the futex call), so the waiters grow 1, 2, …, 8. Waits that began
 * with k threads waiting (itself included): one each for k = 1..8.
 * Phase 2: `other_lock`, held by main, gets one waiter (at
 * other_waiter), which began with 1 waiting.
 *
 * Prints "holder TID", "waiter_K TID" (K = 1..8, in arrival order) and
 * "other TID". */
#include "common.h"

static pthread_mutex_t pile_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int tids[8];
static volatile int other_tid;

static void *pile_on(void *arg)
{
    int i = (int)(long)arg;
    tids[i] = gettid_now();
    CHECK(pthread_mutex_lock(&pile_lock));
    CHECK(pthread_mutex_unlock(&pile_lock));
    return NULL;
}

static void *other_waiter(void *arg)
{
    (void)arg;
    other_tid = gettid_now();
    /* Begin waiting while main sleeps between its polls (it is then off
     * the processors, so on an unloaded machine one is idle). */
    sleep_ms(5);
    CHECK(pthread_mutex_lock(&other_lock));
    CHECK(pthread_mutex_unlock(&other_lock));
    return NULL;
}

/* Starts `fn` and returns once its thread blocks in the futex call. */
static pthread_t start_and_wait_blocked(void *(*fn)(void *), long arg, volatile int *tid)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, (void *)arg));
    while (*tid == 0 || !in_futex_wait(*tid))
        sleep_ms(1);
    return t;
}

static void hold_and_pile(void)
{
    pthread_t t[8];
    CHECK(pthread_mutex_lock(&pile_lock));
    for (int i = 0; i < 8; i++)
        t[i] = start_and_wait_blocked(pile_on, i, &tids[i]);
    CHECK(pthread_mutex_unlock(&pile_lock));
    for (int i = 0; i < 8; i++)
        CHECK(pthread_join(t[i], NULL));
}

static void hold_other(void)
{
    CHECK(pthread_mutex_lock(&other_lock));
    pthread_t t = start_and_wait_blocked(other_waiter, 0, &other_tid);
    CHECK(pthread_mutex_unlock(&other_lock));
    CHECK(pthread_join(t, NULL));
}

int main(void)
{
    printf("holder %d\n", gettid_now());
    hold_and_pile();
    hold_other();
    for (int i = 0; i < 8; i++)
        printf("waiter_%d %d\n", i + 1, tids[i]);
    printf("other %d\n", other_tid);
    return 0;
}
