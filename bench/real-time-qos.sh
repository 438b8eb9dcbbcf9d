#!/usr/bin/env bash
# Duration limits in real time over a slow store (issue 19, item 4d): a 256 MiB file LUN whose
# every store operation takes `store_delay_ms` (default 20; the file itself on the repository's
# disk), with a device queue of depth 4, under `stint bench` 4 KiB random reads at QD 16 with
# 10 % of the reads at DLD 1 (`--cmdprio-percentage 10 --cmdprio-hint 1`). Three variants:
#
#   no-cdl    the same LUN and queue, every read at DLD 0: the unlimited class's baseline;
#   abort     T2A descriptor 1: COMMAND DURATION GUIDELINE 50 ms, policy Fh (abort); the
#             limited reads wait in the same FIFO as the others, so most are ended at 50 ms;
#   priority  the same descriptor, and DLD 1 reads in the `high` class (`dld_classes`), which
#             strict arbitration fetches first: limited reads start at once and meet 50 ms.
#
# For each: limited and unlimited reads' p50, p99, max (ms) and outcomes (met, aborted), and
# the unlimited class's p50 against no-cdl. The limit holds when no limited read took longer
# than 50 ms plus the host's round trip.
#
#   bench/real-time-qos.sh [--rounds N] [--seconds S] [--delay-ms D]
#
# Each run starts its own server on 127.0.0.1 (port 0, URL read from its output) and stops it by
# PID; the variants alternate round by round; the table prints medians over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 seconds=8 delay=20
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2-}; shift; shift || true ;;
    --seconds) seconds=${2-}; shift; shift || true ;;
    --delay-ms) delay=${2-}; shift; shift || true ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--delay-ms D]" >&2; exit 2 ;;
  esac
done
for v in "$rounds" "$seconds" "$delay"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bad value '$v': expected a positive integer" >&2; exit 2; }
done

cargo build --release -q -p stint
stint=$(realpath "${CARGO_TARGET_DIR:-target}/release/stint")
mkdir -p target
work=$(mktemp -d "$PWD/target/real-time-qos.XXXXXX")
pid=""
cleanup() {
  exec 2>/dev/null
  if [ -n "$pid" ]; then kill -9 "$pid" || true; wait "$pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

config() { # variant
  cat <<EOF
[[target]]
name = "iqn.2026-11.dev.stint:rt"
[[target.lun]]
store = "file"
path = "$work/lun.img"
size = "256MiB"
store_delay_ms = $delay

[target.lun.queue]
depth = 4
EOF
  [ "$1" = priority ] && echo 'dld_classes = { "1" = "high" }'
  [ "$1" = no-cdl ] || printf '\n[target.lun.cdl]\nread = [{ dld = 1, guideline_ms = 50, guideline_policy = "abort" }]\n'
}

run() { # variant round
  config "$1" > "$work/$1.toml"
  "$stint" serve --config "$work/$1.toml" --listen 127.0.0.1:0 > "$work/serve.out" 2> "$work/serve.err" &
  pid=$!
  local url=""
  for _ in $(seq 100); do
    url=$(grep -o 'iscsi://[^ ]*' "$work/serve.out" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "$1: server stopped:" >&2; tail -3 "$work/serve.err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "$1: no URL from the server" >&2; exit 1; }
  local prio=(--cmdprio-percentage 10 --cmdprio-hint 1 --cmdprio-class high)
  [ "$1" = no-cdl ] && prio=()
  if ! "$stint" bench --url "$url" --rw randread --bs 4k --iodepth 16 --runtime "${seconds}s" \
      "${prio[@]}" --json > "$work/$1.$2.json" 2> "$work/bench.err"; then
    echo "$1: stint bench failed:" >&2; tail -3 "$work/bench.err" >&2; exit 1
  fi
  kill "$pid"; wait "$pid" || true; pid=""
}

variants=(no-cdl abort priority)
for r in $(seq "$rounds"); do
  order=("${variants[@]}")
  [ $((r % 2)) -eq 0 ] && order=(priority abort no-cdl)
  for v in "${order[@]}"; do
    echo "round $r/$rounds: $v" >&2
    run "$v" "$r"
  done
done

python3 - "$work" "$rounds" "$delay" <<'EOF'
import json, statistics, sys
work, rounds, delay = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def med(xs): return statistics.median(xs) if xs else float("nan")
rows = {}
for v in ("no-cdl", "abort", "priority"):
    for r in range(1, rounds + 1):
        p = json.load(open(f"{work}/{v}.{r}.json"))["points"][0]
        for name, c in p["classes"].items():
            cls = "limited" if "dld1" in name else "unlimited"
            rows.setdefault((v, cls), []).append(c)
print(f"4 KiB random reads, QD 16, store {delay} ms per operation, device queue depth 4,"
      f" 10 % at DLD 1 (guideline 50 ms, Fh); medians of {rounds} rounds")
print(f"{'variant':9} {'class':9} {'ios':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
      f" {'met':>5} {'aborted':>7} {'errors':>6}")
base = med([c["lat_ms"]["p50"] for c in rows[("no-cdl", "unlimited")]])
for (v, cls), cs in rows.items():
    m = lambda k: med([c["lat_ms"][k] for c in cs])
    n = lambda k: med([c[k] for c in cs])
    errors = med([c["ios"] - c["data_ios"] - c["aborted"] - c["completed_unavailable"] for c in cs])
    print(f"{v:9} {cls:9} {n('ios'):6.0f} {m('p50'):8.2f} {m('p99'):8.2f} {m('max'):8.2f}"
          f" {n('limit_met'):5.0f} {n('aborted'):7.0f} {errors:6.0f}")
for v in ("abort", "priority"):
    p50 = med([c["lat_ms"]["p50"] for c in rows[(v, "unlimited")]])
    print(f"{v}: unlimited p50 {p50 / base:.2f}x of no-cdl")
EOF
