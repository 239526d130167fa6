/* Ground truth for exec after threads have run.
 *
 *   exec_after_threads self    3 threads each lock `shared` N (100) times and
 *                              are joined; the program prints its pid and
 *                              execv()s itself with the argument "after".
 *   exec_after_threads true    the same, but execv()s /bin/true.
 *   exec_after_threads after   (the exec'd image) locks `after_lock` AFTER_USES
 *                              (17) times from the main thread and exits 0.
 *
 * Output before exec (flushed): "pid <pid>", "shared <addr>".
 * Output of the exec'd image: "after-pid <pid>", "after_lock <addr>". */
#include "common.h"

#include <unistd.h>

#define THREADS 3
#define N 100
#define AFTER_USES 17

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t after_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        CHECK(pthread_mutex_lock(&shared)); /* @worker-lock */
        CHECK(pthread_mutex_unlock(&shared));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";

    if (strcmp(mode, "after") == 0) {
        for (int i = 0; i < AFTER_USES; i++) {
            CHECK(pthread_mutex_lock(&after_lock)); /* @after-lock */
            CHECK(pthread_mutex_unlock(&after_lock));
        }
        printf("after-pid %d\n", (int)getpid());
        printf("after_lock %p\n", (void *)&after_lock);
        return 0;
    }
    if (strcmp(mode, "self") != 0 && strcmp(mode, "true") != 0) {
        fprintf(stderr, "usage: %s self|true|after\n", argv[0]);
        return 2;
    }

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, worker, NULL));
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(th[i], NULL));

    printf("pid %d\n", (int)getpid());
    printf("shared %p\n", (void *)&shared);
    fflush(stdout);

    if (strcmp(mode, "self") == 0) {
        char *const args[] = { argv[0], "after", NULL };
        execv(argv[0], args);
    } else {
        char *const args[] = { "true", NULL };
        execv("/bin/true", args);
    }
    perror("execv");
    return 1;
}
