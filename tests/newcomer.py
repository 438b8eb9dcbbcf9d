#!/usr/bin/env python3
"""A newcomer's first hour, checked: the README fits on a screen (at most 260 lines), and every link
of the README and docs leads somewhere in the repository (a file, and the heading or anchor it
names); install stint as the README says, run the example commands of the README and of docs/
(each on a free port, in a scratch directory), then every bad input a newcomer is likely to type.
Examples must succeed; each bad input must exit non-zero with a short message naming the field,
with RUST_BACKTRACE=1 set as many shells have it. Last, the memory a 100 TiB RAM LUN costs before
and after 1 GiB is written. Every server started is stopped."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A user error fits on one screen; the caret display of a TOML error takes five lines of it.
MAX_ERROR_LINES = 12
# The README is the landing page: what stint is, the two commands, one example per subcommand
# and the table of docs; the reference lives in docs/ (issue 22).
MAX_README_LINES = 260
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(args, env, cwd, timeout=120, stdin=None):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin)


class Serve:
    """`stint serve ARGS --listen 127.0.0.1:0`; the URLs it prints; stopped by SIGTERM."""

    def __init__(self, args, env, cwd, luns=1):
        # Its log goes to a file: a pipe nobody drains would stall the server when full.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["stint", "serve", "--listen", "127.0.0.1:0", *args],
                                     env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        # serve prints one URL per LUN once it listens, then nothing until it stops.
        self.urls = []
        watchdog = threading.Timer(30, self.proc.kill)  # a server that never listens
        watchdog.start()
        while len(self.urls) < luns:
            line = self.proc.stdout.readline()
            if not line:
                watchdog.cancel()
                self.stop()
                self.log.seek(0)
                raise RuntimeError(f"stint serve {' '.join(args)} printed {self.urls}, "
                                   f"then ended: {self.log.read()}")
            if line.startswith("iscsi://"):
                self.urls.append(line.strip())
        watchdog.cancel()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def capacity(url, env):
    """Bytes READ CAPACITY(16) reports, through libiscsi's tool."""
    out = run(["iscsi-readcapacity16", url], env, REPO).stdout
    found = re.search(r"^Total size:(\d+)$", out, re.M)
    return int(found.group(1)) if found else f"no size in {out!r}"


def install(root, env):
    """The README's install step, into a scratch root (the build reuses the release target)."""
    r = subprocess.run(["cargo", "install", "--locked", "--path", "crates/cli", "--root", root],
                       cwd=REPO, env=env, capture_output=True, text=True)
    check(r.returncode == 0, "cargo install --locked --path crates/cli" +
          ("" if r.returncode == 0 else f": {r.stderr[-2000:]}"))
    r = run(["stint", "--version"], env, root)
    check(r.returncode == 0 and r.stdout.startswith("stint "), f"stint on PATH: {r.stdout.strip()}")


def examples(env, work):
    with Serve([], env, work, luns=2) as s:
        check(len(s.urls) == 2 and s.urls[0].endswith("/0") and s.urls[1].endswith("/1"),
              f"stint serve: a RAM LUN and a CDL disk LUN ({s.urls})")
        check(capacity(s.urls[0], env) == 1 << 30, "LUN 0 is 1 GiB")
        check(capacity(s.urls[1], env) > 20 * 10**12, "LUN 1 is the 22 TB hard disk")
        r = run(["stint", "cdl", "info", s.urls[1]], env, work)
        check(r.returncode == 0 and "T2A" in r.stdout, "stint cdl info on the CDL disk")
        for cmd in (["show", "--page", "t2a"], ["stats"]):
            r = run(["stint", "cdl", *cmd, s.urls[1]], env, work)
            check(r.returncode == 0 and r.stdout, f"stint cdl {' '.join(cmd)}")
        r = run(["stint", "bench", "--url", s.urls[0], "--rw", "randread", "--bs", "4k",
                 "--iodepth", "32", "--runtime", "1s"], env, work)
        check(r.returncode == 0 and "IOPS" in r.stdout, "stint bench --rw randread --iodepth 32")
        # The README's bench example: a fifth of the reads with hint 1 on the CDL disk are DLD 1.
        r = run(["stint", "bench", "--url", s.urls[1], "--rw", "randread", "--bs", "128k",
                 "--iodepth", "32", "--cmdprio-percentage", "20", "--cmdprio-hint", "1",
                 "--runtime", "1s"], env, work)
        check(r.returncode == 0 and re.search(r"^default\s+32\s+medium-dld1\s", r.stdout, re.M),
              "stint bench --cmdprio-hint 1 against LUN 1 reports a medium-dld1 row" +
              ("" if r.returncode == 0 else f": {r.stderr}"))
        r = run(["stint", "bench", "--url", s.urls[0], "--rw", "randrw", "--numjobs", "4",
                 "--iodepth", "16", "--runtime", "1s", "--verify"], env, work)
        check(r.returncode == 0, "stint bench --rw randrw --numjobs 4 --verify" +
              ("" if r.returncode == 0 else f": {r.stdout[-500:]}{r.stderr}"))
        code = s.stop()
    check(code == 0, f"SIGTERM stops stint serve with status 0 (got {code})")

    with Serve(["--lun", "ram:4GiB", "--lun", "file:disk1.img:100GiB"], env, work, 2) as s:
        img = os.path.join(work, "disk1.img")
        st = os.stat(img)
        check(st.st_size == 100 << 30 and st.st_blocks * 512 < 1 << 20,
              "--lun file:disk1.img:100GiB creates a sparse 100 GiB file")
        check(capacity(s.urls[1], env) == 100 << 30, "the file LUN is 100 GiB")
        r = run(["stint", "serve", "--listen", "127.0.0.1:0", "--lun", "file:disk1.img"], env, work)
        check(r.returncode != 0 and f"pid {s.proc.pid}" in r.stderr,
              f"a second server on disk1.img is refused, naming the first: {r.stderr.strip()}")

    # The README's stint ctl: the server's LUN, through its admin socket (docs/ctl.md).
    socket = os.path.join(work, "admin.sock")
    with Serve(["--lun", "ram:16MiB", "--admin-socket", socket], env, work) as s:
        r = run(["stint", "ctl", "--socket", socket, "ls"], env, work)
        check(r.returncode == 0 and re.search(r"^  o- lun0 \.+ \[ram, 16 MiB,", r.stdout, re.M),
              "stint ctl ls lists the running server's 16 MiB LUN" +
              ("" if r.returncode == 0 else f": {r.stderr}"))

    for example in ("hdd-cdl", "fast-fail", "fast-fail-real-time", "priority"):
        path = os.path.join(REPO, "examples", f"{example}.toml")
        with Serve(["--config", path], env, work) as s:
            r = run(["iscsi-inq", s.urls[0]], env, work)
            check(r.returncode == 0, f"stint serve --config examples/{example}.toml answers INQUIRY")

    with Serve(["--config", write(work, "gb.toml", LUN.format('size = "1GB"'))], env, work) as s:
        check(capacity(s.urls[0], env) == 10**9, 'size = "1GB" is 10^9 bytes')

    r = run(["stint", "sim", "--list"], env, work)
    check(r.returncode == 0 and re.search(r"^b1\s+WD CDL baseline", r.stdout, re.M),
          "stint sim --list names the shipped experiments")
    r = run(["stint", "sim", "b1", "--ios", "300", "--qd", "1"], env, work)
    check(r.returncode == 0 and r.stdout.startswith("b1 — "), "stint sim b1 runs the shipped file")
    r = run(["stint", "sim", "b2", "--variant", "cdl-aware", "--qd", "1,32"], env, work)
    check(r.returncode == 0 and re.search(r"^cdl-aware\s+32\s+medium-dld1\s", r.stdout, re.M),
          "stint sim b2 --variant cdl-aware --qd 1,32 (the README's example)")
    for shell, marker in (("bash", "complete -F _stint"), ("zsh", "#compdef stint"),
                          ("fish", "complete -c stint")):
        r = run(["stint", "completions", shell], env, work)
        check(r.returncode == 0 and marker in r.stdout, f"stint completions {shell}")
    b2 = os.path.join(REPO, "experiments", "b2.toml")
    r = run(["stint", "sim", b2, "--json", "--ios", "300", "--qd", "1,8"], env, work)
    check(r.returncode == 0 and json.loads(r.stdout)["experiment"] == "b2", "stint sim --json")
    r = run(["stint", "sim", b2, "--plot", "out", "--ios", "300", "--qd", "1,8"], env, work)
    figures = [f"b2-{kind}.svg" for kind in ("iops", "p99", "cdf")]
    check(r.returncode == 0 and all(os.path.exists(os.path.join(work, "out", f))
                                     for f in figures), "stint sim --plot out/ writes 3 SVGs")


LUN = '[[target]]\nname = "iqn.2026-11.dev.stint:new"\n[[target.lun]]\nstore = "ram"\n{}\n'


def write(work, name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def bad_inputs(env, work):
    open(os.path.join(work, "a-file"), "w").close()
    cases = [
        (["serve", "--config", write(work, "neg.toml", LUN.format("size = -5"))],
         "size must not be negative, not -5"),
        (["serve", "--config", write(work, "unit.toml", LUN.format('size = "1 gigabyte"'))],
         "invalid size"),
        (["serve", "--config", write(work, "key.toml", LUN.format('size = "1GiB"\nsise = 1'))],
         "unknown field `sise`"),
        (["serve", "--config",
          write(work, "serial.toml", LUN.format('size = "1GiB"\nserial = "h\u00e9llo"'))],
         "serial"),
        (["serve", "--config",
          write(work, "name.toml", LUN.format('size = "1GiB"').replace(":new", ":New"))],
         "lower case"),
        (["serve", "--target-name", "iqn.bad name"], "--target-name"),
        (["serve", "--lun", "ram:lots"], "invalid size"),
        (["serve", "--lun", "ram:32PiB"], "PiB it can address"),
        (["serve", "--lun", "file:no/such/dir/disk.img:1GiB"], "no/such/dir/disk.img"),
        (["serve", "--config", "stint.toml"], "stint.toml"),
        (["serve", "--listen", "nowhere"], "--listen"),
        (["sim", write(work, "si.toml", 'id = "si"\nqd = [1]\n[drive]\nmodel = "instant"\n[[job]]\n'
                                         'name = "j"\nbs = "4kB"\n')], "4KiB or 4K"),
        (["sim", "b9"], "not a shipped experiment (a1, a2"),
        # The whole b1 sweep takes minutes: refused within the timeout means refused first.
        (["sim", "b1", "--plot", "a-file"], "--plot a-file: not a directory"),
        (["sim", "b1", "--qd", "0"], "qd"),
        (["bench", "--url", "iscsi://127.0.0.1:1/iqn.2026-11.dev.stint:target0/0",
          "--runtime", "1s"], "127.0.0.1:1"),
        (["bench", "--url", "http://x", "--runtime", "1s"], "--url"),
    ]
    for args, want in cases:
        r = run(["stint", *args], env, work, timeout=20)
        lines = r.stderr.strip().splitlines()
        ok = (r.returncode != 0 and want in r.stderr and len(lines) <= MAX_ERROR_LINES
              and "panicked" not in r.stderr and "backtrace" not in r.stderr.lower())
        shown = r.stderr.strip() if not ok else (lines[0] if lines else "")
        check(ok, f"stint {' '.join(args)} -> {shown}")


def memory(env, work):
    """RSS of a 100 TiB RAM LUN before any write, then after 1 GiB of 1 MiB sequential writes."""
    fill = write(work, "fill.toml", 'id = "fill"\nqd = [1]\nios = 1024\nramp_ios = 0\n'
                 '[drive]\nmodel = "instant"\n[[job]]\nname = "fill"\nrw = "write"\n'
                 'bs = "1m"\nsize = "1GiB"\n')
    with Serve(["--lun", "ram:100TiB"], env, work) as s:
        before = s.rss_kib()
        check(before < 50 << 10, f"ram:100TiB costs {before / 1024:.1f} MiB of RSS before any write")
        r = run(["stint", "bench", fill, "--url", s.urls[0]], env, work)
        check(r.returncode == 0, "1 GiB written with stint bench" +
              ("" if r.returncode == 0 else f": {r.stderr}"))
        after = s.rss_kib()
        over = (after - (1 << 20)) / 1024
        check(1 << 20 <= after <= (1 << 20) + (100 << 10),
              f"after 1 GiB written: {after / 1024:.1f} MiB of RSS (1 GiB + {over:.1f} MiB)")


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|<[^>]+>", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(body):
    """Every anchor of a Markdown text: its headings' (outside code blocks) and <a id>s."""
    found, seen, fenced = set(), {}, False
    for line in body.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        heading = re.match(r"#{1,6} (.*)", line)
        if heading and not fenced:
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    found.update(re.findall(r'<a id="([^"]+)"', body))
    return found


def documents():
    """The README fits on a screen, and what it and the docs point a reader to exists, inside
    the repository: every linked file, and the heading or anchor a link names in it."""
    with open(os.path.join(REPO, "README.md")) as f:
        lines = len(f.read().splitlines())
    check(lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})")
    texts = ["README.md", "experiments/README.md"]
    texts += [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(REPO, "docs")))]
    links, broken = 0, []
    for text in texts:
        with open(os.path.join(REPO, text)) as f:
            body = f.read()
        for target in re.findall(r"\]\(([^)\s]+)\)", body):
            if "://" in target:
                continue
            links += 1
            file, _, fragment = target.partition("#")
            path = os.path.normpath(os.path.join(REPO, os.path.dirname(text), file or
                                                 os.path.basename(text)))
            if not (os.path.exists(path) and path.startswith(REPO + os.sep)):
                broken.append(f"{text} -> {target}")
            elif fragment and path.endswith(".md"):
                with open(path) as f:
                    if fragment not in anchors(f.read()):
                        broken.append(f"{text} -> {target} (no such heading)")
    check(links > 0 and not broken, f"{links} links of the README and docs lead to files and "
          f"headings in the repository" + (f"; broken: {broken}" if broken else ""))
    outside = subprocess.run(["grep", "-rln", r"spec/\|shared/", "crates", "experiments",
                              "README.md", "docs"], cwd=REPO, capture_output=True, text=True)
    check(outside.stdout == "", "no citation of files outside the repository (spec/, shared/)"
          + (f": {outside.stdout.split()}" if outside.stdout else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stint", help="use this binary instead of installing (for a quick rerun)")
    args = ap.parse_args()
    documents()
    with tempfile.TemporaryDirectory(prefix="stint-newcomer-") as work:
        env = dict(os.environ, RUST_BACKTRACE="1")
        env.setdefault("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
        if args.stint:
            os.symlink(os.path.abspath(args.stint), os.path.join(work, "stint"))
            env["PATH"] = work + os.pathsep + env["PATH"]
        else:
            root = os.path.join(work, "root")
            env["PATH"] = os.path.join(root, "bin") + os.pathsep + env["PATH"]
            install(root, env)
        scratch = os.path.join(work, "scratch")
        os.mkdir(scratch)
        examples(env, scratch)
        bad_inputs(env, scratch)
        memory(env, scratch)
    if failures:
        print(f"{len(failures)} newcomer check(s) failed:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("every newcomer check passed")


if __name__ == "__main__":
    main()
