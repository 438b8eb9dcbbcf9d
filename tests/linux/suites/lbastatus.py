#!/usr/bin/env python3
"""Mapped blocks of a disk by GET LBA STATUS (runs INSIDE the VM; standard library only).

  lbastatus.py DEVICE     walks the whole disk with sg_get_lba_status --raw (each answer starts
                          where the last descriptor ended) and prints "mapped=N deallocated=N"
                          in logical blocks
"""
import subprocess
import sys


def main():
    dev = sys.argv[1]
    total = int(open(f"/sys/block/{dev.rsplit('/', 1)[-1]}/size").read()) * 512
    bs = int(subprocess.run(["blockdev", "--getss", dev], capture_output=True, text=True,
                            check=True).stdout)
    blocks = total // bs
    lba, mapped, deallocated = 0, 0, 0
    while lba < blocks:
        out = subprocess.run(["sg_get_lba_status", "--raw", "--maxlen=4096", f"--lba={lba}", dev],
                             capture_output=True, check=True).stdout
        n = (int.from_bytes(out[0:4], "big") - 4) // 16
        if n < 1:
            sys.exit(f"GET LBA STATUS at LBA {lba}: no descriptor")
        for i in range(n):
            d = out[8 + 16 * i: 24 + 16 * i]
            start, count, status = int.from_bytes(d[0:8], "big"), int.from_bytes(d[8:12], "big"), d[12] & 0xF
            if start != lba or count == 0:
                sys.exit(f"GET LBA STATUS: descriptor at {start} (+{count}), expected LBA {lba}")
            if status == 0:
                mapped += count
            else:
                deallocated += count
            lba += count
    print(f"mapped={mapped} deallocated={deallocated}")


if __name__ == "__main__":
    main()
