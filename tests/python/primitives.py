"""One of threading's primitives (argv[1]: lock, rlock, condition,
semaphore, event, queue), waited for by worker threads while a holder
thread sleeps 0.1 s holding it (or before setting / filling it).

Ground truth for the test: each wait a worker measured around its call
(`time.perf_counter_ns`), printed as `wait NS`. The `# marker:` comments
name the lines the report must point at.
"""
import queue
import sys
import threading
import time

KIND = sys.argv[1]
ROUNDS = 3
WORKERS = 2
HELD = KIND in ("lock", "rlock", "condition", "semaphore")

prim = {  # marker: made
    "lock": threading.Lock,
    "rlock": threading.RLock,
    "condition": threading.Condition,
    "semaphore": lambda: threading.Semaphore(1),
    "event": threading.Event,
    "queue": queue.Queue,
}[KIND]()  # marker: end-made
go = threading.Barrier(WORKERS + 1)
waits = []
waits_lock = threading.Lock()


def holder():
    for _ in range(ROUNDS):
        if HELD:
            with prim:  # marker: hold
                go.wait()
                time.sleep(0.1)  # marker: sleep
        else:
            go.wait()
            time.sleep(0.1)
            if KIND == "event":
                prim.set()
            else:
                for _ in range(WORKERS):
                    prim.put(1)
        go.wait()
        if KIND == "event":
            prim.clear()


def wait_once():
    if KIND == "event":
        prim.wait()  # marker: wait-event
    elif KIND == "queue":
        prim.get()  # marker: wait-queue
    elif KIND == "semaphore":
        prim.acquire()  # marker: wait-semaphore
        prim.release()
    else:
        prim.acquire()  # marker: wait-held
        prim.release()


def worker():
    for _ in range(ROUNDS):
        go.wait()
        time.sleep(0.01)
        t0 = time.perf_counter_ns()
        wait_once()
        waited = time.perf_counter_ns() - t0
        with waits_lock:
            waits.append(waited)
        go.wait()


threads = [threading.Thread(target=holder)] + [
    threading.Thread(target=worker) for _ in range(WORKERS)
]
for t in threads:
    t.start()
for t in threads:
    t.join()
for w in sorted(waits):
    print(f"wait {w}")
