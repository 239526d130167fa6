/* Evidence for "one thread alone took this lock", as real programs give it.
 *
 * Four workers, in one heap block, each count work under their own stats
 * lock (made at one line, like memcached's per-worker stats mutexes: one
 * family, named by that line), and under a lock that
 * guards only their own counter (`tally`, a per-worker lock no mode
 * shares). A lock shared by all (`total_lock`) guards the sum.
 *
 *   evidence quiet     nothing else: each stats lock is taken by its
 *                      worker alone in this run.
 *   evidence stats     main also reads every worker's stats under its lock
 *                      while they run (memcached's `stats` command): the
 *                      same locks, taken by two threads.
 *   evidence fork      quiet, then a fork child takes total_lock (which
 *                      four threads shared in the parent) 2000 times alone.
 *   evidence forks     main takes a lock of its own (`own_lock`) 2000
 *                      times, then three fork children each take their
 *                      copy 2000 times: four processes, one run.
 *
 * Output: "mode <mode>", "total <n>". */
#include "common.h"
#include <sys/wait.h>

#define WORKERS 4
#define ROUNDS 3000

struct worker {
    pthread_t thread;
    pthread_mutex_t stats_lock;
    long stats;
    pthread_mutex_t tally_lock;
    long tally;
};

static struct worker *workers;
static pthread_mutex_t total_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static long own;

static void take_own(void)
{
    for (int i = 0; i < 2000; i++) {
        CHECK(pthread_mutex_lock(&own_lock)); /* @own */
        own++;
        CHECK(pthread_mutex_unlock(&own_lock));
    }
}
static long total;
static volatile int running;

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        CHECK(pthread_mutex_lock(&w->stats_lock)); /* @stats-own */
        w->stats++;
        CHECK(pthread_mutex_unlock(&w->stats_lock));
        CHECK(pthread_mutex_lock(&w->tally_lock)); /* @tally */
        w->tally++;
        CHECK(pthread_mutex_unlock(&w->tally_lock));
        CHECK(pthread_mutex_lock(&total_lock));
        total++;
        CHECK(pthread_mutex_unlock(&total_lock));
    }
    return NULL;
}

/* What a `stats` command does: every worker's figure, under its lock. */
static long read_stats(void)
{
    long sum = 0;
    for (int i = 0; i < WORKERS; i++) {
        CHECK(pthread_mutex_lock(&workers[i].stats_lock)); /* @stats-read */
        sum += workers[i].stats;
        CHECK(pthread_mutex_unlock(&workers[i].stats_lock));
    }
    return sum;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "quiet";
    printf("mode %s\n", mode);
    workers = calloc(WORKERS, sizeof *workers);
    if (!workers)
        return 3;
    if (strcmp(mode, "forks") == 0) {
        take_own();
        fflush(stdout);
        for (int i = 0; i < 3; i++) {
            pid_t child = fork();
            if (child < 0)
                return 3;
            if (child == 0) {
                take_own();
                _exit(0);
            }
            int status;
            if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
                return 3;
        }
        return own == 2000 ? 0 : 1;
    }
    for (int i = 0; i < WORKERS; i++) {
        CHECK(pthread_mutex_init(&workers[i].stats_lock, NULL)); /* @stats-init */
        CHECK(pthread_mutex_init(&workers[i].tally_lock, NULL)); /* @tally-init */
    }
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&workers[i].thread, NULL, work, &workers[i]));
    if (strcmp(mode, "stats") == 0) {
        /* Three stats commands while the workers run, then one more after:
         * however the threads were scheduled, main takes every stats lock. */
        for (int i = 0; i < 3; i++)
            (void)read_stats();
    }
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_join(workers[i].thread, NULL));
    if (strcmp(mode, "stats") == 0 && read_stats() != (long)WORKERS * ROUNDS)
        return 1;
    if (strcmp(mode, "fork") == 0) {
        fflush(stdout);
        pid_t child = fork();
        if (child < 0)
            return 3;
        if (child == 0) {
            for (int i = 0; i < 2000; i++) {
                CHECK(pthread_mutex_lock(&total_lock)); /* @child-total */
                total++;
                CHECK(pthread_mutex_unlock(&total_lock));
            }
            _exit(0);
        }
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 3;
    }
    printf("total %ld\n", total);
    return total == (long)WORKERS * ROUNDS ? 0 : 1;
}
