#!/bin/bash
# stint against the real Linux iSCSI initiator: a Debian guest (kernel 6.12, open-iscsi, sd,
# sg3-utils, fio) under QEMU logs in to `stint serve` on the host's 127.0.0.1 and checks what a
# host sees. See tests/linux/README.md.
#   tests/linux/run.sh                    every suite: plain reconnect cdl fast-fail fast-fail-real-time
#                                         cdl-reconnect chap reconfigure
#   SUITES="plain cdl" tests/linux/run.sh  some of them
#   STINT_CEPH_CONF=DIR/ceph.conf tests/linux/run.sh   every suite, plain-rbd (the plain suite
#                                         against an RBD image on that cluster, pool "rbd") and
#                                         gateways (two gateways of one image, dm-multipath, failovers)
# Env: STINT (stint binary; default: cargo build -p stint, then ${CARGO_TARGET_DIR:-target}/debug/stint)
#      STINT_VM_DIR (/tmp/stint-vm: image cache, results)  OUT (results of this run)
#      VM_ATTEMPTS (3: boots per suite when the VM or the harness breaks; a failed check is final)
#      STINT_CEPH_CONF (a Ceph cluster's conf file, user admin, pool "rbd": adds plain-rbd and
#        gateways to the default SUITES; each attempt creates its own image with `rbd create`
#        and removes it)
#      CDL_CONFIG (examples/hdd-cdl.toml)  FAST_FAIL_CONFIG (examples/fast-fail.toml)
#      FAST_FAIL_RT_CONFIG (examples/fast-fail-real-time.toml: suite fast-fail-real-time, the
#        fast-fail suite with limits on the wall clock over a store slowed to 20 ms an operation)
#      VM_TIMEOUT (480 s per VM)  VMTEST_TIMEOUT (420 s per test inside the VM; both 1.5x for
#        the gateways suite)  VERBOSE=1
#      LINUX_VM_BUDGET (2400 s: no new VM boots after this; what is left is reported NOT_RUN)
# Exit status: 0 = every suite passed; 1 = a product check failed (or a suite could not run its
# target); 2 = only harness failures (a VM that broke on every attempt, or no time left).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export VMDIR=${STINT_VM_DIR:-/tmp/stint-vm}
CEPH_CONF_FILE=${STINT_CEPH_CONF:-}
if [ -n "$CEPH_CONF_FILE" ]; then
    [ -r "$CEPH_CONF_FILE" ] || { echo "STINT_CEPH_CONF=$CEPH_CONF_FILE cannot be read" >&2; exit 2; }
    CEPH_CONF_FILE=$(cd "$(dirname "$CEPH_CONF_FILE")" && pwd)/$(basename "$CEPH_CONF_FILE")
fi
SUITES=${SUITES:-plain reconnect cdl fast-fail fast-fail-real-time cdl-reconnect chap reconfigure${CEPH_CONF_FILE:+ plain-rbd gateways}}
ATTEMPTS=${VM_ATTEMPTS:-3}
BUDGET=${LINUX_VM_BUDGET:-2400}
export VM_TIMEOUT=${VM_TIMEOUT:-480} VMTEST_TIMEOUT=${VMTEST_TIMEOUT:-420}
CDL_CONFIG=${CDL_CONFIG:-$ROOT/examples/hdd-cdl.toml}
FAST_FAIL_CONFIG=${FAST_FAIL_CONFIG:-$ROOT/examples/fast-fail.toml}
FAST_FAIL_RT_CONFIG=${FAST_FAIL_RT_CONFIG:-$ROOT/examples/fast-fail-real-time.toml}
# Absolute: their targets run in a scratch directory (a file store's relative path lands there).
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
CDL_CONFIG=$(abspath "$CDL_CONFIG"); FAST_FAIL_CONFIG=$(abspath "$FAST_FAIL_CONFIG")
FAST_FAIL_RT_CONFIG=$(abspath "$FAST_FAIL_RT_CONFIG")
T_START=$(date +%s)
log() { echo "[linux-vm $(date +%T)] $*"; }
for s in $SUITES; do
    case $s in plain|reconnect|cdl|fast-fail|cdl-reconnect|chap|fast-fail-real-time|reconfigure) ;;
    plain-rbd|gateways) [ -n "$CEPH_CONF_FILE" ] || { echo "suite $s needs a Ceph cluster: STINT_CEPH_CONF=DIR/ceph.conf" >&2; exit 2; } ;;
    *) echo "unknown suite '$s' (plain reconnect cdl fast-fail cdl-reconnect chap plain-rbd fast-fail-real-time reconfigure gateways)" >&2; exit 2 ;; esac
done

# ---- host packages ------------------------------------------------------------------------
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v debootstrap >/dev/null || need+=(debootstrap)
{ command -v mkfs.ext4 && command -v debugfs; } >/dev/null || need+=(e2fsprogs)
command -v ss >/dev/null || need+=(iproute2)
command -v flock >/dev/null || need+=(util-linux)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    for try in 1 2 3; do      # another apt may hold the lock: wait and retry
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null && break
        [ $try = 3 ] && { echo "could not install ${need[*]}" >&2; exit 2; }
        sleep 20; dpkg --configure -a >/dev/null 2>&1
    done
fi

# ---- the run directory, cleanup ---------------------------------------------------------------
mkdir -p "$VMDIR/out"
find "$VMDIR/out" -mindepth 1 -maxdepth 1 -mtime +2 -exec rm -rf {} + 2>/dev/null   # old runs
OUT=${OUT:-$VMDIR/out/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
VMPID=; WATCHPID=; TARGETRUN=; LUNDIR=; RBDIMG=
cleanup() {
    [ -n "$WATCHPID" ] && kill "$WATCHPID" 2>/dev/null
    [ -n "$VMPID" ] && kill "$VMPID" 2>/dev/null && wait "$VMPID" 2>/dev/null
    local t
    for t in $TARGETRUN; do "$HERE/lib/target.sh" stop "$t" >/dev/null 2>&1; done   # gateways: two
    [ -n "$LUNDIR" ] && rm -rf "$LUNDIR"
    [ -n "$RBDIMG" ] && rbd_cli rm --no-progress "rbd/$RBDIMG" >/dev/null 2>&1   # once: interrupted
    VMPID=; WATCHPID=; TARGETRUN=; LUNDIR=; RBDIMG=
}
rbd_cli() { timeout 60 rbd -c "$CEPH_CONF_FILE" "$@"; }
# After the target stopped. A watch a killed target left on the image expires after 30 s.
rbd_rm() {
    local i
    for i in 1 2 3 4 5 6 7; do
        rbd_cli rm --no-progress "rbd/$1" && return 0
        sleep 5
    done
    return 1
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# ---- the guest image, cached by the hash of every guest-side file ----------------------------------
KEY=$(cat "$HERE/lib/build-image.sh" "$HERE/lib/vmmux.py" "$HERE"/guest/* | sha256sum | cut -c1-16)
IMG=$VMDIR/image-$KEY
(
    flock 9
    if [ ! -e "$IMG/root.img" ]; then
        log "building the guest image $IMG (first time: about 2 minutes)"
        t=$(date +%s)
        "$HERE/lib/build-image.sh" "$IMG" > "$VMDIR/build-$KEY.log" 2>&1 || {
            tail -30 "$VMDIR/build-$KEY.log"; echo "guest image build failed: $VMDIR/build-$KEY.log" >&2; exit 1; }
        log "guest image built in $(( $(date +%s) - t )) s"
    fi
    # images of older guest files, unused for a day
    find "$VMDIR" -maxdepth 1 -name 'image-*' ! -name "image-$KEY" -mtime +0 -exec rm -rf {} + 2>/dev/null
    touch "$IMG"
) 9> "$VMDIR/.image.lock" || exit 2
IMAGE_S=$(( $(date +%s) - T_START ))

# ---- the stint binary (copied: a rebuild during the run must not change it) --------------------
if [ -z "${STINT:-}" ]; then
    log "cargo build -p stint"
    (cd "$ROOT" && cargo build -q -p stint) || { echo "cargo build -p stint failed" >&2; exit 1; }
    TD=${CARGO_TARGET_DIR:-target}; case $TD in /*) ;; *) TD=$ROOT/$TD ;; esac
    STINT=$TD/debug/stint
fi
[ -x "$STINT" ] || { echo "no stint binary at $STINT" >&2; exit 1; }
cp "$STINT" "$OUT/stint"; export STINT=$OUT/stint
log "stint: $(sha256sum < "$STINT" | cut -c1-16)  image: $IMG  results: $OUT"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A directory for the file-backed LUNs of the reconnect suites: the timed LUN is as large as the
# drive (22 TB, sparse), more than ext4 allows in one file (16 TiB), so /dev/shm (tmpfs) when
# it can hold such a file and has 2 GiB free (only written blocks use memory); else under $1.
lun_dir() {
    local d
    for d in /dev/shm "$1"; do
        [ "$d" = /dev/shm ] && { [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || continue
            [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -gt 2097152 ] || continue; }
        d=$(mktemp -d "$d/stint-vm-lun.XXXXXX" 2>/dev/null) || continue
        if truncate -s 32T "$d/probe" 2>/dev/null; then rm -f "$d/probe"; echo "$d"; return; fi
        rm -rf "$d"
    done
    mkdir -p "$1/lun"; echo "$1/lun"
}

# cdl-reconnect: a copy of the CDL example whose LUN keeps its data in a (sparse) file
file_backed_config() {   # SRC DEST IMG
    awk -v img="$3" '
        /^[[:space:]]*store[[:space:]]*=[[:space:]]*"ram"/ {
            ind = $0; sub(/[^[:space:]].*/, "", ind)
            print ind "store = \"file\""; print ind "path = \"" img "\""; n++; next }
        { print }
        END { if (n != 1) exit 1 }' "$1" > "$2"
}

# reconfigure: the target's configuration file, one target with LUN 0 a (sparse) file LUN and,
# when LUN1_SIZE is given, LUN 1 a RAM LUN of that size. Written beside and renamed over the
# file: a reload must never read half of it.
reconfigure_config() {   # FILE LUN0_IMG [LUN1_SIZE]
    { printf '%s\n' '[[target]]' 'name = "iqn.2026-11.dev.stint:reconfigure"' \
          '[[target.lun]]' 'id = 0' 'store = "file"' "path = \"$2\"" 'size = "512MiB"'
      if [ -n "${3:-}" ]; then printf '%s\n' '[[target.lun]]' 'id = 1' 'store = "ram"' "size = \"$3\""; fi
    } > "$1.new" && mv "$1.new" "$1"
}
# reconfigure, the host half of one step: once the guest prints "VMTEST-HOST: REQUEST", write
# the configuration with LUN 1 of LUN1_SIZE, SIGHUP the target (by its recorded PID) and wait
# (60 s at most) for its log to answer: a new "reconfigured" line or "reload refused". Every
# step goes to host-events.txt ("REQUEST: seen" tells run.sh the host acted). Returns 1 when
# the VM ended first.
reconfigure_step() {   # A V CFG LUN0_IMG REQUEST LUN1_SIZE
    local A=$1 V=$2 cfg=$3 img=$4 req=$5 size=$6 E=$1/host-events.txt before i
    while ! grep -q "^VMTEST-HOST: $req" "$V/results.txt" 2>/dev/null; do
        kill -0 "$VMPID" 2>/dev/null || return 1; sleep 0.2; done
    echo "$(date +%T.%N) $req: seen; LUN 1 size = \"$size\", SIGHUP" >> "$E"
    before=$(grep -c 'reconfigured\|reload refused' "$A/target/target.log")
    reconfigure_config "$cfg" "$img" "$size"
    "$HERE/lib/target.sh" hup "$A/target" >> "$E" 2>&1 || { echo "$req: SIGHUP failed" >> "$E"; return 0; }
    for i in $(seq 300); do
        [ "$(grep -c 'reconfigured\|reload refused' "$A/target/target.log")" -gt "$before" ] && break
        sleep 0.2
    done
    if [ "$(grep -c 'reconfigured\|reload refused' "$A/target/target.log")" -gt "$before" ]; then
        { echo "$(date +%T.%N) $req: target log after $((i / 5)) s:"
          grep 'reconfigured\|reload refused' "$A/target/target.log" | tail -n +$((before + 1)); } >> "$E"
    else
        echo "$(date +%T.%N) $req: the target logged no reconfiguration in 60 s" >> "$E"
    fi
}

# gateways: gateway ME's configuration, the README's CDL disk in front of Ceph
# (examples/ceph-cdl.toml: a device queue, CDL descriptors) on image IMG, as gateway ME of the
# pair gw-a (port group 1, the preferred) and gw-b (port group 2) on ports PA and PB.
gateway_config() {   # FILE ME IMG PA PB
    sed -e "s|^image = \"stint-disk\"$|image = \"$3\"|" -e "s|^# conf = .*|conf = \"$CEPH_CONF_FILE\"|" \
        -e "s|^name = \"iqn.2026-11.dev.stint:ceph\"$|&\ngateway = \"$2\"|" "$ROOT/examples/ceph-cdl.toml" > "$1"
    printf '%s\n' '' '[[target.gateways]]' 'name = "gw-a"' "portal = \"127.0.0.1:$4\"" 'port_group = 1' \
        '[[target.gateways]]' 'name = "gw-b"' "portal = \"127.0.0.1:$5\"" 'port_group = 2' >> "$1"
    grep -q "^image = \"$3\"" "$1" && grep -q '^conf = ' "$1" && grep -q "^gateway = \"$2\"" "$1"
}
# gateways, the host half: SIGKILL and restart each gateway (by its recorded PID) on the guest's
# requests, in the suite's order. host-events.txt: "REQ: seen", then "REQ: done" (or "REQ:
# failed": a gateway that does not start again is the product's failure).
GATEWAY_REQUESTS="kill-gw-a restart-gw-a kill-gw-b restart-gw-b"
gateways_host() {   # A V
    local A=$1 V=$2 E=$1/host-events.txt req
    for req in $GATEWAY_REQUESTS; do
        while ! grep -q "^VMTEST-HOST: $req" "$V/results.txt" 2>/dev/null; do
            kill -0 "$VMPID" 2>/dev/null || return 0; sleep 0.2; done
        echo "$(date +%T.%N) $req: seen" >> "$E"
        if "$HERE/lib/target.sh" "${req%%-*}" "$A/${req#*-}" >> "$E" 2>&1; then
            echo "$(date +%T.%N) $req: done" >> "$E"
        else
            echo "$(date +%T.%N) $req: failed" >> "$E"
        fi
    done
}

# ---- one attempt: target + VM -> status in $A/status ----------------------------------------
# status: PASS | FAIL (a product check failed, or the target could not start) | HARNESS (retry)
attempt() {
    local suite=$1 A=$2 port ports script env=() args=() lunimg cfg= tcwd=. extra=()
    mkdir -p "$A"; TARGETRUN=$A/target
    port=$(free_port); ports=$port
    script=$HERE/suites/$suite.sh
    case $suite in
    cdl|cdl-reconnect) cfg=$CDL_CONFIG ;;
    fast-fail) cfg=$FAST_FAIL_CONFIG ;;
    fast-fail-real-time) cfg=$FAST_FAIL_RT_CONFIG ;;
    esac
    if [ -n "$cfg" ] && [ ! -e "$cfg" ]; then echo "FAIL target: no config $cfg" > "$A/status"; return; fi
    case $suite in
    plain) args=(serve --listen "127.0.0.1:$port" --lun ram:512MiB); env=(LUN_BYTES=536870912) ;;
    plain-rbd)
        # A fresh image per attempt; the LUN's size must come from it.
        RBDIMG=stint-vm-$$-$(basename "$A")
        if ! rbd_cli create --size 512M "rbd/$RBDIMG" > "$A/rbd-create.txt" 2>&1; then
            echo "HARNESS rbd create rbd/$RBDIMG failed: $(tail -1 "$A/rbd-create.txt")" > "$A/status"; RBDIMG=; return; fi
        echo "  rbd image rbd/$RBDIMG (512 MiB) on $CEPH_CONF_FILE"
        # The README's example (examples/ceph-cdl.toml: real-time CDL descriptors, a device
        # queue) on this image and cluster: the host must see a CDL disk.
        sed -e "s|^image = \"stint-disk\"$|image = \"$RBDIMG\"|" \
            -e "s|^# conf = .*|conf = \"$CEPH_CONF_FILE\"|" "$ROOT/examples/ceph-cdl.toml" > "$A/ceph-cdl.toml"
        if ! grep -q "^image = \"$RBDIMG\"" "$A/ceph-cdl.toml" || ! grep -q '^conf = ' "$A/ceph-cdl.toml"; then
            echo "FAIL target: examples/ceph-cdl.toml has no image = \"stint-disk\" or # conf = line to set" > "$A/status"; return; fi
        args=(serve --config "$A/ceph-cdl.toml" --listen "127.0.0.1:$port")
        script=$HERE/suites/plain.sh; env=(LUN_BYTES=536870912 LBP_LOG=0 CDL_SUPPORTED=1) ;;
    chap)
        # The names and secrets suites/chap.sh logs in with.
        printf '%s\n' '[[target]]' 'name = "iqn.2026-11.dev.stint:chap"' \
            'chap = { user = "alice", secret = "alice-secret-12" }' \
            'mutual_chap = { user = "stint", secret = "target-secret-34" }' \
            '[[target.lun]]' 'store = "ram"' 'size = "64MiB"' \
            '[[target.lun]]' 'store = "ram"' 'size = "64MiB"' \
            'allowed_initiators = ["iqn.2026-11.dev.stint:someone-else"]' > "$A/chap.toml"
        args=(serve --config "$A/chap.toml" --listen "127.0.0.1:$port") ;;
    reconnect)
        LUNDIR=$(lun_dir "$A"); lunimg=$LUNDIR/lun.img
        args=(serve --listen "127.0.0.1:$port" --lun "file:$lunimg:512MiB") ;;
    reconfigure)
        # LUN 0 only; the host adds LUN 1 (64 MiB) and grows it (128 MiB) on the guest's requests
        LUNDIR=$(lun_dir "$A"); lunimg=$LUNDIR/lun0.img
        reconfigure_config "$A/reconfigure.toml" "$lunimg"
        args=(serve --config "$A/reconfigure.toml" --listen "127.0.0.1:$port") ;;
    cdl|fast-fail|fast-fail-real-time)
        # a file store's relative path: in this scratch directory, removed after the attempt
        LUNDIR=$A/lun; mkdir -p "$LUNDIR"; tcwd=$LUNDIR
        args=(serve --config "$cfg" --listen "127.0.0.1:$port")
        [ "$suite" = fast-fail-real-time ] && script=$HERE/suites/fast-fail.sh ;;
    gateways)
        # One fresh image, two gateways of it on two ports (gw-a's first: the guest's portal)
        RBDIMG=stint-vm-$$-gw-$(basename "$A")
        if ! rbd_cli create --size 512M "rbd/$RBDIMG" > "$A/rbd-create.txt" 2>&1; then
            echo "HARNESS rbd create rbd/$RBDIMG failed: $(tail -1 "$A/rbd-create.txt")" > "$A/status"; RBDIMG=; return; fi
        echo "  rbd image rbd/$RBDIMG (512 MiB) on $CEPH_CONF_FILE"
        local pb; pb=$(free_port); while [ "$pb" = "$port" ]; do pb=$(free_port); done
        ports=$port,$pb
        if ! gateway_config "$A/gw-a.toml" gw-a "$RBDIMG" "$port" "$pb" ||
           ! gateway_config "$A/gw-b.toml" gw-b "$RBDIMG" "$port" "$pb"; then
            echo "FAIL target: examples/ceph-cdl.toml has no name/image = \"stint-disk\"/# conf = line to set" > "$A/status"; return; fi
        TARGETRUN="$A/gw-a $A/gw-b"
        extra=("$ROOT/examples/gateways/multipath.conf") ;;
    cdl-reconnect)
        LUNDIR=$(lun_dir "$A"); lunimg=$LUNDIR/hdd.img
        if ! file_backed_config "$cfg" "$A/hdd-cdl-file.toml" "$lunimg"; then
            echo "FAIL target: $cfg has not exactly one store = \"ram\" line to turn into a file store" > "$A/status"; return; fi
        args=(serve --config "$A/hdd-cdl-file.toml" --listen "127.0.0.1:$port")
        script=$HERE/suites/reconnect.sh; env=(CDL=1) ;;
    esac
    local trc t p plist i=0
    read -ra plist <<< "${ports//,/ }"
    for t in $TARGETRUN; do
        p=${plist[$i]}; i=$((i + 1))
        if [ "$suite" = gateways ]; then args=(serve --config "$A/$(basename "$t").toml" --listen "127.0.0.1:$p"); fi
        (cd "$tcwd" && exec "$HERE/lib/target.sh" start "$t" "$p" "${args[@]}") > "$A/target-start.txt" 2>&1; trc=$?
        if [ $trc = 2 ]; then echo "HARNESS port $p taken" > "$A/status"; return; fi
        if [ $trc != 0 ]; then
            echo "FAIL target: stint ${args[*]} did not start: $(grep -m1 -iE 'error|panick' "$t/target.log")" > "$A/status"
            return
        fi
        echo "  target: pid $(cat "$A/target-start.txt") on 127.0.0.1:$p: stint ${args[*]}"
    done
    local V=$A/vm; mkdir -p "$V"; : > "$V/results.txt"
    local rc vmt=$VMTEST_TIMEOUT vmw=$VM_TIMEOUT
    # the gateways suite waits through two failovers and two restarts: about 200 s on a quiet
    # machine, 340 s with both cores busy; the others take half the default or less
    [ "$suite" = gateways ] && { vmt=$(( vmt * 3 / 2 )); vmw=$(( vmw * 3 / 2 )); }
    (
        flock -w 1800 8 || exit 125                  # one VM at a time on this machine
        export VMTEST_TIMEOUT=$vmt VM_TIMEOUT=$vmw
        VMTEST_ENV=$(printf '%s\n' "${env[@]}") exec "$HERE/lib/vm.sh" "$IMG" "$V" "$ports" "$script" \
            "$HERE/suites/lib.sh" "$HERE/suites/cdltool.py" "$HERE/suites/lbastatus.py" "${extra[@]}"
    ) 8> "$VMDIR/.vm.lock" &
    VMPID=$!
    if [ "$suite" = reconnect ] || [ "$suite" = cdl-reconnect ]; then
        : > "$A/host-events.txt"
        # the host half: on the guest's request, crash the target, restart it 5 s later
        ( while ! grep -q '^VMTEST-HOST: kill-target' "$V/results.txt" 2>/dev/null; do
              kill -0 $VMPID 2>/dev/null || exit 0; sleep 0.2; done
          echo "$(date +%T.%N) kill -KILL target" >> "$A/host-events.txt"
          "$HERE/lib/target.sh" kill "$A/target" >> "$A/host-events.txt" 2>&1 && echo killed >> "$A/host-events.txt"
          sleep 5
          echo "$(date +%T.%N) restart target" >> "$A/host-events.txt"
          "$HERE/lib/target.sh" restart "$A/target" >> "$A/host-events.txt" 2>&1 && echo restarted >> "$A/host-events.txt"
          echo "$(date +%T.%N) done" >> "$A/host-events.txt" ) &
        WATCHPID=$!
    elif [ "$suite" = gateways ]; then
        : > "$A/host-events.txt"
        gateways_host "$A" "$V" &
        WATCHPID=$!
    elif [ "$suite" = reconfigure ]; then
        : > "$A/host-events.txt"
        # the host half: reload the target on the guest's requests, while fio runs on LUN 0
        ( reconfigure_step "$A" "$V" "$A/reconfigure.toml" "$lunimg" add-lun1 64MiB &&
          reconfigure_step "$A" "$V" "$A/reconfigure.toml" "$lunimg" grow-lun1 128MiB ) &
        WATCHPID=$!
    fi
    if [ "${VERBOSE:-0}" = 1 ]; then tail -n +1 -f "$V/results.txt" --pid=$VMPID & fi
    wait $VMPID; rc=$?; VMPID=
    if [ -n "$WATCHPID" ]; then wait "$WATCHPID" 2>/dev/null; WATCHPID=; fi
    for t in $TARGETRUN; do "$HERE/lib/target.sh" stop "$t"; done > "$A/target-stop.txt" 2>&1; TARGETRUN=
    [ -n "$LUNDIR" ] && rm -rf "$LUNDIR"; LUNDIR=
    if [ -n "$RBDIMG" ]; then
        rbd_rm "$RBDIMG" > "$A/rbd-rm.txt" 2>&1 || echo "  could not remove rbd/$RBDIMG: $(tail -1 "$A/rbd-rm.txt")"
        RBDIMG=
    fi
    sed 's/^/  /' "$V/timing.txt" 2>/dev/null
    # classify
    local started=0 fails muxbad=0 panic=0
    grep -q '^VMTEST-START' "$V/results.txt" && started=1
    fails=$(grep -h '^CHECK .*=FAIL' "$V/results.txt" | sed 's/^CHECK \([^=]*\)=FAIL.*/\1/' | tr '\n' ' ')
    grep -qE 'host_mux=(died|traceback)|guest_mux=(died|traceback)' "$V/timing.txt" 2>/dev/null && muxbad=1
    grep -qE 'Kernel panic|BUG:|Oops|general protection fault' "$V/console.log" 2>/dev/null && panic=1
    # a broken transport (mux) or boot is the harness's fault, even when checks failed after it
    if [ $started = 0 ]; then
        echo "HARNESS the test did not start (rc=$rc; $(grep -h VMTEST-ERROR "$V/results.txt" | head -1))" > "$A/status"
    elif [ $muxbad = 1 ]; then
        echo "HARNESS the connection multiplexer failed ($(sed -n 's/.*\(host_mux=.*\)/\1/p' "$V/timing.txt"); failed checks: ${fails:-none})" > "$A/status"
    elif grep -q '^VMTEST-HARNESS:' "$V/results.txt"; then
        # a tool of the guest the test relies on broke (the gateways suite's multipathd)
        echo "HARNESS $(grep -m1 '^VMTEST-HARNESS:' "$V/results.txt" | cut -c17-) (failed checks: ${fails:-none})" > "$A/status"
    elif [ -n "$fails" ]; then
        echo "FAIL checks: $fails" > "$A/status"
    elif [ $panic = 1 ]; then
        echo "FAIL the guest kernel crashed during the test (see vm/console.log)" > "$A/status"
    elif [ -e "$V/out/rc" ]; then
        if [ "$(cat "$V/out/rc")" = 0 ] && grep -q '^RESULT=PASS' "$V/results.txt"; then echo PASS > "$A/status"
        elif [ "$(cat "$V/out/rc")" = 124 ]; then echo "FAIL the test timed out in the guest (${vmt} s)" > "$A/status"
        else echo "FAIL the test ended with status $(cat "$V/out/rc") and no failed check" > "$A/status"; fi
    elif [ "$rc" = 124 ]; then
        echo "HARNESS the VM timed out (${vmw} s) and did not report" > "$A/status"
    else
        echo "HARNESS the VM broke (rc=$rc, qemu: $(tail -1 "$V/qemu.log" 2>/dev/null))" > "$A/status"
    fi
    if [ "$(cut -d' ' -f1 "$A/status")" != HARNESS ] && [ -e "$A/host-events.txt" ] && \
       ! grep -q '^killed' "$A/host-events.txt" && grep -q '^VMTEST-HOST: kill-target' "$V/results.txt"; then
        echo "HARNESS the host did not kill the target on request (previous: $(cat "$A/status"))" > "$A/status"
    fi
    # a reload the target refused is the likely cause of the checks that failed: say so
    if [ "$(cut -d' ' -f1 "$A/status")" = FAIL ] && grep -q 'reload refused' "$A/host-events.txt" 2>/dev/null; then
        echo "$(sed 's/ *$//' "$A/status"); target: $(grep -m1 -o 'reload refused.*' "$A/host-events.txt")" > "$A/status"
    fi
    local req
    for req in $GATEWAY_REQUESTS; do
        [ "$suite" = gateways ] && grep -q "^VMTEST-HOST: $req" "$V/results.txt" || continue
        if grep -q " $req: failed" "$A/host-events.txt"; then
            echo "FAIL the host could not $req (the gateway did not start again; previous: $(cat "$A/status"))" > "$A/status"
        elif [ "$(cut -d' ' -f1 "$A/status")" != HARNESS ] && ! grep -q " $req: done" "$A/host-events.txt"; then
            echo "HARNESS the host did not act on the request $req (previous: $(cat "$A/status"))" > "$A/status"
        fi
    done
    for req in add-lun1 grow-lun1; do
        if [ "$(cut -d' ' -f1 "$A/status")" != HARNESS ] && grep -q "^VMTEST-HOST: $req" "$V/results.txt" && \
           ! grep -q " $req: seen" "$A/host-events.txt" 2>/dev/null; then
            echo "HARNESS the host did not reload the target on the request $req (previous: $(cat "$A/status"))" > "$A/status"
        fi
    done
}

# ---- the suites -----------------------------------------------------------------------------
declare -A RES NOTE TRIES WALL
for suite in $SUITES; do
    t0=$(date +%s); n=0; RES[$suite]=NOT_RUN; NOTE[$suite]="no time left"
    while [ $n -lt "$ATTEMPTS" ]; do
        if [ $(( $(date +%s) - T_START )) -gt "$BUDGET" ]; then log "time budget ($BUDGET s) spent"; break; fi
        n=$((n + 1))
        log "suite $suite, attempt $n"
        attempt "$suite" "$OUT/$suite/attempt-$n"
        [ -n "$LUNDIR" ] && rm -rf "$LUNDIR"; LUNDIR=; TARGETRUN=
        [ -n "$RBDIMG" ] && { rbd_rm "$RBDIMG" >/dev/null 2>&1; RBDIMG=; }
        st=$(cat "$OUT/$suite/attempt-$n/status")
        log "suite $suite, attempt $n: $st"
        RES[$suite]=${st%% *}; NOTE[$suite]=${st#* }; [ "$st" = PASS ] && NOTE[$suite]=
        [ "${RES[$suite]}" = HARNESS ] || break
    done
    TRIES[$suite]=$n; WALL[$suite]=$(( $(date +%s) - t0 ))
    ln -sfn "attempt-$n" "$OUT/$suite/last"
done

# ---- summary ----------------------------------------------------------------------------------
echo
echo "== linux VM summary ($OUT)"
pass=0; fail=0; harness=0
for suite in $SUITES; do
    case ${RES[$suite]} in PASS) pass=$((pass+1)) ;; FAIL) fail=$((fail+1)) ;; *) harness=$((harness+1)) ;; esac
done
{
    echo "linux_vm_image_s=$IMAGE_S"
    echo "linux_vm_kernel=$(cat "$IMG/kernel-version" 2>/dev/null)"
    for suite in $SUITES; do
        k=${suite//-/_}
        echo "${k}_result=${RES[$suite]}"
        echo "${k}_attempts=${TRIES[$suite]}"
        echo "${k}_wall_s=${WALL[$suite]}"
        [ -n "${NOTE[$suite]}" ] && echo "${k}_reason=${NOTE[$suite]}"
        L=$OUT/$suite/last
        if [ -e "$L/vm/timing.txt" ]; then
            echo "${k}_vm_wall_s=$(sed -n 's/^vm_wall_s=\([0-9.]*\).*/\1/p' "$L/vm/timing.txt")"
            echo "${k}_boot_s=$(sed -n 's/.*guest_uptime_at_test_start_s=\([0-9.?]*\).*/\1/p' "$L/vm/timing.txt")"
        fi
        for a in $(seq 1 $(( ${TRIES[$suite]} - 1 ))); do
            echo "${k}_attempt${a}=$(cat "$OUT/$suite/attempt-$a/status")"
        done
        [ -e "$L/vm/out/kv.txt" ] && sed "s/^/${k}_/" "$L/vm/out/kv.txt"
    done
    echo "linux_vm_total_s=$(( $(date +%s) - T_START ))"
    echo "linux_vm_result=$([ $((fail + harness)) = 0 ] && echo PASS || echo FAIL)"
} | tee "$OUT/summary.txt"
echo "linux-vm: $pass passed, $((fail + harness)) failed"
[ $fail -gt 0 ] && exit 1
[ $harness -gt 0 ] && exit 2
exit 0
