#!/usr/bin/env bash
# Runs every test of stint: formatting and lints, unit and integration tests (cargo test), the
# fuzz targets briefly (fuzz/run.sh, about 5 minutes: 1 for their lints, 2.5 for their build,
# 1 for running; cargo-fuzz is installed once if missing), then libiscsi's iscsi-test-cu conformance suite against `stint serve`, compared with
# tests/conformance/libiscsi-expected.txt, then the README followed as a newcomer would
# (tests/newcomer.py: the install step, the examples, bad inputs, a 100 TiB LUN's memory), then
# the Linux kernel initiator in a QEMU VM against `stint serve` (tests/linux/run.sh, about 10
# minutes). Installs what the tests need (Debian's libiscsi-bin; qemu-system-x86 and debootstrap
# for the VM, whose guest image is cached in /tmp).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v iscsi-test-cu >/dev/null || ! command -v iscsi-inq >/dev/null; then
  echo "== installing libiscsi-bin"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libiscsi-bin >/dev/null
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== fuzz targets: lints, then 6 s each from the committed corpus (fuzz/run.sh, docs/fuzzing.md)"
(cd fuzz && cargo fmt -- --check && cargo clippy --all-targets -q -- -D warnings)
fuzz/run.sh --seconds 6
echo "== libiscsi conformance (iscsi-test-cu, one suite per process)"
cargo build -q -p stint
python3 tests/conformance/libiscsi.py --stint "${CARGO_TARGET_DIR:-target}/debug/stint"
echo "== the README as a newcomer follows it (tests/newcomer.py)"
python3 tests/newcomer.py
echo "== Linux initiator in a VM (tests/linux/run.sh)"
STINT="${CARGO_TARGET_DIR:-target}/debug/stint" tests/linux/run.sh
