#!/usr/bin/env python3
"""Decoders for the guest-side suites (runs INSIDE the VM; standard library only).

  cdltool.py modepage FILE SUBPAGE      MODE SENSE(10) response (sg_modes -r) holding the CDL
                                        T2A (7) or T2B (8) subpage of page 0Ah: one line per
                                        descriptor, KEY=VALUE fields
  cdltool.py logpage FILE               LOG SENSE response (sg_logs -r) of page 19h/21h: one line
                                        per parameter: CODE c1 c2 c3 c4 (the BE32 counters)
  cdltool.py logdelta BEFORE AFTER      the counters' increase per parameter, same format
  cdltool.py fio-digest FILE            a line per job of fio's JSON output
  cdltool.py fio-prio FILE HINT [JOB]   "read=N write=N": completed I/Os with priority hint HINT
                                        (fio's per-priority clat sample counts), all jobs or JOB
  cdltool.py fio-job FILE JOB           KEY=VALUE: error, total_err, first_error, read/write ios
Times are printed in microseconds (T2CDLUNITS: 6h = 500 ns, 8h = 1 us, Ah = 10 ms, Eh = 500 ms).
"""
import json
import sys

UNIT_NS = {0x0: 0, 0x6: 500, 0x8: 1000, 0xA: 10_000_000, 0xE: 500_000_000}
ABORTING = {0xD, 0xE, 0xF}  # policies that end a command that misses its limit with an error


def be(b, off, n):
    return int.from_bytes(b[off:off + n], "big")


def modepage(path, subpage):
    data = open(path, "rb").read()
    if len(data) < 8:
        sys.exit("mode sense response too short: %d bytes" % len(data))
    bdl = be(data, 6, 2)                      # MODE SENSE(10) header: block descriptor length
    off = 8 + bdl
    while off + 4 <= len(data):
        code, spf = data[off] & 0x3F, data[off] & 0x40
        if spf:
            sp, plen, hdr = data[off + 1], be(data, off + 2, 2), 4
        else:
            sp, plen, hdr = 0, data[off + 1], 2
        if code == 0x0A and sp == subpage:
            page = data[off:off + hdr + plen]
            break
        off += hdr + plen
    else:
        sys.exit("page 0Ah subpage %02xh not in the response" % subpage)
    print("page=0a,%02x page_length=%d perf_vs_duration_guideline=%d"
          % (subpage, plen, page[7] >> 4))
    for n in range(7):
        d = page[8 + 32 * n:8 + 32 * (n + 1)]
        if len(d) < 32:
            break
        units = d[0] & 0x0F
        unit_ns = UNIT_NS.get(units)
        inactive, active, guideline = be(d, 2, 2), be(d, 4, 2), be(d, 10, 2)
        ipol, apol, gpol = d[6] >> 4, d[6] & 0x0F, d[14] & 0x0F
        limited = units != 0 and (inactive or active or guideline) and unit_ns is not None

        def us(v):
            return "-" if unit_ns is None else str(v * unit_ns // 1000)
        aborting = limited and ((inactive and ipol in ABORTING) or (active and apol in ABORTING)
                                or (guideline and gpol in ABORTING))
        print("dld=%d units=%xh inactive_us=%s inactive_policy=%xh active_us=%s active_policy=%xh "
              "guideline_us=%s guideline_policy=%xh limited=%d aborting=%d"
              % (n + 1, units, us(inactive), ipol, us(active), apol, us(guideline), gpol,
                 1 if limited else 0, 1 if aborting else 0))


def logparams(path):
    data = open(path, "rb").read()
    if len(data) < 4:
        sys.exit("log sense response too short: %d bytes" % len(data))
    if data[0] & 0x3F != 0x19 or data[1] != 0x21:
        sys.exit("not log page 19h/21h: %02xh/%02xh" % (data[0] & 0x3F, data[1]))
    end = min(len(data), 4 + be(data, 2, 2))
    off, params = 4, {}
    while off + 4 <= end:
        code, plen = be(data, off, 2), data[off + 3]
        body = data[off + 4:off + 4 + plen]
        params[code] = [be(body, i, 4) for i in range(0, len(body) - 3, 4)]
        off += 4 + plen
    return params


def logpage(path):
    for code, counters in sorted(logparams(path).items()):
        print("%04x %s" % (code, " ".join(str(c) for c in counters)))


def logdelta(before, after):
    b, a = logparams(before), logparams(after)
    for code in sorted(a):
        old = b.get(code, [0] * len(a[code]))
        print("%04x %s" % (code, " ".join(str(x - y) for x, y in zip(a[code], old))))


def jobs(path):
    return json.load(open(path))["jobs"]


def fio_digest(path):
    for j in jobs(path):
        parts = ["job=%s error=%s" % (j["jobname"], j.get("error"))]
        if "total_err" in j:
            parts.append("total_err=%s first_error=%s" % (j["total_err"], j.get("first_error")))
        for dd in ("read", "write"):
            r = j[dd]
            if not r["total_ios"]:
                continue
            parts.append("%s_ios=%d %s_iops=%.0f %s_clat_mean_ms=%.1f"
                         % (dd, r["total_ios"], dd, r["iops"], dd, r["clat_ns"]["mean"] / 1e6))
            for p in r.get("prios", []):
                parts.append("%s[class=%d,hint=%d]=%d(mean %.1f ms)"
                             % (dd, p["prioclass"], p.get("priohint", 0), p["clat_ns"]["N"],
                                p["clat_ns"]["mean"] / 1e6))
        print(" ".join(parts))


def fio_prio(path, hint, job=None):
    out = {"read": 0, "write": 0}
    for j in jobs(path):
        if job and j["jobname"] != job:
            continue
        for dd in out:
            for p in j[dd].get("prios", []):
                if p.get("priohint", 0) == hint:
                    out[dd] += p["clat_ns"]["N"]
    print("read=%d write=%d" % (out["read"], out["write"]))


def fio_job(path, name):
    for j in jobs(path):
        if j["jobname"] == name:
            print("error=%s" % j.get("error", 0))
            print("total_err=%s" % j.get("total_err", 0))
            print("first_error=%s" % j.get("first_error", 0))
            for dd in ("read", "write"):
                print("%s_ios=%d" % (dd, j[dd]["total_ios"]))
            return
    sys.exit("no job %s" % name)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "modepage":
        modepage(argv[2], int(argv[3], 0))
    elif cmd == "logpage":
        logpage(argv[2])
    elif cmd == "logdelta":
        logdelta(argv[2], argv[3])
    elif cmd == "fio-digest":
        fio_digest(argv[2])
    elif cmd == "fio-prio":
        fio_prio(argv[2], int(argv[3]), argv[4] if len(argv) > 4 else None)
    elif cmd == "fio-job":
        fio_job(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
