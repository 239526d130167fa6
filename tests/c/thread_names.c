/* Ground truth for thread names.
 *
 *   thread_names          main names itself "main-renamed"
 *                         (pthread_setname_np on itself); thread A is named
 *                         "by-main" by main while A runs; thread B names
 *                         itself "self-named"; A and B are joined. Thread C
 *                         names itself "prctl-named" with prctl(PR_SET_NAME)
 *                         and is still alive (sleeping) when main returns.
 *   thread_names ended    thread D names itself "prctl-ended" with prctl and
 *                         ends; main joins it and returns.
 *   thread_names reuse    main names thread E "early-named" before E has
 *                         called anything the shim hooks (E and F are made
 *                         by libc's own pthread_create, which the shim does
 *                         not see); E locks and ends. Thread F (reusing E's
 *                         pthread_t and stack) locks and waits; the process
 *                         kills itself, so nothing reads F's name at exit:
 *                         F must not be given E's name.
 *
 * Every thread locks `lock` once. Output: "main-tid <tid>", "a-tid <tid>",
 * "b-tid <tid>", "c-tid <tid>" (or "d-tid <tid>"), and each thread's name as
 * read back with pthread_getname_np: "<x>-name <name>". */
#include "common.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long a_tid, b_tid, c_tid, d_tid;
static atomic_int a_named, c_named, e_named, f_locked;
static atomic_long e_tid, f_tid;
static char a_name[16], b_name[16], c_name[16], d_name[16];

static long my_tid(void)
{
    return (long)syscall(SYS_gettid);
}

static void use_lock(void)
{
    CHECK(pthread_mutex_lock(&lock));
    CHECK(pthread_mutex_unlock(&lock));
}

static void *thread_a(void *arg)
{
    (void)arg;
    use_lock();
    atomic_store(&a_tid, my_tid());
    while (!atomic_load(&a_named)) /* runs until main has renamed it */
        sleep_ms(1);
    CHECK(pthread_getname_np(pthread_self(), a_name, sizeof a_name));
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    CHECK(pthread_setname_np(pthread_self(), "self-named"));
    use_lock();
    atomic_store(&b_tid, my_tid());
    CHECK(pthread_getname_np(pthread_self(), b_name, sizeof b_name));
    return NULL;
}

static void *thread_c(void *arg)
{
    (void)arg;
    if (prctl(PR_SET_NAME, "prctl-named", 0, 0, 0) != 0) {
        perror("prctl");
        exit(1);
    }
    use_lock();
    CHECK(pthread_getname_np(pthread_self(), c_name, sizeof c_name));
    atomic_store(&c_tid, my_tid());
    atomic_store(&c_named, 1);
    for (;;) /* still alive when the process exits */
        sleep_ms(1000);
    return NULL;
}

static void *thread_d(void *arg)
{
    (void)arg;
    if (prctl(PR_SET_NAME, "prctl-ended", 0, 0, 0) != 0) {
        perror("prctl");
        exit(1);
    }
    use_lock();
    CHECK(pthread_getname_np(pthread_self(), d_name, sizeof d_name));
    atomic_store(&d_tid, my_tid());
    return NULL;
}

static void *thread_e(void *arg)
{
    (void)arg;
    while (!atomic_load(&e_named)) /* no hooked call until named */
        ;
    use_lock();
    atomic_store(&e_tid, my_tid());
    return NULL;
}

static void *thread_f(void *arg)
{
    (void)arg;
    use_lock();
    atomic_store(&f_tid, my_tid());
    atomic_store(&f_locked, 1);
    for (;;)
        sleep_ms(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    char main_name[16];
    printf("main-tid %ld\n", my_tid());

    if (argc == 2 && strcmp(argv[1], "ended") == 0) {
        pthread_t d;
        CHECK(pthread_create(&d, NULL, thread_d, NULL));
        CHECK(pthread_join(d, NULL));
        printf("d-tid %ld\n", atomic_load(&d_tid));
        printf("d-name %s\n", d_name);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "reuse") == 0) {
        pthread_t e, f;
        void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
        int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *) =
            libc ? (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(libc, "pthread_create") : NULL;
        if (!create)
            return 3;
        CHECK(create(&e, NULL, thread_e, NULL));
        CHECK(pthread_setname_np(e, "early-named"));
        atomic_store(&e_named, 1);
        CHECK(pthread_join(e, NULL));
        CHECK(create(&f, NULL, thread_f, NULL));
        while (!atomic_load(&f_locked))
            sleep_ms(1);
        printf("e-tid %ld\n", atomic_load(&e_tid));
        printf("f-tid %ld\n", atomic_load(&f_tid));
        printf("same-pthread %d\n", pthread_equal(e, f) ? 1 : 0);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [ended]\n", argv[0]);
        return 2;
    }

    CHECK(pthread_setname_np(pthread_self(), "main-renamed"));
    use_lock();

    pthread_t a, b, c;
    CHECK(pthread_create(&a, NULL, thread_a, NULL));
    while (!atomic_load(&a_tid))
        sleep_ms(1);
    CHECK(pthread_setname_np(a, "by-main")); /* A is running */
    atomic_store(&a_named, 1);
    CHECK(pthread_join(a, NULL));

    CHECK(pthread_create(&b, NULL, thread_b, NULL));
    CHECK(pthread_join(b, NULL));

    CHECK(pthread_create(&c, NULL, thread_c, NULL));
    while (!atomic_load(&c_named))
        sleep_ms(1);

    CHECK(pthread_getname_np(pthread_self(), main_name, sizeof main_name));
    printf("main-name %s\n", main_name);
    printf("a-tid %ld\n", atomic_load(&a_tid));
    printf("a-name %s\n", a_name);
    printf("b-tid %ld\n", atomic_load(&b_tid));
    printf("b-name %s\n", b_name);
    printf("c-tid %ld\n", atomic_load(&c_tid));
    printf("c-name %s\n", c_name);
    return 0; /* C is still alive */
}
