"""Workers wait on a threading.Lock that a holder keeps while it sleeps.

Ground truth the test compares the report with: every wait each worker
measured around its acquire (`time.perf_counter_ns`), printed as
`wait NS`, and the holds as `hold NS`. The `# marker:` comments name the
lines the report must point at.
"""
import sys
import threading
import time

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
WORKERS = 3
lock = threading.Lock()
started = threading.Barrier(WORKERS + 1)
out = []
out_lock = threading.Lock()


def holder():
    for _ in range(ROUNDS):
        with lock:  # marker: holder-with
            started.wait()
            t0 = time.perf_counter_ns()
            time.sleep(0.1)  # marker: sleep
            held = time.perf_counter_ns() - t0
        with out_lock:
            out.append(f"hold {held}")
        started.wait()


def worker():
    for _ in range(ROUNDS):
        started.wait()
        time.sleep(0.01)
        t0 = time.perf_counter_ns()
        lock.acquire()  # marker: worker-acquire
        waited = time.perf_counter_ns() - t0
        lock.release()
        with out_lock:
            out.append(f"wait {waited}")
        started.wait()


threads = [threading.Thread(target=holder)] + [
    threading.Thread(target=worker) for _ in range(WORKERS)
]
for t in threads:
    t.start()
for t in threads:
    t.join()
for line in sorted(out):
    print(line)
