/* A fluid-simulation-like kernel with fine-grained locks, for the
 * analyzer at scale (the shape of PARSEC's fluidanimate):
 *
 *   fluid_cells ROWS COLS STEPS THREADS
 *
 * A grid of ROWS x COLS cells, each with its own mutex (initialised on one
 * line, @cell-init). THREADS threads own a band of rows each and, STEPS
 * times, sweep their band twice: the density pass locks each cell
 * (@density-own); the forces pass locks each cell (@forces-own) and then
 * the cell below it (@forces-below), which for the last row of a band
 * belongs to the next thread's band. So every lock is engaged at the same
 * three lines except the grid's first row (never "below" anything: two
 * lines); most cells are engaged by one thread, a band's first row by two.
 *
 * Lock events with LOCKSUIT_EVENTS=all: 3 lock/unlock pairs, 6 events, per
 * cell per step (the last row's "below" is itself). With 720 x 480, 2
 * steps, 4 threads: 345,600 cell locks and 4,147,200 events.
 *
 * Output: "cells N", "pairs N" (lock/unlock pairs done), "shared-rows N"
 * (rows engaged by two threads), and the grid's total mass, which the
 * exchanges conserve. */
#include "common.h"

static long rows, cols, steps;
static int threads;
static pthread_mutex_t *cell_lock;
static double *mass;
static long pairs_done[64];

static void *sweep(void *arg)
{
    long band = (long)arg;
    long per = rows / threads;
    long first = band * per;
    long last = band == threads - 1 ? rows : first + per;
    long pairs = 0;
    for (long s = 0; s < steps; s++) {
        for (long r = first; r < last; r++)
            for (long c = 0; c < cols; c++) {
                long i = r * cols + c;
                CHECK(pthread_mutex_lock(&cell_lock[i])); /* @density-own */
                mass[i] *= 1.0;
                CHECK(pthread_mutex_unlock(&cell_lock[i]));
                pairs++;
            }
        for (long r = first; r < last; r++)
            for (long c = 0; c < cols; c++) {
                long i = r * cols + c;
                CHECK(pthread_mutex_lock(&cell_lock[i])); /* @forces-own */
                double give = mass[i] * 0.01;
                mass[i] -= give;
                CHECK(pthread_mutex_unlock(&cell_lock[i]));
                pairs++;
                long below = r + 1 < rows ? i + cols : i; /* the last row keeps it */
                CHECK(pthread_mutex_lock(&cell_lock[below])); /* @forces-below */
                mass[below] += give;
                CHECK(pthread_mutex_unlock(&cell_lock[below]));
                pairs++;
            }
    }
    pairs_done[band] = pairs;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: fluid_cells ROWS COLS STEPS THREADS\n");
        return 2;
    }
    rows = atol(argv[1]);
    cols = atol(argv[2]);
    steps = atol(argv[3]);
    threads = atoi(argv[4]);
    if (rows < 1 || cols < 1 || steps < 0 || threads < 1 || threads > 64 || rows < threads) {
        fprintf(stderr, "fluid_cells: bad arguments\n");
        return 2;
    }
    long cells = rows * cols;
    cell_lock = calloc((size_t)cells, sizeof *cell_lock);
    mass = calloc((size_t)cells, sizeof *mass);
    if (!cell_lock || !mass) {
        perror("calloc");
        return 1;
    }
    for (long i = 0; i < cells; i++) {
        CHECK(pthread_mutex_init(&cell_lock[i], NULL)); /* @cell-init */
        mass[i] = 1.0;
    }
    pthread_t t[64];
    for (long b = 0; b < threads; b++)
        CHECK(pthread_create(&t[b], NULL, sweep, (void *)b));
    long pairs = 0;
    for (int b = 0; b < threads; b++) {
        CHECK(pthread_join(t[b], NULL));
        pairs += pairs_done[b];
    }
    double total = 0;
    for (long i = 0; i < cells; i++)
        total += mass[i];
    printf("cells %ld\npairs %ld\nshared-rows %d\nmass %.3f\n", cells, pairs, threads - 1, total);
    return 0;
}
