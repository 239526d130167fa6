"""End-to-end benchmark: four Python threads share a lock-protected counter
and pass items through a queue.Queue (CPython's locks, conditions and GIL
handoffs are pthread primitives underneath). Prints nothing; timed from
outside by scripts/bench-e2e.sh."""
import queue
import sys
import threading

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
lock = threading.Lock()
items = queue.Queue(maxsize=64)
counter = 0


def producer():
    global counter
    for i in range(ROUNDS):
        with lock:
            counter += 1
        items.put(i)
    items.put(None)


def consumer():
    global counter
    while items.get() is not None:
        with lock:
            counter += 1


threads = [threading.Thread(target=f) for f in (producer, producer, consumer, consumer)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert counter == 4 * ROUNDS, counter
