#!/bin/bash
# Suite "fast-fail", INSIDE the guest: the CDL hard disk with fast-fail descriptors
# (`stint serve --config examples/fast-fail.toml`: read descriptors whose policy ends a command
# that misses its limit, Fh / Dh / Eh, on a drive with weak sectors). With CDL enabled, one fio
# job per such descriptor (ioprio hint N on every read) and one job without a hint read at
# random over the whole disk. Limited reads that miss must reach fio as errno 62 (ETIME) and
# nothing else; the unlimited reads must all succeed; the kernel must log no error and no reset
# (a duration-limit failure is quiet in Linux); the target's per-descriptor command counts
# (LOG SENSE 19h/21h) must match what fio issued. Then the same jobs read a region written with
# crc32c headers (fio --verify): completed reads must carry the right data, and the only error
# is still ETIME on the limited reads.
. /job/lib.sh
FF_SECS=${FF_SECS:-20}
login
kv capacity_bytes "$(blockdev --getsize64 "$D")"
expect cdl_supported "$(sysfs device/cdl_supported)" 1
cdl_pages
ABORT=$(cdl_hints aborting-read)
kv aborting_read_hints "$ABORT"
check aborting_read_descriptors "$([ -n "$ABORT" ] && echo 0 || echo 1)" "(T2A descriptors with a limit and policy Dh/Eh/Fh: ${ABORT:-none})"
cdl_enable
cdl_stats stats-before; rc=$?; [ $rc = 0 ] || cat stats-before.err stats-before.log
check log_sense_cdl_stats $rc "(LOG SENSE 19h/21h read and decoded: rc=$rc)"

sec "fio: random 4k reads over the whole disk, ${FF_SECS}s: one job per fast-fail hint ($ABORT) + one unlimited"
JOBS=()
for h in $ABORT; do JOBS+=(--name="ff_h$h" --cmdprio_percentage=100 --cmdprio_class=2 --cmdprio_hint="$h"); done
JOBS+=(--name=ff_unlimited)
# ETIME (62) is counted per job and the job goes on; any other error stops fio with it
fio_json ff --filename="$D" --rw=randread --bs=4k --ioengine=libaio --direct=1 --iodepth=4 \
    --norandommap --randrepeat=0 --runtime="$FF_SECS" --time_based --continue_on_error=read --ignore_error=62 "${JOBS[@]}"
rc=$?
check fio_ff_run $rc "(fio rc=$rc: 0 unless an error other than ETIME)"
cdl_stats stats-after
python3 /job/cdltool.py logdelta stats-before.bin stats-after.bin > stats-delta.txt 2>&1
sec "LOG SENSE 19h/21h increase"; cat stats-delta.txt
etime_total=0
for h in $ABORT; do
    J_error=none; J_total_err=0; J_first_error=none; ok=0
    eval "$(python3 /job/cdltool.py fio-job fio-ff.json "ff_h$h" | sed 's/^/J_/')"
    ok=$(python3 -c "import json;print(next(j['read']['clat_ns']['N'] for j in json.load(open('fio-ff.json'))['jobs'] if j['jobname']=='ff_h$h'))" || echo 0)
    tr=$(awk -v c="$(printf '%04x' $((0x20 + h)))" '$1==c {print $5}' stats-delta.txt)
    pol=$(grep "^dld=$h " t2a.txt | grep -oE '(inactive|active|guideline)_policy=[def]h' | tr '\n' ' ')
    kv "dld${h}_policy" "$pol"
    kv "dld${h}_reads_ok" "$ok"; kv "dld${h}_reads_etime" "$J_total_err"; kv "dld${h}_fio_error" "$J_error"
    kv "dld${h}_reads_target_t2a" "${tr:-none}"
    etime_total=$((etime_total + J_total_err))
    # with continue_on_error, fio reports the first (ignored) error as the job's error too
    check "dld${h}_only_etime" "$({ [ "$J_error" = 0 ] || [ "$J_error" = 62 ]; } && { [ "$J_total_err" = 0 ] || [ "$J_first_error" = 62 ]; } && echo 0 || echo 1)" \
        "(fio error=$J_error first_error=$J_first_error: every failed read must be ETIME)"
    check "dld${h}_read_count" "$([ $((ok + J_total_err)) -gt 0 ] && [ "$((ok + J_total_err))" = "$tr" ] && echo 0 || echo 1)" \
        "(fio issued $ok ok + $J_total_err ETIME reads with hint $h, target T2A descriptor $h counted ${tr:-none})"
    # a guideline or inactive limit of tens of ms is missed under a queue of random reads
    if echo "$pol" | grep -qE '(guideline|inactive)_policy=[df]h'; then
        check "dld${h}_misses_reach_fio" "$([ "$J_total_err" -gt 0 ] && echo 0 || echo 1)" "($J_total_err ETIME)"
    fi
done
kv etime_total "$etime_total"
check limited_reads_fail_fast "$([ "$etime_total" -gt 0 ] && echo 0 || echo 1)" "($etime_total reads ended with ETIME)"
U_error=none; U_total_err=0; U_read_ios=0
eval "$(python3 /job/cdltool.py fio-job fio-ff.json ff_unlimited | sed 's/^/U_/')"
kv unlimited_reads "$U_read_ios"; kv unlimited_errors "$U_total_err"
check unlimited_reads_succeed "$([ "$U_error" = 0 ] && [ "$U_total_err" = 0 ] && [ "$U_read_ios" -gt 0 ] && echo 0 || echo 1)" \
    "($U_read_ios reads, $U_total_err errors, fio error $U_error)"

# The data of the reads that complete: a region written with crc32c headers, then read at random
# by one job per fast-fail hint and one without, every completed read verified. A verify error
# (EILSEQ) stops fio whatever continue_on_error=read says; only ETIME is ignored.
FF_VSIZE=${FF_VERIFY_SIZE:-32M}; FF_VSECS=${FF_VERIFY_SECS:-10}
sec "fio verify: write the first $FF_VSIZE with crc32c headers (64k writes, a header per 4k)"
fio_json ffw --name=ffv_write --filename="$D" --rw=write --bs=64k --verify=crc32c --verify_interval=4k \
    --do_verify=0 --size="$FF_VSIZE" --ioengine=libaio --direct=1 --iodepth=4
rc=$?; check fio_ffv_write $rc "(fio rc=$rc)"
sec "fio verify: random 4k reads of that region with verify=crc32c, ${FF_VSECS}s: one job per fast-fail hint ($ABORT) + one unlimited"
JOBS=()
for h in $ABORT; do JOBS+=(--name="ffv_h$h" --cmdprio_percentage=100 --cmdprio_class=2 --cmdprio_hint="$h"); done
JOBS+=(--name=ffv_unlimited)
fio_json ffv --filename="$D" --rw=randread --bs=4k --size="$FF_VSIZE" --verify=crc32c --verify_fatal=1 \
    --ioengine=libaio --direct=1 --iodepth=4 --norandommap --randrepeat=0 --runtime="$FF_VSECS" --time_based \
    --continue_on_error=read --ignore_error=62 "${JOBS[@]}"
rc=$?
check fio_ffv_run $rc "(fio rc=$rc: 0 unless a verify error or an error other than ETIME)"
for h in $ABORT; do
    J_error=none; J_total_err=0; J_first_error=none
    eval "$(python3 /job/cdltool.py fio-job fio-ffv.json "ffv_h$h" | sed 's/^/J_/')"
    ok=$(python3 -c "import json;print(next(j['read']['clat_ns']['N'] for j in json.load(open('fio-ffv.json'))['jobs'] if j['jobname']=='ffv_h$h'))" || echo 0)
    kv "verify_dld${h}_reads_ok" "$ok"; kv "verify_dld${h}_reads_etime" "$J_total_err"
    check "verify_dld${h}_only_etime" "$({ [ "$J_error" = 0 ] || [ "$J_error" = 62 ]; } && { [ "$J_total_err" = 0 ] || [ "$J_first_error" = 62 ]; } && [ $((ok + J_total_err)) -gt 0 ] && echo 0 || echo 1)" \
        "($ok verified, $J_total_err ETIME; fio error=$J_error first_error=$J_first_error)"
done
U_error=none; U_total_err=0; U_read_ios=0
eval "$(python3 /job/cdltool.py fio-job fio-ffv.json ffv_unlimited | sed 's/^/U_/')"
kv verify_unlimited_reads "$U_read_ios"; kv verify_unlimited_errors "$U_total_err"
check verify_unlimited_reads_succeed "$([ "$U_error" = 0 ] && [ "$U_total_err" = 0 ] && [ "$U_read_ios" -gt 0 ] && echo 0 || echo 1)" \
    "($U_read_ios reads verified, $U_total_err errors, fio error $U_error)"
# The reads above verify something: one 4k block of the region overwritten, fio must see it.
sec "fio verify detects a changed block (the check above is not vacuous)"
dd if=/dev/zero of="$D" bs=4k seek=5 count=1 oflag=direct conv=fsync status=none
fio --name=ffv_control --filename="$D" --rw=read --bs=4k --size=64k --verify=crc32c --verify_fatal=1 \
    --ioengine=libaio --direct=1 > fio-ffv-control.txt 2>&1
rc=$?; grep -iE 'verify|err' fio-ffv-control.txt | head -5
check verify_detects_corruption "$([ $rc != 0 ] && grep -qiE 'verify: bad magic|crc32c' fio-ffv-control.txt && echo 0 || echo 1)" \
    "(fio rc=$rc over a region with one zeroed block)"

sec "kernel log: a duration-limit failure is quiet (no I/O error, no reset, no abort)"
kmsgs | grep -v 'vmtest: ===' > dmesg-test.txt
BAD='I/O error|critical|reset|abort|timing out|timed out|FAILED Result|Sense Key|Add\. Sense|offline|blk_update_request'
bad=$(grep -iE "$BAD" dmesg-test.txt | grep -vc 'Power-on or device reset occurred')
grep -iE "$BAD" dmesg-test.txt | grep -v 'Power-on or device reset occurred' | head -10
kv dmesg_error_lines "$bad"
check no_kernel_error_lines "$([ "$bad" = 0 ] && echo 0 || echo 1)" "($bad lines)"
logout
finish
