#!/bin/bash
# Suite "gateways", INSIDE the guest: one RBD image exported by two stint gateways, a and b
# (docs/gateways.md), reached through two portals, $VMTEST_PORTALS (a's first). Discovery
# through a's portal lists both; the guest logs in to both, and dm-multipath (multipath-tools,
# the device section of examples/gateways/multipath.conf: ALUA priorities, group_by_prio,
# failback immediate, no_path_retry queue) must show one disk with two paths, a's in the active
# prio-50 group. ext4 on the first half of the map (files with sha256, and more written during
# the failovers); fio randrw with crc32c verification on 256-448 MiB. Meanwhile, on the
# guest's requests the host SIGKILLs gateway a ("VMTEST-HOST: kill-gw-a"; the holder of the
# image: b's writes wait until the OSD drops a's watch and librbd breaks its lock), restarts it
# ("restart-gw-a"; a is the preferred gateway again, multipath fails back to it), then kills b
# ("kill-gw-b") and restarts it ("restart-gw-b"). fio must see no I/O or verify error, every
# file its sha256, e2fsck a clean file system; the pause of each failover (the longest time
# without a completed fio I/O, and without a completed write) is reported. Both member disks
# must report CDL (cdl_supported; after the restarts, CDLP in REPORT SUPPORTED OPERATION CODES).
# Before ext4, and again while a is dead, reads with a CDL hint (DLD 1: 50 ms, abort) go
# through the map under load, and once through a's member disk alone for comparison.
. /job/lib.sh
read -r PA PB _ <<< "$VMTEST_PORTALS"
WAIT_S=${WAIT_S:-150}     # one step of the sequence, at most (a slow, shared machine)
FIO_MAX=${FIO_MAX:-360}   # fio's runtime cap; the guest stops it once the sequence is done
SD_TIMEOUT=${SD_TIMEOUT:-60}
# A gateway's death, as the initiator sees it: the connection drops, the session times out
# (replacement_timeout) and the member path's queued commands fail to dm-multipath, which
# sends them through the other path. Those messages are the failover (and, for "Failing path",
# a CDL miss on the map, below); an I/O error on the map (dm-N) or in ext4 is not allowed, and
# is checked below.
KWARN_ALLOW='detected conn error \(10[0-9][0-9]\)|session recovery timed out after [0-9]+ secs|I/O error, dev sd[a-z]+, sector'
KWARN_ALLOW+='|sd [0-9:]+: rejecting I/O to offline device|multipath: [0-9]+:[0-9]+: (Failing|Reinstating) path'
# the kernel's rate limit of those I/O error lines (more than ten at once); fio and ext4 would
# see an error the limit hid on the map
KWARN_ALLOW+='|blk_print_req_error: [0-9]+ callbacks suppressed'
# the unit attention ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h) when the preferred gateway
# changes, and scsi_dh_alua finding, on the states it then reads, no live disk in the dead
# gateway's port group to ask (its one disk is offline); device-mapper's own note on the
# guest kernel's configuration
KWARN_ALLOW+='|sd [0-9:]+: Asymmetric access state changed|naa\.[0-9a-f]+: no device found for rtpg'
KWARN_ALLOW+='|device-mapper: core: CONFIG_IMA_DISABLE_HTABLE is disabled'
uname -r
[ -n "$PA" ] && [ -n "$PB" ] || abort "two portals needed (VMTEST_PORTALS='$VMTEST_PORTALS')"
kv portal_a "$PA"; kv portal_b "$PB"

sec "multipath-tools: udevd, /etc/multipath.conf (examples/gateways/multipath.conf), multipathd"
# scsi_dh_alua before the login, so it attaches to the disks as sd probes them
modprobe -a dm_multipath scsi_dh_alua
# multipathd learns of new paths from udev and takes the WWID udev gives the disk
pgrep -x systemd-udevd >/dev/null || /usr/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add >/dev/null 2>&1; udevadm settle -t 30
# the example's file, and the guest's own virtio disks kept out of it
{ cat /job/multipath.conf; printf 'blacklist {\n    devnode "^vd[a-z]"\n}\n'; } > /etc/multipath.conf
multipath -t > multipath-config.txt 2>&1
multipathd -d -s -v3 > multipathd.log 2>&1 &
MPD=$!
for _ in $(seq 150); do multipathd show daemon > /dev/null 2>&1 && break; sleep 0.2; done
multipathd show daemon; check multipathd_running "$(kill -0 $MPD 2>/dev/null && echo 0 || echo 1)" "(pid $MPD)"

sec "discovery through gateway a's portal $PA: both portals"
iscsiadm -m discovery -t st -p "$PA" | tee discovery.txt; rc=${PIPESTATUS[0]}
check discovery "$rc" "(rc=$rc)"
# SendTargets lists every gateway's portal with its port_group as portal group tag
grep -q "^$PA,1 " discovery.txt; check discovery_lists_a $? "($PA,1)"
grep -q "^$PB,2 " discovery.txt; check discovery_lists_b $? "($PB,2)"
# a dead path gives up its commands to dm-multipath after 5 s (open-iscsi's default: 120 s)
iscsiadm -m node -o update -n node.session.timeo.replacement_timeout -v 5
disk_of() {   # PORTAL: the sdX of the session through it
    iscsiadm -m session -P 3 2>/dev/null | awk -v p="$1," '
        /Current Portal:/ { cur = (index($3, p) == 1) }
        cur && /Attached scsi disk/ { print $4; exit }'
}
# b's path first: multipathd makes the map with the non-optimized path alone, and I/O (udev's
# probe of the map) starts there; when a's path joins, the map must move to it (failback
# immediate). The other order, a first, needs no move.
sec "login to b's portal, then a's"
iscsiadm -m node -p "$PB" --login; rb=$?
for _ in $(seq 300); do d=$(disk_of "$PB"); [ -n "$d" ] && [ -b "/dev/$d" ] && break; sleep 0.2; done
udevadm settle -t 30
iscsiadm -m node -p "$PA" --login; ra=$?
check login "$([ $rb = 0 ] && [ $ra = 0 ] && echo 0 || echo 1)" "(b: rc=$rb, a: rc=$ra)"
DA=; DB=
for _ in $(seq 300); do
    DA=$(disk_of "$PA"); DB=$(disk_of "$PB")
    [ -n "$DA" ] && [ -n "$DB" ] && [ -b "/dev/$DA" ] && [ -b "/dev/$DB" ] && break; sleep 0.2
done
kv disk_a "$DA"; kv disk_b "$DB"
check two_disks_attached "$([ -n "$DA" ] && [ -n "$DB" ] && echo 0 || echo 1)" "(a: $DA, b: $DB)"
[ -n "$DA" ] && [ -n "$DB" ] || { iscsiadm -m session -P 3; abort "no disk through each portal"; }
sleep 1
iscsiadm -m session -P 3 | grep -E 'Current Portal|Session State|Attached'
lsscsi
# A write through b waits until the OSD has dropped dead a's watch and librbd has broken its
# lock (osd_client_watch_timeout: 10 s in the tests' cluster, 30 s by default; docs/gateways.md);
# sd's default 30 s command timeout would abort it on a loaded machine.
for d in "$DA" "$DB"; do echo "$SD_TIMEOUT" > "/sys/block/$d/device/timeout"; done
kv sd_timeout "$(cat "/sys/block/$DA/device/timeout")"

sec "the same disk through both: VPD 80h, CDL, ALUA"
sa=$(sg_vpd -p sn -r "/dev/$DA" 2>/dev/null | sha256sum | cut -c1-16)
sb=$(sg_vpd -p sn -r "/dev/$DB" 2>/dev/null | sha256sum | cut -c1-16)
expect same_unit_serial "$sb" "$sa"
expect cdl_supported_a "$(cat "/sys/block/$DA/device/cdl_supported")" 1
expect cdl_supported_b "$(cat "/sys/block/$DB/device/cdl_supported")" 1
tpg_state() {   # DEV GROUP: the group's access state in REPORT TARGET PORT GROUPS through DEV
    sg_rtpg -d "/dev/$1" 2>/dev/null | awk -v g="0x$2" '
        /target port group id :/ { cur = ($6 == g) }
        cur && /asymmetric access state/ { s = $0; sub(/.*\(/, "", s); sub(/\).*/, "", s); print s; exit }'
}
sg_rtpg -d "/dev/$DA" > /dev/null 2>&1   # a unit attention left over from the login
sg_rtpg -d "/dev/$DA" | tee rtpg-a.txt
sg_rtpg -d "/dev/$DB" > rtpg-b.txt 2>&1
expect alua_a_optimized_via_a "$(tpg_state "$DA" 1)" active/optimized
expect alua_b_non_optimized_via_a "$(tpg_state "$DA" 2)" "active/non optimized"   # sg_rtpg 1.48's words
expect alua_a_optimized_via_b "$(tpg_state "$DB" 1)" active/optimized

sec "persistent reservations through both paths: one registration set (sg_persist)"
# A registration is for one I_T nexus (SPC-4 §5.13.7): the guest's nexus through a, then its
# nexus through b; both gateways answer from the one state kept in the cluster.
K=0x4757  # "GW"
expect_cmd pr_register_via_a sg_persist --out --register --param-sark=$K "/dev/$DA"
sg_persist --in --read-keys "/dev/$DB" | tee pr-keys-b.txt
check pr_key_via_b "$(grep -qi "^ *$K\$" pr-keys-b.txt && echo 0 || echo 1)" "($(tr '\n' ' ' < pr-keys-b.txt))"
sg_persist --out --reserve --param-rk=$K --prout-type=1 "/dev/$DB" > /dev/null 2>&1; rc=$?
check pr_reserve_unregistered_nexus_conflicts "$([ $rc = 24 ] && echo 0 || echo 1)" "(rc=$rc, want 24: reservation conflict)"
expect_cmd pr_register_via_b sg_persist --out --register --param-sark=$K "/dev/$DB"
sg_persist --in --read-full-status "/dev/$DA" | tee pr-full-a.txt
check pr_full_status_two_nexuses "$([ "$(grep -ci "Key=$K" pr-full-a.txt)" = 2 ] && \
    grep -qi 'relative port address: 0x1' pr-full-a.txt && grep -qi 'relative port address: 0x2' pr-full-a.txt && echo 0 || echo 1)" \
    "($(tr -s ' \n' ' ' < pr-full-a.txt))"
expect_cmd pr_reserve_via_b sg_persist --out --reserve --param-rk=$K --prout-type=1 "/dev/$DB"
sg_persist --in --read-reservation "/dev/$DA" | tee pr-reservation-a.txt
check pr_reservation_via_a "$(grep -qi "Key=$K" pr-reservation-a.txt && grep -q 'Write Exclusive' pr-reservation-a.txt && echo 0 || echo 1)" \
    "($(tr '\n' ' ' < pr-reservation-a.txt))"
expect_cmd pr_release_via_b sg_persist --out --release --param-rk=$K --prout-type=1 "/dev/$DB"
expect_cmd pr_unregister_via_a sg_persist --out --register --param-rk=$K --param-sark=0 "/dev/$DA"
expect_cmd pr_unregister_via_b sg_persist --out --register --param-rk=$K --param-sark=0 "/dev/$DB"
sg_persist --in --read-keys "/dev/$DA" | tee pr-keys-a.txt
check pr_no_keys_left "$(grep -qi 'no registered reservation keys' pr-keys-a.txt && echo 0 || echo 1)" "($(tr '\n' ' ' < pr-keys-a.txt))"

# multipath -ll, one line per map ("MAP name dm-N") and per path ("PATH sdX group_prio
# group_status dm_state checker_state")
mp_state() {
    multipath -ll 2>/dev/null | awk '
        /^[^ |`]/ && / dm-[0-9]+ / { for (i = 2; i <= NF; i++) if ($i ~ /^dm-[0-9]+$/) print "MAP", $1, $i; next }
        /policy=/ { for (i = 1; i <= NF; i++) { if ($i ~ /^prio=/) pr = substr($i, 6); if ($i ~ /^status=/) gs = substr($i, 8) }; next }
        match($0, /[0-9]+:[0-9]+:[0-9]+:[0-9]+ sd[a-z]+ /) {
            split(substr($0, RSTART, RLENGTH), x, " "); split(substr($0, RSTART + RLENGTH), y, " ")
            print "PATH", x[2], pr, gs, y[2], y[3] }'
}
path() { mp_state | awk -v d="$1" '$1 == "PATH" && $2 == d { print $3, $4, $5, $6; exit }'; }
# wait_for NAME CONDITION...: polls CONDITION (a command) until it holds, WAIT_S at most; kv NAME_s
wait_for() {
    local name=$1 t; shift; t=$(now)
    while ! "$@"; do
        [ $(( ${t%.*} + WAIT_S )) -gt "$(date +%s)" ] || {
            kv "${name}_s" "timeout"; kv "${name}_seen" "$(mp_state | tr '\n' ';')"
            kv "${name}_kernel_states" "a: $(cat "/sys/block/$DA/device/access_state" 2>&1), b: $(cat "/sys/block/$DB/device/access_state" 2>&1)"
            multipathd_alive "$name"; return 1; }
        sleep 0.2
    done
    kv "${name}_s" "$(el "$t")"
}
# multipathd_alive STEP: multipathd moves I/O between the paths (reinstates a path, fails
# back, follows the priorities): without it no path state changes, whatever the gateways
# answer. A daemon that died or stopped answering is the guest's failure, not the target's:
# run.sh retries the attempt ("VMTEST-HARNESS").
multipathd_alive() {
    if ! kill -0 "$MPD" 2>/dev/null; then
        wait "$MPD"; kv multipathd_exit "$?"
        echo "VMTEST-HARNESS: multipathd exited during $1 ($(tail -2 multipathd.log | tr '\n' ' '))"
        return 1
    elif ! timeout 20 multipathd show daemon > /dev/null 2>&1; then
        echo "VMTEST-HARNESS: multipathd did not answer during $1 ($(tail -2 multipathd.log | tr '\n' ' '))"
        return 1
    fi
}
# STATUS: a's group "active" (the one I/O goes to; a group is "enabled" until I/O chose it)
a_preferred() { [ "$(path "$DA")" = "50 ${1:-active} active ready" ] && [ "$(path "$DB")" = "10 enabled active ready" ]; }
one_map_two_paths() {   # [STATUS]
    [ "$(mp_state | grep -c '^MAP')" = 1 ] && [ "$(mp_state | grep -c '^PATH')" = 2 ] && a_preferred "$@"
}
sec "multipath: one disk, two paths, gateway a's active (prio 50)"
# a's group is "enabled" until I/O chose it; udev's probe of the map may have chosen it already
wait_for multipath_map eval 'one_map_two_paths enabled || one_map_two_paths active'
read -r _ MAP DM <<< "$(mp_state | grep -m1 '^MAP')"
# a read through the map: dm-multipath picks the path group I/O goes to
[ -n "$DM" ] && dd if="/dev/$DM" of=/dev/null bs=1M count=4 iflag=direct status=none
multipath -ll | tee multipath-ll-before.txt
expect multipath_maps "$(mp_state | grep -c '^MAP')" 1
expect multipath_paths "$(mp_state | grep -c '^PATH')" 2
expect path_a_active_optimized "$(path "$DA")" "50 active active ready"
expect path_b_enabled_non_optimized "$(path "$DB")" "10 enabled active ready"
kv map "$MAP"; kv map_dm "$DM"
grep -q "hwhandler='1 alua'" multipath-ll-before.txt; check multipath_alua_handler $? ""
[ -n "$DM" ] && [ -b "/dev/$DM" ] || abort "no multipath map"
MD=/dev/$DM
expect map_size "$(blockdev --getsize64 "$MD")" 536870912

# the sequence's events and fio's completion log, both in Unix epoch milliseconds
ev() { local t; t=$(date +%s%3N); echo "$1 $t" >> events.txt; echo "event $1 at $t ms"; }
: > events.txt
# CDL through the map (docs/gateways.md "CDL through dm-multipath"). examples/ceph-cdl.toml's
# T2A DLD 1 is a 50 ms guideline with policy Fh: a read that misses it ends with ABORTED
# COMMAND, which sd completes as BLK_STS_DURATION_LIMIT (-ETIME). On a member disk that reaches
# the application. dm-multipath takes it for a path error (blk_path_error() does not exclude it):
# it fails the path and sends the read again through another one; with no_path_retry queue the
# map holds every I/O while no path is left, until multipathd's checker reinstates one. So the
# checks are what holds whatever the kernel does with a miss: the hints reach the gateways
# through the map, no I/O ends with an error other than ETIME, and the paths come back.
CDL_SECS=${CDL_SECS:-20}
CDL_OFF=448M; CDL_SIZE=64M   # the map's last 64 MiB: neither ext4's nor the verifying fio's
# open-iscsi sends a disk 32 commands at once by default (node.session.queue_depth): the member
# disks take CDL_LOAD_QD + 4, within the session's 128 (cmds_max) and stint's CmdSN window
CDL_LOAD_QD=${CDL_LOAD_QD:-92}
klog_between() { dmesg | awk -v a="$1" -v b="$2" '{ s=$0; sub(/^\[ */,"",s); if (s+0 >= a && s+0 <= b) print }'; }
# cdl_fio NAME FILE SECS: job "lim", 4k random reads QD4 all with hint 1, and job "load", 128k
# random reads and writes QD$CDL_LOAD_QD without a hint: more than the gateway's device queue
# (32), so that limited reads wait behind load in its FIFO submission queue when the cluster
# is slower than the guest's transport, and miss 50 ms; ETIME
# is counted and the job goes on, any other error stops fio. kv: each job's reads, errors,
# first error and longest read; returns 0 when neither job had an error other than ETIME
cdl_fio() {
    local name=$1 file=$2 secs=$3 rc j ok=0
    fio_json "$name" --filename="$file" --offset=$CDL_OFF --size=$CDL_SIZE --ioengine=libaio \
        --direct=1 --norandommap --randrepeat=0 --runtime="$secs" --time_based \
        --continue_on_error=read --ignore_error=62 \
        --name=lim --rw=randread --bs=4k --iodepth=4 --cmdprio_percentage=100 --cmdprio_class=2 --cmdprio_hint=1 \
        --name=load --rw=randrw --bs=128k --iodepth="$CDL_LOAD_QD"
    rc=$?; kv "${name}_fio_rc" "$rc"; [ $rc = 0 ] || ok=1
    for j in lim load; do
        local J_error=none J_total_err=0 J_first_error=none J_read_ios=0
        eval "$(python3 /job/cdltool.py fio-job "fio-$name.json" "$j" | sed 's/^/J_/')"
        kv "${name}_${j}_reads" "$J_read_ios"; kv "${name}_${j}_etime" "$([ "$J_first_error" = 62 ] && echo "$J_total_err" || echo 0)"
        kv "${name}_${j}_errors" "$J_total_err"; kv "${name}_${j}_first_error" "$J_first_error"
        kv "${name}_${j}_max_ms" "$(python3 -c "import json;print(next(round(x['read']['clat_ns']['max']/1e6) for x in json.load(open('fio-$name.json'))['jobs'] if x['jobname']=='$j'))")"
        # with continue_on_error, fio reports the first (ignored) error as the job's error too
        { [ "$J_error" = 0 ] || [ "$J_error" = 62 ]; } && { [ "$J_total_err" = 0 ] || [ "$J_first_error" = 62 ]; } || ok=1
        [ "$j" = lim ] && LIM_READS=$J_read_ios
    done
    return $ok
}
# cdl_map NAME DEV...: CDL enabled on the member disks DEV..., cdl_fio on the map. kv: the
# kernel's "Failing path" lines and multipathd's path events meanwhile, the increase of
# LOG SENSE 19h/21h's T2A DLD 1 counters through each member (each gateway counts the
# commands it served: missed inactive, missed active, missed either, all; a guideline miss is
# in none of the first three); a read dm-multipath sent again after a miss is counted again.
cdl_map() {
    local name=$1 d t0 t1 m0 rc total=0 n; shift
    sec "CDL through the map ($name): hint-1 reads and a QD$CDL_LOAD_QD load on $MD; members $*"
    for d in "$@"; do
        echo 1 > "/sys/block/$d/device/cdl_enable"
        expect "cdl_enable_${name}_$d" "$(cat "/sys/block/$d/device/cdl_enable")" 1
        echo $((CDL_LOAD_QD + 4)) > "/sys/block/$d/device/queue_depth"; kv "cdl_${name}_queue_depth_$d" "$(cat "/sys/block/$d/device/queue_depth")"
        D=/dev/$d cdl_stats "stats-$name-$d-before"
    done
    t0=$(up); m0=$(wc -l < multipathd.log); ev "cdl_${name}_start"
    cdl_fio "cdl_$name" "$MD" "$CDL_SECS"; rc=$?
    ev "cdl_${name}_end"; t1=$(up)
    check "cdl_${name}_no_error_but_etime" $rc "(fio on the map: every error must be ETIME)"
    klog_between "$t0" "$t1" > "dmesg-cdl-$name.txt"
    tail -n +$((m0 + 1)) multipathd.log > "multipathd-cdl-$name.log"
    kv "cdl_${name}_failing_path_lines" "$(grep -c 'Failing path' "dmesg-cdl-$name.txt")"
    kv "cdl_${name}_reinstating_path_lines" "$(grep -c 'Reinstating path' "dmesg-cdl-$name.txt")"
    kv "cdl_${name}_multipathd_path_events" "$(grep -ciE 'mark as failed|reinstated' "multipathd-cdl-$name.log")"
    grep -E 'Failing path|Reinstating path|I/O error' "dmesg-cdl-$name.txt" | head -20
    multipath -ll | tee "multipath-ll-cdl-$name.txt"
    for d in "$@"; do
        D=/dev/$d cdl_stats "stats-$name-$d-after"
        python3 /job/cdltool.py logdelta "stats-$name-$d-before.bin" "stats-$name-$d-after.bin" > "stats-$name-$d-delta.txt" 2>&1
        kv "cdl_${name}_t2a_dld1_via_$d" "$(awk '$1 == "0021" { print $2, $3, $4, $5 }' "stats-$name-$d-delta.txt")"
        n=$(awk '$1 == "0021" { print $5 }' "stats-$name-$d-delta.txt"); total=$((total + ${n:-0}))
    done
    # dm-multipath's clone of a request keeps its I/O priority, so sd sets the DLD
    kv "cdl_${name}_t2a_dld1_total" "$total"
    check "cdl_${name}_hints_reach_gateways" "$([ "$LIM_READS" -gt 0 ] && [ "$total" -ge "$LIM_READS" ] && echo 0 || echo 1)" \
        "(fio read $LIM_READS with hint 1 through the map; the gateways counted $total T2A DLD 1 commands)"
    # Linux 6.12's behaviour, as docs/gateways.md describes it: a read the gateways got again
    # (a miss, sent through another path) failed a path, and no ETIME reached fio
    local resent=$((total - LIM_READS)) failing etime
    failing=$(grep -c 'Failing path' "dmesg-cdl-$name.txt"); etime=$(sed -n "s/^cdl_${name}_lim_etime=//p" kv.txt)
    kv "cdl_${name}_resent" "$resent"
    check "cdl_${name}_misses_fail_paths" "$([ "$resent" -le 0 ] || { [ "$failing" -gt 0 ] && [ "$etime" = 0 ]; } && echo 0 || echo 1)" \
        "($resent hinted reads sent again, $failing 'Failing path' lines, $etime ETIME on the map)"
}
# written first: librbd answers a read of an object never written without the cluster
dd if=/dev/urandom of="$MD" bs=1M seek=448 count=64 oflag=direct status=none
# the same jobs on gateway a's member disk, beside the map: what a miss is without dm-multipath
sec "CDL on member $DA alone (no dm-multipath): the same jobs"
echo 1 > "/sys/block/$DA/device/cdl_enable"; echo $((CDL_LOAD_QD + 4)) > "/sys/block/$DA/device/queue_depth"
# (whether reads miss depends on the cluster's speed against the guest's: 31 ETIME in one run,
# none in the next, the machine less busy; so the misses are counted, not required)
cdl_fio cdl_member "/dev/$DA" 10; check cdl_member_no_error_but_etime $? "(fio on /dev/$DA: every error must be ETIME)"
cdl_map two_paths "$DA" "$DB"
wait_for cdl_two_paths_paths_back one_map_two_paths; check cdl_two_paths_paths_back $? "($(mp_state | tr '\n' ' '))"
multipath -ll

sec "ext4 on the map's first 256 MiB, 200 files with sha256"
mkfs.ext4 -q -F "$MD" 256M; check mkfs $? ""
mkdir -p /mnt/t; mount "$MD" /mnt/t; rc=$?
check mount "$rc" "(rc=$rc)"
[ $rc = 0 ] || abort "cannot mount ext4 on the map"
mkdir -p /mnt/t/before /mnt/t/during /tmp/during
for i in $(seq 1 200); do
    head -c $(( (RANDOM % 64 + 1) * 1024 + RANDOM % 1000 )) /dev/urandom > "/mnt/t/before/f$i"
done
sync
(cd /mnt/t && sha256sum before/*) > /tmp/sums

io_done() { awk '{ print $1 + $5 }' "/sys/block/$1/stat"; }   # reads + writes completed
# io_flows DEV: DEV completes I/O within 2 s
io_flows() { local n; n=$(io_done "$1"); sleep 2; [ "$(io_done "$1")" -gt "$n" ]; }
# fio writes what neither ext4 nor the CDL phases use (the map is mounted: allow_mounted_write)
sec "fio randrw 4k QD16 verify=crc32c on the map's 256-448 MiB; ext4 written meanwhile; the failovers"
fio --name=gw --filename="$MD" --offset=256M --size=192M --rw=randrw --bs=4k --ioengine=libaio \
    --direct=1 --iodepth=16 --runtime="$FIO_MAX" --time_based --verify=crc32c --verify_backlog=64 \
    --verify_fatal=1 --write_lat_log=gw --log_avg_msec=0 --log_unix_epoch=1 --trigger-file=/tmp/fio-stop --allow_mounted_write=1 \
    --group_reporting --output-format=normal,terse --terse-version=3 > fio-gw.txt 2>&1 &
FIOPID=$!
# ext4 under the failovers: a file every 0.3 s, its sha256 taken from the copy in /tmp
( i=0; while [ ! -e /tmp/writer-stop ]; do
      i=$((i + 1)); head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom > "/tmp/during/f$i"
      cp "/tmp/during/f$i" "/mnt/t/during/f$i"; sleep 0.3
  done ) &
WRITER=$!
ev fio_start
sleep 8
wait_for fio_io_flowing io_flows "$DM"

# kill_and_wait G DEV O ODEV: the host kills gateway G; its path DEV must fail, I/O go on
# through gateway O's path ODEV
kill_and_wait() {
    local g=$1 dev=$2 o=$3 other=$4
    sec "SIGKILL gateway $g (path $dev)"
    ev "kill_$g"; echo "VMTEST-HOST: kill-gw-$g guest_uptime=$(up)"
    wait_for "path_${g}_failed" eval '[ "$(path "$dev" | cut -d" " -f3)" = failed ]'
    check "path_${g}_failed" $? "($(path "$dev"))"
    wait_for "io_resumed_after_kill_$g" io_flows "$DM"
    check "io_resumed_after_kill_$g" $? ""
    ev "resumed_$g"
    check "io_through_${o}_after_kill_$g" "$(io_flows "$other" && echo 0 || echo 1)" "($other)"
    multipath -ll | tee "multipath-ll-$g-dead.txt"
}
# restart_and_wait G DEV STATE: the host restarts gateway G; its path must come back in STATE
restart_and_wait() {
    local g=$1 dev=$2 want=$3
    sec "restart gateway $g (path $dev): back as '$want'"
    ev "restart_$g"; echo "VMTEST-HOST: restart-gw-$g guest_uptime=$(up)"
    wait_for "path_${g}_back" eval '[ "$(path "$dev")" = "$want" ]'; local rc=$?
    check "path_${g}_back" $rc "($(path "$dev"), want $want)"
    ev "back_$g"
    multipath -ll | tee "multipath-ll-$g-back.txt"
    return $rc
}
kill_and_wait a "$DA" b "$DB"
# gateway b alone enforces the limits: a miss fails the map's last path
cdl_map b_alone "$DB"
wait_for cdl_b_alone_path_back eval '[ "$(path "$DB" | cut -d" " -f3-)" = "active ready" ]'
check cdl_b_alone_path_back $? "($(path "$DB"))"
if restart_and_wait a "$DA" "50 active active ready"; then
    # failback: a is the preferred gateway again, and writes through it take the image back
    wait_for io_through_a_again io_flows "$DA"; check failback_to_a $? "($(path "$DA"))"
    sleep 3
    kill_and_wait b "$DB" a "$DA"
    restart_and_wait b "$DB" "10 enabled active ready"
else
    echo "gateway a's path did not come back: b is not killed (the disk would have no path)"
fi
sleep 5
sec "the end: one map, two paths, a's active"
multipath -ll | tee multipath-ll-after.txt
check multipath_after "$(one_map_two_paths && echo 0 || echo 1)" "($(mp_state | tr '\n' ' '))"
# both gateways were restarted: each still reports CDL (READ(16)'s CDLP names the T2A page)
for g in a b; do
    d=$([ $g = a ] && echo "$DA" || echo "$DB")
    page=$(sg_opcodes -o 0x88 "/dev/$d" 2>&1 | grep -oE 'Command duration limit (T2)?[AB] mode page' | head -1)
    check "cdl_after_restart_$g" "$([ -n "$page" ] && echo 0 || echo 1)" "(sg_opcodes -o 0x88 /dev/$d: ${page:-no CDL page})"
done
fio_running=$(kill -0 $FIOPID 2>/dev/null && echo 1 || echo 0)
check fio_ran_through_the_failovers "$([ "$fio_running" = 1 ] && echo 0 || echo 1)" "(fio must still run here; it ended early: raise FIO_MAX)"
touch /tmp/writer-stop; wait $WRITER
ev fio_stop; touch /tmp/fio-stop     # fio ends its jobs as at the end of their runtime
for _ in $(seq 300); do kill -0 $FIOPID 2>/dev/null || break; sleep 0.2; done
kill -0 $FIOPID 2>/dev/null && { echo "fio ignored its trigger file: SIGINT"; kill -INT $FIOPID; }
wait $FIOPID; rc=$?
grep -v '^3;' fio-gw.txt
verr=$(grep -ciE 'verify.*(fail|bad)|bad magic|crc32c: verify' fio-gw.txt)
kv fio_rc "$rc"
kv fio_errors "$(awk -F';' '/^3;/ {print $5; exit}' fio-gw.txt)"
kv fio_read_kib "$(awk -F';' '/^3;/ {print $6; exit}' fio-gw.txt)"
kv fio_write_kib "$(awk -F';' '/^3;/ {print $47; exit}' fio-gw.txt)"
kv fio_verify_errors "$verr"
check fio_no_error "$([ "$rc" = 0 ] && [ "$(awk -F';' '/^3;/ {print $5; exit}' fio-gw.txt)" = 0 ] && echo 0 || echo 1)" "(rc=$rc)"
check fio_no_verify_mismatch "$([ "$verr" = 0 ] && echo 0 || echo 1)" "($verr)"

sec "the pause of each failover: the longest time without a completed fio I/O"
# From fio's completion log (gw_clat.1.log: one line per I/O, "epoch msec, clat, direction,
# ...") and events.txt: after each kill (until the gateway's restart) the longest time
# without any completion (pause_kill_G_ms) and without a completed write
# (write_pause_kill_G_ms: reads need no lock, writes wait for it); before the first kill, the
# longest gap of the steady state, for comparison.
python3 - events.txt gw_clat.1.log > pauses.txt <<'EOF'
import sys
ev = {}
for line in open(sys.argv[1]):
    name, ms = line.split()
    ev[name] = int(ms)
done = [(int(f[0]), int(f[2])) for f in (l.split(",") for l in open(sys.argv[2]) if l.strip())]
t_all = sorted(t for t, _ in done)
t_wr = sorted(t for t, d in done if d == 1)
print("completions=%d" % len(t_all))
print("write_completions=%d" % len(t_wr))
def longest(t, lo, hi, inside=False):
    # the longest gap between completions that ends after lo and starts before hi (inside:
    # that starts after lo and ends before hi)
    best = 0
    for a, b in zip(t, t[1:]):
        if (a >= lo and b <= hi) if inside else (b > lo and a < hi):
            best = max(best, b - a)
    return best
end = ev.get("fio_stop", t_all[-1] if t_all else 0)
for g in ("a", "b"):
    k, r = ev.get("kill_" + g), ev.get("restart_" + g)
    if k is not None:
        # until the restart, or (a) the CDL phase that follows the kill: its pauses are no failover's
        hi = min(x for x in (r, ev.get("cdl_b_alone_start") if g == "a" else None, end) if x is not None)
        print("pause_kill_%s_ms=%d" % (g, longest(t_all, k, hi)))
        print("write_pause_kill_%s_ms=%d" % (g, longest(t_wr, k, hi)))
        print("writes_after_kill_%s=%d" % (g, sum(1 for t in t_wr if k < t < hi)))
lo, hi = ev["fio_start"] + 1000, ev.get("kill_a", end)
print("steady_longest_gap_ms=%d" % longest(t_all, lo, hi, True))
print("steady_longest_write_gap_ms=%d" % longest(t_wr, lo, hi, True))
EOF
while IFS='=' read -r k v; do kv "$k" "$v"; done < pauses.txt
for g in a b; do
    p=$(sed -n "s/^pause_kill_${g}_ms=//p" pauses.txt)
    check "pause_kill_${g}_measured" "$([ -n "$p" ] && [ "$p" -gt 0 ] && echo 0 || echo 1)" "(${p:-none} ms)"
    # the other gateway wrote while this one was dead: it took the image over (after kill a:
    # broke dead a's lock)
    n=$(sed -n "s/^writes_after_kill_${g}=//p" pauses.txt)
    check "writes_while_${g}_dead" "$([ -n "$n" ] && [ "$n" -gt 0 ] && echo 0 || echo 1)" "(${n:-none} writes completed between the kill and the restart)"
done

sec "ext4: umount, e2fsck, remount, sha256 of every file"
(cd /tmp/during && sha256sum f*) | sed 's|  f|  during/f|' >> /tmp/sums
kv fs_files "$(wc -l < /tmp/sums)"
umount /mnt/t; check umount $? ""
echo 3 > /proc/sys/vm/drop_caches; blockdev --flushbufs "$MD"
e2fsck -fn "$MD"; rc=$?
check e2fsck "$rc" "(rc=$rc)"
mount "$MD" /mnt/t; rc=$?
check remount "$rc" "(rc=$rc)"
if [ $rc = 0 ]; then
    bad=$(cd /mnt/t && sha256sum -c /tmp/sums 2>&1 | grep -vc ': OK$')
    kv fs_sha256_bad "$bad"
    check fs_sha256 "$([ "$bad" = 0 ] && echo 0 || echo 1)" "($bad of $(wc -l < /tmp/sums) files differ)"
    umount /mnt/t
fi

sec "kernel log: no error on the map or in ext4"
kmsgs | grep -v 'vmtest: ===' > dmesg-test.txt
map_err=$(grep -cE "(I/O|Buffer I/O) error,? (on )?dev $DM|EXT4-fs (error|warning)|blk_update_request" dmesg-test.txt)
kv dmesg_map_errors "$map_err"
kv dmesg_conn_errors "$(grep -c 'detected conn error' dmesg-test.txt)"
kv dmesg_failed_paths "$(grep -c 'Failing path' dmesg-test.txt)"
check no_io_errors_on_map "$([ "$map_err" = 0 ] && echo 0 || echo 1)" "($map_err lines)"

multipathd_alive "the test" && kv multipathd_alive_at_end 1
sec "flush the map, log out"
multipath -f "$MAP"; check multipath_flush $? ""
iscsiadm -m node --logoutall=all; check logout $? ""
kill "$MPD" 2>/dev/null; wait "$MPD" 2>/dev/null
finish
