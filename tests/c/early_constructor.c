/* Ground truth for locks taken before the shim's constructor runs.
 *
 * libearly_ctor_lib.so's constructor locks/unlocks its static
 * PTHREAD_MUTEX_INITIALIZER mutex K1 (25) times before main, and before the
 * preloaded shim's constructor. main then locks the same mutex K2 (40) more
 * times, so it was acquired exactly K1 + K2 times, all by the main thread.
 *
 * Output: "lock <addr>", "ctor-uses <n>" (what the constructor did),
 * "main-uses <n>". */
#include "common.h"

#define K2 40

pthread_mutex_t *early_lock(void);
int early_ctor_uses(void);
int early_errno_kept(void);

int main(void)
{
    pthread_mutex_t *m = early_lock();
    int uses = 0;
    for (int i = 0; i < K2; i++) {
        CHECK(pthread_mutex_lock(m)); /* @main-lock */
        uses++;
        CHECK(pthread_mutex_unlock(m));
    }
    printf("lock %p\n", (void *)m);
    printf("ctor-uses %d\n", early_ctor_uses());
    printf("main-uses %d\n", uses);
    printf("ctor-errno-kept %d\n", early_errno_kept());
    return 0;
}
