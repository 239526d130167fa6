/* Ground truth for starting a child program with posix_spawn or with
 * vfork() + execv().
 *
 *   spawn_parent spawn CHILD   posix_spawn(CHILD spawned SPAWN_USES)
 *   spawn_parent vfork CHILD   vfork(); the child execv()s
 *                              CHILD vforked VFORK_USES at once
 *
 * The parent locks parent_lock BEFORE times, starts the child, waits for it,
 * then locks parent_lock AFTER times and exits 0. The child program
 * (spawn_child) locks its own child_lock and prints its pid.
 *
 * Output (parent): "pid <pid>", "parent_lock <addr>", "child <pid>",
 * "parent-uses <n>". */
#include "common.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define BEFORE 120
#define AFTER 80
#define SPAWN_USES "45"
#define VFORK_USES "65"

extern char **environ;

static pthread_mutex_t parent_lock = PTHREAD_MUTEX_INITIALIZER;
static int uses;

static void parent_work(int n)
{
    for (int i = 0; i < n; i++) {
        CHECK(pthread_mutex_lock(&parent_lock)); /* @parent-lock */
        uses++;
        CHECK(pthread_mutex_unlock(&parent_lock));
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: spawn_parent spawn|vfork CHILD\n");
        return 2;
    }
    const char *mode = argv[1];
    const char *child = argv[2];
    printf("pid %d\n", (int)getpid());
    printf("parent_lock %p\n", (void *)&parent_lock);
    fflush(stdout);

    parent_work(BEFORE);

    pid_t pid;
    if (strcmp(mode, "spawn") == 0) {
        char *cargv[] = { "spawn_child", "spawned", SPAWN_USES, NULL };
        int rc = posix_spawn(&pid, child, NULL, NULL, cargv, environ);
        if (rc != 0) {
            fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
            return 1;
        }
    } else if (strcmp(mode, "vfork") == 0) {
        char *cargv[] = { "spawn_child", "vforked", VFORK_USES, NULL };
        pid = vfork();
        if (pid < 0) {
            perror("vfork");
            return 1;
        }
        if (pid == 0) {
            execv(child, cargv);
            _exit(127);
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("child %d\n", (int)pid);
    fflush(stdout);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        perror("waitpid");
        return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed: status 0x%x\n", status);
        return 1;
    }

    parent_work(AFTER);
    printf("parent-uses %d\n", uses);
    fflush(stdout);
    return 0;
}
