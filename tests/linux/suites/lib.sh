# Shared helpers of the guest-side suites (sourced; runs INSIDE the VM, cwd /job/out).
# Output conventions the host (run.sh) relies on:
#   "CHECK NAME=PASS|FAIL detail"  one product check; any FAIL makes the suite fail (never retried)
#   "KEY=VALUE"                    also appended to kv.txt (the summary)
#   "VMTEST-HARNESS: WHY"          a tool of the guest the suite relies on broke: the attempt
#                                  is the harness's failure and is retried (WHY in the summary)
#   "VMTEST-HOST: kill-target"     asks the host to SIGKILL the target (reconnect suites)
#   "VMTEST-HOST: add-lun1", "VMTEST-HOST: grow-lun1"   ask the host to reload the target with
#                                  LUN 1 added, then grown (reconfigure suite)
#   "VMTEST-HOST: kill-gw-a", "restart-gw-a", "kill-gw-b", "restart-gw-b"   ask the host to
#                                  SIGKILL or restart a gateway (gateways suite)
P=$VMTEST_PORTAL
T0_UP=$(cut -d' ' -f1 /proc/uptime)
FAIL=0; FAILED=
: > kv.txt
now() { date +%s.%N; }
up() { cut -d' ' -f1 /proc/uptime; }
el() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
sec() { echo; echo "=== $* ==="; echo "<6>vmtest: === $* ===" > /dev/kmsg; }
kv() { echo "$1=$2"; echo "$1=$2" >> kv.txt; }
# check NAME OK DETAIL...: OK is 0 (pass) or anything else (fail)
check() {
    local name=$1 ok=$2; shift 2
    if [ "$ok" = 0 ]; then echo "CHECK $name=PASS $*"; echo "check_$name=PASS" >> kv.txt
    else echo "CHECK $name=FAIL $*"; echo "check_$name=FAIL" >> kv.txt; FAIL=1; FAILED="$FAILED $name"
        # what was seen, in the summary too: a CI run keeps only the summary
        if [ $# -gt 0 ]; then echo "why_$name=$*" >> kv.txt; fi
    fi
}
# expect NAME ACTUAL EXPECTED: string equality
expect() { local r=1; [ "$2" = "$3" ] && r=0; check "$1" $r "(got '$2', want '$3')"; }
# expect_cmd NAME CMD...: the command's exit status
expect_cmd() { local name=$1; shift; "$@"; local rc=$?; check "$name" $rc "(rc=$rc: $*)"; return $rc; }
# kernel messages since the test started (all levels, or warn and worse)
kmsgs() { dmesg "$@" | awk -v t="$T0_UP" '{ s=$0; sub(/^\[ */,"",s); if (s+0 >= t) print }'; }
kwarn() { kmsgs --level=emerg,alert,crit,err,warn; }
# Expected warnings: the target's power-on unit attention (once per login); the guest's clock
# complaining that its virtual CPU was not run for a while (a busy host: TCG on a shared
# machine), which says nothing of the target; plus $KWARN_ALLOW (an extended regex a suite
# may set, e.g. the connection errors of a deliberate target crash).
KWARN_ALLOW=${KWARN_ALLOW:-}
kwarn_unexpected() {
    local re='Power-on or device reset occurred'
    re="$re|hrtimer: interrupt took|clocksource: .*(watchdog|read-back delay|unstable)"
    re="$re|[Mm]arking (TSC|clocksource 'tsc' as) unstable|TSC found unstable|Switched to clocksource"
    [ -n "$KWARN_ALLOW" ] && re="$re|$KWARN_ALLOW"
    # Whole traces ("cut here" to "end trace") of the guest kernel's own flush-dependency warning
    # when logout tears the session down (__iscsi_unbind_session flushing pm_runtime_work: a
    # workqueue flag inside Linux 6.12, seen once in 15 runs, whatever the target sent) go;
    # any other trace stays, every line of it.
    kwarn | awk '
        /-----\[ cut here \]-----/ { n = 0; inblock = 1 }
        inblock { buf[n++] = $0; if ($0 ~ /WQ_MEM_RECLAIM iscsi_ctrl_[0-9:]+:__iscsi_unbind_session .* is flushing !WQ_MEM_RECLAIM pm:pm_runtime_work/) known = 1
                  if ($0 ~ /---\[ end trace [0-9a-f]+ \]---/) { if (!known) for (i = 0; i < n; i++) print buf[i]; inblock = 0; known = 0 }
                  next }
        { print }
        END { if (inblock) for (i = 0; i < n; i++) print buf[i] }' | grep -vE "$re"
}
# finish: the kernel-warning check, the summary lines, and the exit status (0 = every check passed)
finish() {
    sec "all kernel warnings/errors since the test started"
    kwarn; kv kwarn_total "$(kwarn | wc -l)"
    local n; n=$(kwarn_unexpected | wc -l)
    kv kwarn_unexpected "$n"
    check no_unexpected_kernel_warnings "$([ "$n" = 0 ] && echo 0 || echo 1)" \
        "$(kwarn_unexpected | head -3 | tr '\n' '|')"
    kmsgs | grep -v 'vmtest: ===' > dmesg-test.txt
    kv failed_checks "$(echo $FAILED)"
    kv RESULT "$([ $FAIL = 0 ] && echo PASS || echo FAIL)"
    exit $FAIL
}
# abort: a step that every later one needs failed; still summarise (exit status 1)
abort() { echo "ABORT: $*"; FAIL=1; finish; }

# login: SendTargets discovery, login, wait for the sd disk. Sets D (/dev/sdX), N (sdX), SG.
login() {
    local t
    sec discovery; t=$(now)
    iscsiadm -m discovery -t st -p "$P"; local rc=$?
    kv discovery_s "$(el $t)"
    check discovery $rc "(iscsiadm -m discovery rc=$rc)"
    [ $rc = 0 ] || abort "discovery failed"
    sec login; t=$(now)
    iscsiadm -m node -p "$P" --login; rc=$?
    check login $rc "(iscsiadm --login rc=$rc)"
    [ $rc = 0 ] || abort "login failed"
    D=
    for _ in $(seq 300); do
        D=$(iscsiadm -m session -P 3 2>/dev/null | awk '/Attached scsi disk/ {print "/dev/"$4; exit}')
        [ -n "$D" ] && [ -b "$D" ] && break; D=; sleep 0.2
    done
    kv login_to_disk_s "$(el $t)"; kv disk "$D"
    check disk_attached "$([ -n "$D" ] && echo 0 || echo 1)" "($D)"
    [ -n "$D" ] || { iscsiadm -m session -P 3; lsscsi -t; abort "no disk attached"; }
    N=${D#/dev/}
    sleep 1       # let sd finish its probe messages
    SG=$(lsscsi -g | awk -v d="$D" '$(NF-1)==d {print $NF; exit}')
    kv sg "$SG"
    iscsiadm -m session -P 3 | grep -E 'Target:|Current Portal|State|Attached'
}
logout() {
    local t rc
    sec logout; t=$(now)
    iscsiadm -m node -p "$P" --logout; rc=$?
    kv logout_s "$(el $t)"
    check logout $rc "(rc=$rc)"
    sleep 1
}
sysfs() { cat "/sys/block/$N/$1" 2>&1 | head -1; }
# fio_json NAME ARGS...: runs fio with JSON output into fio-NAME.json (stderr: fio-NAME.err);
# prints a one-line digest per job; returns fio's exit status
fio_json() {
    local name=$1; shift
    fio --output-format=json --output="fio-$name.json" "$@" 2> "fio-$name.err"
    local rc=$?
    cat "fio-$name.err"
    python3 /job/cdltool.py fio-digest "fio-$name.json" || true
    return $rc
}
# fio_verify NAME SECONDS SIZE [ARGS...]: random read/write with crc32c verification of every
# block written (--verify_backlog: a time-based mixed job verifies nothing without it)
fio_verify() {
    local name=$1 secs=$2 size=$3; shift 3
    sec "fio $name: randrw 4k QD16 libaio direct ${secs}s over $size, verify=crc32c verify_backlog=64"
    fio --name="$name" --filename="$D" --rw=randrw --bs=4k --ioengine=libaio --direct=1 --iodepth=16 \
        --size="$size" --runtime="$secs" --time_based --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
        --group_reporting --output-format=normal,terse --terse-version=3 "$@" > "fio-$name.txt" 2>&1
    local rc=$?
    grep -v '^3;' "fio-$name.txt"
    local verr; verr=$(grep -ciE 'verify.*(fail|bad)|bad magic|crc32c: verify' "fio-$name.txt")
    kv "fio_${name}_rc" $rc
    kv "fio_${name}_err" "$(awk -F';' '/^3;/ {print $5; exit}' "fio-$name.txt")"
    kv "fio_${name}_read_iops" "$(awk -F';' '/^3;/ {print $8; exit}' "fio-$name.txt")"
    kv "fio_${name}_write_iops" "$(awk -F';' '/^3;/ {print $49; exit}' "fio-$name.txt")"
    kv "fio_${name}_verify_errors" "$verr"
    check "fio_${name}" "$([ $rc = 0 ] && [ "$verr" = 0 ] && echo 0 || echo 1)" "(rc=$rc verify_errors=$verr)"
}
# fs_check SIZE_ARG FILES: mkfs.ext4 (on the first SIZE_ARG of the disk if given), FILES files
# of 1-64 KiB, unmount, e2fsck, drop caches, remount, sha256 verify
fs_check() {
    local size=$1 files=$2 t rc
    sec "filesystem: mkfs.ext4 ${size:-(whole disk)} + $files files + remount + sha256"
    t=$(now); mkfs.ext4 -F "$D" $size; rc=$?; kv mkfs_s "$(el $t)"
    check mkfs $rc "(rc=$rc)"
    [ $rc = 0 ] || return
    mkdir -p /mnt/t
    mount "$D" /mnt/t; rc=$?
    check mount $rc "(rc=$rc)"
    [ $rc = 0 ] || return
    t=$(now)
    for d in $(seq 0 9); do mkdir -p /mnt/t/d$d; done
    for i in $(seq 1 "$files"); do
        head -c $(( (RANDOM % 64 + 1) * 1024 + RANDOM % 1000 )) /dev/urandom > /mnt/t/d$((i % 10))/f$i
    done
    (cd /mnt/t && find . -type f -name 'f*' | sort | xargs sha256sum) > /tmp/sums
    sync; kv fs_write_sync_s "$(el $t)"
    du -sh /mnt/t; kv fs_files "$(wc -l < /tmp/sums)"
    umount /mnt/t; check umount $? ""
    echo 3 > /proc/sys/vm/drop_caches; blockdev --flushbufs "$D"
    e2fsck -fn "$D"; rc=$?
    check e2fsck $rc "(rc=$rc)"
    mount "$D" /mnt/t; rc=$?
    check remount $rc "(rc=$rc)"
    [ $rc = 0 ] || return
    t=$(now)
    local bad; bad=$(cd /mnt/t && sha256sum -c /tmp/sums 2>&1 | grep -vc ': OK$')
    kv fs_verify_s "$(el $t)"
    check fs_sha256 "$([ "$bad" = 0 ] && echo 0 || echo 1)" "($bad of $files files differ)"
    umount /mnt/t
}

# cdl_pages: reads the CDL T2A (reads) and T2B (writes) mode pages from the disk into
# t2a.txt / t2b.txt (decoded by cdltool.py, one line per descriptor); sets T2A_RC and T2B_RC
cdl_pages() {
    local sp name
    for sp in 7 8; do
        name=$([ $sp = 7 ] && echo t2a || echo t2b)
        sec "sg_modes -p 0xa,$sp (CDL ${name^^} page)"
        sg_modes -p 0xa,$sp "$D"; local rc=$?
        if [ $rc = 0 ] && sg_modes -r -p 0xa,$sp "$D" > "$name.bin" && \
           python3 /job/cdltool.py modepage "$name.bin" $sp > "$name.txt"; then :; else
            [ $rc = 0 ] && rc=99; : > "$name.txt"; fi
        cat "$name.txt"
        eval "${name^^}_RC=$rc"
    done
}
# cdl_hints KIND: the DLDs (1..7) of KIND: "safe" = neither page's descriptor ends a command
# with an error, limited ones first; "aborting-read" = T2A descriptors with a limit and a
# Dh/Eh/Fh policy; "limited-read" = T2A descriptors with any limit
cdl_hints() {
    case $1 in
    safe) { awk '/^dld=/ && / limited=1/ && / aborting=0/ {sub("dld=","",$1); print $1}' t2a.txt t2b.txt
            seq 1 7; } | awk '!seen[$1]++' | while read -r n; do
              grep -q "^dld=$n .* aborting=1" t2a.txt t2b.txt || echo "$n"; done | tr '\n' ' ' ;;
    aborting-read) awk '/^dld=/ && / aborting=1/ {sub("dld=","",$1); print $1}' t2a.txt | tr '\n' ' ' ;;
    limited-read) awk '/^dld=/ && / limited=1/ {sub("dld=","",$1); print $1}' t2a.txt | tr '\n' ' ' ;;
    esac
}
# cdl_enable: echo 1 > cdl_enable, checked by reading it back
cdl_enable() {
    sec "echo 1 > /sys/block/$N/device/cdl_enable"
    local err rc
    err=$( { echo 1 > "/sys/block/$N/device/cdl_enable"; } 2>&1 ); rc=$?
    kv cdl_enable_write_rc "$rc"; [ -n "$err" ] && echo "$err"
    expect cdl_enable "$(sysfs device/cdl_enable)" 1
}
# cdl_stats FILE: LOG SENSE 19h/21h (CDL statistics, cumulative values) into FILE.bin (sg_raw:
# sg_logs 1.48's --raw and --hex print only the first parameter of this page), decoded into
# FILE.txt; sg_logs' own decoding goes to FILE.log
cdl_stats() {
    sg_logs -p 0x19,0x21 "$D" > "$1.log" 2>&1
    rm -f "$1.bin"; sg_raw -r 4096 -o "$1.bin" "$D" 4d 00 59 21 00 00 00 10 00 00 > "$1.err" 2>&1 &&
        python3 /job/cdltool.py logpage "$1.bin" > "$1.txt"
}
