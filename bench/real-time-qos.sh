#!/usr/bin/env bash
# Duration limits in real time over a slow store (issue 19, item 4d), 4 KiB random reads under
# `stint bench` at QD 16 with 10 % of the reads at DLD 1 (`--cmdprio-percentage 10
# --cmdprio-hint 1`), a device queue of depth 4, over one of two stores:
#
#   file  (default) a 256 MiB file LUN whose every store operation takes `store_delay_ms`
#         (--delay-ms, default 20; the file itself on the repository's disk);
#   rbd   a fresh 256 MiB RBD image, written whole, whose OSDs are slowed by Ceph's own fault
#         injection: every message a client sends them is held for a random time up to
#         --delay-ms (default 30) before the OSD sees it (`ms_inject_delay_type = client`,
#         `ms_inject_delay_probability = 1`, `ms_inject_delay_max`). That delay is per
#         message, so reads still overlap, but a connection delivers its messages in order, so
#         a read also waits for the slower ones before it: a tail of tens of ms.
#         (`osd_debug_inject_dispatch_delay_*` slows reads too, but it sleeps in the thread that
#         reads the connection, and again in the op shard's before the PG, so every read waits
#         out every earlier read's delay: one op at a time, not a slow read.)
#         The cluster is the one of --ceph-conf (user admin, pool `rbd`; the injection is set on
#         all its OSDs and put back to what osd.0 had), else a one-node cluster of its own
#         (tests/ceph/cluster.sh), stopped at the end; the image is removed at the end.
#
# Three variants:
#
#   no-cdl    the same LUN and queue, every read at DLD 0: the unlimited class's baseline;
#   abort     T2A descriptor 1: COMMAND DURATION GUIDELINE 50 ms, policy Fh (abort); the
#             limited reads wait in the same FIFO as the others, so most are ended at 50 ms;
#   priority  the same descriptor, and DLD 1 reads in the `high` class (`dld_classes`), which
#             strict arbitration fetches first: limited reads start at once and meet 50 ms.
#
# For each: limited and unlimited reads' p50, p99, max (ms) and outcomes (met, aborted), the
# limited reads' share of the reads served, and the unlimited class's p50 against no-cdl. The
# limit holds when no limited read took longer than 50 ms plus the host's round trip (5 ms).
#
# --realtime runs the server and `stint bench` under SCHED_FIFO priority 1 (`chrt -f 1`; needs
# root or CAP_SYS_NICE): their threads then run as soon as they wake, whatever else the
# machine runs, so what is left past the limit is stint's own path, not the time its threads
# waited for a CPU (docs/cdl.md, "Where the time past the limit goes").
#
#   bench/real-time-qos.sh [--store file|rbd] [--ceph-conf PATH] [--rounds N] [--seconds S]
#                          [--delay-ms D] [--realtime]
#
# Each run starts its own server on 127.0.0.1 (port 0, URL read from its output) and stops it by
# PID; the variants alternate round by round; the table prints medians over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 [--store file|rbd] [--ceph-conf PATH] [--rounds N] [--seconds S] [--delay-ms D] [--realtime]" >&2
  exit 2
}
store=file ceph_conf="" rounds=3 seconds=8 delay="" sched=()
while [ $# -gt 0 ]; do
  case "$1" in
    --store) store=${2-}; shift; shift || true ;;
    --ceph-conf) ceph_conf=${2-}; shift; shift || true ;;
    --rounds) rounds=${2-}; shift; shift || true ;;
    --seconds) seconds=${2-}; shift; shift || true ;;
    --delay-ms) delay=${2-}; shift; shift || true ;;
    --realtime) sched=(chrt -f 1); shift ;;
    *) usage ;;
  esac
done
case "$store" in
  file) delay=${delay:-20} ;;
  rbd) delay=${delay:-30} ;;
  *) usage ;;
esac
[ -z "$ceph_conf" ] || [ "$store" = rbd ] || { echo "--ceph-conf is for --store rbd" >&2; exit 2; }
[ -z "$ceph_conf" ] || [ -r "$ceph_conf" ] || { echo "no readable ceph.conf at '$ceph_conf'" >&2; exit 2; }
for v in "$rounds" "$seconds" "$delay"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bad value '$v': expected a positive integer" >&2; exit 2; }
done
if [ ${#sched[@]} -gt 0 ] && ! chrt -f 1 true 2>/dev/null; then
  echo "--realtime: cannot run under SCHED_FIFO here (chrt -f 1 needs root or CAP_SYS_NICE)" >&2
  exit 3
fi
if [ "$store" = rbd ]; then
  for c in ceph rbd; do
    command -v $c >/dev/null || { echo "$c is missing (apt-get install ceph-common)" >&2; exit 3; }
  done
fi

cargo build --release -q -p stint
stint=$(realpath "${CARGO_TARGET_DIR:-target}/release/stint")
mkdir -p target
work=$(mktemp -d "$PWD/target/real-time-qos.XXXXXX")
pid="" sleeper="" cluster="" image="" injected=""
cleanup() {
  exec 2>/dev/null
  if [ -n "$pid" ]; then kill -9 "$pid" || true; wait "$pid" || true; fi
  if [ -n "$sleeper" ]; then kill "$sleeper" || true; wait "$sleeper" || true; fi
  [ -z "$injected" ] || uninject || true
  [ -z "$image" ] || timeout 60 rbd -c "$ceph_conf" rm --no-progress "$image" || true
  if [ -n "$cluster" ]; then tests/ceph/cluster.sh stop "$cluster" || true; rm -rf "$cluster"; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The OSDs' injection: these keys, set on every OSD, and osd.0's values before, put back after.
inject_keys=(ms_inject_delay_type ms_inject_delay_probability ms_inject_delay_max)
declare -A before=()
cephcli() { timeout 60 ceph -c "$ceph_conf" "$@"; }
inject() { # key value ...
  while [ $# -gt 0 ]; do cephcli tell 'osd.*' config set "$1" "$2" >/dev/null; shift 2; done
}
uninject() {
  local k
  for k in "${inject_keys[@]}"; do inject "$k" "${before[$k]}"; done
}

if [ "$store" = rbd ]; then
  if [ -z "$ceph_conf" ]; then
    # Under /tmp, not target/: the cluster's admin sockets need a short path.
    cluster=$(mktemp -d "${TMPDIR:-/tmp}/stint-rtqos-ceph.XXXXXX")
    tests/ceph/cluster.sh start "$cluster"
    ceph_conf=$cluster/ceph.conf
  fi
  ceph_conf=$(realpath "$ceph_conf")
  image=rbd/stint-rtqos-$$
  timeout 60 rbd -c "$ceph_conf" create --size 256M "$image"
  # Written whole before it is slowed: reads of objects never written cost the OSD nothing.
  timeout 300 rbd -c "$ceph_conf" bench --io-type write --io-size 4M --io-threads 4 \
    --io-pattern seq --io-total 256M "$image" >/dev/null
  for k in "${inject_keys[@]}"; do
    before[$k]=$(cephcli tell osd.0 config get "$k" -f json |
      python3 -c 'import json,sys; print(next(iter(json.load(sys.stdin).values())))')
  done
  # That the injection slows reads: `rbd bench` on the image before and after, QD 4 as the LUN.
  rbd_reads() {
    timeout 120 rbd -c "$ceph_conf" bench --io-type read --io-size 4K --io-threads 4 \
      --io-pattern rand --io-total 1M "$image" | sed -n 's/.*ops\/sec: *\([0-9.]*\).*/\1/p' | tail -1
  }
  fast=$(rbd_reads)
  injected=1
  # A connection takes the delay when it is made: each variant's server connects after this.
  inject ms_inject_delay_type client ms_inject_delay_probability 1 \
    ms_inject_delay_max "$(python3 -c "print($delay / 1000)")"
  slow=$(rbd_reads)
  echo "rbd bench 4 KiB random reads, QD 4: ${fast%.*} IOPS, ${slow%.*} IOPS with the OSD slowed"
fi

config() { # variant
  cat <<EOF
[[target]]
name = "iqn.2026-11.dev.stint:rt"
[[target.lun]]
EOF
  if [ "$store" = rbd ]; then
    printf 'store = "rbd"\npool = "%s"\nimage = "%s"\nconf = "%s"\nstate_dir = "%s"\n' \
      "${image%%/*}" "${image#*/}" "$ceph_conf" "$work"
  else
    printf 'store = "file"\npath = "%s"\nsize = "256MiB"\nstore_delay_ms = %s\n' \
      "$work/lun.img" "$delay"
  fi
  cat <<EOF

[target.lun.queue]
depth = 4
EOF
  [ "$1" = priority ] && echo 'dld_classes = { "1" = "high" }'
  [ "$1" = no-cdl ] || printf '\n[target.lun.cdl]\nread = [{ dld = 1, guideline_ms = 50, guideline_policy = "abort" }]\n'
}

run() { # variant round
  config "$1" > "$work/$1.toml"
  # Files of this run only: a reused one is truncated by the background child, which may run
  # after the loop below has read the last server's URL from it.
  local out=$work/serve.$1.$2.out err=$work/serve.$1.$2.err
  "${sched[@]}" "$stint" serve --config "$work/$1.toml" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 \
    > "$out" 2> "$err" &
  pid=$!
  local url=""
  for _ in $(seq 100); do
    url=$(grep -so 'iscsi://[^ ]*' "$out" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "$1: server stopped:" >&2; tail -3 "$err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "$1: no URL from the server" >&2; exit 1; }
  local prio=(--cmdprio-percentage 10 --cmdprio-hint 1 --cmdprio-class high)
  [ "$1" = no-cdl ] && prio=()
  if ! "${sched[@]}" "$stint" bench --url "$url" --rw randread --bs 4k --iodepth 16 --runtime "${seconds}s" \
      "${prio[@]}" --json > "$work/$1.$2.json" 2> "$work/bench.err"; then
    echo "$1: stint bench failed:" >&2; tail -3 "$work/bench.err" >&2
    echo "the server's log:" >&2; tail -5 "$err" >&2; exit 1
  fi
  # The server's own view of the ends: how late after the limit a policy ended a read, and
  # how long each hand-off back to a connection waited until its batch was written.
  local metrics
  metrics=$(grep -so 'http://[^ ]*/metrics' "$out" | head -1 || true)
  timeout 10 python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "$metrics" > "$work/$1.$2.metrics" || { echo "$1: no metrics from the server" >&2; exit 1; }
  kill "$pid"; wait "$pid" || true; pid=""
}

# The machine's own lateness beside the runs, to read the limited reads' late ends against: a
# thread that sleeps 1 ms at a time and notes how late it wakes. Mostly idle, it is favoured by
# the scheduler, so it shows the least a busy thread of the server or the host may have waited.
python3 -c '
import signal, sys, time
late = []
def report(*_):
    late.sort()
    q = lambda p: late[min(len(late) - 1, int(p * len(late)))] * 1e3
    print(f"{len(late)} {q(.5):.2f} {q(.99):.2f} {late[-1] * 1e3:.1f} {sum(x > .005 for x in late)}")
    sys.exit(0)
signal.signal(signal.SIGTERM, report)
while True:
    t = time.monotonic(); time.sleep(0.001); late.append(time.monotonic() - t - 0.001)
' > "$work/sleeper.out" &
sleeper=$!

variants=(no-cdl abort priority)
for r in $(seq "$rounds"); do
  order=("${variants[@]}")
  [ $((r % 2)) -eq 0 ] && order=(priority abort no-cdl)
  for v in "${order[@]}"; do
    echo "round $r/$rounds: $v" >&2
    run "$v" "$r"
  done
done
kill "$sleeper"; wait "$sleeper" || true; sleeper=""

if [ "$store" = rbd ]; then
  what="an RBD image whose OSD holds each client message up to $delay ms (ms_inject_delay)"
else
  what="a file store taking $delay ms per operation"
fi
[ ${#sched[@]} -eq 0 ] || what="$what, server and bench under SCHED_FIFO priority 1"
python3 - "$work" "$rounds" "$what" <<'EOF'
import json, statistics, sys
work, rounds, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def med(xs): return statistics.median(xs) if xs else float("nan")
rows = {}
for v in ("no-cdl", "abort", "priority"):
    for r in range(1, rounds + 1):
        p = json.load(open(f"{work}/{v}.{r}.json"))["points"][0]
        for name, c in p["classes"].items():
            cls = "limited" if "dld1" in name else "unlimited"
            rows.setdefault((v, cls), []).append(c)
print(f"4 KiB random reads, QD 16, {what}, device queue depth 4,"
      f" 10 % at DLD 1 (guideline 50 ms, Fh); medians of {rounds} rounds")
print(f"{'variant':9} {'class':9} {'ios':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
      f" {'met':>5} {'aborted':>7} {'errors':>6}")
def lat(v, cls, k): return med([c["lat_ms"][k] for c in rows[(v, cls)]])
for (v, cls), cs in rows.items():
    m = lambda k: med([c["lat_ms"][k] for c in cs])
    n = lambda k: med([c[k] for c in cs])
    errors = med([c["ios"] - c["data_ios"] - c["aborted"] - c["completed_unavailable"] for c in cs])
    print(f"{v:9} {cls:9} {n('ios'):6.0f} {m('p50'):8.2f} {m('p99'):8.2f} {m('max'):8.2f}"
          f" {n('limit_met'):5.0f} {n('aborted'):7.0f} {errors:6.0f}")
for v in ("abort", "priority"):
    # The share of device time the limited class took, as its share of the reads served
    # (every read is one 4 KiB operation of the store).
    share = med([l["data_ios"] / max(1, l["data_ios"] + u["data_ios"])
                 for l, u in zip(rows[(v, "limited")], rows[(v, "unlimited")])])
    worst = max(c["lat_ms"]["max"] for c in rows[(v, "limited")])
    bounded = "within" if worst <= 55 else "OVER"
    print(f"{v}: unlimited p50 {lat(v, 'unlimited', 'p50') / lat('no-cdl', 'unlimited', 'p50'):.2f}x,"
          f" p99 {lat(v, 'unlimited', 'p99') / lat('no-cdl', 'unlimited', 'p99'):.2f}x of no-cdl;"
          f" limited reads {share:.1%} of the reads served; limited p99"
          f" {lat(v, 'limited', 'p99'):.1f} ms, worst max {worst:.1f} ms: {bounded} 50 + 5 ms")
def buckets(v, name):
    """The histogram `name` of variant v's rounds, summed: (upper bound s, count in it)."""
    total = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{v}.{r}.metrics"):
            if line.startswith(name + "_bucket"):
                le = line.split('le="')[1].split('"')[0]
                total[le] = total.get(le, 0) + float(line.split()[-1])
    cum = sorted(((float(k), n) for k, n in total.items()), key=lambda x: x[0])
    return [(le, n - (cum[i - 1][1] if i else 0)) for i, (le, n) in enumerate(cum)]
def spread(hist):
    n = sum(c for _, c in hist)
    if n == 0:
        return "none"
    within = lambda s: sum(c for le, c in hist if le <= s) / n
    worst = max(le for le, c in hist if c > 0)
    return (f"{n:.0f}, {within(0.001):.1%} within 1 ms, {within(0.005):.1%} within 5 ms,"
            f" the last in the bucket up to {worst * 1e3:g} ms")
for v in ("abort", "priority"):
    print(f"{v}, server side: ends after the limit {spread(buckets(v, 'stint_cdl_end_lateness_seconds'))};"
          f" hand-offs to a connection until written {spread(buckets(v, 'stint_delivery_seconds'))}")
n, p50, p99, mx, over = open(f"{work}/sleeper.out").read().split()
print(f"the machine meanwhile: a 1 ms sleep woke late by p50 {p50}, p99 {p99}, max {mx} ms"
      f" ({over} of {n} sleeps over 5 ms late)")
EOF
