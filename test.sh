#!/usr/bin/env bash
# Runs every test of stint: formatting and lints, unit and integration tests (cargo test), the
# fuzz targets briefly (fuzz/run.sh --dev, about 4 minutes: 1 for their lints, 1.5 for their
# unoptimised build, 1 for running; cargo-fuzz is installed once if missing), then libiscsi's iscsi-test-cu conformance suite against `stint serve`, compared with
# tests/conformance/libiscsi-expected.txt, then the Ceph RBD stage (a one-node cluster from
# tests/ceph/cluster.sh, crates/cli/tests/rbd.rs and gateways.rs, the crash test over RBD and the same
# conformance suite against RBD LUNs, the suites that reach the store, through two gateways of
# each image; installs Debian's ceph
# packages, or prints SKIPPED where they cannot be installed; the cluster stays up for the VM's
# plain-rbd and gateways suites), then
# the README followed as a newcomer would
# (tests/newcomer.py: the install step, the examples, bad inputs, a 100 TiB LUN's memory), then
# the Linux kernel initiator in a QEMU VM against `stint serve` (tests/linux/run.sh, about 10
# minutes; with the Ceph cluster, plain-rbd and gateways too), then the cluster is stopped. Installs what the
# tests need (Debian's libiscsi-bin; qemu-system-x86 and debootstrap for the VM, whose guest
# image is cached in /tmp).
set -euo pipefail
cd "$(dirname "$0")"
# A stage's heading, with the time spent so far (CI's limit is on the whole run).
stage() { echo "== $* [$(date -u +%T), ${SECONDS} s in]"; }

if ! command -v iscsi-test-cu >/dev/null || ! command -v iscsi-inq >/dev/null; then
  stage "installing libiscsi-bin"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libiscsi-bin >/dev/null
fi

stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
stage "cargo test"
cargo test --workspace
stage "fuzz targets: lints, then 6 s each from the committed corpus, unoptimised (fuzz/run.sh, docs/fuzzing.md)"
(cd fuzz && cargo fmt -- --check && cargo clippy --all-targets -q -- -D warnings)
fuzz/run.sh --seconds 6 --dev
stage "libiscsi conformance (iscsi-test-cu, one suite per process)"
cargo build -q -p stint
python3 tests/conformance/libiscsi.py --stint "${CARGO_TARGET_DIR:-target}/debug/stint"
stage "Ceph RBD: a one-node cluster (tests/ceph/cluster.sh), the RBD tests, the crash test over RBD, libiscsi against RBD LUNs"
# Debian's ceph packages (about 250 MB; tgt-rbd for bench/vs-tgt-rbd.sh), installed when missing;
# where they cannot be, the stage says SKIPPED and the rest goes on. Once the cluster is up,
# every failure fails.
ceph_pkgs=()
for c in ceph-mon ceph-osd rbd; do command -v "$c" >/dev/null || ceph_pkgs=(ceph-mon ceph-osd ceph-common); done
ldconfig -p | grep -q 'librbd\.so\.1 ' || ceph_pkgs+=(librbd1)
[ -e /usr/lib/tgt/backing-store/bs_rbd.so ] || ceph_pkgs+=(tgt-rbd)
ceph_ok=1
ceph_conf=
if [ ${#ceph_pkgs[@]} -gt 0 ]; then
  stage "installing ${ceph_pkgs[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${ceph_pkgs[@]}" >/dev/null) || ceph_ok=0
fi
if [ "$ceph_ok" = 0 ] || ! command -v ceph-mon >/dev/null || ! command -v rbd >/dev/null; then
  echo "SKIPPED: the Ceph RBD stage (the ceph packages could not be installed here)"
else
  ceph_dir=$(mktemp -d /tmp/stint-ceph.XXXXXX)
  # The cluster's daemons are stopped by their PIDs when test.sh ends, however it ends: after
  # the VM stage (whose plain-rbd and gateways suites use the cluster), a failure (set -e) or an interrupt
  # (INT, TERM: exit, which runs the EXIT trap).
  trap 'tests/ceph/cluster.sh stop "$ceph_dir" || true; rm -rf "$ceph_dir"' EXIT
  trap 'exit 130' INT TERM
  tests/ceph/cluster.sh start "$ceph_dir"
  stage "Ceph: the RBD tests"
  STINT_CEPH_CONF="$ceph_dir/ceph.conf" cargo test -q -p stint --test rbd -- --include-ignored
  stage "Ceph: the gateway tests"
  # Two gateways of one image (docs/gateways.md), libiscsi's multipath tests through them.
  STINT_CEPH_CONF="$ceph_dir/ceph.conf" cargo test -q -p stint --test gateways -- --include-ignored \
    --skip a_gateway_killed_mid
  # The fault test alone (about a minute): six SIGKILLs of a gateway under PERSISTENT RESERVE
  # OUTs and FUA writes, alone so that no other test slows its rounds.
  STINT_CEPH_CONF="$ceph_dir/ceph.conf" cargo test -q -p stint --test gateways -- --ignored \
    a_gateway_killed_mid
  stage "Ceph: the crash test over RBD"
  # The crash test's RBD runs only (its file runs ran above): about 40 s.
  STINT_CEPH_CONF="$ceph_dir/ceph.conf" cargo test -q -p stint --test crash -- --ignored
  stage "Ceph: libiscsi against RBD LUNs, through two gateways of each image"
  # Each suite's session through one gateway, its second initiator's through the other.
  python3 tests/conformance/libiscsi.py --stint "${CARGO_TARGET_DIR:-target}/debug/stint" \
    --rbd "$ceph_dir/ceph.conf" --gateways
  ceph_conf=$ceph_dir/ceph.conf
fi
stage "the README as a newcomer follows it (tests/newcomer.py)"
python3 tests/newcomer.py
stage "Linux initiator in a VM (tests/linux/run.sh)"
# With a cluster, run.sh adds plain-rbd (the plain suite on an RBD image) and gateways (two
# gateways of one image, dm-multipath, failovers) to its suites.
[ -n "$ceph_conf" ] || echo "NOT RUN: the VM's plain-rbd and gateways suites (no Ceph cluster: the Ceph stage was SKIPPED)"
# The release binary, as a host's users run it, and about a sixth faster through the guest's
# suites than the debug one: the newcomer stage's `cargo install` built it (this is a no-op).
cargo build --release -q -p stint
STINT="${CARGO_TARGET_DIR:-target}/release/stint" STINT_CEPH_CONF="$ceph_conf" tests/linux/run.sh
stage "done: every stage that ran passed"
