#!/usr/bin/env bash
# stint vs tgt, side by side on this machine: iscsi-perf (libiscsi) sequential reads at 4 KiB and
# 128 KiB, QD 1 and 32, against a 1 GiB RAM LUN (stint), the same through stint's QoS queue
# (examples/priority.toml: WRR classes, device queue of 32, no drive timing) and a 1 GiB tmpfs
# file (tgt's rdwr store). The targets alternate point by point and round by round, so machine
# noise hits them alike; each point prints the median over the rounds, the stint/tgt ratio and
# the QoS LUN's share of the plain one.
#
#   bench/vs-tgt.sh [--rounds N] [--seconds S] [--points "BLOCKS:QD ..."]
#
# BLOCKS counts 512-byte blocks per I/O (iscsi-perf -b): 8 = 4 KiB, 256 = 128 KiB.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 seconds=5 points="8:1 8:32 256:1 256:32"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --points) points=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--points \"BLOCKS:QD ...\"]" >&2; exit 2 ;;
  esac
done
for p in $points; do
  [[ $p =~ ^[0-9]+:[0-9]+$ ]] || { echo "bad point '$p': expected BLOCKS:QD, e.g. 8:32" >&2; exit 2; }
done

need=()
command -v iscsi-perf >/dev/null || need+=(libiscsi-bin)
command -v tgtd >/dev/null || need+=(tgt)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release -q -p stint
stint=${CARGO_TARGET_DIR:-target}/release/stint

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; return 1; }

work=$(mktemp -d /dev/shm/stint-bench.XXXXXX)
pids=()
cleanup() {
  # tgtd ignores SIGTERM.
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# stint: one 1 GiB RAM LUN.
sport=$(free_port)
"$stint" serve --listen "127.0.0.1:$sport" --lun ram:1GiB >"$work/stint.log" 2>&1 &
pids+=($!)
wait_port "$sport"
stint_url=$(grep -m1 -o 'iscsi://[^ ]*' "$work/stint.log")

# stint with the QoS queue: examples/priority.toml, in a process of its own.
qport=$(free_port)
"$stint" serve --listen "127.0.0.1:$qport" --config examples/priority.toml >"$work/qos.log" 2>&1 &
pids+=($!)
wait_port "$qport"
qos_url=$(grep -m1 -o 'iscsi://[^ ]*' "$work/qos.log")

# tgt: a 1 GiB file on tmpfs; tgt puts its controller at LUN 0, the disk at LUN 1.
# tgtd wants a small control port (-C); it names a UNIX socket, not a TCP port.
tport=$(free_port) cport=$((RANDOM % 8000 + 1000))
truncate -s 1G "$work/tgt.img"
tgtd -f -C "$cport" --iscsi "portal=127.0.0.1:$tport" >"$work/tgt.log" 2>&1 &
tgt_pid=$!
pids+=($tgt_pid)
wait_port "$tport"
tgtadm -C "$cport" --lld iscsi --op new --mode target --tid 1 -T iqn.2001-04.com.example:bench
tgtadm -C "$cport" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$work/tgt.img"
tgtadm -C "$cport" --lld iscsi --op bind --mode target --tid 1 -I ALL
tgt_url="iscsi://127.0.0.1:$tport/iqn.2001-04.com.example:bench/1"

# One iscsi-perf run: prints its average IOPS.
perf() { # url blocks qd
  timeout $((seconds + 20)) iscsi-perf -t "$seconds" -m "$3" -b "$2" "$1" 2>&1 |
    tr '\r' '\n' | awk '/^iops average/ {v=$3} END {if (v == "") exit 1; print v}'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A res
for r in $(seq "$rounds"); do
  for p in $points; do
    set -- ${p/:/ }
    # Rotate which target goes first from round to round.
    case $((r % 3)) in
      1) order="stint qos tgt" ;; 2) order="tgt stint qos" ;; *) order="qos tgt stint" ;;
    esac
    for t in $order; do
      case $t in stint) url=$stint_url ;; qos) url=$qos_url ;; tgt) url=$tgt_url ;; esac
      v=$(perf "$url" "$1" "$2") || { echo "iscsi-perf failed against $t ($url)" >&2; exit 1; }
      res[$t,$1,$2]+="$v "
      printf '  round %d  %-5s %4d KiB QD%-3d %8d IOPS\n' "$r" "$t" $(($1 / 2)) "$2" "$v" >&2
    done
  done
done

printf '\n%-14s %12s %10s %12s %10s %9s %12s %10s\n' "point" "stint IOPS" "MiB/s" \
  "tgt IOPS" "MiB/s" "stint/tgt" "QoS IOPS" "QoS/stint"
for p in $points; do
  set -- ${p/:/ }
  s=$(tr ' ' '\n' <<<"${res[stint,$1,$2]}" | grep . | median)
  q=$(tr ' ' '\n' <<<"${res[qos,$1,$2]}" | grep . | median)
  t=$(tr ' ' '\n' <<<"${res[tgt,$1,$2]}" | grep . | median)
  awk -v b="$1" -v d="$2" -v s="$s" -v q="$q" -v t="$t" 'BEGIN {
    printf "%4d KiB QD%-3d %12.0f %10.1f %12.0f %10.1f %8.2fx %12.0f %9.0f%%\n", b/2, d, s,
      s*b*512/1048576, t, t*b*512/1048576, s/t, q, 100*q/s }'
done
