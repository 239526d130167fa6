/* Ground truth for deep recursion on one lock: the shim counts a
 * re-acquisition of a lock a thread already holds, and keeps no stack entry
 * per level (it tracks 32 nested locks).
 *
 *   recursive_depth DEPTH   A recursive mutex is locked DEPTH times nested
 *                           (one line), `inner` is locked once at the
 *                           deepest level, then everything is unlocked.
 *                           Then a read lock is taken DEPTH times nested
 *                           (one line) and released. Twice over.
 *
 * Output: "recursive <addr>", "inner <addr>", "rwlock <addr>",
 * "recursive-uses <n>", "inner-uses <n>", "read-uses <n>". */
#include "common.h"

#define ROUNDS 2

static pthread_mutex_t recursive;
static pthread_mutex_t inner = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static int recursive_uses, inner_uses, read_uses;

static void descend(int levels)
{
    if (levels == 0) {
        CHECK(pthread_mutex_lock(&inner)); /* @inner-lock */
        inner_uses++;
        CHECK(pthread_mutex_unlock(&inner));
        return;
    }
    CHECK(pthread_mutex_lock(&recursive)); /* @recursive-lock */
    recursive_uses++;
    descend(levels - 1);
    CHECK(pthread_mutex_unlock(&recursive));
}

static void read_nested(int levels)
{
    if (levels == 0)
        return;
    CHECK(pthread_rwlock_rdlock(&rwlock)); /* @read-lock */
    read_uses++;
    read_nested(levels - 1);
    CHECK(pthread_rwlock_unlock(&rwlock));
}

int main(int argc, char **argv)
{
    int depth = argc == 2 ? atoi(argv[1]) : 0;
    if (depth <= 0) {
        fprintf(stderr, "usage: %s DEPTH\n", argv[0]);
        return 2;
    }
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
    CHECK(pthread_mutex_init(&recursive, &attr));
    for (int round = 0; round < ROUNDS; round++) {
        descend(depth);
        read_nested(depth);
    }
    /* Released as often as taken: another thread can have it now. */
    if (pthread_mutex_trylock(&recursive) != 0) {
        fprintf(stderr, "the recursive mutex is still held\n");
        return 1;
    }
    CHECK(pthread_mutex_unlock(&recursive));
    printf("recursive %p\n", (void *)&recursive);
    printf("inner %p\n", (void *)&inner);
    printf("rwlock %p\n", (void *)&rwlock);
    printf("recursive-uses %d\n", recursive_uses);
    printf("inner-uses %d\n", inner_uses);
    printf("read-uses %d\n", read_uses);
    return 0;
}
