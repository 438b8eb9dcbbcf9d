#!/usr/bin/env python3
"""Run libiscsi's iscsi-test-cu conformance suite against stint (or any target) and compare the
result with the checked-in expectations file.

Each suite runs in its own process (Debian's 1.19.0 tool corrupts later 16-byte
CDBs when an earlier suite bails out early), with the URL given twice so MultipathIO runs.
SANITIZE runs with --allow-sanitize on LUNs of its own, one process per test.
CUnit counts a skipped test as passed; a test that printed [SKIPPED] is counted as skipped.

Exit status: 0 when every test not listed in the expectations file passed and every listed test
behaved as listed (or better); 1 otherwise.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "libiscsi-expected.txt")
TARGET = "iqn.2026-11.dev.stint:conformance-"
SUITE_TIMEOUT_S = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"stint serve exited early with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"stint serve did not listen on 127.0.0.1:{port} within {timeout_s} s")


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


def run_suite(suite, url, args=()):
    """Returns {test name: (result, detail)} for one suite (or one test of one); result is
    pass, fail or skip."""
    cmd = ["stdbuf", "-o0", "-e0", "iscsi-test-cu", "--dataloss", *args, f"--test={suite}", url, url]
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


def load_expected():
    expected = {}
    with open(EXPECTED) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in ("skip", "fail"):
                sys.exit(f"{EXPECTED}:{n}: expected '<test> skip|fail <reason>'")
            expected[parts[0]] = (parts[1], parts[2])
    return expected


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stint", help="path to the stint binary to start (on a free port)")
    ap.add_argument("--url", help="test an already running target at this libiscsi URL instead")
    ap.add_argument("--no-compare", action="store_true", help="only print the results")
    ap.add_argument("--jobs", type=int, default=2, help="suites run at once (each needs its own LUN)")
    args = ap.parse_args()
    if not args.stint and not args.url:
        ap.error("give --stint or --url")

    procs, urls, special = [], [], []
    try:
        if args.stint:
            # One LUN per parallel worker so suites that write never see each other's data, plus
            # LUNs of the flavours some suites need: those suites
            # skip on a plain fixed disk.
            port = free_port()
            # SANITIZE wipes its LUN, so it gets LUNs of its own, and each test its own process
            # with a timeout. Sanitize.Reset needs a sanitize still running 4 s after it began,
            # through resets and a new login: a paced LUN's takes 8 s.
            sanitize = [t for t in list_tests(3) if t.startswith("SCSI.Sanitize.")]
            reset = ["SCSI.Sanitize.Reset"]
            allow = ["--allow-sanitize"]
            unpaced = [t for t in sanitize if t not in reset]
            flavours = [
                ("inquiry_version = 6", ["SCSI.Inquiry"], "@inquiry_version=6", []),
                ("read_only = true", ["SCSI.ReadOnly"], "", []),
                ("removable = true", ["SCSI.PreventAllow", "SCSI.StartStopUnit", "SCSI.NoMedia"], "", []),
                # 512e (8 logical blocks per physical block): the unaligned-unmap and data-out
                # size cases of these suites skip unless LBPPB >= 2.
                ("physical_block_exponent = 3",
                 ["SCSI.WriteSame10", "SCSI.WriteSame16", "SCSI.CompareAndWrite"], "@lbppb=8", []),
                ("", unpaced, "", allow),
                ("sanitize_pace_ms = 8000", reset, "", allow),
                # The whole suite once more on 4 KiB logical blocks, with the same flavours.
                ("block_size = 4096", ["*"], "@block_size=4096", []),
                ("block_size = 4096\nread_only = true", ["SCSI.ReadOnly"], "@block_size=4096", []),
                ("block_size = 4096\nremovable = true", ["SCSI.PreventAllow", "SCSI.StartStopUnit"],
                 "@block_size=4096", []),
                ("block_size = 4096", unpaced, "@block_size=4096", allow),
                ("block_size = 4096\nsanitize_pace_ms = 8000", reset, "@block_size=4096", allow),
            ]
            # Each LUN gets a target node of its own: a TARGET RESET from one suite must not
            # raise unit attentions in a suite running beside it.
            config = [f'listen = "127.0.0.1:{port}"']
            luns = [""] * args.jobs + [extra for extra, _, _, _ in flavours]
            # The suite stops units, switches SWP and resets targets: stint refuses those to
            # initiators not granted them (16 tests fail or skip without the grant).
            for i, extra in enumerate(luns):
                config += ["[[target]]", f'name = "{TARGET}{i}"', 'privileged_initiators = ["*"]',
                           "[[target.lun]]", 'store = "ram"', 'size = "64MiB"', extra]
            config_path = os.path.join(tempfile.gettempdir(), f"stint-conformance-{port}.toml")
            with open(config_path, "w") as f:
                f.write("\n".join(config) + "\n")
            log = open(os.path.join(tempfile.gettempdir(), "stint-conformance-serve.log"), "w")
            procs.append(subprocess.Popen([args.stint, "serve", "--config", config_path],
                                          stdout=subprocess.DEVNULL, stderr=log))
            wait_listening(port, procs[0])
            url = lambda i: f"iscsi://127.0.0.1:{port}/{TARGET}{i}/0"
            urls = [url(i) for i in range(args.jobs)]
            special = [(url(args.jobs + i), suites, suffix, extra_args)
                       for i, (_, suites, suffix, extra_args) in enumerate(flavours)]
        else:
            urls = [args.url]
        suites = list_tests(2)
        family = lambda s: ".".join(s.split(".")[:2])
        # Suites that only a special LUN exercises run there instead of on a plain LUN (or, in
        # a suffixed pass, instead of on that pass's "*" LUN); a suffix marks an extra run whose
        # results are reported under their own names.
        moved = {}
        for _, ss, suffix, _ in special:
            if ss != ["*"]:
                moved.setdefault(suffix, set()).update(family(s) for s in ss)
        everything = lambda suffix: [s for s in suites if s not in moved.get(suffix, set())]
        items = [("special", (url, everything(suffix) if ss == ["*"] else ss, suffix, extra_args))
                 for url, ss, suffix, extra_args in special]
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
        elapsed = time.monotonic() - started
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    counts = {"pass": 0, "fail": 0, "skip": 0}
    for res, _ in results.values():
        counts[res] += 1
    for name in sorted(results):
        res, detail = results[name]
        if res != "pass":
            print(f"  {res:4} {name}  {detail}")
    print(f"libiscsi iscsi-test-cu: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped of {len(results)} in {elapsed:.0f} s")
    if args.no_compare:
        return 0

    expected = load_expected()
    regressions, improvements = [], []
    for name in sorted(results):
        res, detail = results[name]
        exp = expected.get(name, ("pass", ""))[0]
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


if __name__ == "__main__":
    sys.exit(main())
