#!/usr/bin/env bash
# stint vs its peers, side by side on this machine: sequential reads at 4 KiB and 128 KiB, QD 1
# and 32, against a 1 GiB RAM LUN (stint), the same through stint's QoS queue
# (examples/priority.toml: WRR classes, device queue of 32, no drive timing), a 1 GiB tmpfs file
# from tgt (its rdwr store) and the same from istgt. Two clients: libiscsi's iscsi-perf against
# all four, and stint's own load generator (`stint bench --rw read`) against stint's plain LUN,
# tgt and istgt, so the second table shows whether `stint bench` keeps up with iscsi-perf on each
# target. The runs alternate point by point and round by round (rotated, every other round
# reversed), so machine noise hits them alike; each table prints medians over the rounds.
#
#   bench/vs-tgt.sh [--rounds N] [--seconds S] [--points "BLOCKS:QD ..."] [--stint-b PATH]
#
# BLOCKS counts 512-byte blocks per I/O (iscsi-perf -b): 8 = 4 KiB, 256 = 128 KiB.
# --stint-b serves the same 1 GiB RAM LUN from a second stint binary (another build, e.g. one
# from before a change) in a process of its own, run by both clients in the same rotation as the
# first; the tables then show it as "stint B", with its ratio to this tree's build (B/stint).
#
# Before the rounds, `stint bench` runs for a second against each of its targets; a target it
# cannot run against is reported (with the URL and the tool's error) and left out of the client
# table instead of stopping the comparison. Any later failure of either tool stops the script,
# naming the tool, target and URL.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

rounds=3 seconds=5 points="8:1 8:32 256:1 256:32" stint_b=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --points) points=$2; shift 2 ;;
    --stint-b) stint_b=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--points \"BLOCKS:QD ...\"] [--stint-b PATH]" >&2
       exit 2 ;;
  esac
done
positive rounds="$rounds" seconds="$seconds"
if [ -n "$stint_b" ] && ! [ -x "$stint_b" ]; then
  echo "bad --stint-b '$stint_b': not an executable file" >&2; exit 2
fi
for p in $points; do
  [[ $p =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] ||
    { echo "bad point '$p': expected BLOCKS:QD, e.g. 8:32" >&2; exit 2; }
done

need=()
command -v iscsi-perf >/dev/null || need+=(libiscsi-bin)
command -v tgtd >/dev/null || need+=(tgt)
command -v istgt >/dev/null || [ -x /usr/sbin/istgt ] || need+=(istgt)
install_missing ${need[@]+"${need[@]}"}
istgt=$(command -v istgt || echo /usr/sbin/istgt)
cargo build --release -q -p stint
stint=${CARGO_TARGET_DIR:-target}/release/stint

work=$(mktemp -d /dev/shm/stint-bench.XXXXXX)
pids=()
cleanup() {
  # tgtd ignores SIGTERM; istgt takes seconds to act on it. SIGKILL, by PID, for all (and no
  # "Killed" notices from the shell).
  exec 2>/dev/null
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

declare -A url

# stint: one 1 GiB RAM LUN.
port=$(free_port)
"$stint" serve --listen "127.0.0.1:$port" --lun ram:1GiB >"$work/stint.log" 2>&1 &
pids+=($!)
wait_up "stint serve" "$port" $! "$work/stint.log"
url[stint]=$(grep -m1 -o 'iscsi://[^ ]*' "$work/stint.log")

# The second stint build, if any: the same LUN, in a process of its own.
if [ -n "$stint_b" ]; then
  port=$(free_port)
  "$stint_b" serve --listen "127.0.0.1:$port" --lun ram:1GiB >"$work/stint-b.log" 2>&1 &
  pids+=($!)
  wait_up "stint serve (--stint-b)" "$port" $! "$work/stint-b.log"
  url[stintb]=$(grep -m1 -o 'iscsi://[^ ]*' "$work/stint-b.log")
fi

# stint with the QoS queue: examples/priority.toml, in a process of its own.
port=$(free_port)
"$stint" serve --listen "127.0.0.1:$port" --config examples/priority.toml >"$work/qos.log" 2>&1 &
pids+=($!)
wait_up "stint serve (QoS)" "$port" $! "$work/qos.log"
url[qos]=$(grep -m1 -o 'iscsi://[^ ]*' "$work/qos.log")

# tgt: a 1 GiB file on tmpfs; tgt puts its controller at LUN 0, the disk at LUN 1.
# tgtd wants a small control port (-C); it names a UNIX socket, not a TCP port.
port=$(free_port) cport=$((RANDOM % 8000 + 1000))
truncate -s 1G "$work/tgt.img"
tgtd -f -C "$cport" --iscsi "portal=127.0.0.1:$port" >"$work/tgt.log" 2>&1 &
pids+=($!)
wait_up tgtd "$port" $! "$work/tgt.log"
tgtadm -C "$cport" --lld iscsi --op new --mode target --tid 1 -T iqn.2001-04.com.example:bench
tgtadm -C "$cport" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$work/tgt.img"
tgtadm -C "$cport" --lld iscsi --op bind --mode target --tid 1 -I ALL
url[tgt]="iscsi://127.0.0.1:$port/iqn.2001-04.com.example:bench/1"

# istgt (Debian's 0.4~20111008): a 1 GiB file on tmpfs as LUN 0 ("Storage FILE Auto": a plain
# file read and written with read(2)/write(2), its size taken from the file), run in the
# foreground (-D) in the default "normal" mode (-m 1: a sender thread per connection).
# Its quirks:
# - QueueDepth is the command window it grants (MaxCmdSN = CmdSN + QueueDepth - 1) and the
#   depth of the LU's queue, which one thread per LU drains one command at a time. 32 lets
#   QD32 reach the target, like stint's device queue of 32 and tgt. With QueueDepth 0 (no
#   queuing) the window is 8 and commands run inline on the connection's thread: as fast or
#   faster on this 2-vCPU machine, but then QD32 is QD8 at the target.
# - MaxRecvDataSegmentLength bounds only the Data-Out PDUs it receives; Data-In follows the
#   initiator's (262144 for libiscsi and stint alike). 262144 here mirrors stint; the bursts
#   are its example's. No digests, no CHAP (AuthMethod None, DiscoveryAuthMethod None), and
#   no NOP-In pings (NopInInterval 0).
# - It refuses to start without a [UnitControl] section; with no Portal in it, it opens no
#   control port. AuthFile, MediaDirectory and PidFile (-p) point into the temp dir, so it
#   reads nothing from /etc/istgt. Its listen backlog is 2.
# - It logs to stdout with -D (and to syslog); SIGTERM takes it a few seconds.
# - MODE SENSE of a subpage it lacks (e.g. CDL's 0Ah/07h) answers GOOD with the 8-byte header
#   and no page rather than CHECK CONDITION.
port=$(free_port)
truncate -s 1G "$work/istgt.img"
: >"$work/istgt-auth.conf"
mkdir -p "$work/istgt-media"
cat >"$work/istgt.conf" <<EOF
[Global]
  NodeBase "iqn.2001-04.com.example"
  PidFile $work/istgt.pid
  AuthFile $work/istgt-auth.conf
  MediaDirectory $work/istgt-media
  Timeout 30
  NopInInterval 0
  DiscoveryAuthMethod None
  MaxSessions 16
  MaxConnections 4
  MaxR2T 32
  MaxOutstandingR2T 16
  DefaultTime2Wait 2
  DefaultTime2Retain 60
  FirstBurstLength 262144
  MaxBurstLength 1048576
  MaxRecvDataSegmentLength 262144
  InitialR2T Yes
  ImmediateData Yes
  DataPDUInOrder Yes
  DataSequenceInOrder Yes
  ErrorRecoveryLevel 0

[UnitControl]
  AuthMethod None

[PortalGroup1]
  Portal P1 127.0.0.1:$port

[InitiatorGroup1]
  InitiatorName "ALL"
  Netmask 127.0.0.1

[LogicalUnit1]
  TargetName bench
  Mapping PortalGroup1 InitiatorGroup1
  AuthMethod None
  UseDigest Auto
  UnitType Disk
  QueueDepth 32
  LUN0 Storage $work/istgt.img Auto
EOF
"$istgt" -D -m 1 -c "$work/istgt.conf" -p "$work/istgt.pid" >"$work/istgt.log" 2>&1 &
pids+=($!)
wait_up istgt "$port" $! "$work/istgt.log"
url[istgt]="iscsi://127.0.0.1:$port/iqn.2001-04.com.example:bench/0"

# One run of a client: prints its average IOPS, or fails with the tool's output in $err.
err=$work/client.err
run() { # client target blocks qd seconds
  local u=${url[$2]}
  case $1 in
    perf)
      timeout $(($5 + 30)) iscsi-perf -t "$5" -m "$4" -b "$3" "$u" >"$err" 2>&1 &&
        tr '\r' '\n' <"$err" | awk '/^iops average/ {v=$3} END {if (v == "") exit 1; print v}' ;;
    bench)
      timeout $(($5 + 60)) env RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0 "$stint" bench --url "$u" \
        --rw read --bs $(($3 / 2))k --iodepth "$4" --runtime "$5s" --json >"$work/bench.json" 2>"$err" &&
        python3 -c 'import json, sys; print(round(json.load(sys.stdin)["points"][0]["total"]["iops"]))' \
          <"$work/bench.json" 2>>"$err" ;;
  esac
}
# The tool's last words (progress lines dropped).
said() { tr '\r' '\n' <"$err" | grep -av -e '^\s*$' -e '^[0-9:]* - lba' | tail -n "$1" | sed 's/^/    /' >&2; }
name() { case $1 in perf) echo iscsi-perf ;; bench) echo "stint bench" ;; esac; }
label() { case $1 in stintb) echo "stint B" ;; *) echo "$1" ;; esac; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Every (client, target) pair, each client's pairs on a target next to each other.
runs=() skipped=""
for t in stint ${stint_b:+stintb} qos tgt istgt; do
  runs+=("perf:$t")
  if [ "$t" != qos ]; then
    if v=$(run bench "$t" 8 1 1); then
      runs+=("bench:$t")
    else
      echo "stint bench cannot run against $t (${url[$t]}); left out of the client table:" >&2
      said 6
      skipped+=" $t"
    fi
  fi
done

declare -A res
n=${#runs[@]}
for r in $(seq "$rounds"); do
  # Rotate the order from round to round, and reverse it every other round.
  lst=("${runs[@]}")
  if ((r % 2 == 0)); then
    lst=(); for ((i = n - 1; i >= 0; i--)); do lst+=("${runs[i]}"); done
  fi
  k=$(((r - 1) * n / rounds % n))
  order=("${lst[@]:k}" "${lst[@]:0:k}")
  for p in $points; do
    b=${p%:*} q=${p#*:}
    for ct in "${order[@]}"; do
      c=${ct%:*} t=${ct#*:}
      v=$(run "$c" "$t" "$b" "$q" "$seconds") || {
        echo "$(name "$c") failed against $t (${url[$t]}) at $((b / 2)) KiB QD$q:" >&2
        said 8
        exit 1
      }
      res[$c,$t,$b,$q]+="$v "
      printf '  round %d  %-11s %-7s %4d KiB QD%-3d %8d IOPS\n' "$r" "$(name "$c")" "$(label "$t")" \
        $((b / 2)) "$q" "$v" >&2
    done
  done
done
med() { tr ' ' '\n' <<<"${res[$1]:-}" | grep . | median; }

echo
echo "Targets, iscsi-perf sequential reads: median IOPS over $rounds rounds of ${seconds} s"
printf '%-13s %9s %8s %9s %8s %9s %8s %10s %12s %9s %10s\n' "point" "stint" "MiB/s" "tgt" \
  "MiB/s" "istgt" "MiB/s" "stint/tgt" "stint/istgt" "QoS LUN" "QoS/stint"
for p in $points; do
  b=${p%:*} q=${p#*:}
  s=$(med "perf,stint,$b,$q") t=$(med "perf,tgt,$b,$q") i=$(med "perf,istgt,$b,$q")
  o=$(med "perf,qos,$b,$q")
  awk -v b="$b" -v d="$q" -v s="$s" -v t="$t" -v i="$i" -v q="$o" 'BEGIN {
    m = b * 512 / 1048576
    printf "%4d KiB QD%-3d %9.0f %8.1f %9.0f %8.1f %9.0f %8.1f %9.2fx %11.2fx %9.0f %9.0f%%\n",
      b/2, d, s, s*m, t, t*m, i, i*m, s/t, s/i, q, 100*q/s }'
done

if [ -n "$stint_b" ]; then
  echo
  echo "Two stint builds, same runs: median iscsi-perf IOPS of this tree's build and of stint B"
  echo "($stint_b)"
  printf '%-13s %9s %9s %9s %10s %10s\n' "point" "stint" "stint B" "B/stint" "stint/tgt" "B/tgt"
  for p in $points; do
    b=${p%:*} q=${p#*:}
    s=$(med "perf,stint,$b,$q") o=$(med "perf,stintb,$b,$q") t=$(med "perf,tgt,$b,$q")
    awk -v b="$b" -v d="$q" -v s="$s" -v o="$o" -v t="$t" 'BEGIN {
      printf "%4d KiB QD%-3d %9.0f %9.0f %8.1f%% %9.2fx %9.2fx\n", b/2, d, s, o, 100*o/s, s/t, o/t }'
  done
fi

echo
echo "Clients, same runs: median IOPS of iscsi-perf and stint bench per target"
printf '%-13s %-7s %11s %12s %11s\n' "point" "target" "iscsi-perf" "stint bench" "bench/perf"
for p in $points; do
  b=${p%:*} q=${p#*:}
  for t in stint ${stint_b:+stintb} tgt istgt; do
    pf=$(med "perf,$t,$b,$q")
    if [[ " $skipped " == *" $t "* ]]; then
      printf '%4d KiB QD%-3d %-7s %11.0f %12s %11s\n' $((b / 2)) "$q" "$(label "$t")" "$pf" "fails" "-"
      continue
    fi
    sb=$(med "bench,$t,$b,$q")
    awk -v b="$b" -v d="$q" -v t="$(label "$t")" -v p="$pf" -v s="$sb" 'BEGIN {
      printf "%4d KiB QD%-3d %-7s %11.0f %12.0f %10.2fx\n", b/2, d, t, p, s, s/p }'
  done
done
if [ -n "$skipped" ]; then
  echo "(stint bench cannot run against:$skipped; see its error above)"
fi
