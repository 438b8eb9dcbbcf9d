#!/usr/bin/env python3
"""vmmux: carry many TCP connections over ONE byte stream (a virtio-serial port).
Guest: listens on 127.0.0.1:PORT in the VM (--listen, once per target); each accepted
       connection is a channel.
Host:  listens on a UNIX socket that QEMU's chardev connects to; per channel it
       opens a TCP connection to the target (127.0.0.1:PORT) and relays both ways.
       With several --target (one per gateway), a channel goes to the target whose port
       is the one the guest accepted it on.
Frame: type:u8 chan:u32 len:u32 payload  (OPEN guest->host, whose payload is the port
       the guest accepted on; DATA, EOF=half close, CLOSE)
Only loopback targets are accepted.
"""
import argparse, os, queue, socket, struct, sys, threading, time

OPEN, DATA, EOF, CLOSE = 1, 2, 3, 4
HDR = struct.Struct("!BII")
CHUNK = 65536
verbose = False
ROLE = "?"

def log(*a):
    print("vmmux[%s] %.3f:" % (ROLE, time.time()), *a, file=sys.stderr, flush=True)

class Stream:
    """The single shared byte stream (virtio-serial fd or a connected socket)."""
    def __init__(self, read, write):
        self._read, self._write = read, write
        self.wlock = threading.Lock()
    def send(self, typ, chan, payload=b""):
        buf = HDR.pack(typ, chan, len(payload)) + payload
        if verbose:
            log("tx frame type=%d chan=%d len=%d" % (typ, chan, len(payload)))
        with self.wlock:
            mv = memoryview(buf)
            while mv:
                n = self._write(mv)
                mv = mv[n:]
    def readexact(self, n):
        out = bytearray()
        while len(out) < n:
            b = self._read(n - len(out))
            if not b:
                return None
            out += b
        return bytes(out)

class Chan:
    def __init__(self, mux, cid, sock):
        self.mux, self.cid, self.sock = mux, cid, sock
        self.q = queue.Queue()          # frames to write into the socket
        self.up = self.down = 0
        self.rd_done = self.wr_done = False
        self.lock = threading.Lock()
        self.closed = False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # register BEFORE any frame for this channel can arrive, or it is dropped
        mux.chans[cid] = self
        threading.Thread(target=self.writer, daemon=True).start()
    def start(self):                    # start relaying socket -> stream
        threading.Thread(target=self.reader, daemon=True).start()
    def reader(self):                   # socket -> stream
        try:
            while True:
                b = self.sock.recv(CHUNK)
                if not b:
                    self.mux.stream.send(EOF, self.cid)
                    break
                self.up += len(b)
                self.mux.stream.send(DATA, self.cid, b)
        except OSError as e:
            if not self.closed:
                if verbose:
                    log("chan", self.cid, "recv error", e)
                self.mux.stream.send(CLOSE, self.cid)
                self.finish()
            return
        with self.lock:
            self.rd_done = True
            both = self.wr_done
        if both:
            self.mux.stream.send(CLOSE, self.cid)
            self.finish()
    def writer(self):                   # stream -> socket
        while True:
            typ, payload = self.q.get()
            try:
                if typ == DATA:
                    self.sock.sendall(payload)
                    self.down += len(payload)
                    continue
                if typ == EOF:
                    self.sock.shutdown(socket.SHUT_WR)
                    with self.lock:
                        self.wr_done = True
                        both = self.rd_done
                    if both:
                        self.mux.stream.send(CLOSE, self.cid)
                        self.finish()
                        return
                    continue
            except OSError:
                if not self.closed:
                    self.mux.stream.send(CLOSE, self.cid)
            self.finish()               # CLOSE or error
            return
    def finish(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.mux.chans.pop(self.cid, None)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.q.put((CLOSE, b""))        # wake writer if idle
        log("chan %d closed (to-target %d B, from-target %d B)"
            % (self.cid, self.up if ROLE == "guest" else self.down,
               self.down if ROLE == "guest" else self.up))

class Mux:
    def __init__(self, stream):
        self.stream = stream
        self.chans = {}
    def dispatch(self, on_open):
        while True:
            h = self.stream.readexact(HDR.size)
            if h is None:
                return
            typ, cid, n = HDR.unpack(h)
            if verbose:
                log("rx frame type=%d chan=%d len=%d" % (typ, cid, n))
            payload = self.stream.readexact(n) if n else b""
            if n and payload is None:
                return
            if typ == OPEN:
                on_open(cid, payload)
                continue
            ch = self.chans.get(cid)
            if ch is None:              # late frame for a closed channel
                if typ == DATA:
                    log("dropped %d B for closed chan %d" % (n, cid))
                continue
            ch.q.put((typ, payload))

def guest(a):
    # The virtio-serial port reads 0 bytes while the host side is not
    # connected; wait for it instead of treating that as the end.
    fd = os.open(a.dev, os.O_RDWR)
    def rd(n):
        while True:
            b = os.read(fd, n)
            if b:
                return b
            time.sleep(0.05)
    mux = Mux(Stream(rd, lambda mv: os.write(fd, mv)))
    nxt = [0]
    nlock = threading.Lock()
    def acceptor(lst, port):
        while True:
            s, peer = lst.accept()
            with nlock:
                nxt[0] += 1
                cid = nxt[0]
            log("chan %d open from %s:%d to port %d" % (cid, *peer, port))
            ch = Chan(mux, cid, s)          # registered: a fast CLOSE reply is not lost
            mux.stream.send(OPEN, cid, b"%d" % port)   # OPEN must precede any DATA
            ch.start()
    for addr in a.listen:
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        host, port = addr.rsplit(":", 1)
        lst.bind((host, int(port)))
        lst.listen(16)
        log("listening on", addr, "via", a.dev)
        threading.Thread(target=acceptor, args=(lst, int(port)), daemon=True).start()
    if a.ready:
        open(a.ready, "w").close()
    mux.dispatch(lambda cid, payload: None)

def host(a):
    targets = [t.rsplit(":", 1) for t in a.target]
    if os.path.exists(a.unix):
        os.unlink(a.unix)
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(a.unix)
    lst.listen(1)
    log("waiting for QEMU on", a.unix, "-> targets", " ".join(a.target))
    if a.ready:
        open(a.ready, "w").close()
    conn, _ = lst.accept()
    lst.close()
    log("QEMU connected")
    mux = Mux(Stream(conn.recv, conn.send))
    def on_open(cid, payload):
        # the target the guest's port stands for; the first when the guest named none
        port = payload.decode() if payload else targets[0][1]
        match = [t for t in targets if t[1] == port]
        if not match:
            log("chan %d: no target for guest port %s" % (cid, port))
            mux.stream.send(CLOSE, cid)
            return
        thost, tport = match[0]
        try:
            s = socket.create_connection((thost, int(tport)), timeout=10)
            s.settimeout(None)
        except OSError as e:
            log("chan %d: connect %s:%s failed: %s" % (cid, thost, tport, e))
            mux.stream.send(CLOSE, cid)
            return
        log("chan %d open -> %s:%s (local port %d)" % (cid, thost, tport, s.getsockname()[1]))
        Chan(mux, cid, s).start()
    mux.dispatch(on_open)
    log("QEMU disconnected; exiting")

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["host", "guest"])
    p.add_argument("--dev", help="guest: the virtio-serial port")
    p.add_argument("--listen", action="append", help="guest: 127.0.0.1:PORT to listen on (repeatable)")
    p.add_argument("--unix", help="host: UNIX socket that QEMU connects to")
    p.add_argument("--target", action="append", help="host: a target's address, 127.0.0.1:PORT (repeatable; default 127.0.0.1:3260)")
    p.add_argument("--ready", help="touch this file once listening")
    p.add_argument("-v", action="store_true")
    a = p.parse_args()
    ROLE, verbose = a.role, a.v
    a.target = a.target or ["127.0.0.1:3260"]
    for t in a.target:
        if not t.split(":")[0].startswith("127."):
            sys.exit("refusing non-loopback target " + t)
    (host if a.role == "host" else guest)(a)
