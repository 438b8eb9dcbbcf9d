#!/usr/bin/env bash
# stint vs tgt on a file on real disk (issue 19 item 5; bench/vs-tgt.sh compares them on memory):
# one 2 GiB file of random bytes on the disk that holds this repository (refused on tmpfs or
# ramfs), served by stint's file LUN with `direct = true` (io_uring, O_DIRECT) and by tgt with
# its default backing store, rdwr (a thread pool of pread/pwrite), opened O_DIRECT
# (`--bsoflags direct`), and with its aio store (Linux native AIO), which always opens O_DIRECT
# (it refuses `--bsoflags`); the script checks tgtd's descriptors for O_DIRECT. O_DIRECT on all three so the reads
# reach the device: this machine's page cache would hold the whole file after one pass, and
# the comparison would measure memory. One client for all, libiscsi's iscsi-perf: reads of
# 4 KiB and 128 KiB at QD 1 and 32, sequential, and 4 KiB random (iscsi-perf -r); then
# `stint bench` random 4 KiB writes at QD 32 against each (tgt's rdwr and aio stores, as stint's
# LUN, write through to the file). The runs alternate point by point and round by round
# (rotated, every other round reversed), so noise hits the targets alike; medians are printed.
#
#   bench/vs-tgt-disk.sh [--rounds N] [--seconds S] [--dir DIR]
#
# DIR (default: target/, under this repository) holds the file; it is removed at the end. The
# three servers run at once on 127.0.0.1, on free ports, and are stopped by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

rounds=3 seconds=5 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2-}; shift; shift || true ;;
    --seconds) seconds=${2-}; shift; shift || true ;;
    --dir) dir=${2-}; shift; shift || true ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--dir DIR]" >&2; exit 2 ;;
  esac
done
positive rounds="$rounds" seconds="$seconds"

need=()
command -v iscsi-perf >/dev/null || need+=(libiscsi-bin)
command -v tgtd >/dev/null || need+=(tgt)
install_missing ${need[@]+"${need[@]}"}
cargo build --release -q -p stint
stint=$(realpath "${CARGO_TARGET_DIR:-target}/release/stint")

mkdir -p "${dir:-target}"
disk=$(mktemp -d "$(realpath "${dir:-target}")/vs-tgt-disk.XXXXXX")
work=$(mktemp -d)
pids=()
cleanup() {
  # tgtd ignores SIGTERM while it has targets: SIGKILL, by PID.
  exec 2>/dev/null
  for p in "${pids[@]}"; do kill -9 "$p" || true; done
  wait || true
  rm -rf "$disk" "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fstype=$(findmnt -no FSTYPE -T "$disk" 2>/dev/null || stat -f -c %T "$disk")
if [ "$fstype" = tmpfs ] || [ "$fstype" = ramfs ]; then
  echo "$disk is on $fstype, not a disk; give --dir on one" >&2
  exit 2
fi
device=$(findmnt -no SOURCE -T "$disk" 2>/dev/null || echo "?")
img=$disk/lun.img
echo "writing 2 GiB of random bytes to $img ($fstype on $device)" >&2
dd if=/dev/urandom of="$img" bs=1M count=2048 iflag=fullblock conv=fsync status=none

declare -A url

# stint: the file, O_DIRECT, through io_uring (the log says which engine runs).
port=$(free_port)
cat >"$work/stint.toml" <<EOF
listen = "127.0.0.1:$port"
[[target]]
name = "iqn.2026-11.dev.stint:disk"
[[target.lun]]
store = "file"
path = "$img"
direct = true
EOF
"$stint" serve --config "$work/stint.toml" >"$work/stint.log" 2>&1 &
pids+=($!)
wait_up "stint serve" "$port" $! "$work/stint.log"
url[stint]=$(grep -m1 -o 'iscsi://[^ ]*' "$work/stint.log")
grep -o 'engine="[^"]*"' "$work/stint.log" | head -1 | sed 's/^/stint data plane: /' >&2

# tgt: one target per backing store, the disk at LUN 1 (its controller at LUN 0). -C names a
# UNIX control socket, not a TCP port.
port=$(free_port) cport=$((RANDOM % 8000 + 1000))
tgtd -f -C "$cport" --iscsi "portal=127.0.0.1:$port" >"$work/tgt.log" 2>&1 &
pids+=($!)
wait_up tgtd "$port" $! "$work/tgt.log"
tid=0
for bs in rdwr aio; do
  tid=$((tid + 1))
  flags=(); [ $bs = rdwr ] && flags=(--bsoflags direct)
  tgtadm -C "$cport" --lld iscsi --op new --mode target --tid $tid -T "iqn.2001-04.com.example:$bs"
  tgtadm -C "$cport" --lld iscsi --op new --mode logicalunit --tid $tid --lun 1 -b "$img" \
    --bstype $bs "${flags[@]}"
  tgtadm -C "$cport" --lld iscsi --op bind --mode target --tid $tid -I ALL
  url[tgt-$bs]="iscsi://127.0.0.1:$port/iqn.2001-04.com.example:$bs/1"
done
# Every descriptor tgtd holds on the file must be O_DIRECT (040000 in /proc/PID/fdinfo's
# octal flags), else its reads would come from the page cache.
for fd in /proc/"${pids[-1]}"/fd/*; do
  [ "$(readlink "$fd")" = "$img" ] || continue
  f=$(awk '/^flags:/ {print $2}' "/proc/${pids[-1]}/fdinfo/${fd##*/}")
  (((8#$f & 8#40000) != 0)) || { echo "tgtd holds $img without O_DIRECT (flags $f)" >&2; exit 1; }
done
targets=(stint tgt-rdwr tgt-aio)

err=$work/client.err
run() { # target point seconds
  local u=${url[$1]} b q r=""
  IFS=: read -r b q r <<<"$2"
  case $r in
    w)
      timeout $(($3 + 60)) "$stint" bench --url "$u" --rw randwrite --bs $((b / 2))k \
        --iodepth "$q" --runtime "$3s" --json >"$work/bench.json" 2>"$err" &&
        python3 -c 'import json, sys; print(round(json.load(sys.stdin)["points"][0]["total"]["iops"]))' \
          <"$work/bench.json" 2>>"$err" ;;
    *)
      timeout $(($3 + 30)) iscsi-perf -t "$3" -m "$q" -b "$b" ${r:+-r} "$u" >"$err" 2>&1 &&
        tr '\r' '\n' <"$err" | awk '/^iops average/ {v=$3} END {if (v == "") exit 1; print v}' ;;
  esac
}
said() { tr '\r' '\n' <"$err" | grep -av -e '^\s*$' -e '^[0-9:]* - lba' | tail -n 8 | sed 's/^/    /' >&2; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# BLOCKS:QD[:r random read | :w random write]; blocks of 512 bytes.
points="8:1 8:32 256:1 256:32 8:1:r 8:32:r 8:32:w"
what() { # point
  local b q r
  IFS=: read -r b q r <<<"$1"
  case $r in r) r="rand read" ;; w) r="rand write" ;; *) r="seq read" ;; esac
  printf '%-10s %4d KiB QD%-3d' "$r" $((b / 2)) "$q"
}

declare -A res
n=${#targets[@]}
for r in $(seq "$rounds"); do
  lst=("${targets[@]}")
  if ((r % 2 == 0)); then lst=(); for ((i = n - 1; i >= 0; i--)); do lst+=("${targets[i]}"); done; fi
  k=$(((r - 1) % n))
  order=("${lst[@]:k}" "${lst[@]:0:k}")
  for p in $points; do
    for t in "${order[@]}"; do
      v=$(run "$t" "$p" "$seconds") || {
        echo "the client failed against $t (${url[$t]}) at $(what "$p"):" >&2
        said
        exit 1
      }
      res[$t,$p]+="$v "
      printf '  round %d  %-8s %s %8d IOPS\n' "$r" "$t" "$(what "$p")" "$v" >&2
    done
  done
done
med() { tr ' ' '\n' <<<"${res[$1]:-}" | grep . | median; }

echo
echo "A 2 GiB file on $device ($fstype), O_DIRECT on every target: median IOPS over $rounds rounds of ${seconds} s"
echo "(reads: iscsi-perf; writes: stint bench)"
printf '%-27s %9s %9s %9s %8s %12s %11s\n' "point" "stint" "tgt rdwr" "tgt aio" "MiB/s" \
  "stint/rdwr" "stint/aio"
for p in $points; do
  b=${p%%:*} s=$(med "stint,$p") t=$(med "tgt-rdwr,$p") a=$(med "tgt-aio,$p")
  awk -v w="$(what "$p")" -v b="$b" -v s="$s" -v t="$t" -v a="$a" 'BEGIN {
    printf "%-27s %9.0f %9.0f %9.0f %8.1f %11.2fx %10.2fx\n", w, s, t, a, s*b*512/1048576, s/t, s/a }'
done
