/* Lock-order ground truth. Threads run one after the other (each is
 * joined before the next starts), so nothing here ever deadlocks; the
 * orders they take locks in are what the report must judge.
 *
 *   lock_order abba        take_ab: A then B; take_ba: B then A.
 *                          -> one potential deadlock, both functions.
 *   lock_order gated       the same, each under gate lock G -> none.
 *   lock_order three       A then B; B then C; C then A -> one, 3 edges.
 *   lock_order buckets     8 bucket locks made at one line; a function
 *                          takes pairs in address order -> none.
 *   lock_order buckets-reversed
 *                          the same, and another function takes b6 then
 *                          b2: with b2 -> b3 -> ... -> b6 that closes one
 *                          cycle of the 5 concrete locks b2..b6 -> one.
 *   lock_order trylock     A then B; B then trylock A -> none.
 *   lock_order read-read   rwlocks R, S: read R then read S; read S then
 *                          read R; nobody writes -> none.
 *   lock_order read-read-written
 *                          the same, and a thread write-locks R and S
 *                          alone -> none: glibc's default rwlocks let a
 *                          reader in past a queued writer.
 *   lock_order recursive   recursive mutex M, then A, then M again: the
 *                          re-acquisition is no edge -> none.
 *   lock_order gate-dropped
 *                          10 times: take A then B at one line, under gate
 *                          G in odd rounds and under X in even ones;
 *                          another thread takes G, B, A. No lock is held
 *                          every time A -> B is taken -> one, with A -> B
 *                          taken 10 times.
 *
 * Output: "mode <mode>". */
#include "common.h"

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t c = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t buckets[8];
static pthread_rwlock_t r = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t s = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t m;
static int gated;

static void lock2(pthread_mutex_t *first, pthread_mutex_t *second)
{
    if (gated)
        CHECK(pthread_mutex_lock(&gate));
    CHECK(pthread_mutex_lock(first));
    CHECK(pthread_mutex_lock(second));
    CHECK(pthread_mutex_unlock(second));
    CHECK(pthread_mutex_unlock(first));
    if (gated)
        CHECK(pthread_mutex_unlock(&gate));
}

static void *take_ab(void *arg) { (void)arg; lock2(&a, &b); return NULL; }
static void *take_ba(void *arg) { (void)arg; lock2(&b, &a); return NULL; }
static void *take_bc(void *arg) { (void)arg; lock2(&b, &c); return NULL; }
static void *take_ca(void *arg) { (void)arg; lock2(&c, &a); return NULL; }

static pthread_mutex_t x = PTHREAD_MUTEX_INITIALIZER;

static void *a_then_b_gate_dropped(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++) {
        pthread_mutex_t *outer = i % 2 ? &x : &gate;
        CHECK(pthread_mutex_lock(outer));
        CHECK(pthread_mutex_lock(&a));
        CHECK(pthread_mutex_lock(&b)); /* @gate-dropped-b */
        CHECK(pthread_mutex_unlock(&b));
        CHECK(pthread_mutex_unlock(&a));
        CHECK(pthread_mutex_unlock(outer));
    }
    return NULL;
}

static void *buckets_in_order(void *arg)
{
    (void)arg;
    for (int i = 0; i + 1 < 8; i++)
        lock2(&buckets[i], &buckets[i + 1]);
    return NULL;
}

static void *buckets_reversed(void *arg)
{
    (void)arg;
    lock2(&buckets[6], &buckets[2]);
    return NULL;
}

static void *try_ba(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&b));
    if (pthread_mutex_trylock(&a) == 0)
        CHECK(pthread_mutex_unlock(&a));
    CHECK(pthread_mutex_unlock(&b));
    return NULL;
}

static void read2(pthread_rwlock_t *first, pthread_rwlock_t *second)
{
    CHECK(pthread_rwlock_rdlock(first));
    CHECK(pthread_rwlock_rdlock(second));
    CHECK(pthread_rwlock_unlock(second));
    CHECK(pthread_rwlock_unlock(first));
}

static void *read_rs(void *arg) { (void)arg; read2(&r, &s); return NULL; }
static void *read_sr(void *arg) { (void)arg; read2(&s, &r); return NULL; }

static void *write_each(void *arg)
{
    (void)arg;
    CHECK(pthread_rwlock_wrlock(&r));
    CHECK(pthread_rwlock_unlock(&r));
    CHECK(pthread_rwlock_wrlock(&s));
    CHECK(pthread_rwlock_unlock(&s));
    return NULL;
}

static void *recursive(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&m));
    CHECK(pthread_mutex_lock(&a));
    CHECK(pthread_mutex_lock(&m));
    CHECK(pthread_mutex_unlock(&m));
    CHECK(pthread_mutex_unlock(&a));
    CHECK(pthread_mutex_unlock(&m));
    return NULL;
}

static void run(void *(*fn)(void *))
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, NULL));
    CHECK(pthread_join(t, NULL));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    for (int i = 0; i < 8; i++)
        CHECK(pthread_mutex_init(&buckets[i], NULL)); /* @bucket-init */
    pthread_mutexattr_t attr;
    CHECK(pthread_mutexattr_init(&attr));
    CHECK(pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE));
    CHECK(pthread_mutex_init(&m, &attr));
    printf("mode %s\n", mode);
    if (strcmp(mode, "abba") == 0 || strcmp(mode, "gated") == 0) {
        gated = strcmp(mode, "gated") == 0;
        run(take_ab);
        run(take_ba);
    } else if (strcmp(mode, "three") == 0) {
        run(take_ab);
        run(take_bc);
        run(take_ca);
    } else if (strcmp(mode, "buckets") == 0) {
        run(buckets_in_order);
    } else if (strcmp(mode, "buckets-reversed") == 0) {
        run(buckets_in_order);
        run(buckets_reversed);
    } else if (strcmp(mode, "trylock") == 0) {
        run(take_ab);
        run(try_ba);
    } else if (strcmp(mode, "read-read") == 0) {
        run(read_rs);
        run(read_sr);
    } else if (strcmp(mode, "read-read-written") == 0) {
        run(read_rs);
        run(read_sr);
        run(write_each);
    } else if (strcmp(mode, "recursive") == 0) {
        run(recursive);
    } else if (strcmp(mode, "gate-dropped") == 0) {
        run(a_then_b_gate_dropped);
        gated = 1;
        run(take_ba);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
