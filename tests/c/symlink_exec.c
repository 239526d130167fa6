/* Ground truth for a symlink planted where the next image's trace will go.
 *
 *   symlink_exec DIR VICTIM PROG NAME
 *     locks first_lock FIRST_USES times, creates the symlink
 *     DIR/locksuit.NAME.<pid>.trace -> VICTIM, then execv()s PROG (whose
 *     executable's base name is NAME) as "PROG second SECOND_USES": the new
 *     image has the same pid, so the trace name it wants is taken by the
 *     symlink.
 *
 * Output: "pid <pid>", "first_lock <addr>", "link <path>"; then the output
 * of PROG (spawn_child: "second-pid", "second-lock", "second-uses"). */
#include "common.h"

#include <unistd.h>

#define FIRST_USES 12
#define SECOND_USES "33"

static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: symlink_exec DIR VICTIM PROG NAME\n");
        return 2;
    }
    for (int i = 0; i < FIRST_USES; i++) {
        CHECK(pthread_mutex_lock(&first_lock)); /* @first-lock */
        CHECK(pthread_mutex_unlock(&first_lock));
    }
    char link[4096];
    snprintf(link, sizeof link, "%s/locksuit.%s.%d.trace", argv[1], argv[4], (int)getpid());
    if (symlink(argv[2], link) != 0) {
        perror("symlink");
        return 1;
    }
    printf("pid %d\n", (int)getpid());
    printf("first_lock %p\n", (void *)&first_lock);
    printf("link %s\n", link);
    fflush(stdout);
    char *args[] = { argv[3], "second", SECOND_USES, NULL };
    execv(argv[3], args);
    perror("execv");
    return 1;
}
