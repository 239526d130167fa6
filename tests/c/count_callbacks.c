/* Preloaded into a program built with `locksuit cc` and run without the
 * shim: the load and store callbacks, counting their calls, and at exit
 * "callbacks N" on stderr. Behind the access gate (whose words
 * liblocksuit_cov.so keeps equal) the program should make none. */
#include <stdatomic.h>
#include <stdio.h>

static atomic_long calls;

#define CALLBACK(name) \
    void name(void *address) { (void)address; atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed); }
CALLBACK(__sanitizer_cov_load1)
CALLBACK(__sanitizer_cov_load2)
CALLBACK(__sanitizer_cov_load4)
CALLBACK(__sanitizer_cov_load8)
CALLBACK(__sanitizer_cov_load16)
CALLBACK(__sanitizer_cov_store1)
CALLBACK(__sanitizer_cov_store2)
CALLBACK(__sanitizer_cov_store4)
CALLBACK(__sanitizer_cov_store8)
CALLBACK(__sanitizer_cov_store16)

__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "callbacks %ld\n", atomic_load(&calls));
}
