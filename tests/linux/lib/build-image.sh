#!/bin/bash
# Builds the guest: a Debian rootfs (debootstrap) -> an ext4 root image, the kernel and the initrd.
# Usage: lib/build-image.sh IMAGEDIR
#   IMAGEDIR receives vmlinuz, initrd.img, root.img (run.sh names it after a hash of the
#   guest-side files, so an edit of any of them builds a new image). The debootstrap result is
#   cached beside it in $VMDIR/rootfs-<hash of suite and package list>, so only the first build
#   on a machine downloads packages (about 1 min 40 s); later builds take seconds.
# Env: VMDIR (the work directory, from run.sh), GUEST_SUITE (trixie: kernel 6.12, sd with CDL),
#      MIRROR (the Debian mirror that apt on this machine uses, else deb.debian.org).
# Needs root, debootstrap, e2fsprogs (mkfs.ext4 -d).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
IMG=${1:?IMAGEDIR}
: "${VMDIR:?VMDIR}"
SUITE=${GUEST_SUITE:-trixie}
if [ -z "${MIRROR:-}" ]; then
    MIRROR=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi
# Guest packages: the initiator (open-iscsi), the SCSI tools (sg3-utils, lsscsi), fio (3.39 in
# trixie: cmdprio_hint), python3-minimal (guest half of the mux, page decoding), e2fsprogs,
# multipath-tools (dm-multipath over the gateways suite's two paths).
PKGS=udev,kmod,linux-image-amd64,initramfs-tools,zstd,open-iscsi,sg3-utils,fio,lsscsi,util-linux,iproute2,python3-minimal,procps,e2fsprogs,multipath-tools
KEY=$(printf '%s %s\n' "$SUITE" "$PKGS" | sha256sum | cut -c1-12)
R=$VMDIR/rootfs-$KEY
# rootfs trees of other package lists, unused for a day
find "$VMDIR" -maxdepth 1 -name 'rootfs-*' ! -name "rootfs-$KEY" -mtime +0 -exec rm -rf {} + 2>/dev/null
if [ ! -e "$R/.debootstrap-done" ]; then
    rm -rf "$R"
    ok=
    for try in 1 2 3; do
        if debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$R" "$MIRROR"; then ok=1; break; fi
        echo "debootstrap failed (try $try); retrying" >&2; rm -rf "$R"; sleep 10
    done
    [ -n "$ok" ] || { echo "debootstrap failed 3 times" >&2; exit 1; }
    # small initrd: only what mounting /dev/vda needs (virtio_pci is built in)
    sed -i 's/^MODULES=.*/MODULES=list/' "$R/etc/initramfs-tools/initramfs.conf"
    printf 'virtio_blk\next4\n' > "$R/etc/initramfs-tools/modules"
    chroot "$R" update-initramfs -u -k all
    rm -rf "$R"/usr/share/doc/* "$R"/usr/share/man/* "$R"/usr/share/locale/* \
           "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*
    touch "$R/.debootstrap-done"
fi
touch "$R"
echo vmtest > "$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 vmtest\n' > "$R/etc/hosts"
echo '/dev/vda / ext4 rw,noatime 0 0' > "$R/etc/fstab"
chroot "$R" passwd -d root >/dev/null            # console login, for debugging only
# guest automation (the kernel boots with init=/usr/local/sbin/vmtest-init: no systemd)
install -m 0755 "$HERE/lib/vmmux.py" "$R/usr/local/sbin/vmmux.py"
install -m 0755 "$HERE/guest/vmtest-run" "$R/usr/local/sbin/vmtest-run"
install -m 0755 "$HERE/guest/vmtest-init" "$R/usr/local/sbin/vmtest-init"
TMPIMG=$IMG.tmp.$$
rm -rf "$TMPIMG"; mkdir -p "$TMPIMG"
K=$(ls "$R"/boot/vmlinuz-* | sort -V | tail -1); V=${K##*/vmlinuz-}
cp "$K" "$TMPIMG/vmlinuz"; cp "$R/boot/initrd.img-$V" "$TMPIMG/initrd.img"
mkfs.ext4 -q -F -L vmroot -d "$R" "$TMPIMG/root.img" 1536M
echo "$V" > "$TMPIMG/kernel-version"
rm -rf "$IMG"; mv "$TMPIMG" "$IMG"
echo "guest image: kernel $V in $IMG"
