/* A vfork child whose exec fails and that calls _exit(42) shares the
 * parent's memory: the shim must leave the parent's trace alone. The parent
 * takes a lock and returns 0 from main. */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(void)
{
    CHECK(pthread_mutex_lock(&m));
    CHECK(pthread_mutex_unlock(&m));
    pid_t child = vfork();
    if (child == 0) {
        execl("/nonexistent/program", "program", (char *)NULL);
        _exit(42);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", WEXITSTATUS(status));
    return 0;
}
