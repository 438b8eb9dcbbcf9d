#!/usr/bin/env bash
# Instructions the server executes per 4 KiB READ at QD32: `stint serve` with one 1 GiB RAM LUN
# runs under callgrind while `stint bench --rw read --bs 4k --iodepth 32` (natively) sends it N1
# reads in one run and N2 in another. Per command = (Ir(N2) - Ir(N1)) / (reads(N2) - reads(N1)),
# the reads as the server's metrics counted them, so the login, the ramp, the drain and shutdown
# cancel out (and start-up is not counted: callgrind's counters are zeroed once it listens). Then the functions of the difference, per command: inclusive and self
# instructions (callgrind_annotate of each run, subtracted function by function).
#
#   bench/instructions.sh [--stint PATH] [--ios "N1 N2"] [--top K] [--written]
#                         [--sim] [--sim-ios "N1 N2"] [--keep DIR]
#
# --stint PATH  measures that binary (e.g. an older build) instead of building this tree's.
# --written     first writes the LUN's first MiBs (before callgrind's counters are zeroed), so
#               the reads copy stored data. Without it (how docs/ measured
#               it) the reads hit chunks never written, and the store zero-fills the buffer.
# --sim         also counts `stint sim experiments/b1.toml --qd 32 --threads 1 --ios N` under
#               callgrind, per simulated command (the same difference of two run lengths).
# --keep DIR    leaves the callgrind files there (callgrind_annotate, kcachegrind).
#
# Callgrind counts every iteration of a `rep stosb`/`rep movsb` as one instruction: glibc's
# memset of 4 KiB is `rep stosb`, so each 4 KiB zero-fill counts 4,096 (about a hundred cycles
# of a real CPU), ten times glibc's vector-loop memcpy of 4 KiB (about 410). The simulator's
# count is deterministic; the server's moves by up to about 1 % from run to run, as the tokio
# workers wake and poll once for a different number of commands.
set -euo pipefail

stint="" ios="10000 40000" sim=0 sim_ios="20000 100000" top=20 written=0 keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --stint) stint=$(realpath -m "$2"); shift 2 ;;
    --ios) ios=$2; shift 2 ;;
    --sim) sim=1; shift ;;
    --sim-ios) sim_ios=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --written) written=1; shift ;;
    --keep) keep=$(realpath -m "$2"); shift 2 ;;
    *) echo "usage: $0 [--stint PATH] [--ios \"N1 N2\"] [--top K] [--written] [--sim] [--sim-ios \"N1 N2\"] [--keep DIR]" >&2
       exit 2 ;;
  esac
done
for n in "$ios" "$sim_ios"; do
  [[ $n =~ ^([1-9][0-9]*)\ ([1-9][0-9]*)$ ]] && ((BASH_REMATCH[1] < BASH_REMATCH[2])) ||
    { echo "bad run lengths '$n': expected \"N1 N2\" with N1 < N2" >&2; exit 2; }
done
[[ $top =~ ^[1-9][0-9]*$ ]] || { echo "bad --top '$top'" >&2; exit 2; }
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
if [ -z "$stint" ]; then
  cargo build --release -q -p stint
  stint=${CARGO_TARGET_DIR:-target}/release/stint
fi
[ -x "$stint" ] || { echo "bad --stint '$stint': not an executable file" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$work"/*.cg "$keep"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# One server run under callgrind: N reads; leaves $work/serve-N.cg and the reads the server
# counted in $work/serve-N.reads.
serve_run() { # N
  local log=$work/serve-$1.log pid url murl
  valgrind --tool=callgrind --callgrind-out-file="$work/serve-$1.cg" "$stint" serve \
    --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --lun ram:1GiB >"$log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    grep -q iscsi:// "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  url=$(grep -m1 -o 'iscsi://[^ ]*' "$log") || { echo "stint serve did not start:" >&2; tail "$log" >&2; exit 1; }
  murl=$(grep -m1 -o 'http://[^ ]*/metrics' "$log")
  if ((written)); then # 128 KiB writes over what the longer run reads, ramp and drain included
    timeout 900 "$stint" bench --url "$url" --rw write --bs 128k --iodepth 8 \
      --ios $(((${ios#* } + 1000) / 32)) --json >/dev/null
  fi
  # Counting starts here: start-up and the writes (whose Data-Out PDUs the server receives in
  # pieces that differ from run to run) stay out of both runs.
  callgrind_control --zero "$pid" >/dev/null 2>&1
  timeout 900 "$stint" bench --url "$url" --rw read --bs 4k --iodepth 32 --ios "$1" --json >/dev/null
  python3 - "$murl" >"$work/serve-$1.reads" <<'EOF'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
print(round(sum(float(v) for v in re.findall(r'^stint_commands_total\{[^}]*kind="read"[^}]*\} (\S+)', text, re.M))))
EOF
  kill -TERM "$pid"
  wait "$pid" || { echo "stint serve (pid $pid) exited with $?:" >&2; tail "$log" >&2; exit 1; }
  pids=()
}

sim_run() { # N
  valgrind --tool=callgrind --callgrind-out-file="$work/sim-$1.cg" "$stint" sim experiments/b1.toml \
    --qd 32 --threads 1 --ios "$1" --json >/dev/null 2>"$work/sim-$1.log" ||
    { echo "stint sim failed:" >&2; tail "$work/sim-$1.log" >&2; exit 1; }
}

# Per command of the difference between two callgrind files: total, and the top functions by
# inclusive and by self instructions. Callgrind splits a function by the source files of the
# code inlined into it: its self cost is the sum of the pieces, its inclusive cost the largest.
report() { # what file1 file2 commands
  for f in "$2" "$3"; do
    # A call already under way when the counters were zeroed is written with calls=0, and
    # callgrind_annotate then takes its cost for the caller's own: count it as one call.
    sed -i 's/^calls=0 /calls=1 /' "$f"
    for inc in yes no; do
      callgrind_annotate --inclusive=$inc --threshold=100 --auto=no "$f" 2>/dev/null >"$f.$inc"
    done
  done
  python3 - "$@" "$top" <<'EOF'
import re, sys
what, a, b, n, top = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
def load(path, inclusive):
    fns, total = {}, None
    for line in open(path):
        m = re.match(r'^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$', line)
        if not m:
            continue
        ir, name = int(m.group(1).replace(',', '')), m.group(2)
        if name == 'PROGRAM TOTALS':
            total = ir
            continue
        name = re.sub(r' \[[^\]]*\]$', '', name).split(':', 1)[-1]
        # A fragment's inclusive cost is part of the whole function's (the largest entry).
        fns[name] = max(fns.get(name, 0), ir) if inclusive else fns.get(name, 0) + ir
    return fns, total
for kind in ('yes', 'no'):
    (fa, ta), (fb, tb) = (load(f'{f}.{kind}', kind == 'yes') for f in (a, b))
    d = sorted(((fb.get(k, 0) - fa.get(k, 0)) / n, k) for k in set(fa) | set(fb))[::-1]
    per = (tb - ta) / n
    if kind == 'yes':
        print(f'{what}: {per:,.0f} instructions per command '
              f'(Ir {ta:,} and {tb:,}, {n:,.0f} commands apart)')
        # The thread start, runtime and task-poll frames every command runs inside.
        outer = [k for v, k in d if v >= 0.99 * per]
        d = [(v, k) for v, k in d if v < 0.99 * per]
        print(f'  top {top} by inclusive instructions per command (left out: {len(outer)} outer '
              f'frames at 99 % or more, the threads\' start and the runtime):')
    else:
        mem = sum(v for v, k in d if re.match(r'__mem(set|cpy|move)', k))
        print(f'  top {top} by self instructions per command ({mem:,.0f} in libc memset/memcpy, '
              f'where each byte of a rep stosb/movsb counts as an instruction):')
    for v, k in d[:top]:
        print(f'  {v:9,.0f}  {k[:150]}')
EOF
}

read -r n1 n2 <<<"$ios"
serve_run "$n1"
serve_run "$n2"
r1=$(<"$work/serve-$n1.reads") r2=$(<"$work/serve-$n2.reads")
echo "stint serve, 4 KiB sequential READ at QD32 from stint bench, 1 GiB RAM LUN$( ((written)) &&
  echo ' (written first)' || echo ' (never written)'): --ios $n1 and $n2; the server counted $r1 and $r2 reads"
report "server" "$work/serve-$n1.cg" "$work/serve-$n2.cg" $((r2 - r1))

if ((sim)); then
  read -r n1 n2 <<<"$sim_ios"
  sim_run "$n1"
  sim_run "$n2"
  echo
  echo "stint sim experiments/b1.toml --qd 32 --threads 1: --ios $n1 and $n2"
  report "simulator" "$work/sim-$n1.cg" "$work/sim-$n2.cg" $((n2 - n1))
fi
