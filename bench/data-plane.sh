#!/usr/bin/env bash
# The data plane of file LUNs (store I/O submitted asynchronously, through io_uring or a thread
# pool, instead of run on the connection's thread one command at a time), measured with
# `stint bench` (4 KiB random reads) against this tree's build and, with --stint-b, another
# build (e.g. one from before the data plane), in four sections:
#
# 1. A 1 GiB file LUN on tmpfs (/dev/shm, written once with random bytes, so reads copy data),
#    QD 1 and 32: IOPS of both builds and new/B. The data plane must not be slower than the
#    synchronous path where the store never waits.
# 2. A slow store, this tree's build only: the same file with `store_delay_ms = 20` (every
#    completion held until 20 ms after submission), QD 1, 8 and 32. Expected: QD / 20 ms (50,
#    400, 1600 IOPS) when the host's queue depth reaches the store. (The synchronous path
#    serves about 50 IOPS at any QD of one connection.)
# 3. A 2 GiB file on the disk that holds this repository (under target/, written once), its
#    pages evicted before every run (fsync, then POSIX_FADV_DONTNEED; fincore, where present,
#    shows what stayed), so reads reach the device: QD 1 and 32 for B (buffered), this build
#    buffered and this build with `direct = true` (O_DIRECT). Buffered runs cache what they
#    read (at QD32 a 5 s run reads a few hundred MiB of the 2 GiB), so their later reads hit
#    the page cache more often. When the disk is about as fast as the page cache (QD 1 on the
#    disk at 80 % or more of QD 1 on tmpfs, for B if given, else this build: e.g. a virtual
#    disk the host caches), the script says so: the section then measures no device.
# 4. 16 sessions x QD32 against one RAM LUN (`--lun ram:1GiB`, never written): total IOPS of
#    both builds and new/B, for the LUN's lock under many connections.
#
#   bench/data-plane.sh [--rounds N] [--seconds S] [--stint-b PATH]
#
# Every run starts its own server (a file LUN holds its file's lock, so two servers cannot
# share one file) on 127.0.0.1 with a port of its own choosing (--listen 127.0.0.1:0; the URL
# is read from its output), runs this tree's `stint bench` for S seconds against it, and stops
# it by PID. The runs alternate point by point and round by round (the variants of a point
# rotated and every other round reversed), so machine noise hits them alike; the tables print
# medians over the rounds. Any failure of a server or of `stint bench` stops the script, naming
# the run, with the tool's last words.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 seconds=5 stint_b=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2-}; shift; shift || true ;;
    --seconds) seconds=${2-}; shift; shift || true ;;
    --stint-b) stint_b=${2-}; shift; shift || true ;;
    *) echo "usage: $0 [--rounds N] [--seconds S] [--stint-b PATH]" >&2
       exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bad --rounds '$rounds': expected a positive integer" >&2; exit 2; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "bad --seconds '$seconds': expected a positive integer" >&2; exit 2; }
if [ -n "$stint_b" ]; then
  if ! [ -f "$stint_b" ] || ! [ -x "$stint_b" ]; then
    echo "bad --stint-b '$stint_b': not an executable file" >&2; exit 2
  fi
  stint_b=$(realpath "$stint_b")
fi
command -v python3 >/dev/null || { echo "python3 is needed (JSON, page eviction)" >&2; exit 2; }

cargo build --release -q -p stint
stint=$(realpath "${CARGO_TARGET_DIR:-target}/release/stint")

work=$(mktemp -d)                                # configs, logs
shm=$(mktemp -d /dev/shm/stint-data-plane.XXXXXX) # section 1 and 2's file
mkdir -p target
disk=$(mktemp -d "$PWD/target/data-plane.XXXXXX") # section 3's file, on the repository's disk
pid=""
cleanup() {
  exec 2>/dev/null
  if [ -n "$pid" ]; then kill -9 "$pid" || true; wait "$pid" || true; fi
  rm -rf "$work" "$shm" "$disk"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fstype=$(findmnt -no FSTYPE -T "$disk" 2>/dev/null || stat -f -c %T "$disk")
if [ "$fstype" = tmpfs ] || [ "$fstype" = ramfs ]; then
  echo "the repository's directory is on $fstype, not a disk: section 3 would measure memory" >&2
  exit 1
fi

echo "writing the test files: 1 GiB in $shm, 2 GiB in $disk ($fstype)" >&2
dd if=/dev/urandom of="$shm/lun.img" bs=1M count=1024 iflag=fullblock status=none
dd if=/dev/urandom of="$disk/lun.img" bs=1M count=2048 iflag=fullblock conv=fsync status=none

conf() { # name, then the LUN's extra keys
  local f=$work/$1.toml
  shift
  {
    echo '[[target]]'
    echo 'name = "iqn.2026-11.dev.stint:data-plane"'
    echo '[[target.lun]]'
    printf '%s\n' "$@"
  } >"$f"
  echo "$f"
}
delay_toml=$(conf delay 'store = "file"' "path = \"$shm/lun.img\"" 'store_delay_ms = 20')
direct_toml=$(conf direct 'store = "file"' "path = \"$disk/lun.img\"" 'direct = true')

# Evicts the disk file's pages (after an fsync, so none is dirty) and prints how many bytes
# of it stay in the page cache.
evict() {
  python3 - "$disk/lun.img" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
EOF
  if command -v fincore >/dev/null; then
    fincore --bytes --noheadings --output RES "$disk/lun.img" | tr -d ' '
  else
    echo "?"
  fi
}

# The server of a variant, binary and arguments, into the array cmd.
server() { # section variant
  case $1:$2 in
    tmpfs:new) cmd=("$stint" serve --lun "file:$shm/lun.img") ;;
    tmpfs:b) cmd=("$stint_b" serve --lun "file:$shm/lun.img") ;;
    delay:new) cmd=("$stint" serve --config "$delay_toml") ;;
    disk:b) cmd=("$stint_b" serve --lun "file:$disk/lun.img") ;;
    disk:new) cmd=("$stint" serve --lun "file:$disk/lun.img") ;;
    disk:direct) cmd=("$stint" serve --config "$direct_toml") ;;
    ram16:new) cmd=("$stint" serve --lun ram:1GiB) ;;
    ram16:b) cmd=("$stint_b" serve --lun ram:1GiB) ;;
  esac
}
label() { # section variant
  case $1:$2 in
    disk:b) echo "B buffered" ;; disk:new) echo "new buffered" ;; disk:direct) echo "new direct" ;;
    *:b) echo "B" ;; *:new) echo "new" ;;
  esac
}

log=$work/serve.log err=$work/bench.err
# The server's last words and the client's, on a failure.
said() {
  echo "  server ($log):" >&2; tail -n 8 "$log" | sed 's/^/    /' >&2
  [ -s "$err" ] && { echo "  stint bench:" >&2; tail -n 8 "$err" | sed 's/^/    /' >&2; }
  return 0
}
# Stops the server by PID: SIGTERM, then SIGKILL (reported) if it has not exited in 10 s.
stop() { # what
  local rc=0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "warning: $1: stint serve (pid $pid) still runs 10 s after SIGTERM; killed" >&2
    tail -n 5 "$log" | sed 's/^/    /' >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || rc=$?
  pid=""
  if ((rc != 0 && rc != 137 && rc != 143)); then
    echo "warning: $1: stint serve exited with status $rc after SIGTERM:" >&2
    tail -n 5 "$log" | sed 's/^/    /' >&2
  fi
}

# One run: starts the variant's server, evicts the disk file for section 3, runs stint bench
# for $seconds, stops the server; sets $v to "IOPS mean-latency-ms" and $resident to the bytes
# of the disk file left in the page cache by the eviction.
run() { # section variant qd
  local what u cmd
  what="$(label "$1" "$2") ($1) QD$3"
  server "$1" "$2"
  : >"$log"
  : >"$err"
  "${cmd[@]}" --listen 127.0.0.1:0 >"$log" 2>&1 &
  pid=$!
  u=""
  for _ in $(seq 100); do
    u=$(grep -m1 -o 'iscsi://[^ ]*' "$log") && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$u" ] || { echo "$what: stint serve printed no URL (${cmd[*]}):" >&2; said; exit 1; }
  resident=""
  if [ "$1" = disk ]; then resident=$(evict); fi
  local jobs=(--iodepth "$3")
  [ "$1" = ram16 ] && jobs=(--numjobs 16 --iodepth 32)
  if ! timeout $((seconds + 60)) env RUST_BACKTRACE=0 "$stint" bench --url "$u" --rw randread \
      --bs 4k "${jobs[@]}" --runtime "${seconds}s" --json >"$work/bench.json" 2>"$err" ||
    ! v=$(python3 -c 'import json, sys
t = json.load(sys.stdin)["points"][0]["total"]
print(round(t["iops"]), t["lat_ms"]["mean"])' <"$work/bench.json" 2>>"$err"); then
    echo "$what: stint bench failed against $u (${cmd[*]}):" >&2; said; exit 1
  fi
  stop "$what"
}

# The points, each with its variants.
points="tmpfs:1 tmpfs:32 delay:1 delay:8 delay:32 disk:1 disk:32 ram16:32"
variants() { # section
  case $1 in
    tmpfs | ram16) echo new ${stint_b:+b} ;;
    delay) echo new ;;
    disk) echo ${stint_b:+b} new direct ;;
  esac
}

declare -A iops lat res
maxres=0
for r in $(seq "$rounds"); do
  for p in $points; do
    s=${p%:*} q=${p#*:}
    read -r -a vs <<<"$(variants "$s")"
    n=${#vs[@]}
    # Rotate the variants from round to round, and reverse them every other round.
    lst=("${vs[@]}")
    if ((r % 2 == 0)); then
      lst=(); for ((i = n - 1; i >= 0; i--)); do lst+=("${vs[i]}"); done
    fi
    k=$(((r - 1) % n))
    order=("${lst[@]:k}" "${lst[@]:0:k}")
    for x in "${order[@]}"; do
      run "$s" "$x" "$q"
      read -r i l <<<"$v"
      iops[$s,$x,$q]+="$i " lat[$s,$x,$q]+="$l "
      if [ -n "$resident" ]; then
        res[$s,$x,$q]+="$resident "
        [[ $resident =~ ^[0-9]+$ ]] && ((resident > maxres)) && maxres=$resident
      fi
      printf '  round %d  %-6s %-13s QD%-3d %8d IOPS  %8.3f ms%s\n' "$r" "$s" "$(label "$s" "$x")" \
        "$q" "$i" "$l" "${resident:+  (${resident} B cached after eviction)}" >&2
    done
  done
done

median() { tr ' ' '\n' | awk NF | sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mi() { median <<<"${iops[$1]:-}"; }
ml() { median <<<"${lat[$1]:-}"; }
# a/b as "1.23x", or "-" without b.
ratio() { if [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; else echo "-"; fi; }
us() { if [ -n "$1" ]; then awk -v l="$1" 'BEGIN {printf "%.0f", l * 1000}'; else echo "-"; fi; }
or_dash() { echo "${1:--}"; }

echo
echo "stint data plane: this tree's build (new) $(git describe --always --dirty 2>/dev/null || true)"
echo "and B = ${stint_b:-none}; client: this tree's stint bench, 4 KiB random reads;"
echo "median over $rounds rounds of ${seconds} s per point; latencies are the mean per command."

echo
echo "## 1. File LUN on tmpfs (1 GiB in /dev/shm, written)"
echo
echo "| QD | new IOPS | new lat µs | B IOPS | B lat µs | new/B |"
echo "|---:|---:|---:|---:|---:|---:|"
for q in 1 32; do
  a=$(mi "tmpfs,new,$q") b=$(mi "tmpfs,b,$q")
  echo "| $q | $a | $(us "$(ml "tmpfs,new,$q")") | $(or_dash "$b") | $(us "$(ml "tmpfs,b,$q")") | $(ratio "$a" "$b") |"
done

echo
echo "## 2. Slow store: file LUN with store_delay_ms = 20 (new only)"
echo
echo "| QD | IOPS | expected (QD / 20 ms) | measured/expected | mean lat ms |"
echo "|---:|---:|---:|---:|---:|"
for q in 1 8 32; do
  a=$(mi "delay,new,$q") e=$((q * 50))
  echo "| $q | $a | $e | $(ratio "$a" "$e") | $(ml "delay,new,$q") |"
done

echo
echo "## 3. File LUN on the disk (2 GiB on $fstype$(findmnt -no SOURCE -T "$disk" 2>/dev/null | sed 's/^/ on /') under target/, pages evicted before each run)"
echo
echo "| QD | B buffered | new buffered | new direct | new buffered/B | new direct/B | direct/buffered |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for q in 1 32; do
  b=$(mi "disk,b,$q") a=$(mi "disk,new,$q") d=$(mi "disk,direct,$q")
  echo "| $q | $(or_dash "$b") | $a | $d | $(ratio "$a" "$b") | $(ratio "$d" "$b") | $(ratio "$d" "$a") |"
done
echo
echo "| QD | mean lat µs: B buffered | new buffered | new direct |"
echo "|---:|---:|---:|---:|"
for q in 1 32; do
  echo "| $q | $(us "$(ml "disk,b,$q")") | $(us "$(ml "disk,new,$q")") | $(us "$(ml "disk,direct,$q")") |"
done
echo
if command -v fincore >/dev/null; then
  echo "Eviction: at most $maxres bytes of the 2 GiB file were in the page cache when a run began."
else
  echo "Eviction: not checked (no fincore)."
fi
# The device's latency at QD1: disk minus tmpfs, per build (B's synchronous path has no thread
# hand-offs in the way, so its difference, when given, decides whether the disk is a device).
qd1() { # label variant-on-disk variant-on-tmpfs
  local d s
  d=$(mi "disk,$2,1") s=$(mi "tmpfs,$3,1")
  [ -n "$d" ] && [ -n "$s" ] || return 0
  awk -v n="$1" -v d="$d" -v s="$s" -v dl="$(us "$(ml "disk,$2,1")")" -v sl="$(us "$(ml "tmpfs,$3,1")")" 'BEGIN {
    printf "QD1, %s: %d IOPS (%d µs) on the disk, %d IOPS (%d µs) on tmpfs: the disk adds %d µs per read.\n", n, d, dl, s, sl, dl - sl }'
}
qd1 "B buffered" b b
qd1 "new buffered" new new
qd1 "new direct" direct new
judge=b
[ -n "$stint_b" ] || judge=new
awk -v d="$(mi "disk,$judge,1")" -v s="$(mi "tmpfs,$judge,1")" -v n="$(label disk "$judge")" 'BEGIN {
  if (d >= 0.8 * s)
    print "NOTE: this disk is about as fast as the page cache (QD1 reads of " n " from it run at " \
      int(100 * d / s + 0.5) "% of its rate on tmpfs): section 3 measures no real device here; read its ratios as CPU cost."
  else
    print "The disk is slower than the page cache (" n " at QD1: " int(100 * d / s + 0.5) "% of its tmpfs rate): section 3 reaches the device."
}'

echo
echo "## 4. 16 sessions x QD32, one RAM LUN (ram:1GiB, never written)"
echo
echo "| sessions x QD | new IOPS | B IOPS | new/B |"
echo "|---|---:|---:|---:|"
a=$(mi "ram16,new,32") b=$(mi "ram16,b,32")
echo "| 16 x 32 | $a | $(or_dash "$b") | $(ratio "$a" "$b") |"
