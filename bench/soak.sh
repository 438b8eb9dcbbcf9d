#!/usr/bin/env bash
# Soak: one `stint serve` with a RAM LUN and a file LUN under verified load for a bounded time
# while a hostile client attacks it. Two `stint bench --verify` runs (16 sessions × QD32 of
# random 4 KiB read/write each, one per LUN: every read checked against the last write), and
# bench/hostile.py (malformed PDUs, connections dropped mid-login and mid-write, bad CDBs, and
# --logins iscsi-inq login/logout cycles). Prints the server's RSS and open descriptors at the
# start (after a 20 s warm-up) and every minute; fails on a verify error, a panic or error in
# the server's log, a failed well-formed login, or a server that died.
#
#   bench/soak.sh [--minutes N] [--logins N] [--stint PATH]     (default 10 minutes, 1000 logins)
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10 logins=1000 stint=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --logins) logins=$2; shift 2 ;;
    --stint) stint=$2; shift 2 ;;
    *) echo "usage: $0 [--minutes N] [--logins N] [--stint PATH]" >&2; exit 2 ;;
  esac
done
command -v iscsi-inq >/dev/null || { echo "soak: needs iscsi-inq (Debian's libiscsi-bin)" >&2; exit 2; }
if [ -z "$stint" ]; then
  cargo build --release -q -p stint
  stint="${CARGO_TARGET_DIR:-target}/release/stint"
fi

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  jobs -p | xargs -r kill 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target=iqn.2026-11.dev.stint:soak
"$stint" serve --listen "127.0.0.1:$port" --target-name "$target" \
  --lun ram:1GiB --lun "file:$work/lun.img:1GiB" >"$work/urls" 2>"$work/serve.log" &
server=$!
for _ in $(seq 100); do [ "$(wc -l <"$work/urls")" -ge 2 ] && break; sleep 0.1; done
mapfile -t urls <"$work/urls"
[ "${#urls[@]}" -ge 2 ] || { echo "soak: stint serve did not start"; cat "$work/serve.log"; exit 1; }

usage() {  # RSS (MiB) and open descriptors of the server
  local rss fds
  rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$server/status")
  fds=$(ls "/proc/$server/fd" | wc -l)
  echo "rss_mib=$rss fds=$fds"
}

secs=$((minutes * 60))
echo "soak: ${minutes} min, stint serve pid $server on 127.0.0.1:$port; LUN 0 ram:1GiB, LUN 1 file:1GiB"
# Every block written once first, so that RSS measures the server, not the RAM LUN filling up.
for i in 0 1; do
  "$stint" bench --url "${urls[$i]}" --rw write --bs 1m --iodepth 8 --ios 1024 --json >/dev/null
done
echo "$(date +%T) both LUNs written once"
for i in 0 1; do
  "$stint" bench --url "${urls[$i]}" --rw randrw --bs 4k --numjobs 16 --iodepth 32 \
    --runtime "${secs}s" --verify --json --initiator "iqn.2026-11.dev.stint:soak$i" \
    >"$work/bench$i.json" 2>"$work/bench$i.err" &
  eval "bench$i=$!"
done
python3 bench/hostile.py --portal "127.0.0.1:$port" --target "$target" \
  --seconds "$((secs - 30))" --logins "$logins" >"$work/hostile.out" 2>&1 &
hostile=$!

sleep 20
start_usage=$(usage)
echo "start (after 20 s): $start_usage"
for _ in $(seq $(((secs - 20) / 60))); do
  sleep 60
  kill -0 "$server" 2>/dev/null || break
  echo "  $(date +%T) $(usage)"
done
status=0
echo "$(date +%T) waiting for the clients"
# Every client finishes before the server's state is read, so nothing of theirs is in flight.
wait "$bench0" || status=1
wait "$bench1" || status=1
wait "$hostile" || status=1
if ! kill -0 "$server" 2>/dev/null; then
  echo "FAIL: stint serve died"; tail -20 "$work/serve.log"; exit 1
fi
sleep 2
end_usage=$(usage)
echo "end: $end_usage (start: $start_usage)"
cat "$work/hostile.out"
for i in 0 1; do
  python3 - "$work/bench$i.json" "$i" <<'EOF' || status=1
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    print(f"FAIL: LUN {sys.argv[2]}: bench printed no report"); sys.exit(1)
v, t = r["verify"], r["points"][0]["total"]
print(f"LUN {sys.argv[2]}: {t['ios']} I/Os at {t['iops']:.0f} IOPS, {v['blocks_checked']} blocks "
      f"verified, {len(v['mismatches'])} mismatches")
sys.exit(1 if v["mismatches"] else 0)
EOF
  [ -s "$work/bench$i.err" ] && { echo "bench $i stderr:"; tail -5 "$work/bench$i.err"; }
done
panics=$(grep -c 'panicked' "$work/serve.log" || true)
errors=$(grep -c ' ERROR ' "$work/serve.log" || true)
echo "server log: $(wc -l <"$work/serve.log") lines, $panics panics, $errors errors"
[ "$panics" = 0 ] && [ "$errors" = 0 ] || { grep -m5 'panicked\| ERROR ' "$work/serve.log"; status=1; }
[ $status = 0 ] && echo "soak: PASS" || echo "soak: FAIL"
exit $status
