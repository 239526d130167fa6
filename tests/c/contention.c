/* Ground truth for contention counting.
 *
 * Two threads, one mutex L, ROUNDS rounds. In each round:
 *   A: locks L, raises a_locked, waits until B has announced it is about to
 *      lock L *and* the kernel shows B asleep (so B is blocked on L), then
 *      sleeps HOLD_MS more, then unlocks L and waits for B to finish the round.
 *   B: waits for a_locked, announces, locks L (must wait for A), unlocks L,
 *      raises b_done.
 * So B's lock is contended every round and A's never is: contended == ROUNDS,
 * acquisitions == 2 * ROUNDS, and B waits at least HOLD_MS per round.
 * All hand-shakes use C11 atomics; nothing but the two marked lines touches L.
 *
 * Output: "lock <addr>", "rounds <n>", "hold-ms <n>". */
#include "common.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROUNDS 10
#define HOLD_MS 20

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;

static atomic_int a_locked;   /* round number A holds L for */
static atomic_int b_trying;   /* round number B is about to lock L for */
static atomic_int b_done;     /* last round B completed */
static atomic_int b_tid;

/* Scheduler state letter of thread tid ('R', 'S', 'D', ...), or '?'.
 * Uses raw open/read so no stdio lock is involved. */
static char thread_state(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return (p && p[1] == ' ') ? p[2] : '?';
}

void thread_a_round(int round)
{
    CHECK(pthread_mutex_lock(&L)); /* @a-lock */
    atomic_store(&a_locked, round);
    while (atomic_load(&b_trying) != round)
        sched_yield();
    /* B is now between its announcement and the futex wait inside
     * pthread_mutex_lock; wait until it is actually asleep there. */
    long long give_up = now_ns() + 2000000000LL;
    while (thread_state(atomic_load(&b_tid)) != 'S' && now_ns() < give_up)
        sleep_ms(1);
    sleep_ms(HOLD_MS);
    CHECK(pthread_mutex_unlock(&L));
    while (atomic_load(&b_done) != round)
        sched_yield();
}

void thread_b_round(int round)
{
    while (atomic_load(&a_locked) != round)
        sched_yield();
    atomic_store(&b_trying, round);
    CHECK(pthread_mutex_lock(&L)); /* @b-lock */
    CHECK(pthread_mutex_unlock(&L));
    atomic_store(&b_done, round);
}

static void *thread_a(void *arg)
{
    (void)arg;
    for (int r = 1; r <= ROUNDS; r++)
        thread_a_round(r);
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    atomic_store(&b_tid, (int)syscall(SYS_gettid));
    for (int r = 1; r <= ROUNDS; r++)
        thread_b_round(r);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    printf("lock %p\n", (void *)&L);
    printf("rounds %d\n", ROUNDS);
    printf("hold-ms %d\n", HOLD_MS);
    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    while (atomic_load(&b_tid) == 0)
        sched_yield();
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    CHECK(pthread_join(a, NULL));
    CHECK(pthread_join(b, NULL));
    return 0;
}
