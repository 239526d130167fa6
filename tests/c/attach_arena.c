/* A lock inside glibc: malloc's arena mutex (one arena, M_ARENA_MAX 1),
 * whose waits are futex calls glibc makes inline (no syscall() the shim
 * could see; `locksuit attach` sees them in the kernel). Once the file
 * named by argv[1] exists, a thread trims a fragmented heap (malloc_trim
 * holds the arena's lock while it returns ~20,000 ranges to the kernel)
 * while the main thread, 2 ms later, asks malloc for a block the thread
 * cache cannot give, and waits. Prints the main thread's time in that
 * malloc call and how long the trim went on after that call began. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNKS 40000
#define CHUNK 20000

static void *chunks[CHUNKS];
static volatile int trimming;
static volatile uint64_t trim_end;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *trimmer(void *arg) {
    (void)arg;
    trimming = 1;
    malloc_trim(0); /* attach-trim */
    trim_end = now_ns();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    mallopt(M_ARENA_MAX, 1);
    for (int i = 0; i < CHUNKS; i++) {
        chunks[i] = malloc(CHUNK);
        memset(chunks[i], 1, CHUNK);
    }
    for (int i = 0; i < CHUNKS; i += 2)
        free(chunks[i]);
    while (access(argv[1], F_OK) != 0)
        usleep(1000);
    pthread_t t;
    pthread_create(&t, NULL, trimmer, NULL);
    while (!trimming)
        usleep(10);
    usleep(2000);
    uint64_t t0 = now_ns();
    void *p = malloc(4096); /* attach-malloc */
    uint64_t waited = now_ns() - t0;
    pthread_join(t, NULL);
    printf("malloc-waited-ns %llu\n", (unsigned long long)waited);
    /* 0: the trim was over before malloc began (a very busy machine). */
    printf("held-after-ns %llu\n", (unsigned long long)(trim_end > t0 ? trim_end - t0 : 0));
    free(p);
    return 0;
}
