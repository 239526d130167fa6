/* Ground truth for fork: one trace per process, each with only its own locks.
 *
 * The parent takes lock A PARENT_USES times, then forks. The child takes
 * lock B CHILD_USES times and exits 0. The parent waits for the child and
 * exits 0. Neither process touches the other's lock.
 *
 * Output: "parent <pid>", "A <addr>", "B <addr>" (before the fork, flushed),
 * then from the parent "child <pid>". */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

#define PARENT_USES 300
#define CHILD_USES 200

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;

void parent_work(void)
{
    for (int i = 0; i < PARENT_USES; i++) {
        CHECK(pthread_mutex_lock(&lock_a)); /* @parent-lock */
        CHECK(pthread_mutex_unlock(&lock_a));
    }
}

void child_work(void)
{
    for (int i = 0; i < CHILD_USES; i++) {
        CHECK(pthread_mutex_lock(&lock_b)); /* @child-lock */
        CHECK(pthread_mutex_unlock(&lock_b));
    }
}

int main(void)
{
    printf("parent %d\n", (int)getpid());
    printf("A %p\n", (void *)&lock_a);
    printf("B %p\n", (void *)&lock_b);
    fflush(stdout);

    parent_work();

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        child_work();
        exit(0);
    }
    printf("child %d\n", (int)pid);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed: status 0x%x\n", status);
        return 1;
    }
    return 0;
}
