/* Lock-order ground truth, printed by the program itself.
 *
 * Each scenario (argv[1]) is one run, so findings of different scenarios
 * never mix. Threads whose lock orders form a cycle run one after the
 * other (each is joined before the next starts), so nothing here ever
 * deadlocks, and no outcome depends on timing; where threads do run at
 * once they take their locks in an order that cannot deadlock.
 *
 * The rules the expectations follow (those of the lock-order analysis):
 *   potential-deadlock      a cycle of "took B while holding A" edges
 *                           between concrete locks (never closed through
 *                           two locks that merely share a family, i.e.
 *                           were made at one line); its locks are exactly
 *                           the locks of one simple cycle. A trylock edge
 *                           cannot block, so it never closes a cycle; a
 *                           read edge into an rwlock nobody write-locks is
 *                           dropped; a cycle whose every edge was taken
 *                           while holding one common gate lock is not
 *                           reported.
 *   family-order-inversion  locks of one family taken two at a time at the
 *                           same pair of lines in both address orders, with
 *                           no concrete cycle among them; its locks are
 *                           every lock of those pairs. It says the family
 *                           has no consistent order, not that it can
 *                           deadlock.
 *
 *   order_truth global-order
 *       64 structs in an array, each with a mutex; the even elements'
 *       mutexes are initialised at one line, the odd ones' at another (two
 *       families in one array). Pairs a[i] then a[j], i < j (neighbours,
 *       far apart like a[29] then a[1000 % 64], pseudo-random ones), always
 *       in ascending address order, by one thread, then by 4 at once.
 *       -> nothing.
 *   order_truth disjoint-pairs
 *       lk[0..3] made at one line; thread 1 nests lk0 -> lk1, thread 2
 *       nests lk3 -> lk2, both through nest() (one pair of lines).
 *       -> family-order-inversion {lk0, lk1, lk2, lk3}.
 *   order_truth disjoint-pairs-lines
 *       the same, but thread 2 nests at lines of its own -> nothing.
 *   order_truth cycle-2 | cycle-5 | cycle-30
 *       n mutexes made in a loop (one family) in a ring; thread i takes
 *       L[i] then L[(i+1) % n] through nest() -> one potential-deadlock
 *       over exactly the n locks, and no family-order-inversion (a
 *       concrete cycle among them was seen).
 *   order_truth cycle-30-solo
 *       the same ring of 30, each mutex initialised at a line of its own
 *       (no family at all) -> one potential-deadlock over the 30.
 *   order_truth peer-stress
 *       8 mutexes made at one line (modelled on a peer tool's stress
 *       test). 4 <-> 5 and 6 <-> 7 are real cycles (4 then 5, 5 then 4;
 *       6 then 7, 7 then 6). 0 <-> 1 and 2 <-> 3 are not: 0 then 1 and
 *       2 then 3 are locks, 1 then 0 and 3 then 2 are trylocks while
 *       holding the first; those four threads run alone once, then all at
 *       once, 200 rounds each. -> potential-deadlock {p4, p5} and
 *       {p6, p7}. (The lock direction of 0/1 and 2/3 is at lines of its
 *       own and ascending, the trylocks at lines of their own and
 *       descending: no pair of lines has both orders except nest()'s,
 *       whose locks all lie on the two cycles.)
 *   order_truth trylock-closes
 *       A then B; B then trylock A -> nothing.
 *   order_truth behind-trylock
 *       thread 1 locks A, trylocks B (it succeeds), then locks C holding
 *       both; thread 2 locks C then B. B was got by a trylock, but C is
 *       then waited for while holding it -> potential-deadlock {B, C}.
 *   order_truth rwlocks-read-only
 *       rwlocks R1, R2 nobody write-locks: read R1 then read R2; read R2
 *       then read R1 -> nothing.
 *   order_truth rwlocks-written
 *       the same, and a thread write-locks R1 and R2 (alone, not nested):
 *       glibc's rwlocks (reader-preferring by default) let a reader in
 *       past a queued writer, so a read never waits for a read hold
 *       -> nothing.
 *   order_truth rwlocks-prefer-writer
 *       the same with rwlocks made to prefer writers
 *       (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP): a queued writer
 *       holds the second read back -> potential-deadlock {R1, R2}.
 *   order_truth rwlocks-read-write
 *       read R1 then write-lock R2; read R2 then write-lock R1: a writer
 *       waits for readers -> potential-deadlock {R1, R2}.
 *   order_truth gated-and-not
 *       A then B and B then A, each under G; also B then C and C then A
 *       with no gate: the cycle A, B, C can deadlock
 *       -> potential-deadlock {A, B, C}.
 *   order_truth object-global
 *       three objects' mutexes made at one line, and a global G: one
 *       thread takes object 0 then G, another G then object 1. No cycle
 *       over the same locks, but an object reachable both ways would make
 *       one -> family-order-inversion {object 0, object 1}.
 *   order_truth gated
 *       A then B, and B then A, each while holding G -> nothing (G -> A,
 *       G -> B are fine).
 *   order_truth tree
 *       15 malloc'd nodes whose mutexes are all made at one line, built
 *       into a binary search tree over their addresses (a left child lies
 *       below its parent, a right child above). One thread, then two at
 *       once, walk hand over hand from the root to every leaf, every lock
 *       taken at one line. No cycle, but parent then child at one pair of
 *       lines in both address orders -> family-order-inversion over all
 *       15 nodes. That finding is the weak kind: its message must not
 *       claim a deadlock (hand-over-hand down a tree cannot deadlock).
 *
 * Output:
 *   scenario NAME
 *   lock NAME ADDRESS          each lock the scenario uses (for messages)
 *   expect KIND ADDRESS...     one line per finding of kind
 *                              potential-deadlock or family-order-inversion
 *                              the report must hold, with the addresses of
 *                              exactly its locks; no line = no finding. */
#include "common.h"

#include <stdint.h>

typedef void *(*body_fn)(void *);

/* Runs fn(arg) in a thread of its own and waits for it. */
static void run(body_fn fn, void *arg)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fn, arg));
    CHECK(pthread_join(t, NULL));
}

/* Runs fn(args[i]) in n threads at once and waits for them all. */
static void run_together(body_fn fn, void **args, int n)
{
    pthread_t t[8];
    for (int i = 0; i < n; i++)
        CHECK(pthread_create(&t[i], NULL, fn, args[i]));
    for (int i = 0; i < n; i++)
        CHECK(pthread_join(t[i], NULL));
}

static void name_lock(const char *name, const void *lock)
{
    printf("lock %s %p\n", name, lock);
}

static void name_locks(const char *prefix, const void *first, size_t stride, int n)
{
    for (int i = 0; i < n; i++)
        printf("lock %s%d %p\n", prefix, i, (const void *)((const char *)first + i * stride));
}

static void expect_begin(const char *kind) { printf("expect %s", kind); }
static void expect_lock(const void *lock) { printf(" %p", lock); }
static void expect_end(void) { printf("\n"); }

/* Takes `outer` then `inner`, and lets go: every pair nested through here
 * is taken at one pair of lines. */
static void nest(pthread_mutex_t *outer, pthread_mutex_t *inner)
{
    CHECK(pthread_mutex_lock(outer)); /* @nest-outer */
    CHECK(pthread_mutex_lock(inner)); /* @nest-inner */
    CHECK(pthread_mutex_unlock(inner));
    CHECK(pthread_mutex_unlock(outer));
}

struct pair {
    pthread_mutex_t *outer, *inner;
};

static void *nest_pair(void *arg)
{
    struct pair *p = arg;
    nest(p->outer, p->inner);
    return NULL;
}

/* nest(outer, inner) in a thread of its own. */
static void run_nest(pthread_mutex_t *outer, pthread_mutex_t *inner)
{
    struct pair p = { outer, inner };
    run(nest_pair, &p);
}

/* ---- global-order ---- */

#define SLOTS 64
_Static_assert(1000 % SLOTS > 29, "a[29] then a[1000 % n] is ascending");

static struct slot {
    long before;
    pthread_mutex_t m;
    long after;
} slots[SLOTS];

static void *ascending_pairs(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    nest(&slots[29].m, &slots[1000 % SLOTS].m);
    nest(&slots[0].m, &slots[SLOTS - 1].m);
    for (int i = 0; i + 1 < SLOTS; i++)
        nest(&slots[i].m, &slots[i + 1].m);
    for (int i = 0; i + 2 < SLOTS; i++)
        nest(&slots[i].m, &slots[i + 2].m);
    for (int k = 0; k < 256; k++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 16) % SLOTS);
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 16) % SLOTS);
        if (i == j)
            continue;
        if (i > j) {
            int t = i;
            i = j;
            j = t;
        }
        nest(&slots[i].m, &slots[j].m);
    }
    return NULL;
}

static void global_order(void)
{
    for (int i = 0; i < SLOTS; i++) {
        if (i % 2 == 0)
            CHECK(pthread_mutex_init(&slots[i].m, NULL)); /* @even-init */
        else
            CHECK(pthread_mutex_init(&slots[i].m, NULL)); /* @odd-init */
    }
    name_locks("slot", &slots[0].m, sizeof slots[0], SLOTS);
    run(ascending_pairs, (void *)(uintptr_t)1);
    void *seeds[4] = { (void *)(uintptr_t)2, (void *)(uintptr_t)3,
                       (void *)(uintptr_t)4, (void *)(uintptr_t)5 };
    run_together(ascending_pairs, seeds, 4);
}

/* ---- disjoint-pairs, disjoint-pairs-lines ---- */

static pthread_mutex_t lk[4];

static void *lk3_then_lk2_own_lines(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&lk[3])); /* @own-outer */
    CHECK(pthread_mutex_lock(&lk[2])); /* @own-inner */
    CHECK(pthread_mutex_unlock(&lk[2]));
    CHECK(pthread_mutex_unlock(&lk[3]));
    return NULL;
}

static void disjoint_pairs(int own_lines)
{
    for (int i = 0; i < 4; i++)
        CHECK(pthread_mutex_init(&lk[i], NULL)); /* @lk-init */
    name_locks("lk", &lk[0], sizeof lk[0], 4);
    run_nest(&lk[0], &lk[1]);
    if (own_lines) {
        run(lk3_then_lk2_own_lines, NULL);
        return;
    }
    run_nest(&lk[3], &lk[2]);
    expect_begin("family-order-inversion");
    for (int i = 0; i < 4; i++)
        expect_lock(&lk[i]);
    expect_end();
}

/* ---- cycle-N, cycle-30-solo ---- */

#define RING_MAX 30
static pthread_mutex_t ring[RING_MAX];

static void ring_cycle(int n)
{
    for (int i = 0; i < n; i++)
        run_nest(&ring[i], &ring[(i + 1) % n]);
    expect_begin("potential-deadlock");
    for (int i = 0; i < n; i++)
        expect_lock(&ring[i]);
    expect_end();
}

static void cycle_family(int n)
{
    for (int i = 0; i < n; i++)
        CHECK(pthread_mutex_init(&ring[i], NULL)); /* @ring-init */
    name_locks("ring", &ring[0], sizeof ring[0], n);
    ring_cycle(n);
}

static void cycle_solo(void)
{
    /* One line each: 30 locks, no two of one family. */
    CHECK(pthread_mutex_init(&ring[0], NULL));
    CHECK(pthread_mutex_init(&ring[1], NULL));
    CHECK(pthread_mutex_init(&ring[2], NULL));
    CHECK(pthread_mutex_init(&ring[3], NULL));
    CHECK(pthread_mutex_init(&ring[4], NULL));
    CHECK(pthread_mutex_init(&ring[5], NULL));
    CHECK(pthread_mutex_init(&ring[6], NULL));
    CHECK(pthread_mutex_init(&ring[7], NULL));
    CHECK(pthread_mutex_init(&ring[8], NULL));
    CHECK(pthread_mutex_init(&ring[9], NULL));
    CHECK(pthread_mutex_init(&ring[10], NULL));
    CHECK(pthread_mutex_init(&ring[11], NULL));
    CHECK(pthread_mutex_init(&ring[12], NULL));
    CHECK(pthread_mutex_init(&ring[13], NULL));
    CHECK(pthread_mutex_init(&ring[14], NULL));
    CHECK(pthread_mutex_init(&ring[15], NULL));
    CHECK(pthread_mutex_init(&ring[16], NULL));
    CHECK(pthread_mutex_init(&ring[17], NULL));
    CHECK(pthread_mutex_init(&ring[18], NULL));
    CHECK(pthread_mutex_init(&ring[19], NULL));
    CHECK(pthread_mutex_init(&ring[20], NULL));
    CHECK(pthread_mutex_init(&ring[21], NULL));
    CHECK(pthread_mutex_init(&ring[22], NULL));
    CHECK(pthread_mutex_init(&ring[23], NULL));
    CHECK(pthread_mutex_init(&ring[24], NULL));
    CHECK(pthread_mutex_init(&ring[25], NULL));
    CHECK(pthread_mutex_init(&ring[26], NULL));
    CHECK(pthread_mutex_init(&ring[27], NULL));
    CHECK(pthread_mutex_init(&ring[28], NULL));
    CHECK(pthread_mutex_init(&ring[29], NULL));
    name_locks("solo", &ring[0], sizeof ring[0], RING_MAX);
    ring_cycle(RING_MAX);
}

/* ---- peer-stress ---- */

static pthread_mutex_t peer[8];

struct try_pair {
    pthread_mutex_t *first, *second;
    int rounds;
    /* Run alone: the trylock must succeed. */
    int alone;
};

/* first then second, both locks, at lines of their own. */
static void *lock_lock(void *arg)
{
    struct try_pair *p = arg;
    for (int r = 0; r < p->rounds; r++) {
        CHECK(pthread_mutex_lock(p->first)); /* @peer-lock-first */
        CHECK(pthread_mutex_lock(p->second)); /* @peer-lock-second */
        CHECK(pthread_mutex_unlock(p->second));
        CHECK(pthread_mutex_unlock(p->first));
    }
    return NULL;
}

/* first locked, then second tried while holding it. */
static void *lock_trylock(void *arg)
{
    struct try_pair *p = arg;
    for (int r = 0; r < p->rounds; r++) {
        CHECK(pthread_mutex_lock(p->first)); /* @peer-try-first */
        int rc = pthread_mutex_trylock(p->second); /* @peer-try-second */
        if (rc == 0)
            CHECK(pthread_mutex_unlock(p->second));
        else if (rc != EBUSY || p->alone)
            die_rc("pthread_mutex_trylock", rc, __LINE__);
        CHECK(pthread_mutex_unlock(p->first));
    }
    return NULL;
}

static void *lock_or_try(void *arg)
{
    struct try_pair *p = arg;
    return p->first < p->second ? lock_lock(arg) : lock_trylock(arg);
}

static void peer_stress(void)
{
    for (int i = 0; i < 8; i++)
        CHECK(pthread_mutex_init(&peer[i], NULL)); /* @peer-init */
    name_locks("p", &peer[0], sizeof peer[0], 8);
    /* Not cycles: 0 then 1 and 2 then 3 locked, 1 then 0 and 3 then 2
     * tried; each alone (every trylock succeeds), then all four at once
     * (a trylock never waits; some fail). */
    struct try_pair pairs[4] = {
        { &peer[0], &peer[1], 1, 1 },
        { &peer[1], &peer[0], 1, 1 },
        { &peer[2], &peer[3], 1, 1 },
        { &peer[3], &peer[2], 1, 1 },
    };
    void *args[4] = { &pairs[0], &pairs[1], &pairs[2], &pairs[3] };
    for (int i = 0; i < 4; i++)
        run(lock_or_try, &pairs[i]);
    for (int i = 0; i < 4; i++) {
        pairs[i].rounds = 200;
        pairs[i].alone = 0;
    }
    run_together(lock_or_try, args, 4);
    /* Real cycles, one thread after the other. */
    run_nest(&peer[4], &peer[5]);
    run_nest(&peer[5], &peer[4]);
    run_nest(&peer[6], &peer[7]);
    run_nest(&peer[7], &peer[6]);
    for (int i = 4; i < 8; i += 2) {
        expect_begin("potential-deadlock");
        expect_lock(&peer[i]);
        expect_lock(&peer[i + 1]);
        expect_end();
    }
}

/* ---- trylock-closes, behind-trylock, gated ---- */

static pthread_mutex_t ma, mb, mc, mg;

static void init_singles(void)
{
    CHECK(pthread_mutex_init(&ma, NULL));
    CHECK(pthread_mutex_init(&mb, NULL));
    CHECK(pthread_mutex_init(&mc, NULL));
    CHECK(pthread_mutex_init(&mg, NULL));
    name_lock("A", &ma);
    name_lock("B", &mb);
    name_lock("C", &mc);
    name_lock("G", &mg);
}

static void *b_then_try_a(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&mb));
    CHECK(pthread_mutex_trylock(&ma)); /* @try-closes */
    CHECK(pthread_mutex_unlock(&ma));
    CHECK(pthread_mutex_unlock(&mb));
    return NULL;
}

static void *a_try_b_then_c(void *arg)
{
    (void)arg;
    CHECK(pthread_mutex_lock(&ma));
    CHECK(pthread_mutex_trylock(&mb)); /* @behind-try */
    CHECK(pthread_mutex_lock(&mc)); /* @behind-c */
    CHECK(pthread_mutex_unlock(&mc));
    CHECK(pthread_mutex_unlock(&mb));
    CHECK(pthread_mutex_unlock(&ma));
    return NULL;
}

static void *gated_pair(void *arg)
{
    struct pair *p = arg;
    CHECK(pthread_mutex_lock(&mg));
    nest(p->outer, p->inner);
    CHECK(pthread_mutex_unlock(&mg));
    return NULL;
}

static void trylock_closes(void)
{
    init_singles();
    run_nest(&ma, &mb);
    run(b_then_try_a, NULL);
}

static void behind_trylock(void)
{
    init_singles();
    run(a_try_b_then_c, NULL);
    run_nest(&mc, &mb);
    expect_begin("potential-deadlock");
    expect_lock(&mb);
    expect_lock(&mc);
    expect_end();
}

static void gated(void)
{
    init_singles();
    struct pair ab = { &ma, &mb }, ba = { &mb, &ma };
    run(gated_pair, &ab);
    run(gated_pair, &ba);
}

/* ---- rwlocks-read-only, rwlocks-written ---- */

static pthread_rwlock_t r1, r2;

struct rw_pair {
    pthread_rwlock_t *first, *second;
};

static void *read_both(void *arg)
{
    struct rw_pair *p = arg;
    CHECK(pthread_rwlock_rdlock(p->first)); /* @read-first */
    CHECK(pthread_rwlock_rdlock(p->second)); /* @read-second */
    CHECK(pthread_rwlock_unlock(p->second));
    CHECK(pthread_rwlock_unlock(p->first));
    return NULL;
}

/* Read-locks `first`, then write-locks `second`. */
static void *read_then_write(void *arg)
{
    struct rw_pair *p = arg;
    CHECK(pthread_rwlock_rdlock(p->first));
    CHECK(pthread_rwlock_wrlock(p->second));
    CHECK(pthread_rwlock_unlock(p->second));
    CHECK(pthread_rwlock_unlock(p->first));
    return NULL;
}

static void *write_each(void *arg)
{
    (void)arg;
    CHECK(pthread_rwlock_wrlock(&r1));
    CHECK(pthread_rwlock_unlock(&r1));
    CHECK(pthread_rwlock_wrlock(&r2));
    CHECK(pthread_rwlock_unlock(&r2));
    return NULL;
}

/* 0: nobody writes; 1: writers, default rwlocks; 2: writers, rwlocks
 * that prefer writers; 3: each reader goes on to write-lock the other. */
static void rwlocks(int how)
{
    pthread_rwlockattr_t attr;
    CHECK(pthread_rwlockattr_init(&attr));
    if (how == 2)
        CHECK(pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP));
    CHECK(pthread_rwlock_init(&r1, &attr));
    CHECK(pthread_rwlock_init(&r2, &attr));
    name_lock("R1", &r1);
    name_lock("R2", &r2);
    struct rw_pair one_two = { &r1, &r2 }, two_one = { &r2, &r1 };
    body_fn each = how == 3 ? read_then_write : read_both;
    run(each, &one_two);
    run(each, &two_one);
    if (how == 1 || how == 2)
        run(write_each, NULL);
    if (how < 2)
        return;
    expect_begin("potential-deadlock");
    expect_lock(&r1);
    expect_lock(&r2);
    expect_end();
}

/* ---- gated-and-not ---- */

static void gated_and_not(void)
{
    init_singles();
    struct pair ab = { &ma, &mb }, ba = { &mb, &ma };
    run(gated_pair, &ab);
    run(gated_pair, &ba);
    run_nest(&mb, &mc);
    run_nest(&mc, &ma);
    expect_begin("potential-deadlock");
    expect_lock(&ma);
    expect_lock(&mb);
    expect_lock(&mc);
    expect_end();
}

/* ---- object-global ---- */

struct object {
    pthread_mutex_t m;
    int value;
};

static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;

static struct object *new_object(void)
{
    struct object *o = calloc(1, sizeof *o);
    if (!o)
        exit(3);
    CHECK(pthread_mutex_init(&o->m, NULL)); /* @object-init */
    return o;
}

static void *object_then_global(void *arg)
{
    struct object *o = arg;
    CHECK(pthread_mutex_lock(&o->m));
    CHECK(pthread_mutex_lock(&global_lock));
    o->value++;
    CHECK(pthread_mutex_unlock(&global_lock));
    CHECK(pthread_mutex_unlock(&o->m));
    return NULL;
}

static void *global_then_object(void *arg)
{
    struct object *o = arg;
    CHECK(pthread_mutex_lock(&global_lock));
    CHECK(pthread_mutex_lock(&o->m));
    o->value++;
    CHECK(pthread_mutex_unlock(&o->m));
    CHECK(pthread_mutex_unlock(&global_lock));
    return NULL;
}

static void object_global(void)
{
    struct object *o[3];
    for (int i = 0; i < 3; i++)
        o[i] = new_object();
    name_lock("object0", &o[0]->m);
    name_lock("object1", &o[1]->m);
    name_lock("G", &global_lock);
    run(object_then_global, o[0]);
    run(global_then_object, o[1]);
    expect_begin("family-order-inversion");
    expect_lock(&o[0]->m);
    expect_lock(&o[1]->m);
    expect_end();
}

/* ---- tree ---- */

#define NODES 15

struct node {
    pthread_mutex_t m;
    struct node *kid[2];
};

static struct node *make_node(void)
{
    struct node *n = calloc(1, sizeof *n);
    if (!n)
        exit(3);
    CHECK(pthread_mutex_init(&n->m, NULL)); /* @node-init */
    return n;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(struct node *const *)a;
    uintptr_t y = (uintptr_t)*(struct node *const *)b;
    return x < y ? -1 : x > y;
}

/* The binary search tree over sorted[lo, hi): its root. */
static struct node *build(struct node **sorted, int lo, int hi)
{
    if (lo >= hi)
        return NULL;
    int mid = lo + (hi - lo) / 2;
    struct node *n = sorted[mid];
    n->kid[0] = build(sorted, lo, mid);
    n->kid[1] = build(sorted, mid + 1, hi);
    return n;
}

static struct node *root;

/* Hand over hand from the root down the path `bits` picks (bit d: which
 * child at depth d); every lock is taken at one line. */
static void descend(unsigned bits)
{
    struct node *held = NULL, *n = root;
    for (int depth = 0; n; depth++) {
        CHECK(pthread_mutex_lock(&n->m)); /* @tree-lock */
        if (held)
            CHECK(pthread_mutex_unlock(&held->m));
        held = n;
        n = n->kid[(bits >> depth) & 1];
    }
    CHECK(pthread_mutex_unlock(&held->m));
}

static void *walk_every_path(void *arg)
{
    (void)arg;
    for (unsigned bits = 0; bits < 8; bits++)
        descend(bits);
    return NULL;
}

static void tree(void)
{
    struct node *sorted[NODES];
    for (int i = 0; i < NODES; i++)
        sorted[i] = make_node();
    qsort(sorted, NODES, sizeof sorted[0], by_address);
    root = build(sorted, 0, NODES);
    for (int i = 0; i < NODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        name_lock(name, &sorted[i]->m);
    }
    /* One walk alone first: the trace then holds one site for the line of
     * @tree-lock (two threads first seeing a line at once may each record
     * it, and the analysis must compare lines, not those records). */
    run(walk_every_path, NULL);
    void *none[2] = { NULL, NULL };
    run_together(walk_every_path, none, 2);
    /* Parent then child at one pair of lines, left children below their
     * parents and right ones above: both address orders, no cycle. The
     * weak kind, whose message must not claim a deadlock. */
    expect_begin("family-order-inversion");
    for (int i = 0; i < NODES; i++)
        expect_lock(&sorted[i]->m);
    expect_end();
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    printf("scenario %s\n", s);
    if (strcmp(s, "global-order") == 0)
        global_order();
    else if (strcmp(s, "disjoint-pairs") == 0)
        disjoint_pairs(0);
    else if (strcmp(s, "disjoint-pairs-lines") == 0)
        disjoint_pairs(1);
    else if (strcmp(s, "cycle-2") == 0)
        cycle_family(2);
    else if (strcmp(s, "cycle-5") == 0)
        cycle_family(5);
    else if (strcmp(s, "cycle-30") == 0)
        cycle_family(30);
    else if (strcmp(s, "cycle-30-solo") == 0)
        cycle_solo();
    else if (strcmp(s, "peer-stress") == 0)
        peer_stress();
    else if (strcmp(s, "trylock-closes") == 0)
        trylock_closes();
    else if (strcmp(s, "behind-trylock") == 0)
        behind_trylock();
    else if (strcmp(s, "rwlocks-read-only") == 0)
        rwlocks(0);
    else if (strcmp(s, "rwlocks-written") == 0)
        rwlocks(1);
    else if (strcmp(s, "rwlocks-prefer-writer") == 0)
        rwlocks(2);
    else if (strcmp(s, "rwlocks-read-write") == 0)
        rwlocks(3);
    else if (strcmp(s, "gated-and-not") == 0)
        gated_and_not();
    else if (strcmp(s, "object-global") == 0)
        object_global();
    else if (strcmp(s, "gated") == 0)
        gated();
    else if (strcmp(s, "tree") == 0)
        tree();
    else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
