#!/bin/bash
# Boots the test VM once: it runs TESTSCRIPT against the iSCSI target that listens on the HOST
# at 127.0.0.1:PORT, then powers off; the results are collected into OUTDIR.
# Usage: lib/vm.sh IMAGEDIR OUTDIR PORT[,PORT...] TESTSCRIPT [EXTRA_FILE...]
#   Inside the VM the target is reachable at the same address, 127.0.0.1:PORT ($VMTEST_PORTAL),
#   through a virtio-serial multiplexer (lib/vmmux.py; the guest has no NIC). Several ports
#   (several targets, e.g. gateways): each is reachable in the VM at its own address, the
#   first is $VMTEST_PORTAL, all of them are in $VMTEST_PORTALS. EXTRA_FILEs are
#   copied next to the test script (/job in the VM). Lines KEY=VALUE in $VMTEST_ENV (a string)
#   are exported to the test.
# Env: VM_MEM (MiB, 1024)  VM_SMP (2)  VM_CPU (max)  VM_TIMEOUT (s, 900: the whole VM)
#      VMTEST_TIMEOUT (s, 600: the test inside the VM)  VERBOSE=1 (stream the console)
#      VMTEST_MUX_VERBOSE=1  VM_APPEND (extra kernel arguments, e.g. vmtest.udev=1)
# OUTDIR: results.txt (the test's stdout+stderr, live), console.log (serial console),
#   out/ (files the test wrote: rc, test.log, kv.txt, dmesg-full.txt, iscsid.log, ...),
#   mux-host.log, qemu.log, timing.txt.
# Exit status: the test's own (0 = pass), 124 = the VM timed out, 125 = the VM or the harness broke
# (QEMU failed, the job disk was not written back).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
IMG=${1:?IMAGEDIR}; OUT=${2:?OUTDIR}; PORT=${3:?PORT}; SCRIPT=${4:?TESTSCRIPT}; shift 4
PORTS=${PORT//,/ }; PORT=${PORTS%% *}; TARGETS=(); PORTALS=
for p in $PORTS; do
    case "$p" in [1-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9]) ;; *) echo "PORT must be a number 1000-65535" >&2; exit 125;; esac
    TARGETS+=(--target "127.0.0.1:$p"); PORTALS="${PORTALS:+$PORTALS }127.0.0.1:$p"
done
[ -e "$IMG/root.img" ] || { echo "no $IMG/root.img" >&2; exit 125; }
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
JOB=$(mktemp -d "$OUT/.job.XXXXXX")
cp "$SCRIPT" "$JOB/test.sh"; for f in "$@"; do cp -r "$f" "$JOB/"; done
{ echo "VMTEST_PORTAL=127.0.0.1:$PORT"; echo "VMTEST_PORTALS=\"$PORTALS\""; echo "VMTEST_TIMEOUT=${VMTEST_TIMEOUT:-600}"
  [ -n "${VMTEST_MUX_VERBOSE:-}" ] && echo "VMTEST_MUX_VERBOSE=1"
  printf '%s\n' "${VMTEST_ENV:-}" | grep -E '^[A-Z_][A-Z0-9_]*=' | sed 's/^/export /'; } > "$JOB/env"
rm -f "$OUT/job.img"
mkfs.ext4 -q -F -L vmjob -d "$JOB" "$OUT/job.img" 256M >/dev/null || exit 125
rm -rf "$JOB"
SOCK=$OUT/.mux.sock; rm -f "$SOCK" "$OUT/.mux-ready"
python3 "$HERE/vmmux.py" host ${VMTEST_MUX_VERBOSE:+-v} --unix "$SOCK" "${TARGETS[@]}" \
    --ready "$OUT/.mux-ready" 2> "$OUT/mux-host.log" &
MUXPID=$!
for i in $(seq 200); do [ -e "$OUT/.mux-ready" ] && break; sleep 0.05; done
[ -e "$OUT/.mux-ready" ] || { echo "host mux did not start" >&2; kill "$MUXPID" 2>/dev/null; exit 125; }
: > "$OUT/results.txt"; : > "$OUT/console.log"
ACCEL=${VM_ACCEL:-tcg}; [ "$ACCEL" = tcg ] && ACCEL=tcg,thread=multi
T0=$(date +%s.%N)
TAILPID=
[ "${VERBOSE:-0}" = 1 ] && { tail -n +1 -f "$OUT/console.log" & TAILPID=$!; }
QPID=
stop_all() {    # on SIGTERM/SIGINT: end what this script started, by PID
    [ -n "$QPID" ] && kill "$QPID" 2>/dev/null
    [ -n "$TAILPID" ] && kill "$TAILPID" 2>/dev/null
    kill "$MUXPID" 2>/dev/null; rm -f "$SOCK"; exit 125
}
trap stop_all TERM INT
timeout -k 5 "${VM_TIMEOUT:-900}" qemu-system-x86_64 \
  -nodefaults -no-user-config -machine q35 -accel "$ACCEL" -cpu "${VM_CPU:-max}" \
  -smp "${VM_SMP:-2}" -m "${VM_MEM:-1024}" -display none -no-reboot -nic none \
  -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" \
  -append "console=ttyS0 root=/dev/vda rw panic=-1 mitigations=off init=/usr/local/sbin/vmtest-init ${VM_APPEND:-}" \
  -drive file="$IMG/root.img",format=raw,if=virtio,snapshot=on,cache=unsafe \
  -drive file="$OUT/job.img",format=raw,if=virtio,cache=writeback \
  -device virtio-rng-pci -device virtio-serial-pci \
  -chardev socket,id=mux,path="$SOCK" -device virtserialport,chardev=mux,name=vmtest.mux \
  -chardev file,id=res,path="$OUT/results.txt" -device virtserialport,chardev=res,name=vmtest.results \
  -chardev file,id=con,path="$OUT/console.log" -serial chardev:con \
  > "$OUT/qemu.log" 2>&1 &
QPID=$!
wait "$QPID"; QRC=$?; QPID=
T1=$(date +%s.%N)
[ -n "$TAILPID" ] && kill "$TAILPID" 2>/dev/null
# the host mux exits by itself only once QEMU has gone ("QEMU disconnected"); dead before that,
# or with a Python traceback, it broke the test's transport: a harness failure
sleep 0.3
MUX=ok
if ! kill -0 "$MUXPID" 2>/dev/null && ! grep -q 'QEMU disconnected' "$OUT/mux-host.log"; then MUX=died; fi
grep -q Traceback "$OUT/mux-host.log" && MUX=traceback
kill "$MUXPID" 2>/dev/null; wait "$MUXPID" 2>/dev/null; rm -f "$SOCK" "$OUT/.mux-ready"
rm -rf "$OUT/out"; debugfs -R "rdump /out $OUT" "$OUT/job.img" >/dev/null 2>&1
rm -f "$OUT/job.img"
RC=$(cat "$OUT/out/rc" 2>/dev/null || echo 125)
[ "$QRC" = 124 ] || [ "$QRC" = 137 ] && RC=124
BOOT=$(sed -n 's/^VMTEST-START uptime=\([0-9.]*\).*/\1/p' "$OUT/results.txt")
GMUX=$(cat "$OUT/out/mux-state" 2>/dev/null || echo unknown)
grep -q Traceback "$OUT/out/vmmux-guest.log" 2>/dev/null && GMUX=traceback
printf 'vm_wall_s=%.1f guest_uptime_at_test_start_s=%s qemu_rc=%s test_rc=%s host_mux=%s guest_mux=%s\n' \
  "$(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}')" "${BOOT:-?}" "$QRC" "$RC" "$MUX" "$GMUX" > "$OUT/timing.txt"
exit "$RC"
