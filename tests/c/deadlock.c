/* Programs that hang for good, each in one well-known way.
 *
 *   deadlock abba         two threads: one locks A then B, the other B then
 *                         A; a barrier between their first and second lock
 *                         makes the deadlock certain.
 *   deadlock self         main locks a default (non-recursive) mutex twice.
 *   deadlock abandoned    a thread locks L and exits holding it; main then
 *                         locks L.
 *   deadlock lost-wakeup  a thread waits on a condition nobody signals;
 *                         main joins it.
 *   deadlock join-lock    main locks A, starts a thread that locks A, and
 *                         joins it: a cycle through a join and a lock.
 *   deadlock named        abba, with its threads named: the first by main
 *                         with pthread_setname_np right after creating it
 *                         ("taker-ab"), the second by itself with prctl
 *                         ("taker-ba"), which no hook sees.
 *
 * Output: "pid <pid>" and "ready", flushed, once the program is about to
 * hang. */
#include "common.h"

#include <sys/prctl.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *take_ab(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&a)); /* @ab-first */
    pthread_barrier_wait(&both_hold_one);
    CHECK(pthread_mutex_lock(&b)); /* @ab-second */
    return NULL;
}

static void *take_ba(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&b)); /* @ba-first */
    pthread_barrier_wait(&both_hold_one);
    CHECK(pthread_mutex_lock(&a)); /* @ba-second */
    return NULL;
}

static void *take_ba_named(void *arg)
{
    prctl(PR_SET_NAME, "taker-ba");
    return take_ba(arg);
}

static void *exit_holding(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&a)); /* @abandoned-lock */
    return NULL;
}

static void *wait_forever(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&a));
    for (;;)
        CHECK(pthread_cond_wait(&never, &a)); /* @lost-wait */
    return NULL;
}

static void *lock_a(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&a)); /* @join-lock-wait */
    return NULL;
}

static void ready(void)
{
    printf("pid %d\nready\n", (int)getpid());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    pthread_t t1, t2;
    if (strcmp(mode, "abba") == 0) {
        CHECK(pthread_barrier_init(&both_hold_one, NULL, 2));
        CHECK(pthread_create(&t1, NULL, take_ab, NULL));
        CHECK(pthread_create(&t2, NULL, take_ba, NULL));
        ready();
        CHECK(pthread_join(t1, NULL));
    } else if (strcmp(mode, "named") == 0) {
        CHECK(pthread_barrier_init(&both_hold_one, NULL, 2));
        CHECK(pthread_create(&t1, NULL, take_ab, NULL));
        CHECK(pthread_setname_np(t1, "taker-ab"));
        CHECK(pthread_create(&t2, NULL, take_ba_named, NULL));
        ready();
        CHECK(pthread_join(t1, NULL));
    } else if (strcmp(mode, "self") == 0) {
        CHECK(pthread_mutex_lock(&a));
        ready();
        CHECK(pthread_mutex_lock(&a)); /* @self-relock */
    } else if (strcmp(mode, "abandoned") == 0) {
        CHECK(pthread_create(&t1, NULL, exit_holding, NULL));
        CHECK(pthread_join(t1, NULL));
        ready();
        CHECK(pthread_mutex_lock(&a)); /* @abandoned-wait */
    } else if (strcmp(mode, "lost-wakeup") == 0) {
        CHECK(pthread_create(&t1, NULL, wait_forever, NULL));
        ready();
        CHECK(pthread_join(t1, NULL)); /* @lost-join */
    } else if (strcmp(mode, "join-lock") == 0) {
        CHECK(pthread_mutex_lock(&a)); /* @join-hold */
        CHECK(pthread_create(&t1, NULL, lock_a, NULL));
        ready();
        CHECK(pthread_join(t1, NULL)); /* @join-wait */
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
