/* A child program for the spawn, vfork+exec and symlink tests.
 *
 *   spawn_child TAG N   locks child_lock N times, then exits 0.
 *
 * Output: "TAG-pid <pid>", "TAG-lock <addr>", "TAG-uses <n>" (flushed). */
#include "common.h"

#include <unistd.h>

static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: spawn_child TAG N\n");
        return 2;
    }
    const char *tag = argv[1];
    int n = atoi(argv[2]);
    int uses = 0;
    for (int i = 0; i < n; i++) {
        CHECK(pthread_mutex_lock(&child_lock)); /* @child-lock */
        uses++;
        CHECK(pthread_mutex_unlock(&child_lock));
    }
    printf("%s-pid %d\n", tag, (int)getpid());
    printf("%s-lock %p\n", tag, (void *)&child_lock);
    printf("%s-uses %d\n", tag, uses);
    fflush(stdout);
    return 0;
}
