/* Shared library for early_constructor.c (built with -shared -fPIC and
 * linked into the program, so it is a DT_NEEDED library).
 *
 * Its constructor runs before the constructor of an LD_PRELOADed library
 * (the dynamic loader initialises DT_NEEDED libraries that the preloaded one
 * does not depend on first), so the K1 lock/unlock pairs below happen before
 * the shim's own constructor has run: the shim must initialise itself on
 * this first hooked call and record them. */
#include "common.h"

#define K1 25

static pthread_mutex_t early_mutex = PTHREAD_MUTEX_INITIALIZER;
static int ctor_uses;
static int errno_kept;

__attribute__((constructor)) static void early_ctor(void)
{
    /* 100 calls that never block, before the shim started: they must not
     * decide how it times calls (the kernel is checked when it starts). */
    calm_pipe_calls(100);
    /* The first hooked call initialises the shim (it creates the trace,
     * and its mkdir of an existing LOCKSUIT_DIR fails with EEXIST): errno
     * must still be what the program set. */
    for (int i = 0; i < K1; i++) {
        if (i == 0)
            errno = 4242;
        CHECK(pthread_mutex_lock(&early_mutex)); /* @ctor-lock */
        if (i == 0)
            errno_kept = errno == 4242;
        ctor_uses++;
        CHECK(pthread_mutex_unlock(&early_mutex));
    }
}

pthread_mutex_t *early_lock(void)
{
    return &early_mutex;
}

int early_ctor_uses(void)
{
    return ctor_uses;
}

int early_errno_kept(void)
{
    return errno_kept;
}
