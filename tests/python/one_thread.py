"""One thread takes a threading.Lock many times; nothing else does.

The report must name the lock by the line that made it, find the taking
line's site with only that lock (the interpreter's own GIL calls made
under it are no calls of that line), and say the lock is one thread's.
The `# marker:` comments name the lines."""
import threading

lock = threading.Lock()  # marker: made
total = 0


def bump():
    global total
    for _ in range(200_000):
        with lock:  # marker: take
            total += 1


bump()
print(f"total {total}")
