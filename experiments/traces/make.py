#!/usr/bin/env python3
"""Writes the two shipped traces, one workload in two formats (experiments/README.md, F1).

A video-like stream of 128 KiB sequential reads (one every 4 ms, up to 0.5 ms late) from
8 TiB on, and once a second from 0.3 s a checkpoint: a burst of 4 KiB random writes (4 KiB
aligned in the first 2 TiB, about 0.5 ms apart). Eight seconds. The numbers come from a
splitmix64 stream with a fixed seed, so rerunning this writes the same bytes:

    python3 experiments/traces/make.py experiments/traces

stream-checkpoint.iolog is a fio iolog v3 (timestamps in µs, as fio writes them);
stream-checkpoint.csv the same I/Os as SNIA MSR Cambridge CSV (Windows filetime ticks of
100 ns from 2007-02-22, the week of the MSR traces, host "stint", disk 0, response time 0).
"""

import os
import sys

SEED = 21
SECONDS = 8
READ_EVERY_US = 4000
READ_BYTES = 128 << 10
STREAM_START = 8 << 40
BURST_FIRST_US = 300_000
BURST_EVERY_US = 1_000_000
BURST_WRITES = 48
WRITE_BYTES = 4 << 10
WRITE_SPAN = 2 << 40
# 2007-02-22 00:00 UTC, the week the MSR Cambridge traces were taken, as a Windows filetime
# (100 ns ticks since 1601).
FILETIME_BASE = 128_165_760_000_000_000

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def ios():
    rng = SplitMix64(SEED)
    out = []
    end = SECONDS * 1_000_000
    offset = STREAM_START
    for t in range(0, end, READ_EVERY_US):
        out.append((t + rng.below(500), "read", offset, READ_BYTES))
        offset += READ_BYTES
    for burst in range(BURST_FIRST_US, end, BURST_EVERY_US):
        t = burst
        for _ in range(BURST_WRITES):
            block = rng.below(WRITE_SPAN // WRITE_BYTES)
            out.append((t, "write", block * WRITE_BYTES, WRITE_BYTES))
            t += 1 + rng.below(1000)
    out.sort(key=lambda io: io[0])
    return out


def main():
    into = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    trace = ios()
    last = trace[-1][0]
    with open(os.path.join(into, "stream-checkpoint.iolog"), "w") as f:
        f.write("fio version 3 iolog\n0 /dev/sdb add\n0 /dev/sdb open\n")
        for t, action, offset, length in trace:
            f.write(f"{t} /dev/sdb {action} {offset} {length}\n")
        f.write(f"{last} /dev/sdb close\n")
    with open(os.path.join(into, "stream-checkpoint.csv"), "w") as f:
        for t, action, offset, length in trace:
            kind = "Read" if action == "read" else "Write"
            f.write(f"{FILETIME_BASE + t * 10},stint,0,{kind},{offset},{length},0\n")


if __name__ == "__main__":
    main()
