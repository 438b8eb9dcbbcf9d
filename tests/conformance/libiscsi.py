#!/usr/bin/env python3
"""Run libiscsi's iscsi-test-cu conformance suite against stint (or any target) and compare the
result with the checked-in expectations file.

Each suite runs in its own process (Debian's 1.19.0 tool corrupts later 16-byte
CDBs when an earlier suite bails out early), with the URL given twice so MultipathIO runs.
SANITIZE runs with --allow-sanitize on LUNs of its own, one process per test.
CUnit counts a skipped test as passed; a test that printed [SKIPPED] is counted as skipped.
With --peer tgt (or istgt) the same passes run, in the same invocation, against that target
started here on LUNs of the same flavours, and a table puts the counts side by side.
The 512-byte pass runs once more on block LUNs (store = "block", on loop devices set up here and
detached at the end; names suffixed @store=block), held to the RAM LUN's expectations; where no
loop device can be set up (not root) that pass is skipped with a message.

Exit status: 0 when every test not listed in the expectations file passed and every listed test
behaved as listed (or better); 1 otherwise.
"""
import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "libiscsi-expected.txt")
# What an RBD LUN does differently, on top of EXPECTED (--rbd).
EXPECTED_RBD = os.path.join(HERE, "libiscsi-expected-rbd.txt")
# What two gateways of each image (--gateways) do differently, on top of both.
EXPECTED_GATEWAYS = os.path.join(HERE, "libiscsi-expected-gateways.txt")
TARGET = "iqn.2026-11.dev.stint:conformance-"
# The result names of the pass on block LUNs; its tests are held to the plain names' expectations.
BLOCK_SUFFIX = "@store=block"
BLOCK_LUN_BYTES = 64 << 20
SUITE_TIMEOUT_S = 120

# The suites an RBD run (--rbd) keeps: those whose commands reach the store (reads, writes,
# verifies, UNMAP, WRITE SAME, COMPARE AND WRITE, SANITIZE, GET LBA STATUS, ORWRITE,
# PRE-FETCH, copies, persistent reservations with their kept state, MultipathIO's writes and
# reads across sessions). The others are left to the RAM run, since the device answers them
# the same whatever its store: INQUIRY, Mandatory, MODE SENSE, NoMedia, PREVENT ALLOW,
# READ CAPACITY (the size is read once at start), READ DEFECT DATA, ReadOnly (refused before
# the store), REPORT SUPPORTED OPCODES, RESERVE(6), START STOP UNIT, TEST UNIT READY and the
# iSCSI transport suites. Also left out: the 4 KiB pass of Sanitize.Reset (a 60 s sleep
# testing resets during a sanitize; its 512-byte pass runs the same store steps). This keeps
# the RBD run near 2 minutes of CI time instead of 4 to 5.
RBD_SUITES = {f"SCSI.{s}" for s in (
    "Read6 Read10 Read12 Read16 Write10 Write12 Write16 WriteAtomic16 Verify10 Verify12 "
    "Verify16 WriteVerify10 WriteVerify12 WriteVerify16 Unmap WriteSame10 WriteSame16 "
    "CompareAndWrite Sanitize GetLBAStatus OrWrite Prefetch10 Prefetch16 ExtendedCopy "
    "ReceiveCopyResults PrinReadKeys PrinServiceactionRange PrinReportCapabilities "
    "ProutRegister ProutReserve ProutClear ProutPreempt MultipathIO").split()}


def family(name):
    """The suite of a suite, test or result name: SCSI.Sanitize@block_size=4096.Reset is
    SCSI.Sanitize."""
    return ".".join(p.split("@")[0] for p in name.split(".")[:2])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(name, port, proc, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{name} exited early with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{name} did not listen on 127.0.0.1:{port} within {timeout_s} s")


def list_tests(parts_wanted):
    """The suites (two-part names) or tests (three-part names) iscsi-test-cu knows."""
    out = subprocess.run(["iscsi-test-cu", "--list"], capture_output=True, text=True, check=True).stdout
    names = []
    for line in out.split():
        parts = line.strip().split(".")
        if len(parts) == parts_wanted and parts[0] in ("SCSI", "iSCSI"):
            names.append(line.strip())
    return names


TEST_RE = re.compile(r"^\s+Test: (\S+) \.\.\.")
VERDICT_RE = re.compile(r"(?<!\[)\b(passed|FAILED)\b(?!\])")


# Seconds each iscsi-test-cu process took, (suite or test, extra arguments) -> s, for the
# slowest-suites line a run ends with.
SECONDS = {}


def run_suite(suite, url, args=()):
    """Returns {test name: (result, detail)} for one suite (or one test of one); result is
    pass, fail or skip."""
    started = time.monotonic()
    try:
        return _run_suite(suite, url, args)
    finally:
        key = " ".join([suite, *args])
        SECONDS[key] = SECONDS.get(key, 0) + time.monotonic() - started


def _run_suite(suite, url, args):
    # `url` is one URL, given twice, or two separated by a space (two gateways, --gateways)
    urls = url.split() * (3 - len(url.split()))
    cmd = ["stdbuf", "-o0", "-e0", "iscsi-test-cu", "--dataloss", *args, f"--test={suite}", *urls[:2]]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=SUITE_TIMEOUT_S)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += "\n  Test: <timeout> ...FAILED\n"
    prefix = ".".join(suite.split(".")[:2])
    results, name, block = {}, None, []

    def close():
        if name is None:
            return
        text = "\n".join(block)
        # CUnit prints the verdict after the test's own output; whatever follows it on the same
        # line belongs to the suite's teardown, not to this test.
        m = VERDICT_RE.search(text)
        if m is None or m.group(1) == "FAILED" or "<timeout>" in name:
            res = "fail"
        elif "[SKIPPED]" in text[: m.start()]:
            res = "skip"
        else:
            res = "pass"
        detail = ""
        for l in block:
            l = l.strip()
            if l.startswith("[SKIPPED]") or l.startswith("[FAILED]") or re.match(r"^\d+\. ", l):
                detail = l
                break
        results[f"{prefix}.{name}"] = (res, detail)

    for line in out.splitlines():
        m = TEST_RE.match(line)
        if m:
            close()
            name, block = m.group(1), [line[m.end():]]
        elif line.startswith("Run Summary"):
            close()
            name, block = None, []
        elif name is not None:
            block.append(line)
    close()
    if not results:
        results[f"{prefix}.<suite>"] = ("fail", out.strip().splitlines()[-1] if out.strip() else "no output")
    return results


def load_expected(path=EXPECTED, expected=None):
    expected = {} if expected is None else expected
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in ("skip", "fail"):
                sys.exit(f"{path}:{n}: expected '<test> skip|fail <reason>'")
            expected[parts[0]] = (parts[1], parts[2])
    return expected


def flavours(block=True):
    """The LUNs a pass needs beyond the plain ones: (settings as stint.toml spells them, suites
    run there, suffix of their result names, extra iscsi-test-cu arguments); with `block`, also
    the 512-byte pass on block devices."""
    # SANITIZE wipes its LUN, so it gets LUNs of its own, and each test its own process with a
    # timeout. Sanitize.Reset needs a sanitize still running 4 s after it began, through resets
    # and a new login: a paced LUN's takes 8 s.
    sanitize = [t for t in list_tests(3) if t.startswith("SCSI.Sanitize.")]
    reset = ["SCSI.Sanitize.Reset"]
    allow = ["--allow-sanitize"]
    unpaced = [t for t in sanitize if t not in reset]
    k4 = {"block_size": 4096}
    blk = {"store": "block"}
    return [
        ({"inquiry_version": 6}, ["SCSI.Inquiry"], "@inquiry_version=6", []),
        ({"read_only": True}, ["SCSI.ReadOnly"], "", []),
        ({"removable": True}, ["SCSI.PreventAllow", "SCSI.StartStopUnit", "SCSI.NoMedia"], "", []),
        # 512e (8 logical blocks per physical block): the unaligned-unmap and data-out size
        # cases of these suites skip unless LBPPB >= 2.
        ({"physical_block_exponent": 3},
         ["SCSI.WriteSame10", "SCSI.WriteSame16", "SCSI.CompareAndWrite"], "@lbppb=8", []),
        # A fresh LUN for MultipathIO: libiscsi 1.19's CompareAndWrite case zeroes LBAs 0-255
        # but compares LBA 256 with zeros too, so it fails wherever an earlier suite on a
        # shared LUN left data there (which suites did depends on the two workers' timing).
        ({}, ["SCSI.MultipathIO"], "", []),
        ({}, unpaced, "", allow),
        ({"sanitize_pace_ms": 8000}, reset, "", allow),
        # The whole suite once more on 4 KiB logical blocks, with the same flavours.
        (k4, ["*"], "@block_size=4096", []),
        ({**k4, "read_only": True}, ["SCSI.ReadOnly"], "@block_size=4096", []),
        ({**k4, "removable": True}, ["SCSI.PreventAllow", "SCSI.StartStopUnit"], "@block_size=4096", []),
        (k4, unpaced, "@block_size=4096", allow),
        ({**k4, "sanitize_pace_ms": 8000}, reset, "@block_size=4096", allow),
    ] + ([
        # The whole suite on a block device (stint's io_uring path, O_DIRECT), with the same
        # flavours: the store must not change an answer.
        (blk, ["*"], BLOCK_SUFFIX, []),
        ({**blk, "read_only": True}, ["SCSI.ReadOnly"], BLOCK_SUFFIX, []),
        ({**blk, "removable": True}, ["SCSI.PreventAllow", "SCSI.StartStopUnit"], BLOCK_SUFFIX, []),
        (blk, unpaced, BLOCK_SUFFIX, allow),
        ({**blk, "sanitize_pace_ms": 8000}, reset, BLOCK_SUFFIX, allow),
    ] if block else [])


def stop(proc, name, term=True):
    """Stops a server this script started: SIGTERM, then SIGKILL after 10 s (at once without
    `term`)."""
    (proc.terminate if term else proc.kill)()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print(f"  ({name} ignored SIGTERM for 10 s and was killed)")


def loop_device(stack, work):
    """A loop device over a new sparse file in `work`, detached (by the device losetup returned)
    when `stack` closes; raises OSError or CalledProcessError where none can be set up."""
    img = tempfile.mktemp(prefix="block-lun.", suffix=".img", dir=work)
    with open(img, "wb") as f:
        f.truncate(BLOCK_LUN_BYTES)
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    stack.callback(subprocess.run, ["losetup", "-d", dev], check=False)
    return dev


def loop_devices_work():
    """None when a loop device can be set up here, else why not."""
    try:
        with contextlib.ExitStack() as stack:
            work = tempfile.mkdtemp(prefix="stint-conformance-probe.")
            stack.callback(shutil.rmtree, work, True)
            loop_device(stack, work)
        return None
    except (OSError, subprocess.CalledProcessError) as e:
        return getattr(e, "stderr", None) or str(e)


def rbd_images(conf, count, stack):
    """`count` fresh 64 MiB images in pool rbd of the cluster `conf` names, removed at the end
    (after the server that holds their locks has stopped: callbacks run last first)."""
    names = [f"stint-conformance-{os.getpid()}-{i}" for i in range(count)]
    rbd = lambda *a: subprocess.run(["rbd", "-c", conf, *a], capture_output=True, text=True)
    for name in names:
        rbd("rm", "--no-progress", f"rbd/{name}")
        p = rbd("create", "--size", "64M", f"rbd/{name}")
        if p.returncode != 0:
            sys.exit(f"rbd create rbd/{name}: {p.stderr.strip()}")
        stack.callback(rbd, "rm", "--no-progress", f"rbd/{name}")
    return names


def serve_stint(binary, luns, stack, rbd_conf=None, gateways=False):
    """Starts `stint serve` with one target node per LUN (a TARGET RESET from one suite must not
    raise unit attentions in a suite running beside it); returns their URLs. With `rbd_conf`,
    each LUN is a 64 MiB RBD image of that cluster instead of RAM. With `gateways` too, two
    servers, gateways a and b (docs/gateways.md), export every target; a LUN's URL is then both
    gateways' ("A B", every other LUN "B A"): a suite's sessions go through the first, and
    MultipathIO's second path through the other."""
    images = rbd_images(rbd_conf, len(luns), stack) if rbd_conf else None
    if gateways:
        ports = {"a": free_port(), "b": free_port()}
        urls = {g: serve_stint_config(binary, luns, stack, images, rbd_conf, ports, g) for g in ports}
        return [f"{urls['a'][i]} {urls['b'][i]}" if i % 2 == 0 else f"{urls['b'][i]} {urls['a'][i]}"
                for i in range(len(luns))]
    return serve_stint_config(binary, luns, stack, images, rbd_conf, {"": free_port()}, "")


def serve_stint_config(binary, luns, stack, images, rbd_conf, ports, gateway):
    """One `stint serve` of serve_stint: on ports[gateway], as that gateway of `ports` (when
    `gateway` is not "")."""
    port = ports[gateway]
    # The tool's synchronous API answers no NOP-In while a test sleeps (Sanitize.Reset sleeps
    # 60 s), and stint closes a connection silent for two ping intervals: no pings here.
    config = [f'listen = "127.0.0.1:{port}"', "nop_in_interval_s = 0"]
    # The suite stops units, switches SWP and resets targets: stint refuses those to initiators
    # not granted them (16 tests fail or skip without the grant).
    work = tempfile.mkdtemp(prefix=f"stint-conformance{gateway}.")
    stack.callback(shutil.rmtree, work, True)
    for i, settings in enumerate(luns):
        config += ["[[target]]", f'name = "{TARGET}{i}"', 'privileged_initiators = ["*"]']
        if gateway:
            config.append(f'gateway = "{gateway}"')
            for group, (g, p) in enumerate(sorted(ports.items()), 1):
                config += ["[[target.gateways]]", f'name = "{g}"', f'portal = "127.0.0.1:{p}"',
                           f"port_group = {group}"]
        config.append("[[target.lun]]")
        if settings.get("store") == "block":
            # Sized by the device (64 MiB, as the RAM LUNs).
            config += ['store = "block"', f'path = "{loop_device(stack, work)}"']
        elif images:
            config += ['store = "rbd"', 'pool = "rbd"', f'image = "{images[i]}"',
                       f'conf = "{rbd_conf}"']
        else:
            config += ['store = "ram"', 'size = "64MiB"']
        config += [f"{k} = {str(v).lower() if isinstance(v, bool) else v}"
                   for k, v in settings.items() if k != "store"]
    config_path = os.path.join(work, "stint.toml")
    with open(config_path, "w") as f:
        f.write("\n".join(config) + "\n")
    name = f"stint-conformance-serve{'-' + gateway if gateway else ''}"
    log = stack.enter_context(open(os.path.join(tempfile.gettempdir(), f"{name}.log"), "w"))
    proc = subprocess.Popen([binary, "serve", "--config", config_path], stdout=subprocess.DEVNULL, stderr=log)
    stack.callback(stop, proc, name)
    wait_listening(name, port, proc)
    return [f"iscsi://127.0.0.1:{port}/{TARGET}{i}/0" for i in range(len(luns))]


def peer_dir(stack, name):
    """A temp dir for a peer's backing files (tmpfs when there is one), removed at the end."""
    work = tempfile.mkdtemp(prefix=f"stint-conformance-{name}.",
                            dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    stack.callback(shutil.rmtree, work, True)
    return work


def serve_tgt(luns, stack):
    """Starts tgtd (Debian's tgt) with one target per LUN, each a 64 MiB file on tmpfs through
    its rdwr store at LUN 1 (tgt puts its controller at LUN 0); returns their URLs. Flavours
    map to tgt's own LU parameters where it has them (block size, LBPPBE, readonly,
    removable); the rest (INQUIRY version, SANITIZE pace) get a plain LUN. Thin provisioning is
    on, as on stint's RAM LUNs."""
    work = peer_dir(stack, "tgt")
    port = free_port()
    # -C names a UNIX control socket, not a TCP port: any number whose socket is not taken.
    cport = next(n for n in range(4100, 9000) if not os.path.exists(f"/var/run/tgtd/socket.{n}"))
    log = stack.enter_context(open(os.path.join(work, "tgtd.log"), "w"))
    proc = subprocess.Popen(["tgtd", "-f", "-C", str(cport), "--iscsi", f"portal=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    # tgtd ignores SIGTERM while it has targets.
    stack.callback(stop, proc, "tgtd", False)
    wait_listening("tgtd", port, proc)

    def adm(*a):
        p = subprocess.run(["tgtadm", "-C", str(cport), "--lld", "iscsi", *a], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"tgtadm {' '.join(a)}: {p.stdout.strip()} {p.stderr.strip()}")

    for i, settings in enumerate(luns):
        tid, img = str(i + 1), os.path.join(work, f"lun{i}.img")
        with open(img, "wb") as f:
            f.truncate(64 << 20)
        adm("--op", "new", "--mode", "target", "--tid", tid, "-T", f"{TARGET}{i}")
        adm("--op", "new", "--mode", "logicalunit", "--tid", tid, "--lun", "1", "-b", img,
            "--blocksize", str(settings.get("block_size", 512)))
        params = ["thin_provisioning=1"]
        if "physical_block_exponent" in settings:
            params.append(f"lbppbe={settings['physical_block_exponent']}")
        params += [f"{k}=1" for k in ("read_only", "removable") if settings.get(k)]
        adm("--op", "update", "--mode", "logicalunit", "--tid", tid, "--lun", "1",
            "--params", ",".join(params).replace("read_only", "readonly"))
        adm("--op", "bind", "--mode", "target", "--tid", tid, "-I", "ALL")
    return [f"iscsi://127.0.0.1:{port}/{TARGET}{i}/1" for i in range(len(luns))]


def serve_istgt(luns, stack):
    """Starts istgt (Debian's 0.4~20111008) with one logical unit (target) per LUN, each a 64 MiB
    file on tmpfs at LUN 0; returns their URLs. Flavours map to BlockLength and ReadOnly; the
    rest get a plain disk (istgt's removable units are DVD drives, not disks). A reservation
    (RESERVE or PERSISTENT RESERVE) a test leaves behind stays on istgt's LUN, so later suites
    there fail with RESERVATION CONFLICT: most of its failures are that."""
    work = peer_dir(stack, "istgt")
    port = free_port()
    open(os.path.join(work, "auth.conf"), "w").close()
    os.mkdir(os.path.join(work, "media"))
    # The settings of bench/vs-tgt.sh (see its comments); MaxSessions and MaxConnections leave
    # room for the two sessions each MultipathIO test opens.
    conf = f"""[Global]
  NodeBase "iqn.2026-11.dev.stint"
  PidFile {work}/istgt.pid
  AuthFile {work}/auth.conf
  MediaDirectory {work}/media
  Timeout 30
  NopInInterval 0
  DiscoveryAuthMethod None
  MaxSessions 64
  MaxConnections 4
  MaxR2T 32
  MaxOutstandingR2T 16
  FirstBurstLength 262144
  MaxBurstLength 1048576
  MaxRecvDataSegmentLength 262144
  InitialR2T Yes
  ImmediateData Yes
  ErrorRecoveryLevel 0
[UnitControl]
  AuthMethod None
[PortalGroup1]
  Portal P1 127.0.0.1:{port}
[InitiatorGroup1]
  InitiatorName "ALL"
  Netmask 127.0.0.1
"""
    for i, settings in enumerate(luns):
        img = os.path.join(work, f"lun{i}.img")
        with open(img, "wb") as f:
            f.truncate(64 << 20)
        conf += f"""[LogicalUnit{i + 1}]
  TargetName {TARGET}{i}
  Mapping PortalGroup1 InitiatorGroup1
  AuthMethod None
  UseDigest Auto
  UnitType Disk
  QueueDepth 32
  BlockLength {settings.get("block_size", 512)}
  ReadOnly {"Yes" if settings.get("read_only") else "No"}
  LUN0 Storage {img} Auto
"""
    with open(os.path.join(work, "istgt.conf"), "w") as f:
        f.write(conf)
    log = stack.enter_context(open(os.path.join(work, "istgt.log"), "w"))
    proc = subprocess.Popen(["istgt", "-D", "-m", "1", "-c", os.path.join(work, "istgt.conf"),
                             "-p", os.path.join(work, "istgt.pid")], stdout=log, stderr=subprocess.STDOUT)
    stack.callback(stop, proc, "istgt")
    wait_listening("istgt", port, proc)
    return [f"iscsi://127.0.0.1:{port}/{TARGET}{i}/0" for i in range(len(luns))]


PEERS = {"tgt": serve_tgt, "istgt": serve_istgt}


def run_all(urls, special, scope=None):
    """Runs every suite (of `scope`, when given): the plain ones spread over `urls` (one at a
    time per URL), the special ones on their LUNs. Returns ({test: (result, detail)},
    seconds)."""
    suites = [s for s in list_tests(2) if scope is None or s in scope]
    # Suites that only a special LUN exercises run there instead of on a plain LUN (or, in a
    # suffixed pass, instead of on that pass's "*" LUN); a suffix marks an extra run whose
    # results are reported under their own names.
    moved = {}
    for _, ss, suffix, _ in special:
        if ss != ["*"]:
            moved.setdefault(suffix, set()).update(family(s) for s in ss)
    everything = lambda suffix: [s for s in suites if s not in moved.get(suffix, set())]
    items = [("special", (url, everything(suffix) if ss == ["*"] else ss, suffix, extra_args))
             for url, ss, suffix, extra_args in special]
    if scope is not None:
        items = [(k, (url, [t for t in ss if family(t) in scope], suffix, extra))
                 for k, (url, ss, suffix, extra) in items]
    items += [("plain", suite) for suite in everything("")]
    results = {}
    started = time.monotonic()
    free = list(urls)
    lock = threading.Lock()

    def work(item):
        kind, what = item
        if kind == "special":
            url, ss, suffix, extra_args = what
            out = {}
            for suite in ss:
                f = family(suite)
                out.update({name.replace(f, f + suffix, 1): r
                            for name, r in run_suite(suite, url, extra_args).items()})
            return out
        with lock:
            url = free.pop()
        try:
            return run_suite(what, url)
        finally:
            with lock:
                free.append(url)

    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        for r in pool.map(work, items):
            results.update(r)
    return results, time.monotonic() - started


def counts(results, pred=lambda name: True):
    c = {"pass": 0, "fail": 0, "skip": 0}
    for name, (res, _) in results.items():
        if pred(name):
            c[res] += 1
    return c


def summary(c):
    return f"{c['pass']} passed, {c['fail']} failed, {c['skip']} skipped of {sum(c.values())}"


def compare(results, rbd=False, gateways=False):
    """Checks stint's results against the expectations file (and, for RBD LUNs, the RBD one
    over it, for the suites of RBD_SUITES; through gateways, the gateways' one over both);
    returns the exit status."""
    expected = load_expected()
    if rbd:
        load_expected(EXPECTED_RBD, expected)
        if gateways:
            load_expected(EXPECTED_GATEWAYS, expected)
        expected = {k: v for k, v in expected.items() if family(k) in RBD_SUITES}
    regressions, improvements = [], []
    for name in sorted(results):
        res, detail = results[name]
        # A block LUN's test is held to what the RAM LUN's is.
        exp = expected.get(name, expected.get(name.replace(BLOCK_SUFFIX, "", 1), ("pass", "")))[0]
        rank = {"pass": 2, "skip": 1, "fail": 0}
        if rank[res] < rank[exp]:
            regressions.append(f"{name}: expected {exp}, got {res}  {detail}")
        elif rank[res] > rank[exp]:
            improvements.append(f"{name}: expected {exp}, got {res}")
    for name in sorted(set(expected) - set(results)):
        regressions.append(f"{name}: listed in {os.path.basename(EXPECTED)} but not run")
    for line in improvements:
        print(f"  better than expected (update the expectations file): {line}")
    for line in regressions:
        print(f"  REGRESSION: {line}")
    if regressions:
        print(f"libiscsi conformance: {len(regressions)} regression(s) against {os.path.basename(EXPECTED)}")
        return 1
    print("libiscsi conformance: matches expectations")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stint", help="path to the stint binary to start (on a free port)")
    ap.add_argument("--url", help="test an already running target at this libiscsi URL instead")
    ap.add_argument("--peer", action="append", default=[], choices=sorted(PEERS),
                    help="also run the same passes against this target, started here with the "
                         "same LUNs (repeatable); its results are printed, never compared")
    ap.add_argument("--no-compare", action="store_true", help="only print the results")
    ap.add_argument("--jobs", type=int, default=2, help="suites run at once (each needs its own LUN)")
    ap.add_argument("--rbd", metavar="CEPH_CONF",
                    help="with --stint: every LUN a 64 MiB RBD image of this cluster (pool rbd, "
                         "user admin) instead of RAM, the suites that reach the store only "
                         "(RBD_SUITES), compared with the same expectations")
    ap.add_argument("--gateways", action="store_true",
                    help="with --rbd: two servers export every image as gateways a and b "
                         "(docs/gateways.md); each suite runs through one of them, every other "
                         "LUN's through b, and MultipathIO across both")
    args = ap.parse_args()
    if not args.stint and not args.url and not args.peer:
        ap.error("give --stint, --url or --peer")
    if args.url and (args.stint or args.peer):
        ap.error("--url tests one running target: give it alone")

    if args.rbd and not args.stint:
        ap.error("--rbd needs --stint")
    if args.gateways and not args.rbd:
        ap.error("--gateways needs --rbd (the gateways share RBD images)")
    name = "stint-gateways" if args.gateways else "stint-rbd" if args.rbd else "stint"
    targets = [(name, lambda luns, stack: serve_stint(args.stint, luns, stack, args.rbd, args.gateways))] if args.stint else []
    targets += [(peer, PEERS[peer]) for peer in args.peer]
    totals, status = [], 0
    if args.url:
        results, elapsed = run_all([args.url], [])
        totals.append(("target", results, elapsed))
    else:
        # A run on RBD LUNs (--rbd) is about the RBD store: no block LUN pass beside it.
        why = loop_devices_work() if args.stint and not args.rbd else None
        if why:
            print(f"SKIPPED (not passed): the {BLOCK_SUFFIX} pass: no loop device here ({why.strip()})")
        passes = flavours(block=why is None and not args.rbd)
        scope = RBD_SUITES if args.rbd else None
        if args.rbd:
            # Only the flavours with suites of the RBD scope; not the 4 KiB Sanitize.Reset.
            passes = [(settings, ss, suffix, extra) for settings, ss, suffix, extra in passes
                      if (ss == ["*"] or any(family(t) in scope for t in ss))
                      and not (ss == ["SCSI.Sanitize.Reset"] and suffix)]
        for name, serve in targets:
            # Only stint has a block LUN pass (the peers' stores are files).
            passes_here = [p for p in passes if name == "stint" or p[0].get("store") != "block"]
            with contextlib.ExitStack() as stack:
                # One LUN per parallel worker so suites that write never see each other's
                # data, plus the LUNs of the flavours some suites need (they skip on a plain
                # fixed disk).
                urls = serve([{}] * args.jobs + [settings for settings, _, _, _ in passes_here], stack)
                special = [(urls[args.jobs + i], ss, suffix, extra)
                           for i, (_, ss, suffix, extra) in enumerate(passes_here)]
                results, elapsed = run_all(urls[: args.jobs], special, scope)
            totals.append((name, results, elapsed))

    for name, results, elapsed in totals:
        print(f"== {name}")
        for test in sorted(results):
            res, detail = results[test]
            if res != "pass":
                print(f"  {res:4} {test}  {detail}")
        print(f"libiscsi iscsi-test-cu against {name}: {summary(counts(results))} in {elapsed:.0f} s")
        slowest = sorted(SECONDS.items(), key=lambda kv: -kv[1])[:8]
        print("  slowest (s, all passes): " + ", ".join(f"{k} {v:.0f}" for k, v in slowest))
        SECONDS.clear()
        if name.startswith("stint") and not args.no_compare:
            status = compare(results, bool(args.rbd), args.gateways)
    if len(totals) > 1:
        # A column per pass: the 512-byte one, the 4096-byte one, and the extra runs on LUNs
        # of one flavour (@inquiry_version=6, @lbppb=8), whose suites also ran in the passes.
        suffix = lambda test: "".join(re.findall(r"@[^.]*", test)[:1]) or "512-byte"
        cols = sorted({suffix(t) for _, results, _ in totals for t in results},
                      key=lambda c: (c[0] == "@", c))
        cell = lambda x, width: f"{x['pass']}/{x['fail']}/{x['skip']} of {sum(x.values())}".rjust(width)
        print("\nlibiscsi iscsi-test-cu, same run: passed/failed/skipped of run")
        print(f"  {'target':7} {'all':>18}" + "".join(f"{c:>22}" for c in cols))
        for name, results, _ in totals:
            row = [cell(counts(results), 18)]
            row += [cell(counts(results, lambda t, col=col: suffix(t) == col), 22) for col in cols]
            print(f"  {name:7} " + "".join(row))
    return status


if __name__ == "__main__":
    sys.exit(main())
