"""
What one wake-up between two processes costs on this machine: two processes bounce one
byte over a socketpair N times (each message wakes the other, which was blocked in recv),
first on two different CPUs, then both on one CPU. Prints the round trip's wall time and
the CPU time (user + system) each side spent per round trip.

Why it matters: every message between Evora's processes (producer, server, worker,
PostgreSQL) that finds its reader asleep pays this; a burn-down batches its messages (a
few hundredths of a context switch per job) and a single submit or a latency job does not.
Python and the standard library only, so that the number is the machine's, not a runtime's.

Usage: python3 bench/experiments/wakeup-cost.py [N=20000]
"""
import os
import socket
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def bounce(parent_cpu: int, child_cpu: int) -> None:
    a, b = socket.socketpair()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {child_cpu})
        a.close()
        c0 = cpu_seconds()
        for _ in range(N):
            b.send(b.recv(64))
        os.write(w, repr((cpu_seconds() - c0) / N * 1e6).encode())
        os._exit(0)
    os.sched_setaffinity(0, {parent_cpu})
    b.close()
    for _ in range(100):  # both sides running
        a.send(b"x")
        a.recv(64)
    t0, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(N - 100):
        a.send(b"x")
        a.recv(64)
    wall = (time.perf_counter() - t0) / (N - 100) * 1e6
    cpu = (cpu_seconds() - c0) / (N - 100) * 1e6
    os.waitpid(pid, 0)
    child = float(os.read(r, 64))
    where = "two CPUs" if parent_cpu != child_cpu else "one CPU "
    print(f"{where}: round trip {wall:6.1f} us wall; CPU per round trip: this side {cpu:5.1f} us, the other {child:5.1f} us")


cpus = sorted(os.sched_getaffinity(0))
if len(cpus) >= 2:
    bounce(cpus[0], cpus[1])
bounce(cpus[0], cpus[0])
