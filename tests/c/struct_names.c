/* Locks inside structs and arrays of globals and statics: each is named by
 * its path in the variable (`&chop[4].m`), from the program's DWARF.
 *
 * Each lock is initialised, then taken once by a worker thread and once by
 * main. For each, the program prints one line:
 *
 *   lock <address> <path> <variable's address> <variable's size> <lock's size>
 *
 * <path> is the name the report must give it with DWARF; the rest lets a
 * test work out the name without DWARF (`&chop+0x220`). Condition
 * variables print "cond" instead of "lock". The struct layouts are fixed
 * (x86-64 glibc sizes) so that the old size-computed names would be wrong:
 * `&chop[12]` for chop[4].m, `&node[1]` for node[0].b. */
#include "common.h"

#include <semaphore.h>

/* 120 bytes, the mutex at 64: not a multiple of the mutex's 40. */
struct chopstick {
    char pad[64];
    pthread_mutex_t m;
    char tail[16];
};
static struct chopstick chop[5];

/* Two mutexes a struct: node[0].b is at 40, node[1].a at 88. */
struct node {
    pthread_mutex_t a;
    pthread_mutex_t b;
    long value;
};
static struct node node[3];

/* A typedef'd struct with an array member of mutexes, through a volatile
 * variable. */
typedef struct config {
    int count;
    pthread_mutex_t locks[4];
} config_t;
static volatile config_t cfg;

/* An array of arrays. */
static pthread_mutex_t grid[3][4];

/* An rwlock, spinlocks (4 bytes) and a semaphore inside structs. */
static struct {
    long version;
    pthread_rwlock_t rw;
} table;
static struct {
    int flags;
    pthread_spinlock_t s[3];
} spins;
static struct {
    int waiting;
    sem_t sem;
} pool;

/* A condition variable beside its mutex. */
struct queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int items;
};
static struct queue q;

/* Anonymous members: their members are named without them. */
static struct {
    int kind;
    union {
        pthread_mutex_t m;
        char pad[64];
    };
    struct {
        long x;
        pthread_mutex_t inner;
    };
} anon;

/* Declared before it is defined (DW_AT_specification in the DWARF). */
extern struct node later[];
struct node later[2];

static void show(const char *what, const volatile void *lock, const char *path,
                 const volatile void *var, size_t var_size, size_t lock_size)
{
    printf("%s %p %s %p %zu %zu\n", what, (void *)lock, path, (void *)var, var_size,
           lock_size);
}

#define SHOW(lock, path, var) show("lock", lock, path, &(var), sizeof(var), sizeof(*(lock)))

static void bump(int print)
{
    /* Statics inside a function. */
    static pthread_mutex_t counted = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        int n;
        pthread_mutex_t m;
    } local = {0, PTHREAD_MUTEX_INITIALIZER};
    CHECK(pthread_mutex_lock(&counted));
    CHECK(pthread_mutex_unlock(&counted));
    CHECK(pthread_mutex_lock(&local.m));
    local.n++;
    CHECK(pthread_mutex_unlock(&local.m));
    if (print) {
        SHOW(&counted, "&bump::counted", counted);
        SHOW(&local.m, "&bump::local.m", local);
    }
}

static pthread_mutex_t *cfg_lock(int i)
{
    return (pthread_mutex_t *)&cfg.locks[i];
}

static void take_all(void)
{
    CHECK(pthread_mutex_lock(&chop[4].m));
    CHECK(pthread_mutex_unlock(&chop[4].m));
    CHECK(pthread_mutex_lock(&chop[0].m));
    CHECK(pthread_mutex_unlock(&chop[0].m));
    CHECK(pthread_mutex_lock(&node[0].b));
    CHECK(pthread_mutex_unlock(&node[0].b));
    CHECK(pthread_mutex_lock(&node[1].a));
    CHECK(pthread_mutex_unlock(&node[1].a));
    CHECK(pthread_mutex_lock(cfg_lock(2)));
    CHECK(pthread_mutex_unlock(cfg_lock(2)));
    CHECK(pthread_mutex_lock(&grid[1][2]));
    CHECK(pthread_mutex_unlock(&grid[1][2]));
    CHECK(pthread_mutex_lock(&grid[0][0]));
    CHECK(pthread_mutex_unlock(&grid[0][0]));
    CHECK(pthread_rwlock_wrlock(&table.rw));
    CHECK(pthread_rwlock_unlock(&table.rw));
    CHECK(pthread_spin_lock(&spins.s[1]));
    CHECK(pthread_spin_unlock(&spins.s[1]));
    CHECK(sem_wait(&pool.sem));
    CHECK(sem_post(&pool.sem));
    CHECK(pthread_mutex_lock(&q.lock));
    q.items++;
    CHECK(pthread_cond_signal(&q.cond));
    CHECK(pthread_mutex_unlock(&q.lock));
    CHECK(pthread_mutex_lock(&anon.m));
    CHECK(pthread_mutex_unlock(&anon.m));
    CHECK(pthread_mutex_lock(&anon.inner));
    CHECK(pthread_mutex_unlock(&anon.inner));
    CHECK(pthread_mutex_lock(&later[1].b));
    CHECK(pthread_mutex_unlock(&later[1].b));
    bump(0);
}

static void *worker(void *arg)
{
    (void)arg;
    take_all();
    return NULL;
}

int main(void)
{
    for (int i = 0; i < 5; i++)
        CHECK(pthread_mutex_init(&chop[i].m, NULL));
    for (int i = 0; i < 3; i++) {
        CHECK(pthread_mutex_init(&node[i].a, NULL));
        CHECK(pthread_mutex_init(&node[i].b, NULL));
    }
    for (int i = 0; i < 4; i++)
        CHECK(pthread_mutex_init(cfg_lock(i), NULL));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            CHECK(pthread_mutex_init(&grid[i][j], NULL));
    CHECK(pthread_rwlock_init(&table.rw, NULL));
    for (int i = 0; i < 3; i++)
        CHECK(pthread_spin_init(&spins.s[i], PTHREAD_PROCESS_PRIVATE));
    CHECK(sem_init(&pool.sem, 0, 1));
    CHECK(pthread_mutex_init(&q.lock, NULL));
    CHECK(pthread_cond_init(&q.cond, NULL));
    CHECK(pthread_mutex_init(&anon.m, NULL));
    CHECK(pthread_mutex_init(&anon.inner, NULL));
    CHECK(pthread_mutex_init(&later[1].b, NULL));

    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL));
    CHECK(pthread_join(t, NULL));
    take_all();

    SHOW(&chop[4].m, "&chop[4].m", chop);
    SHOW(&chop[0].m, "&chop[0].m", chop);
    SHOW(&node[0].b, "&node[0].b", node);
    SHOW(&node[1].a, "&node[1].a", node);
    SHOW(cfg_lock(2), "&cfg.locks[2]", cfg);
    SHOW(&grid[1][2], "&grid[1][2]", grid);
    SHOW(&grid[0][0], "&grid[0][0]", grid);
    SHOW(&table.rw, "&table.rw", table);
    SHOW(&spins.s[1], "&spins.s[1]", spins);
    SHOW(&pool.sem, "&pool.sem", pool);
    SHOW(&q.lock, "&q.lock", q);
    show("cond", &q.cond, "&q.cond", &q, sizeof q, sizeof q.cond);
    SHOW(&anon.m, "&anon.m", anon);
    SHOW(&anon.inner, "&anon.inner", anon);
    SHOW(&later[1].b, "&later[1].b", later);
    bump(1);
    return 0;
}
