/* The same lock and trylock calls, at the same lines on the same mutexes,
 * round after round: from the second round on the shim's full mode takes
 * them on its quick path (shim/src/hooks/mutexes/quick.rs), hits and
 * misses, busy and nested ones, error-checking and recursive mutexes.
 *
 * Prints "<round> <call> <CODE>" for every call, then "taken-<mutex> N"
 * (the acquisitions it made of each) and "busy-normal N" (trylocks of
 * the normal mutex that found it busy): none of it depends on timing, so
 * it is compared byte for byte with a plain run. Then "addr-<mutex> ADDR"
 * lines, which differ from run to run. Argument: rounds (default 4). */
#include "common.h"

#include <sched.h>
#include <stdatomic.h>

static pthread_mutex_t normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t errorcheck, recursive;
static long taken_normal, taken_outer, taken_errorcheck, taken_recursive, busy_normal;
static atomic_int holding, let_go;

static const char *code_name(int rc)
{
    switch (rc) {
    case 0: return "0";
    case EBUSY: return "EBUSY";
    case EDEADLK: return "EDEADLK";
    case EPERM: return "EPERM";
    default: return "OTHER";
    }
}

static int counted(int rc, long *taken)
{
    if (rc == 0)
        (*taken)++;
    else if (rc == EBUSY && taken == &taken_normal)
        busy_normal++;
    return rc;
}

static void show(int round, const char *call, int rc)
{
    printf("%d %-26s %s\n", round, call, code_name(rc));
}

static void *hold_normal(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&normal));
    atomic_store(&holding, 1);
    while (!atomic_load(&let_go))
        sched_yield();
    CHECK(pthread_mutex_unlock(&normal));
    return NULL;
}

static void round_of_calls(int r)
{
    show(r, "trylock-free", counted(pthread_mutex_trylock(&normal), &taken_normal));
    show(r, "unlock", pthread_mutex_unlock(&normal));
    show(r, "lock-free", counted(pthread_mutex_lock(&normal), &taken_normal));
    show(r, "unlock", pthread_mutex_unlock(&normal));

    show(r, "lock-outer", counted(pthread_mutex_lock(&outer), &taken_outer));
    show(r, "lock-nested", counted(pthread_mutex_lock(&normal), &taken_normal));
    show(r, "trylock-self-held", counted(pthread_mutex_trylock(&normal), &taken_normal));
    show(r, "unlock-nested", pthread_mutex_unlock(&normal));
    show(r, "trylock-nested", counted(pthread_mutex_trylock(&normal), &taken_normal));
    show(r, "unlock-nested", pthread_mutex_unlock(&normal));
    show(r, "unlock-outer", pthread_mutex_unlock(&outer));

    pthread_t holder;
    atomic_store(&holding, 0);
    atomic_store(&let_go, 0);
    CHECK(pthread_create(&holder, NULL, hold_normal, NULL));
    while (!atomic_load(&holding))
        sched_yield();
    show(r, "trylock-held-by-other", counted(pthread_mutex_trylock(&normal), &taken_normal));
    atomic_store(&let_go, 1);
    CHECK(pthread_join(holder, NULL));
    taken_normal++; /* the holder's */

    show(r, "errorcheck-lock", counted(pthread_mutex_lock(&errorcheck), &taken_errorcheck));
    show(r, "errorcheck-relock", counted(pthread_mutex_lock(&errorcheck), &taken_errorcheck));
    show(r, "errorcheck-trylock-held",
         counted(pthread_mutex_trylock(&errorcheck), &taken_errorcheck));
    show(r, "errorcheck-unlock", pthread_mutex_unlock(&errorcheck));
    show(r, "errorcheck-unlock-again", pthread_mutex_unlock(&errorcheck));

    show(r, "recursive-lock", counted(pthread_mutex_lock(&recursive), &taken_recursive));
    show(r, "recursive-lock-again", counted(pthread_mutex_lock(&recursive), &taken_recursive));
    show(r, "recursive-trylock", counted(pthread_mutex_trylock(&recursive), &taken_recursive));
    show(r, "recursive-unlock-3", pthread_mutex_unlock(&recursive));
    show(r, "recursive-unlock-2", pthread_mutex_unlock(&recursive));
    show(r, "recursive-unlock-1", pthread_mutex_unlock(&recursive));
    show(r, "recursive-unlock-extra", pthread_mutex_unlock(&recursive));
}

static void init_typed(pthread_mutex_t *m, int type)
{
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, type));
    CHECK(pthread_mutex_init(m, &attr));
    CHECK(pthread_mutexattr_destroy(&attr));
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    init_typed(&errorcheck, PTHREAD_MUTEX_ERRORCHECK);
    init_typed(&recursive, PTHREAD_MUTEX_RECURSIVE);
    for (int r = 1; r <= rounds; r++)
        round_of_calls(r);
    printf("taken-normal %ld\ntaken-outer %ld\ntaken-errorcheck %ld\ntaken-recursive %ld\n",
           taken_normal, taken_outer, taken_errorcheck, taken_recursive);
    printf("busy-normal %ld\n", busy_normal);
    printf("addr-normal %p\naddr-outer %p\naddr-errorcheck %p\naddr-recursive %p\n",
           (void *)&normal, (void *)&outer, (void *)&errorcheck, (void *)&recursive);
    return 0;
}
