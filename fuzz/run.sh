#!/usr/bin/env bash
# Runs stint's fuzz targets one after the other on one core (docs/fuzzing.md):
#
#   fuzz/run.sh [--seconds N] [--merge] [--dev] [TARGET...]
#
# --seconds N  how long each target runs (default 600); all targets when none is named.
# --dev        build unoptimised: half the build time, a thirtieth of the executions per
#              second; for a short check of the committed corpus (./test.sh), not for a search.
# --merge      afterwards, add to fuzz/corpus/TARGET the fewest inputs that cover the edges
#              the run reached and the corpus did not (libFuzzer's -set_cover_merge=1 on
#              edges alone, inputs cut to the length in max_len below): the kept corpus
#              stays small.
#
# Installs cargo-fuzz if missing. Builds on Rust stable: no sanitizer (`--sanitizer none`;
# safe Rust needs none), debug assertions and overflow checks on. An input that runs longer
# than 10 s counts as a crash (a hang), as does one past libFuzzer's 2 GB RSS limit. New
# inputs and each target's log go to a scratch directory the script creates beside the targets
# (a corpus and a log per target; git ignores it), a crashing input to fuzz/artifacts/. Prints
# execs, coverage and crashes per target; exits 1 if any target crashed (the input, and
# `cargo fuzz run TARGET FILE` to replay it, are printed).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=600
merge=0
profile=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    --dev) profile=(--dev); shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
all=$(cd fuzz && cargo fuzz list)
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<<"$(echo $all)"
fi
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$all" || { echo "no fuzz target $t (have: $(echo $all))" >&2; exit 2; }
done

echo "== building the fuzz targets"
start=$(date +%s)
(cd fuzz && cargo fuzz build --sanitizer none "${profile[@]}")
echo "   built in $(( $(date +%s) - start )) s"

# The dictionary of each target's vocabulary.
dict() {
  case "$1" in
    pdu|text|login|connection) echo "-dict=fuzz/dict/iscsi.dict" ;;
    experiment_toml|stint_toml|drive_profile) echo "-dict=fuzz/dict/toml.dict" ;;
    admin_request) echo "-dict=fuzz/dict/admin.dict" ;;
  esac
}

# The longest input kept by --merge: a PDU sequence or a TOML file's first lines.
max_len() {
  case "$1" in
    pdu|text) echo 256 ;;
    login|experiment_toml|stint_toml|drive_profile|admin_request) echo 512 ;;
    scsi) echo 600 ;;
    codec) echo 64 ;;
    *) echo 1024 ;;
  esac
}

# New inputs and logs: kept in the repository's tree, ignored by git (its .gitignore files).
scratch=fuzz/work
failed=()
printf '%-16s %12s %8s %8s %8s %s\n' target execs exec/s cov corpus result
for t in "${targets[@]}"; do
  work="$scratch/corpus/$t"
  log="$scratch/logs/$t.log"
  mkdir -p "$work" "$scratch/logs" "fuzz/artifacts/$t" "fuzz/corpus/$t"
  # One process (no -jobs/-workers): one core. The committed corpus is read, not written.
  set +e
  (cd fuzz && cargo fuzz run --sanitizer none "${profile[@]}" "$t" "../$work" "corpus/$t" -- \
     -max_total_time="$seconds" -timeout=10 -print_final_stats=1 $(dict "$t" | sed 's|fuzz/||') \
     -artifact_prefix="artifacts/$t/") >"$log" 2>&1
  rc=$?
  set -e
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | tail -1 | cut -d' ' -f2)
  corp=$(grep -oE 'corp: [0-9]+' <<<"$last" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    result="CRASH ${crash:-(see $log)}"
    failed+=("$t")
  fi
  printf '%-16s %12s %8s %8s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${corp:-?}" "$result"
  if [ "$rc" -ne 0 ]; then
    grep -m1 -A4 'panicked at' "$log" | sed 's/^/    /' || tail -5 "$log" | sed 's/^/    /'
    echo "    replay: (cd fuzz && cargo fuzz run --sanitizer none ${profile[*]} $t ${crash#fuzz/})"
  elif [ "$merge" -eq 1 ]; then
    (cd fuzz && cargo fuzz run --sanitizer none "${profile[@]}" "$t" "corpus/$t" "../$work" -- \
       -set_cover_merge=1 -use_counters=0 -use_cmp=0 -max_len="$(max_len "$t")") >>"$log" 2>&1
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "crashed: ${failed[*]}" >&2
  exit 1
fi
