"""Four CPU-bound Python threads with deterministic results.

The threads compete for the GIL (a pthread mutex paired with a condition
variable in CPython), so under the shim the trace shows that mutex engaged by
several threads and waited on through a cond. The output is the same on every
run: results are printed in worker order after all threads are joined.
"""
import sys
import threading

WORKERS = 4
N = 60_000

results = [None] * WORKERS
progress = threading.Condition()
finished = 0


def work(index):
    global finished
    # Deterministic CPU-bound work: a simple LCG checksum.
    x = index + 1
    total = 0
    for i in range(N):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        total = (total + (x % 1000) * (i % 7)) % 1_000_000_007
    results[index] = total
    with progress:
        finished += 1
        progress.notify_all()


def main():
    threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}")
               for i in range(WORKERS)]
    for t in threads:
        t.start()
    with progress:
        while finished < WORKERS:
            progress.wait()
    for t in threads:
        t.join()
    for i, r in enumerate(results):
        print(f"worker {i} checksum {r}")
    print(f"finished {finished}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
