#!/bin/bash
# Suite "reconfigure", INSIDE the guest: the target is reconfigured while fio runs (issue 22,
# live reconfiguration). The target starts with LUN 0 only (a 512 MiB file LUN). While fio
# verifies random reads/writes on LUN 0 for $FIO_RUNTIME s, the guest prints
# "VMTEST-HOST: add-lun1", on which the host rewrites the target's stint.toml with a 64 MiB
# RAM LUN 1 and sends it SIGHUP; the guest rescans the session until LUN 1's disk appears,
# checks its size and writes and reads it. Then "VMTEST-HOST: grow-lun1": the host rewrites
# LUN 1's size to 128 MiB and sends SIGHUP again; the guest rescans until the disk has grown,
# sd must log the capacity change, and the data written before must be intact. fio on LUN 0
# must see no I/O or verify error.
. /job/lib.sh
FIO_RUNTIME=${FIO_RUNTIME:-40}
WAIT_S=${WAIT_S:-90}      # a reload and the rescans after it, at most (a slow, shared machine)
MIB=1048576
# The unit attentions the reloads cause, reported by the SCSI layer at warning level:
# REPORTED LUNS DATA HAS CHANGED (3Fh/0Eh) and CAPACITY DATA HAS CHANGED (2Ah/09h).
KWARN_ALLOW='LUN assignments on this target have changed|Capacity data has changed'
uname -r
login
# LUN 1 is found by its H:C:T:L beside LUN 0's, not by udev's by-path links (no udev here).
HCTL0=$(basename "$(readlink -f "/sys/block/$N/device")")
HCTL1=${HCTL0%:*}:1
kv lun0_hctl "$HCTL0"
lun1_disk() { ls "/sys/bus/scsi/devices/$HCTL1/block" 2>/dev/null | head -1; }
size_of() { blockdev --getsize64 "$1" 2>/dev/null || echo 0; }
rescan() { iscsiadm -m session --rescan > /dev/null 2>&1; }
sec "before: LUN 0 only"
sg_luns "$D"
expect lun1_absent_before "$(lun1_disk)" ""

sec "fio randrw 4k QD16 verify ${FIO_RUNTIME}s on LUN 0 ($D); LUN 1 added and grown meanwhile"
fio --name=reconfigure --filename="$D" --rw=randrw --bs=4k --ioengine=libaio --direct=1 --iodepth=16 \
    --size=256M --runtime="$FIO_RUNTIME" --time_based --verify=crc32c --verify_backlog=64 --verify_fatal=1 \
    --group_reporting --output-format=normal,terse --terse-version=3 > fio-reconfigure.txt 2>&1 &
FIOPID=$!
t_fio=$(now)
sleep 3         # fio is under way before the first reload
fio_running() { kill -0 $FIOPID 2>/dev/null && echo 1 || echo 0; }

sec "add LUN 1: the host reloads the target; iscsiadm -m session --rescan until it appears"
kv fio_running_at_add "$(fio_running)"
echo "VMTEST-HOST: add-lun1 guest_uptime=$(up)"
t=$(now); L1=; n=0
while [ $(( ${t%.*} + WAIT_S )) -gt "$(date +%s)" ]; do
    rescan; n=$((n + 1))
    L1=$(lun1_disk)
    [ -n "$L1" ] && [ -b "/dev/$L1" ] && [ "$(size_of "/dev/$L1")" -gt 0 ] && break
    L1=; sleep 1
done
kv lun1_appeared_s "$(el $t)"; kv lun1_rescans "$n"; kv lun1_disk "$L1"
kv fio_running_when_lun1_appeared "$(fio_running)"
check lun1_appeared "$([ -n "$L1" ] && echo 0 || echo 1)" "(/dev/$L1 at $HCTL1 after $n rescans)"
if [ -n "$L1" ]; then
    sleep 1       # let sd finish its probe messages
    sg_luns "$D"; lsscsi
    # the point of the suite: the LUN came while fio ran on LUN 0
    check lun1_added_during_fio "$([ "$(fio_running)" = 1 ] && echo 0 || echo 1)" \
        "(fio ended before LUN 1 appeared: raise FIO_RUNTIME)"
    expect lun1_size_64mib "$(size_of "/dev/$L1")" $((64 * MIB))
    sec "LUN 1: dd 16 MiB at 16 MiB, direct write and read back"
    head -c 16M /dev/urandom > /tmp/pattern; sha=$(sha256sum < /tmp/pattern | cut -d' ' -f1)
    dd if=/tmp/pattern of="/dev/$L1" bs=1M seek=16 oflag=direct conv=fsync status=none
    check lun1_dd_write $? ""
    rsha=$(dd if="/dev/$L1" bs=1M skip=16 count=16 iflag=direct status=none | sha256sum | cut -d' ' -f1)
    expect lun1_dd_sha256 "$rsha" "$sha"

    sec "grow LUN 1 to 128 MiB: the host reloads the target; rescan until sd sees the new size"
    kv fio_running_at_resize "$(fio_running)"
    echo "VMTEST-HOST: grow-lun1 guest_uptime=$(up)"
    t=$(now); n=0; sz=0
    while [ $(( ${t%.*} + WAIT_S )) -gt "$(date +%s)" ]; do
        rescan; n=$((n + 1))
        sz=$(size_of "/dev/$L1"); [ "$sz" = $((128 * MIB)) ] && break
        sleep 1
    done
    kv resize_seen_s "$(el $t)"; kv resize_rescans "$n"; kv lun1_size_after "$sz"
    kv fio_running_when_resize_seen "$(fio_running)"
    expect lun1_size_128mib "$sz" $((128 * MIB))
    sleep 1
    # Linux 6.12's set_capacity_and_notify(), in 512-byte sectors: 64 MiB -> 128 MiB
    msg="$L1: detected capacity change from $((64 * MIB / 512)) to $((128 * MIB / 512))"
    kmsgs | grep -E "\\b$L1\\b.*(capacity|logical blocks)"
    check resize_seen "$(kmsgs | grep -qF "$msg" && echo 0 || echo 1)" "(kernel log: '$msg')"
    sec "LUN 1 after the resize: the 16 MiB written before are intact; 8 MiB at 100 MiB (the grown part) round trip"
    rsha=$(dd if="/dev/$L1" bs=1M skip=16 count=16 iflag=direct status=none | sha256sum | cut -d' ' -f1)
    expect lun1_data_kept_across_resize "$rsha" "$sha"
    head -c 8M /dev/urandom > /tmp/pattern2; sha2=$(sha256sum < /tmp/pattern2 | cut -d' ' -f1)
    dd if=/tmp/pattern2 of="/dev/$L1" bs=1M seek=100 oflag=direct conv=fsync status=none
    check lun1_dd_write_grown $? ""
    rsha=$(dd if="/dev/$L1" bs=1M skip=100 count=8 iflag=direct status=none | sha256sum | cut -d' ' -f1)
    expect lun1_dd_sha256_grown "$rsha" "$sha2"
fi

sec "fio on LUN 0 ends"
wait $FIOPID; rc=$?
kv fio_wall_s "$(el $t_fio)"
grep -v '^3;' fio-reconfigure.txt
verr=$(grep -ciE 'verify.*(fail|bad)|bad magic|crc32c: verify' fio-reconfigure.txt)
kv fio_rc $rc
kv fio_errors "$(awk -F';' '/^3;/ {print $5; exit}' fio-reconfigure.txt)"
kv fio_read_iops "$(awk -F';' '/^3;/ {print $8; exit}' fio-reconfigure.txt)"
kv fio_write_iops "$(awk -F';' '/^3;/ {print $49; exit}' fio-reconfigure.txt)"
kv fio_verify_errors "$verr"
check fio_verify_across_reloads "$([ $rc = 0 ] && [ "$verr" = 0 ] && echo 0 || echo 1)" "(rc=$rc verify_errors=$verr)"
expect lun0_size_unchanged "$(size_of "$D")" $((512 * MIB))

sec "kernel log"
kmsgs | grep -v 'vmtest: ===' > dmesg-test.txt
lunchg=$(grep -c 'LUN assignments on this target have changed' dmesg-test.txt)
capchg=$(grep -c 'Capacity data has changed' dmesg-test.txt)
BAD='I/O error|critical .*error|blk_update_request|FAILED Result|offline|timed out|reset|conn error'
io_err=$(grep -iE "$BAD" dmesg-test.txt | grep -vc 'Power-on or device reset occurred')
kv dmesg_lun_change_ua "$lunchg"; kv dmesg_capacity_ua "$capchg"; kv dmesg_io_errors "$io_err"
# fio's next command on LUN 0 after the add gets REPORTED LUNS DATA HAS CHANGED
check lun_change_ua_seen "$([ "$lunchg" -ge 1 ] && echo 0 || echo 1)" "($lunchg lines)"
# the rescan's first command to LUN 1 after the grow gets CAPACITY DATA HAS CHANGED
check capacity_ua_seen "$([ "$capchg" -ge 1 ] && echo 0 || echo 1)" "($capchg lines)"
check no_io_errors "$([ "$io_err" = 0 ] && echo 0 || echo 1)" "($io_err lines)"
grep -iE "$BAD" dmesg-test.txt | grep -v 'Power-on or device reset occurred' | head -5
logout
finish
