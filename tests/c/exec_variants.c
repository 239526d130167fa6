/* Every way into a new program image.
 *
 *   exec_variants VARIANT   locks a mutex 10 times, then runs `true`
 *                           through VARIANT: execl, execlp, execle, execv,
 *                           execve, execvp, execvpe, fexecve, execveat
 *                           (the image is replaced), execl-300 (execl
 *                           with 300 arguments), or posix_spawn,
 *                           posix_spawnp, system, popen (a child runs it;
 *                           this process then exits 0).
 *
 * Output: "pid <pid>" before the exec; for the spawning variants also
 * "<variant> <status>" with the child's exit status. A failed exec prints
 * "failed <errno>" and exits 1. */
#include "common.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

#define X10 "x", "x", "x", "x", "x", "x", "x", "x", "x", "x"
#define X100 X10, X10, X10, X10, X10, X10, X10, X10, X10, X10

static int find_true(char *out, size_t len)
{
    const char *candidates[] = {"/bin/true", "/usr/bin/true"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        if (access(candidates[i], X_OK) == 0) {
            snprintf(out, len, "%s", candidates[i]);
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    const char *v = argc > 1 ? argv[1] : "";
    char path[64];
    if (find_true(path, sizeof path) != 0)
        return 2;
    for (int i = 0; i < 10; i++) {
        CHECK(pthread_mutex_lock(&m));
        CHECK(pthread_mutex_unlock(&m));
    }
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    char *args[] = {"true", NULL};

    if (strcmp(v, "execl") == 0)
        execl(path, "true", (char *)NULL);
    else if (strcmp(v, "execl-300") == 0)
        execl(path, "true", X100, X100, X100, (char *)NULL);
    else if (strcmp(v, "execlp") == 0)
        execlp("true", "true", (char *)NULL);
    else if (strcmp(v, "execle") == 0)
        execle(path, "true", (char *)NULL, environ);
    else if (strcmp(v, "execv") == 0)
        execv(path, args);
    else if (strcmp(v, "execve") == 0)
        execve(path, args, environ);
    else if (strcmp(v, "execvp") == 0)
        execvp("true", args);
    else if (strcmp(v, "execvpe") == 0)
        execvpe("true", args, environ);
    else if (strcmp(v, "fexecve") == 0) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        fexecve(fd, args, environ);
    } else if (strcmp(v, "execveat") == 0)
        execveat(AT_FDCWD, path, args, environ, 0);
    else if (strcmp(v, "posix_spawn") == 0 || strcmp(v, "posix_spawnp") == 0) {
        pid_t child;
        int rc = strcmp(v, "posix_spawn") == 0
                     ? posix_spawn(&child, path, NULL, NULL, args, environ)
                     : posix_spawnp(&child, "true", NULL, NULL, args, environ);
        int status = -1;
        if (rc == 0)
            waitpid(child, &status, 0);
        printf("%s %d\n", v, status);
        return 0;
    } else if (strcmp(v, "system") == 0) {
        printf("system %d\n", system("true"));
        return 0;
    } else if (strcmp(v, "popen") == 0) {
        FILE *f = popen("true", "r");
        printf("popen %d\n", f ? pclose(f) : -1);
        return 0;
    } else {
        fprintf(stderr, "unknown variant %s\n", v);
        return 2;
    }
    printf("failed %d\n", errno);
    return 1;
}
