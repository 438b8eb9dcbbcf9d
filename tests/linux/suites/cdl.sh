#!/bin/bash
# Suite "cdl", INSIDE the guest: the CDL hard disk (`stint serve --config examples/hdd-cdl.toml`).
# The kernel must see a rotational disk with CDL; REPORT SUPPORTED OPERATION CODES must name the
# CDL page of READ(16); the T2A/T2B mode pages must be readable; cdl_enable must stick; fio's
# prioritized I/Os (ioprio hint N) must reach the target as DLD N: the per-descriptor command
# counts of LOG SENSE 19h/21h grow by exactly fio's own per-priority counts, and LOG SELECT
# (sg_logs -R) sets them to zero; the write cache is the model's (off: "write through"). Then ext4 on the first GiB and fio verification, both with
# CDL enabled.
. /job/lib.sh
COUNT_SECS=${COUNT_SECS:-15}
login
sec "identity, capacity"
sg_inq "$D" | grep -E 'Vendor|Product|Revision|Version'
sg_readcap -l "$D" | grep -E 'Last LBA|Logical block length|Device size'
sec "sg_vpd -p 0xb1 (block device characteristics)"; sg_vpd -p 0xb1 "$D"
sec sysfs
for f in device/scsi_level device/cdl_supported device/cdl_enable queue/rotational \
         device/queue_depth queue/scheduler queue/nr_requests device/timeout; do
    kv "sysfs_${f//\//_}" "$(sysfs $f)"
done
kv capacity_bytes "$(blockdev --getsize64 "$D")"
expect cdl_supported "$(sysfs device/cdl_supported)" 1
expect rotational "$(sysfs queue/rotational)" 1
# The Caching page's WCE is the drive model's write cache: off for the shipped disk.
expect cache_type "$(cat /sys/block/$N/device/scsi_disk/*/cache_type)" "write through"
expect queue_write_cache "$(sysfs queue/write_cache)" "write through"

for op in 0x88 0x8a; do
    sec "sg_opcodes -o $op"
    out=$(sg_opcodes -o $op "$D" 2>&1); rc=$?; echo "$out"
    page=$(echo "$out" | grep -oE 'Command duration limit (T2)?[AB] mode page' | head -1)
    kv "opcodes_${op#0x}_cdl_page" "${page:-none}"
    if [ $op = 0x88 ]; then
        check opcodes_88_cdlp "$([ $rc = 0 ] && [ -n "$page" ] && echo 0 || echo 1)" "(rc=$rc: ${page:-no CDL page})"
    fi
done

cdl_pages
check sg_modes_t2a "$([ "$T2A_RC" = 0 ] && grep -q '^dld=7 ' t2a.txt && echo 0 || echo 1)" "(page 0Ah/07h: rc=$T2A_RC)"
check sg_modes_t2b "$([ "$T2B_RC" = 0 ] && grep -q '^dld=7 ' t2b.txt && echo 0 || echo 1)" "(page 0Ah/08h: rc=$T2B_RC)"
kv t2a_limited "$(cdl_hints limited-read)"
SAFE=$(cdl_hints safe); H1=$(echo $SAFE | awk '{print $1}'); H2=$(echo $SAFE | awk '{print $2}')
kv count_hints "$H1 $H2"
cdl_enable

sec "LOG SENSE 19h/21h (CDL statistics) before"
cdl_stats stats-before; rc=$?; cat stats-before.txt; [ $rc = 0 ] || cat stats-before.err stats-before.log
check log_sense_cdl_stats $rc "(LOG SENSE 19h/21h read and decoded: rc=$rc)"

sec "fio: per-hint prioritized I/O (cmdprio_class=2, 30%), ${COUNT_SECS}s, CDL enabled"
echo 2 > "/sys/block/$N/queue/nomerges"     # one command per fio I/O, so the counts can match
JOBS=(); off=0
for h in $H1 $H2; do
    JOBS+=(--name="cdl_h$h" --cmdprio_percentage=30 --cmdprio_class=2 --cmdprio_hint="$h" --offset=${off}G)
    off=$((off + 1))
done
fio_json count --filename="$D" --rw=randrw --bs=4k --ioengine=libaio --direct=1 --iodepth=8 \
    --size=1G --runtime="$COUNT_SECS" --time_based "${JOBS[@]}"
rc=$?
check fio_cdl_count_run $rc "(fio rc=$rc)"
echo 0 > "/sys/block/$N/queue/nomerges"
sec "LOG SENSE 19h/21h after, and the increase"
cdl_stats stats-after || cat stats-after.err
if [ -s stats-before.txt ] && [ -s stats-after.txt ]; then
    python3 /job/cdltool.py logdelta stats-before.bin stats-after.bin | tee stats-delta.txt
fi
for h in $H1 $H2; do
    F_read=0; F_write=0
    eval "$(python3 /job/cdltool.py fio-prio fio-count.json "$h" | sed 's/^/F_/; s/ / F_/')"
    tr=$(awk -v c="$(printf '%04x' $((0x20 + h)))" '$1==c {print $5}' stats-delta.txt 2>/dev/null)
    tw=$(awk -v c="$(printf '%04x' $((0x40 + h)))" '$1==c {print $5}' stats-delta.txt 2>/dev/null)
    kv "dld${h}_reads_fio" "$F_read"; kv "dld${h}_reads_target_t2a" "${tr:-none}"
    kv "dld${h}_writes_fio" "$F_write"; kv "dld${h}_writes_target_t2b" "${tw:-none}"
    check "dld${h}_read_count" "$([ "$F_read" -gt 0 ] && [ "$F_read" = "$tr" ] && echo 0 || echo 1)" \
        "(fio ${F_read} prioritized reads with hint $h, target T2A descriptor $h counted ${tr:-none})"
    check "dld${h}_write_count" "$([ "$F_write" -gt 0 ] && [ "$F_write" = "$tw" ] && echo 0 || echo 1)" \
        "(fio ${F_write} prioritized writes with hint $h, target T2B descriptor $h counted ${tw:-none})"
done

sec "LOG SELECT, PCR=1 (sg_logs -R -p 0x19,0x21): the counters start again from zero"
sg_logs -R -p 0x19,0x21 "$D" > reset.log 2>&1; rc=$?; cat reset.log
cdl_stats stats-reset || cat stats-reset.err
sum=$(awk '{for (i = 2; i <= NF; i++) s += $i} END {if (NR) print s}' stats-reset.txt 2>/dev/null)
kv cdl_stats_sum_after_reset "${sum:-none}"
check cdl_stats_reset "$([ $rc = 0 ] && [ "$sum" = 0 ] && echo 0 || echo 1)" \
    "(sg_logs -R rc=$rc; the page's counters sum to ${sum:-none} after it)"

fs_check 1G 200
fio_verify cdl_verify 20 1G --cmdprio_percentage=30 --cmdprio_class=2 --cmdprio_hint="${H1:-1}"
sec "CDL enable state at the end"; kv cdl_enable_end "$(sysfs device/cdl_enable)"
logout
finish
