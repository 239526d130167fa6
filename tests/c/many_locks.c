/* Ground truth for a program whose trace outgrows its limits.
 *
 *   many_locks COUNT   locks marker MARK_BEFORE times; then initialises
 *                      COUNT heap mutexes (never freed, so every address is
 *                      distinct) and locks and unlocks each once; then
 *                      locks marker MARK_AFTER more times (same line, same
 *                      thread as before). Exits 0.
 *
 * Output: "pid <pid>", "marker <addr>", "created <COUNT>",
 * "marker-uses <MARK_BEFORE+MARK_AFTER>". */
#include "common.h"

#include <unistd.h>

#define MARK_BEFORE 70
#define MARK_AFTER 30

static pthread_mutex_t marker = PTHREAD_MUTEX_INITIALIZER;
static int marker_uses;

static void use_marker(int n)
{
    for (int i = 0; i < n; i++) {
        CHECK(pthread_mutex_lock(&marker)); /* @marker-lock */
        marker_uses++;
        CHECK(pthread_mutex_unlock(&marker));
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: many_locks COUNT\n");
        return 2;
    }
    int count = atoi(argv[1]);
    printf("pid %d\n", (int)getpid());
    printf("marker %p\n", (void *)&marker);
    fflush(stdout);
    pthread_mutex_t *locks = calloc((size_t)count, sizeof *locks);
    if (!locks && count > 0) {
        perror("calloc");
        return 1;
    }
    /* Both marker batches take the same call path (this one line), so the
     * second batch counts into the record the first one made: a record is
     * per lock and call path, and a new call path would need a new record,
     * which a full trace cannot take. */
    for (int phase = 0; phase < 2; phase++) {
        use_marker(phase == 0 ? MARK_BEFORE : MARK_AFTER);
        if (phase == 1)
            break;
        for (int i = 0; i < count; i++) {
            CHECK(pthread_mutex_init(&locks[i], NULL)); /* @many-init */
            CHECK(pthread_mutex_lock(&locks[i])); /* @many-lock */
            CHECK(pthread_mutex_unlock(&locks[i]));
        }
    }
    printf("created %d\n", count);
    printf("marker-uses %d\n", marker_uses);
    fflush(stdout);
    return 0;
}
