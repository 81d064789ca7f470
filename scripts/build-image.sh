#!/usr/bin/env bash
# Build the systemd base image for molecule scenarios with debootstrap (no registry is reachable)
# and import it into podman as localhost/dlrack-systemd:bookworm. Rebuilt only when missing or
# when this script's package list or user setup changes (their hash is an image label).
# Like a real server, the image has sudo and an unprivileged login user, `dlrack`, with
# passwordless sudo: molecule scenarios connect as that user and become root (dlrack_become).
set -euo pipefail
IMAGE=${DLRACK_IMAGE:-localhost/dlrack-systemd:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PKGS=python3,python3-apt,systemd,systemd-sysv,dbus,udev,sudo,procps,iproute2,kmod,util-linux,fdisk,e2fsprogs,xfsprogs,pciutils,dmidecode,numactl,mdadm,gdisk,ca-certificates,gnupg
USERS="dlrack:sudo-nopasswd"
want=$(printf '%s %s %s' "$SUITE" "$PKGS" "$USERS" | sha256sum | cut -c1-16)
have=$(podman image inspect "$IMAGE" --format '{{ index .Labels "dlrack.pkgs" }}' 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "build-image: $IMAGE is current"; exit 0
fi
root=$(mktemp -d /var/tmp/dlrack-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "build-image: debootstrap $SUITE into $root (a few minutes)"
debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$root" "$MIRROR" >/tmp/dlrack-debootstrap.log 2>&1 || {
  tail -20 /tmp/dlrack-debootstrap.log >&2; exit 1; }
# No mdadm monitoring / initramfs noise inside test containers; keep apt lists so apt works offline-ish.
chroot "$root" systemctl mask systemd-udevd.service systemd-udevd-kernel.socket systemd-udevd-control.socket \
  getty@tty1.service systemd-logind.service >/dev/null 2>&1 || true
echo 'deb http://deb.debian.org/debian bookworm main' > "$root/etc/apt/sources.list"
# The login user of the scenarios: unprivileged, root through sudo (as on most servers).
chroot "$root" useradd --create-home --shell /bin/bash dlrack
echo 'dlrack ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/dlrack"
chmod 0440 "$root/etc/sudoers.d/dlrack"
rm -rf "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL dlrack.pkgs=$want" - "$IMAGE" >/dev/null
echo "build-image: imported $IMAGE"
