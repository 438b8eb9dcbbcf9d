#!/usr/bin/env bash
# The two clocks agree: `stint bench` runs experiment files in real time against a LUN served by
# `stint serve`, and `stint sim --device` runs the same files on the same device configuration
# in virtual time; per point and class this prints both IOPS, p99 and share of failed commands.
#
#   bench/two-clocks.sh [--ios N] [--qd 1,8,32]
#
# Cases: b1 and b2 (128 KiB random reads; b2 sends 20 % of them with DLD 1) on
# examples/hdd-cdl.toml: a class's IOPS must agree within 5 % and its p99 within 10 %. And b2's
# job on examples/fast-fail.toml, where DLD 1 is a 30 ms guideline with policy Fh and 1 % of the
# disk is weak (placed by the LUN's seed in both runs): which reads meet slow sectors, and so
# every later decision, changes with the timing of each command, so bench's IOPS, p99 and share
# of aborted limited reads must lie in the 99.8 % prediction interval of the simulator over
# workload seeds 1-20 (widened by the same 5 % / 10 %). A p99 with fewer than 10 samples beyond
# it (a class of fewer than 1,000 commands) is one of its few slowest commands, not an estimate:
# it shows as "–" and is not compared.
# Exits 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ios=1500 qd=1,8,32
while [ $# -gt 0 ]; do
  case "$1" in
    --ios) ios=$2; shift 2 ;;
    --qd) qd=$2; shift 2 ;;
    *) echo "usage: $0 [--ios N] [--qd 1,8,32]" >&2; exit 2 ;;
  esac
done

cargo build --release -q -p stint
stint=${CARGO_TARGET_DIR:-target}/release/stint
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

serve() { # config -> sets $url to the LUN's URL (not in a subshell: the server's pid must
  # reach `pids`, or cleanup cannot stop it)
  local port log
  log=$work/serve-$(basename "$1").log
  port=$(free_port)
  : >"$log"
  "$stint" serve --listen "127.0.0.1:$port" --config "$1" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q iscsi:// "$log" && break; sleep 0.1; done
  url=$(grep -m1 -o 'iscsi://[^ ]*' "$log")
}

cat >"$work/compare.py" <<'EOF'
import json, statistics, sys
name, bench = sys.argv[1], json.load(open(sys.argv[2]))
sims = [json.load(open(f)) for f in sys.argv[3:]]
failed = lambda c: (c["completed_unavailable"] + c["aborted"]) / max(c["ios"], 1)
# One simulator run with bench's seed must match it. Over several workload seeds bench is one
# more draw: it must lie in the seeds' 99.8 % prediction interval (Student's t for 19 degrees
# of freedom, as the script runs 20 seeds), widened by the tolerance.
T = 3.58
bad = 0
for i, b in enumerate(bench["points"]):
    for cls in sorted(b["classes"]):
        x = b["classes"][cls]
        ys = [s["points"][i]["classes"][cls] for s in sims]
        def within(get, tolerance):
            vs = list(map(get, ys))
            m = statistics.fmean(vs)
            half = T * statistics.stdev(vs) * (1 + 1 / len(vs)) ** 0.5 if len(vs) > 1 else 0.0
            lo, hi = max(m - half, 0.0) * (1 - tolerance), (m + half) * (1 + tolerance)
            return lo - 1e-9 <= get(x) <= hi + 1e-9, lo, hi
        ok_i, lo_i, hi_i = within(lambda c: c["iops"], 0.05)
        solid = min(c["samples_beyond"]["p99"] for c in [x, *ys]) >= 10
        ok_p, lo_p, hi_p = within(lambda c: c["lat_ms"]["p99"], 0.10)
        ok_f, lo_f, hi_f = within(failed, 0.0)
        ok = ok_i and (ok_p or not solid) and (len(ys) == 1 or ok_f)
        bad += not ok
        def sim(lo, hi, get, f):
            return f(get(ys[0])) if len(ys) == 1 else f"{f(lo)}–{f(hi)}"
        num, pct = lambda v: f"{v:.1f}", lambda v: f"{100 * v:.1f}%"
        print(f"| {name} | {b['qd']} | {cls} | {num(x['iops'])} | {sim(lo_i, hi_i, lambda c: c['iops'], num)} "
              f"| {num(x['lat_ms']['p99']) if solid else '–'} "
              f"| {sim(lo_p, hi_p, lambda c: c['lat_ms']['p99'], num) if solid else '–'} "
              f"| {pct(failed(x))} | {sim(lo_f, hi_f, failed, pct)} |{'' if ok else ' OUT'}")
sys.exit(1 if bad else 0)
EOF

fail=0
compare() { # name config experiment variant "seeds"
  local url sims=()
  serve "$2"
  "$stint" bench "$3" --url "$url" --qd "$qd" --ios "$ios" --variant "$4" --seed 1 --json >"$work/bench.json"
  for s in $5; do
    "$stint" sim "$3" --device "$2" --qd "$qd" --ios "$ios" --variant "$4" --seed "$s" --json >"$work/sim-$s.json"
    sims+=("$work/sim-$s.json")
  done
  python3 "$work/compare.py" "$1" "$work/bench.json" "${sims[@]}" || fail=1
}

echo "| case | QD | class | bench IOPS | sim IOPS | bench p99 ms | sim p99 ms | bench failed | sim failed |"
echo "|---|---|---|---|---|---|---|---|---|"
compare b1 examples/hdd-cdl.toml experiments/b1.toml default 1
compare b2 examples/hdd-cdl.toml experiments/b2.toml cdl-aware 1
compare b2-fast-fail examples/fast-fail.toml experiments/b2.toml cdl-aware "$(seq -s " " 20)"
exit $fail
