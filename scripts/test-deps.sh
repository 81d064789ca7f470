#!/usr/bin/env bash
# Install what the tests need on a Debian/Ubuntu machine (run as root):
#  - apt packages: podman + runc (crun fails under a cgroup-hybrid host), debootstrap, shellcheck
#    (ansible-test sanity), tools the integration tests use on the host (mkfs, losetup, qemu for
#    the VM scenario);
#  - podman settings this kind of host needs (runtime runc, modest ulimits);
#  - the base image dlrack-systemd:bookworm, built with debootstrap and imported (only if missing).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=(podman runc debootstrap xfsprogs e2fsprogs util-linux fdisk mdadm numactl
           qemu-system-x86 qemu-utils linux-image-amd64 openssh-client ca-certificates
           chromium shellcheck fio)  # fio: tests/unit/.../acceptance capture real fio runs;
                                 # chromium renders the HTML report (test_report_browser.py);
                                 # the shellcheck tool is for ansible-test sanity (make sanity)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # mdadm's postinst wants to rebuild an initramfs for the host; that is harmless but slow.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

conf=/etc/containers/containers.conf
if ! grep -q 'dlrack.node' "$conf" 2>/dev/null; then
  mkdir -p /etc/containers
  cat > "$conf" <<'CONF'
# written by dlrack.node scripts/test-deps.sh: crun fails on a cgroup-hybrid host, and the
# default ulimits are refused in nested sandboxes.
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=1024:4096"]

[engine]
runtime = "runc"
CONF
fi

./scripts/build-image.sh
