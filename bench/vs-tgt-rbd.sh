#!/usr/bin/env bash
# stint against tgt on the same Ceph RBD image: a one-node cluster (tests/ceph/cluster.sh), one
# 1 GiB image, served in turn by stint (`store = "rbd"`, librbd's asynchronous API) and by tgt's
# RBD backing store (Debian's tgt-rbd, `--bstype rbd`), with the same clients, at two points:
# 4 KiB random reads at QD 32 and 64 KiB sequential writes at QD 16. The ceiling is the
# cluster's own `rbd bench` on the same image at the same sizes and depths, without iSCSI.
# librbd's cache is off for every client (the cluster's [client] section), so no side merges
# writes the other sends through.
#
#   bench/vs-tgt-rbd.sh [--rounds N] [--seconds S] [--keep-cluster DIR]
#
# Clients: `stint bench` for both points, and libiscsi's iscsi-perf (reads only) for the read
# point. Only one server holds the image at a time (stint takes its exclusive lock), so the
# servers alternate, round by round; the table prints medians over the rounds and each ratio
# stint/tgt and stint/rbd-bench from the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

rounds=3 seconds=10 keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --keep-cluster) keep=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--keep-cluster DIR]" >&2; exit 2 ;;
  esac
done
positive rounds="$rounds" seconds="$seconds"

need=()
command -v iscsi-perf >/dev/null || need+=(libiscsi-bin)
command -v tgtd >/dev/null || need+=(tgt)
[ -e /usr/lib/tgt/backing-store/bs_rbd.so ] || need+=(tgt-rbd)
for c in ceph-mon ceph-osd rbd; do command -v $c >/dev/null || need+=(ceph-mon ceph-osd ceph-common); done
install_missing ${need[@]+"${need[@]}"}
cargo build --release -q -p stint
stint=${CARGO_TARGET_DIR:-target}/release/stint

work=$(mktemp -d /tmp/stint-vs-tgt-rbd.XXXXXX)
cluster=${keep:-$work/ceph}
server_pid="" tgt_cport=""
cleanup() {
  stop_server 2>/dev/null || true
  [ -n "$keep" ] || tests/ceph/cluster.sh stop "$cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT


[ -s "$cluster/ceph.conf" ] && rbd -c "$cluster/ceph.conf" ls rbd >/dev/null 2>&1 ||
  tests/ceph/cluster.sh start "$cluster"
conf=$cluster/ceph.conf
img=rbd/stint-vs-tgt
rbd -c "$conf" rm --no-progress "$img" >/dev/null 2>&1 || true
rbd -c "$conf" create --size 1G "$img"
# Written once, whole: reads of objects never written cost the OSD nothing and would flatter
# every reader alike.
rbd -c "$conf" bench --io-type write --io-size 4M --io-threads 4 --io-pattern seq \
  --io-total 1G "$img" >/dev/null

url=""
start_stint() {
  local port; port=$(free_port)
  "$stint" serve --listen "127.0.0.1:$port" --lun "rbd:$img:$conf" >"$work/stint.log" 2>&1 &
  server_pid=$!
  wait_up "stint serve" "$port" "$server_pid" "$work/stint.log" 20
  url=$(grep -m1 -o 'iscsi://[^ ]*' "$work/stint.log")
}
start_tgt() {
  local port; port=$(free_port)
  tgt_cport=$((RANDOM % 8000 + 1000))
  tgtd -f -C "$tgt_cport" --iscsi "portal=127.0.0.1:$port" >"$work/tgt.log" 2>&1 &
  server_pid=$!
  wait_up tgtd "$port" "$server_pid" "$work/tgt.log" 20
  local adm="tgtadm -C $tgt_cport --lld iscsi"
  $adm --op new --mode target --tid 1 -T iqn.2001-04.com.example:rbd
  $adm --op new --mode logicalunit --tid 1 --lun 1 --bstype rbd --backing-store "$img" \
    --bsopts "conf=$conf;id=admin"
  $adm --op bind --mode target --tid 1 -I ALL
  url="iscsi://127.0.0.1:$port/iqn.2001-04.com.example:rbd/1"
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  if [ -n "$tgt_cport" ]; then
    # tgtd ignores SIGTERM while it has targets: delete them (closing the image, which
    # releases its lock), then the daemon.
    tgtadm -C "$tgt_cport" --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
    tgtadm -C "$tgt_cport" --op delete --mode system >/dev/null 2>&1 || true
  else
    kill -TERM "$server_pid" 2>/dev/null || true
  fi
  for _ in $(seq 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid="" tgt_cport=""
}

err=$work/client.err
bench() { # rw bs qd
  timeout $((seconds + 60)) env RUST_BACKTRACE=0 "$stint" bench --url "$url" --rw "$1" \
    --bs "$2" --iodepth "$3" --runtime "${seconds}s" --json >"$work/bench.json" 2>"$err" ||
    { echo "stint bench $* against $url failed:" >&2; cat "$err" >&2; return 1; }
  python3 -c 'import json, sys; print(round(json.load(sys.stdin)["points"][0]["total"]["iops"]))' <"$work/bench.json"
}
perf() { # blocks qd
  timeout $((seconds + 30)) iscsi-perf -r -t "$seconds" -m "$2" -b "$1" "$url" >"$err" 2>&1 ||
    { echo "iscsi-perf against $url failed:" >&2; tail -5 "$err" >&2; return 1; }
  tr '\r' '\n' <"$err" | awk '/^iops average/ {v=$3} END {if (v == "") exit 1; print v}'
}
rbdbench() { # type size threads pattern total (rbd bench runs for a volume, not a time)
  rbd -c "$conf" bench --io-type "$1" --io-size "$2" --io-threads "$3" --io-pattern "$4" \
    --io-total "$5" "$img" 2>&1 |
    awk '/^elapsed:/ {for (i = 1; i <= NF; i++) if ($i == "ops/sec:") v = $(i + 1)} END {printf "%d\n", v}'
}

declare -A results
note() { results[$1]="${results[$1]:-} $2"; }
for r in $(seq "$rounds"); do
  order="stint tgt"; [ $((r % 2)) -eq 0 ] && order="tgt stint"
  for server in $order; do
    "start_$server"
    note "$server:bench-randread" "$(bench randread 4k 32)"
    note "$server:perf-randread" "$(perf 8 32)"
    note "$server:bench-write" "$(bench write 64k 16)"
    stop_server
  done
  note "rbd:randread" "$(rbdbench read 4K 32 rand 512M)"
  note "rbd:write" "$(rbdbench write 64K 16 seq 1G)"
  echo "round $r of $rounds done" >&2
done

median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }
m() { echo "${results[$1]}" | median; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo
echo "RBD image $img (1 GiB, written), one-node cluster ($(grep -m1 osd_objectstore "$conf" | awk '{print $3}')), librbd cache off;"
echo "medians of $rounds rounds of ${seconds} s, IOPS"
printf '%-34s %10s %10s %12s %11s %13s\n' point stint tgt-rbd "rbd bench" stint/tgt stint/ceiling
for p in "4 KiB rand read QD32 (stint bench):bench-randread:randread" \
         "4 KiB rand read QD32 (iscsi-perf):perf-randread:randread" \
         "64 KiB seq write QD16 (stint bench):bench-write:write"; do
  IFS=: read -r label key ceil <<<"$p"
  s=$(m "stint:$key") t=$(m "tgt:$key") c=$(m "rbd:$ceil")
  printf '%-34s %10s %10s %12s %11s %13s\n' "$label" "$s" "$t" "$c" "$(ratio "$s" "$t")" "$(ratio "$s" "$c")"
done
