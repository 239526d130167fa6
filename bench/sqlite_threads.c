/* A real library's locking: SQLite (the amalgamation cargo fetches for the
 * analyzer, built by scripts/bench-data.sh) in serialized threading mode.
 * T threads (argv[1]) each open a database of their own in memory, insert
 * ROWS rows (argv[2]) in one transaction through a prepared statement, and
 * run 50 aggregate queries over them. The threads share SQLite's global
 * mutexes (its allocator's statistics, the page cache, the prepared
 * statement cache), which is where they meet. Prints nanoseconds per row
 * and a checksum.
 *
 *   sqlite_threads [THREADS] [ROWS] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sqlite3.h"

static long rows;

static int check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "sqlite_threads: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
    return rc;
}

static void *work(void *arg) {
    long id = (long)arg;
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
        fprintf(stderr, "sqlite_threads: cannot open a database\n");
        exit(1);
    }
    check(sqlite3_exec(db, "CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER, s TEXT)", 0, 0, 0), db,
          "create");
    check(sqlite3_exec(db, "BEGIN", 0, 0, 0), db, "begin");
    sqlite3_stmt *insert;
    check(sqlite3_prepare_v2(db, "INSERT INTO t(v, s) VALUES(?, ?)", -1, &insert, 0), db, "prepare");
    char text[32];
    for (long i = 0; i < rows; i++) {
        snprintf(text, sizeof text, "row %ld of %ld", i, id);
        sqlite3_bind_int64(insert, 1, (i * 2654435761u) % 1000);
        sqlite3_bind_text(insert, 2, text, -1, SQLITE_TRANSIENT);
        check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    check(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit");
    int64_t sum = 0;
    for (int q = 0; q < 50; q++) {
        sqlite3_stmt *query;
        check(sqlite3_prepare_v2(db, "SELECT sum(v), count(*) FROM t WHERE v > ?", -1, &query, 0), db,
              "prepare");
        sqlite3_bind_int(query, 1, q * 10);
        if (check(sqlite3_step(query), db, "query") == SQLITE_ROW)
            sum += sqlite3_column_int64(query, 0) + sqlite3_column_int64(query, 1);
        sqlite3_finalize(query);
    }
    sqlite3_close(db);
    return (void *)(intptr_t)sum;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    rows = argc > 2 ? atol(argv[2]) : 20000;
    if (threads < 1 || threads > 64 || rows < 1) {
        fprintf(stderr, "usage: sqlite_threads [THREADS 1-64] [ROWS]\n");
        return 2;
    }
    if (sqlite3_threadsafe() == 0) {
        fprintf(stderr, "sqlite_threads: SQLite was built without threads\n");
        return 2;
    }
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    int64_t checksum = 0;
    for (int i = 0; i < threads; i++) {
        void *sum;
        pthread_join(t[i], &sum);
        checksum += (intptr_t)sum;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f ns per row, checksum %lld\n", ns / ((double)threads * rows), (long long)checksum);
    return 0;
}
