/* Programs that close descriptors they did not open, as daemons do. The
 * shim's own trace descriptor must never be one of them.
 *
 *   closed_fds daemon FILE   closes 3..1023, opens FILE, writes 20 bytes,
 *                            then makes and uses 2,000 locks (the trace
 *                            grows) and writes 20 more bytes.
 *   closed_fds stdout        started with stdout closed (`>&-`): uses locks,
 *                            then writes to descriptor 1, which must fail
 *                            with EBADF (reported on stderr).
 *   closed_fds stdin         started with stdin closed (`<&-`): uses locks,
 *                            then reads descriptor 0: EBADF.
 *   closed_fds stderr FILE   closes stderr and opens FILE (it gets 2), then
 *                            makes and uses 20,000 locks; under a small
 *                            LOCKSUIT_MAX_MB the shim would like to warn
 *                            that its trace is full, but 2 is no longer the
 *                            stderr the process started with, so FILE must
 *                            hold only the program's own line.
 *
 * Output (stdout, except in "stdout" mode): "<mode> <what> <value>". */
#include "common.h"

#include <fcntl.h>
#include <unistd.h>

#define MANY 20000

static pthread_mutex_t locks[MANY];

static void use_locks(int n)
{
    for (int i = 0; i < n; i++) {
        CHECK(pthread_mutex_init(&locks[i], NULL));
        CHECK(pthread_mutex_lock(&locks[i]));
        CHECK(pthread_mutex_unlock(&locks[i]));
    }
}

static const char *errno_name(int e)
{
    return e == EBADF ? "EBADF" : e == 0 ? "none" : strerror(e);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "daemon") == 0 && argc > 2) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            return 1;
        printf("daemon fd %d\n", fd);
        printf("daemon write %zd\n", write(fd, "twenty bytes of data", 20));
        use_locks(2000);
        printf("daemon write-again %zd\n", write(fd, "and twenty bytes more", 20));
        printf("daemon close %d\n", close(fd));
        return 0;
    }
    if (strcmp(mode, "stdout") == 0) {
        use_locks(2000);
        errno = 0;
        ssize_t n = write(1, "lost\n", 5);
        fprintf(stderr, "stdout write %zd errno %s\n", n, errno_name(errno));
        return 0;
    }
    if (strcmp(mode, "stdin") == 0) {
        use_locks(2000);
        char c;
        errno = 0;
        ssize_t n = read(0, &c, 1);
        printf("stdin read %zd errno %s\n", n, errno_name(errno));
        return 0;
    }
    if (strcmp(mode, "stderr") == 0 && argc > 2) {
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        printf("stderr fd %d\n", fd);
        use_locks(MANY);
        if (write(fd, "the program's own line\n", 23) != 23)
            return 1;
        return 0;
    }
    fprintf(stderr, "usage: %s daemon FILE|stdout|stdin|stderr FILE\n", argv[0]);
    return 2;
}
