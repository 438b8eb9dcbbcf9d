#!/usr/bin/env python3
"""A hostile and careless iSCSI client, for bench/soak.sh: for --seconds it keeps sending a
target malformed PDUs, opening connections and dropping them mid-login or mid-command, and
logging in and out with libiscsi's iscsi-inq (--logins times in all, spread over the run),
from --threads attackers at once (random choices seeded by --seed; the threads interleave, so
a run is not exactly reproducible).
Prints one line of counts at the end; exits 1 if a well-formed login failed or the target
stopped accepting connections.

    bench/hostile.py --portal 127.0.0.1:3260 --target IQN --seconds 600 --logins 1000
"""
import argparse
import random
import socket
import struct
import subprocess
import sys
import threading
import time

INITIATOR = "iqn.2026-11.dev.stint:hostile"


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def bhs(opcode, flags, data_len, rest=b"", ahs_words=0):
    """A Basic Header Segment (RFC 7143 §11.2.1): opcode, flags, TotalAHSLength,
    DataSegmentLength, then bytes 8..47 from `rest`."""
    head = struct.pack(">BBxxB", opcode, flags, ahs_words) + data_len.to_bytes(3, "big")
    return head + rest.ljust(40, b"\0")[:40]


def login_pdu(target, keys=None, flags=0x87, isid=None):
    """A Login Request (RFC 7143 §11.12): operational stage straight to full feature phase."""
    data = keys if keys is not None else (
        f"InitiatorName={INITIATOR}\0SessionType=Normal\0TargetName={target}\0"
        "HeaderDigest=None\0DataDigest=None\0").encode()
    isid = isid or bytes([0x80, 0, 0]) + random.randbytes(3)
    rest = isid + b"\0\0" + struct.pack(">IHxxII", random.getrandbits(32), 0, 1, 0)
    return bhs(0x43, flags, len(data), rest) + pad4(data)


def logged_in(portal, target):
    """A connection in full feature phase, or None when the login was refused."""
    s = socket.create_connection(portal, timeout=1)
    s.sendall(login_pdu(target))
    resp = recv_exact(s, 48)
    if resp is None or resp[0] & 0x3F != 0x23 or resp[36] != 0:
        s.close()
        return None
    dlen = int.from_bytes(resp[5:8], "big")
    recv_exact(s, dlen + (-dlen % 4))
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def scsi_command(cdb, data_len=0, flags=0xC1, dsl=0, lun=0):
    """A SCSI Command PDU (RFC 7143 §11.3) with a random tag and CmdSN."""
    rest = struct.pack(">QIIII", lun << 48, random.getrandbits(32), data_len,
                       random.getrandbits(32), 0) + cdb.ljust(16, b"\0")[:16]
    return bhs(0x01, flags, dsl, rest)


CASES = []


def case(f):
    CASES.append(f)
    return f


@case
def random_bytes(portal, target):
    s = socket.create_connection(portal, timeout=1)
    s.sendall(random.randbytes(random.choice([1, 47, 48, 200, 5000])))


@case
def truncated_login(portal, target):
    s = socket.create_connection(portal, timeout=1)
    s.sendall(login_pdu(target)[:random.randrange(1, 60)])


@case
def garbage_login_keys(portal, target):
    keys = random.choice([
        random.randbytes(random.randrange(1, 3000)),
        b"InitiatorName=" + b"x" * 70000,
        b"=\0==\0" * 100,
        f"InitiatorName={INITIATOR}\0TargetName={target}\0AuthMethod=CHAP\0".encode(),
        b"\xff\xfe\0TargetName\0",
    ])
    s = socket.create_connection(portal, timeout=1)
    s.sendall(login_pdu(target, keys=keys, flags=random.choice([0x87, 0x81, 0xC7, 0x03])))
    recv_exact(s, 48)


@case
def huge_data_segment(portal, target):
    s = socket.create_connection(portal, timeout=1)
    s.sendall(bhs(0x43, 0x87, 0xFFFFFF, b"\x80" + b"\0" * 39) + b"x" * 1000)


@case
def random_pdus_after_login(portal, target):
    s = logged_in(portal, target)
    if s is None:
        return
    for _ in range(random.randrange(1, 20)):
        op = random.choice([0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x1C, 0x3F, 0x41])
        dsl = random.choice([0, 8, 512, 0x1000000 - 1])
        rest = random.randbytes(40)
        pdu = bhs(op | random.choice([0, 0x40]), random.getrandbits(8), dsl, rest,
                  ahs_words=random.choice([0, 0, 1, 255]))
        s.sendall(pdu + random.randbytes(min(dsl, 4096)))


@case
def write_then_vanish(portal, target):
    s = logged_in(portal, target)
    if s is None:
        return
    blocks = random.choice([1, 64, 2048])
    cdb = bytes([0x2A, 0]) + struct.pack(">IxH", random.randrange(1 << 16), blocks) + b"\0"
    # WRITE(10) expecting data, sent with part of it only: the target waits, then we vanish.
    s.sendall(scsi_command(cdb, data_len=blocks * 512, flags=0xA1, dsl=512) + b"\0" * 512)


@case
def bad_cdbs(portal, target):
    s = logged_in(portal, target)
    if s is None:
        return
    for _ in range(random.randrange(1, 30)):
        cdb = random.randbytes(16)
        s.sendall(scsi_command(cdb, data_len=random.choice([0, 512, 1 << 20]),
                               flags=random.choice([0x81, 0xC1, 0xA1])))
    recv_exact(s, 48)


@case
def connect_and_drop(portal, target):
    s = socket.create_connection(portal, timeout=1)
    time.sleep(random.random() * 0.2)
    s.close()


def inq(url):
    r = subprocess.run(["timeout", "30", "iscsi-inq", url], capture_output=True, text=True)
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--portal", required=True, help="host:port")
    ap.add_argument("--target", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--logins", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=4, help="hostile connections at once")
    a = ap.parse_args()
    random.seed(a.seed)
    host, port = a.portal.rsplit(":", 1)
    portal = (host, int(port))
    url = f"iscsi://{a.portal}/{a.target}/0"
    sent = {c.__name__: 0 for c in CASES}
    connect_failures = 0
    logins = [0, 0]  # done, failed
    start = time.monotonic()
    end = start + a.seconds

    def log_in_and_out():
        # Spread evenly over the run, beside the hostile connections.
        for n in range(a.logins):
            time.sleep(max(0.0, start + a.seconds * n / a.logins - time.monotonic()))
            logins[1] += 0 if inq(url) else 1
            logins[0] += 1

    well_formed = threading.Thread(target=log_in_and_out)
    well_formed.start()

    def attack():
        nonlocal connect_failures
        while time.monotonic() < end:
            c = random.choice(CASES)
            try:
                c(portal, a.target)
            except ConnectionRefusedError:
                connect_failures += 1
                continue
            except OSError:
                pass  # the target closing on us is a fine answer
            sent[c.__name__] += 1

    attackers = [threading.Thread(target=attack) for _ in range(a.threads)]
    for t in attackers:
        t.start()
    for t in attackers:
        t.join()
    well_formed.join()
    logins, login_failures = logins
    cases = " ".join(f"{k}={v}" for k, v in sent.items())
    print(f"hostile: {sum(sent.values())} hostile connections ({cases}); "
          f"{logins} iscsi-inq logins, {login_failures} failed; "
          f"{connect_failures} connections refused")
    sys.exit(1 if login_failures or connect_failures else 0)


if __name__ == "__main__":
    main()
