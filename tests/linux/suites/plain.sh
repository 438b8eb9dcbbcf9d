#!/bin/bash
# Suite "plain" (and "plain-rbd"), INSIDE the guest: a RAM LUN (`stint serve --lun ram:512MiB`;
# plain-rbd: a 512 MiB RBD image, `--lun rbd:rbd/IMAGE:CONF`) through the whole
# Linux initiator path: SendTargets discovery, login, sd attach, the INQUIRY VPD pages, READ
# CAPACITY, REPORT SUPPORTED OPERATION CODES, MODE SENSE, REPORT TARGET PORT GROUPS, the
# Logical Block Provisioning log page, persistent reservations (sg_persist registers, reads the
# keys, reserves, releases), raw sequential I/O, copy offload (3PC, the Third-party Copy VPD
# page, sg_xcopy's EXTENDED COPY checked by reading both ranges), ext4 with files
# verified across a remount, thin provisioning (fstrim frees what ext4 freed, as GET LBA STATUS
# shows; blkdiscard deallocates the disk, which then reads zeros), fio random read/write with
# crc32c verification, logout, and no
# kernel warning beyond the power-on unit attention of the login. From the host: LUN_BYTES, the
# size the disk must have (an RBD LUN takes its image's); CDL_SUPPORTED, what sd must find
# (1: the LUN has CDL descriptors); LBP_LOG=0, the LUN has no Logical
# Block Provisioning log page (an RBD LUN does not count its usage).
. /job/lib.sh
sec versions
uname -r; iscsiadm --version; fio --version; sg_inq --version 2>&1 | head -1
kv kernel "$(uname -r)"
login

sec "dmesg since the test started"; kmsgs
sec lsscsi; lsscsi; lsscsi -t -g
sec "sg_inq (standard)"; expect_cmd sg_inq sg_inq "$D"
for p in 0x00 0x80 0x83 0xb0 0xb1 0xb2; do
    sec "sg_vpd -p $p"; expect_cmd "sg_vpd_${p#0x}" sg_vpd -p $p "$D"
done
sec "sg_readcap -l"; expect_cmd sg_readcap sg_readcap -l "$D"
kv capacity_bytes "$(blockdev --getsize64 "$D")"
[ -n "${LUN_BYTES:-}" ] && expect capacity "$(blockdev --getsize64 "$D")" "$LUN_BYTES"
sec "sg_opcodes (all)"; expect_cmd sg_opcodes sg_opcodes "$D"
sec "sg_opcodes -o 0x88"; sg_opcodes -o 0x88 "$D"
sec "sg_modes -a"; expect_cmd sg_modes sg_modes -a "$D"
sec "sg_rtpg -d (implicit ALUA: one target port group, active/optimized)"
sg_rtpg -d "$D" > rtpg.txt 2>&1; rc=$?; cat rtpg.txt
check rtpg_active_optimized "$([ $rc = 0 ] && grep -q 'active/optimized' rtpg.txt && echo 0 || echo 1)" \
    "(rc=$rc: $(head -4 rtpg.txt | tr '\n' ' '))"
sec "sg_logs -p 0xc (logical block provisioning)"
sg_logs -p 0xc "$D" > lbp-log.txt 2>&1; rc=$?; cat lbp-log.txt
if [ "${LBP_LOG:-1}" = 1 ]; then
    check lbp_log_page "$([ $rc = 0 ] && grep -qi 'resource count' lbp-log.txt && echo 0 || echo 1)" \
        "(rc=$rc: $(head -4 lbp-log.txt | tr '\n' ' '))"
else
    # A store that does not count its usage (RBD) has no such page: not listed, and refused.
    sg_logs -p 0 "$D" > log-pages.txt 2>&1; lrc=$?; cat log-pages.txt
    check lbp_log_page_absent "$([ $lrc = 0 ] && ! grep -qiE '^ *0x0c ' log-pages.txt && [ $rc != 0 ] && grep -qi 'illegal request' lbp-log.txt && echo 0 || echo 1)" \
        "(page 00h rc=$lrc: $(tr '\n' ' ' < log-pages.txt | head -c 300); page 0Ch rc=$rc)"
fi

sec "persistent reservations: sg_persist registers, reads the keys, reserves, releases"
K=0x5374696e74  # "Stint"
expect_cmd pr_capabilities sg_persist --in --report-capabilities "$D"
expect_cmd pr_register sg_persist --out --register --param-sark=$K "$D"
sg_persist --in --read-keys "$D" | tee pr-keys.txt
check pr_read_keys "$(grep -qi "^ *$K\$" pr-keys.txt && echo 0 || echo 1)" "($(tr '\n' ' ' < pr-keys.txt))"
expect_cmd pr_reserve sg_persist --out --reserve --param-rk=$K --prout-type=1 "$D"
sg_persist --in --read-reservation "$D" | tee pr-reservation.txt
check pr_read_reservation "$(grep -qi "Key=$K" pr-reservation.txt && grep -q 'Write Exclusive' pr-reservation.txt && echo 0 || echo 1)" \
    "($(tr '\n' ' ' < pr-reservation.txt))"
expect_cmd pr_read_full_status sg_persist --in --read-full-status "$D"
expect_cmd pr_release sg_persist --out --release --param-rk=$K --prout-type=1 "$D"
expect_cmd pr_unregister sg_persist --out --register --param-rk=$K --param-sark=0 "$D"
sg_persist --in --read-keys "$D" | tee pr-keys.txt
check pr_no_keys_left "$(grep -qi 'no registered reservation keys' pr-keys.txt && echo 0 || echo 1)" \
    "($(tr '\n' ' ' < pr-keys.txt))"

sec sysfs
for f in device/scsi_level device/cdl_supported queue/rotational queue/logical_block_size \
         queue/physical_block_size queue/write_cache device/queue_depth queue/max_hw_sectors_kb \
         queue/optimal_io_size queue/scheduler device/vendor device/model device/rev device/state; do
    kv "sysfs_${f//\//_}" "$(sysfs $f)"
done
[ -n "${CDL_SUPPORTED:-}" ] && expect cdl_supported "$(sysfs device/cdl_supported)" "$CDL_SUPPORTED"

sec "raw sequential: dd 64 MiB bs=1M direct write, then direct read"
head -c 64M /dev/urandom > /tmp/seq; sha=$(sha256sum < /tmp/seq | cut -d' ' -f1)
t=$(now); dd if=/tmp/seq of="$D" bs=1M oflag=direct conv=fsync status=none; rc=$?
kv dd_write_s "$(el $t)"; check dd_write $rc "(rc=$rc)"
t=$(now); rsha=$(dd if="$D" bs=1M count=64 iflag=direct status=none | sha256sum | cut -d' ' -f1)
kv dd_read_s "$(el $t)"; expect dd_sha256 "$rsha" "$sha"
rm -f /tmp/seq

sec "copy offload: 3PC, sg_vpd decodes page 8Fh, sg_xcopy copies 16 MiB within the disk"
check inquiry_3pc "$(sg_inq "$D" | grep -q '3PC=1' && echo 0 || echo 1)"
expect_cmd sg_vpd_8f sg_vpd -p 0x8f "$D"
# sg_xcopy takes the disk's sg node (it cannot find one for a block device without udev).
SG=/dev/$(ls "/sys/block/${D#/dev/}/device/scsi_generic"); kv sg_node "$SG"
t=$(now); expect_cmd sg_xcopy sg_xcopy if="$SG" of="$SG" bs=512 count=32768 seek=65536
kv sg_xcopy_16mib_s "$(el $t)"
expect xcopy_sha256 "$(dd if="$D" bs=1M skip=32 count=16 iflag=direct status=none | sha256sum)" \
    "$(dd if="$D" bs=1M count=16 iflag=direct status=none | sha256sum)"

fs_check "" 300

sec "thin provisioning: fstrim on ext4 frees blocks, blkdiscard reads back zeros"
dmb=$(sysfs queue/discard_max_bytes); kv sysfs_queue_discard_max_bytes "$dmb"
check discard_supported "$([ "${dmb:-0}" -gt 0 ] && echo 0 || echo 1)" "(discard_max_bytes=$dmb)"
mapped_blocks() { python3 /job/lbastatus.py "$D" | sed -n 's/^mapped=\([0-9]*\).*/\1/p'; }
mkfs.ext4 -q -F -E nodiscard "$D" && mount "$D" /mnt/t
head -c 192M /dev/urandom > /mnt/t/big; sync
m_full=$(mapped_blocks); kv lba_status_mapped_with_file "$m_full"
rm /mnt/t/big; sync
fstrim -v /mnt/t | tee fstrim.txt; rc=${PIPESTATUS[0]}
check fstrim $rc "(rc=$rc: $(cat fstrim.txt))"
m_trimmed=$(mapped_blocks); kv lba_status_mapped_after_fstrim "$m_trimmed"
freed_mib=$(( (${m_full:-0} - ${m_trimmed:-0}) * $(blockdev --getss "$D") >> 20 ))
kv fstrim_freed_mib "$freed_mib"
check fstrim_frees_the_file "$([ "$freed_mib" -ge 160 ] && echo 0 || echo 1)" \
    "(mapped blocks $m_full -> $m_trimmed: $freed_mib MiB freed of the 192 MiB file)"
umount /mnt/t
blkdiscard -f "$D"; rc=$?; check blkdiscard $rc "(rc=$rc)"
m_none=$(mapped_blocks); kv lba_status_mapped_after_blkdiscard "$m_none"
check blkdiscard_deallocates "$([ "${m_none:-1}" = 0 ] && echo 0 || echo 1)" "(mapped: $m_none)"
nonzero=$(dd if="$D" bs=1M count=64 iflag=direct status=none | tr -d '\0' | wc -c)
check discarded_reads_zeros "$([ "$nonzero" = 0 ] && echo 0 || echo 1)" "($nonzero non-zero bytes in 64 MiB)"

fio_verify randrw_verify 20 256M
logout
finish
