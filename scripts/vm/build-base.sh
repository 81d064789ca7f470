#!/usr/bin/env bash
# Build the QEMU guest for the storage_vm molecule scenario, from Debian packages only:
# debootstrap (minbase + kernel + ssh + python3 + mdadm + xfsprogs + dbus), an ext4 root image made
# with `mkfs.ext4 -d`, the guest's own kernel/initrd copied out for -kernel/-initrd, and an ssh key
# generated here. Test-only guest settings: MODULES=dep for the role's update-initramfs handler, and a
# bytecode cache for Ansible's zipped modules (zipimport_cache.py). Built once per machine under
# $DLRACK_VM_CACHE (default /var/cache/dlrack-vm); rebuilt only when this script or zipimport_cache.py
# changes (their hash is stored next to the image). Each run boots a qcow2 copy-on-write overlay of
# base.raw (scripts/vm/start.sh), so the base image is never written.
set -euo pipefail
CACHE=${DLRACK_VM_CACHE:-/var/cache/dlrack-vm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PKGS=linux-image-amd64,openssh-server,python3,python3-apt,mdadm,xfsprogs,dbus,systemd-sysv,udev,kmod,iproute2,util-linux,fdisk,e2fsprogs,procps,initramfs-tools
HOOK="$(dirname "$0")/zipimport_cache.py"
want=$( (cat "$0" "$HOOK"; echo "$PKGS") | sha256sum | cut -c1-16)
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ -f "$CACHE/base.raw" ] && [ "$(cat "$CACHE/base.id" 2>/dev/null)" = "$want" ]; then
  echo "build-base: $CACHE/base.raw is current"; exit 0
fi
rm -f "$CACHE/base.raw" "$CACHE/base.id"
root=$(mktemp -d /var/tmp/dlrack-vmroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "build-base: debootstrap $SUITE into $root (several minutes)"
debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
  tail -30 "$CACHE/debootstrap.log" >&2; exit 1; }
[ -f "$CACHE/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C dlrack-vm -f "$CACHE/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$CACHE/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
echo dlrack-vm > "$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 dlrack-vm\n' > "$root/etc/hosts"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' > "$root/etc/fstab"
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=ipv4\n' > "$root/etc/systemd/network/10-dhcp.network"
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
chroot "$root" systemctl mask getty@tty1.service >/dev/null 2>&1 || true
# Key-only root login; no DNS lookups (the guest has no resolver worth waiting for).
printf 'PermitRootLogin prohibit-password\nUseDNS no\n' > "$root/etc/ssh/sshd_config.d/dlrack.conf"
# The guest must not start with an array config from the build host.
printf 'HOMEHOST <system>\nMAILADDR root\n' > "$root/etc/mdadm/mdadm.conf"
chroot "$root" update-initramfs -u -k all >/dev/null 2>&1 || true
# Written after the build's own initrd (the boot initrd stays MODULES=most): keeps the role's
# update-initramfs handler short under TCG (MODULES=most took over 10 minutes on a loaded 2-core host).
printf 'MODULES=dep\n' > "$root/etc/initramfs-tools/conf.d/dlrack-test.conf"
# Bytecode cache for zip imports (scripts/vm/zipimport_cache.py): halves each Ansible module's run.
install -m 0644 "$HOOK" "$root/usr/lib/python3/dist-packages/dlrack_zipimport_cache.py"
echo 'import dlrack_zipimport_cache' > "$root/usr/lib/python3/dist-packages/dlrack_zipimport_cache.pth"
kver=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sed 's/^vmlinuz-//' | sort -V | tail -1)
cp "$root/boot/vmlinuz-$kver" "$CACHE/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$CACHE/initrd.img"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
mkfs.ext4 -q -F -L dlrack-root -d "$root" "$CACHE/base.raw.tmp" 3G
mv "$CACHE/base.raw.tmp" "$CACHE/base.raw"
echo "$want" > "$CACHE/base.id"
echo "build-base: built $CACHE/base.raw (kernel $kver)"
