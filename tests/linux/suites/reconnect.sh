#!/bin/bash
# Suite "reconnect" (and "cdl-reconnect" with CDL=1), INSIDE the guest: the target crashes
# during I/O. fio verifies random reads/writes for $FIO_RUNTIME s; $KILL_AFTER s in, the guest
# prints "VMTEST-HOST: kill-target", on which the host SIGKILLs the target and restarts it 5 s
# later (same file-backed LUN). The session must recover by itself with no I/O or verify error.
# CDL=1: the LUN is the CDL hard disk: CDL must be supported; it is enabled and 30% of fio's
# I/Os carry a duration limit hint whose descriptors never fail a command.
. /job/lib.sh
FIO_RUNTIME=${FIO_RUNTIME:-40}; KILL_AFTER=${KILL_AFTER:-8}; CDL=${CDL:-0}
KWARN_ALLOW='detected conn error \(10[0-9][0-9]\)'
uname -r
login
S=$(ls -d /sys/class/iscsi_session/session* | head -1)
sec "recovery settings"
iscsiadm -m node -o show | grep -E 'replacement_timeout|noop_out|login_timeout|abort_timeout|lu_reset' | sort -u
kv recovery_tmo "$(cat $S/recovery_tmo)"; kv sd_timeout "$(sysfs device/timeout)"
PRIO=()
if [ "$CDL" = 1 ]; then
    expect cdl_supported "$(sysfs device/cdl_supported)" 1
    expect rotational "$(sysfs queue/rotational)" 1
    cdl_pages
    HINT=$(cdl_hints safe | awk '{print $1}')
    kv cdl_hint "$HINT"
    if [ "$(sysfs device/cdl_supported)" = 1 ] && [ -n "$HINT" ]; then
        cdl_enable
        PRIO=(--cmdprio_percentage=30 --cmdprio_class=2 --cmdprio_hint="$HINT")
    fi
fi

sec "fio randrw 4k QD16 verify ${FIO_RUNTIME}s ${PRIO[*]}; target killed after ${KILL_AFTER}s, restarted 5 s later"
fio --name=reconnect --filename="$D" --rw=randrw --bs=4k --ioengine=libaio --direct=1 --iodepth=16 \
    --size=256M --runtime=$FIO_RUNTIME --time_based --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
    --group_reporting --output-format=normal,terse --terse-version=3 "${PRIO[@]}" > fio-reconnect.txt 2>&1 &
FIOPID=$!
t_fio=$(now)
sleep "$KILL_AFTER"
echo "VMTEST-HOST: kill-target guest_uptime=$(up)"
kv kill_requested_uptime "$(up)"
# session / connection / device state, printed on change, until fio ends
last=; went_down=0
while kill -0 $FIOPID 2>/dev/null; do
    st="session=$(cat $S/state 2>/dev/null) conn=$(cat /sys/class/iscsi_connection/connection*/state 2>/dev/null | tr '\n' ' ')dev=$(sysfs device/state)"
    [ "$st" != "$last" ] && echo "uptime=$(up) $st"
    case "$st" in *FAILED*|*failed*|*down*|*blocked*) went_down=1 ;; esac
    last=$st; sleep 0.5
done
wait $FIOPID; rc=$?
kv fio_wall_s "$(el $t_fio)"
grep -v '^3;' fio-reconnect.txt
verr=$(grep -ciE 'verify.*(fail|bad)|bad magic|crc32c: verify' fio-reconnect.txt)
kv fio_rc $rc
kv fio_err "$(awk -F';' '/^3;/ {print $5; exit}' fio-reconnect.txt)"
kv fio_read_iops "$(awk -F';' '/^3;/ {print $8; exit}' fio-reconnect.txt)"
kv fio_write_iops "$(awk -F';' '/^3;/ {print $49; exit}' fio-reconnect.txt)"
kv fio_verify_errors "$verr"
check fio_verify_across_crash "$([ $rc = 0 ] && [ "$verr" = 0 ] && echo 0 || echo 1)" "(rc=$rc verify_errors=$verr)"

sec "post-recovery dd 32 MiB write + direct read-back sha256"
head -c 32M /dev/urandom > /tmp/pattern; sha=$(sha256sum < /tmp/pattern | cut -d' ' -f1)
dd if=/tmp/pattern of="$D" bs=1M seek=300 oflag=direct conv=fsync status=none; check dd_write_after_recovery $? ""
rsha=$(dd if="$D" bs=1M skip=300 count=32 iflag=direct status=none | sha256sum | cut -d' ' -f1)
expect dd_sha256_after_recovery "$rsha" "$sha"

sec "session after recovery"
iscsiadm -m session -P 1 | grep -E 'Current Portal|Connection State|Session State|Internal iscsid'
expect session_logged_in "$(cat $S/state 2>/dev/null)" LOGGED_IN
kmsgs | grep -v 'vmtest: ===' > dmesg-test.txt
conn_err=$(grep -c 'detected conn error' dmesg-test.txt)
BAD='I/O error|critical .*error|blk_update_request|FAILED Result|offline|timed out|reset'
io_err=$(grep -iE "$BAD" dmesg-test.txt | grep -vc 'Power-on or device reset occurred')
kv dmesg_conn_errors "$conn_err"; kv dmesg_io_errors "$io_err"; kv session_went_down "$went_down"
# the crash must have been seen by the initiator, or this suite tested nothing
check crash_seen_by_initiator "$([ "$conn_err" -gt 0 ] || [ "$went_down" = 1 ] && echo 0 || echo 1)" "(conn errors $conn_err)"
check no_io_errors "$([ "$io_err" = 0 ] && echo 0 || echo 1)" "($io_err lines)"
grep -iE "$BAD" dmesg-test.txt | grep -v 'Power-on or device reset occurred' | head -5
logout
finish
