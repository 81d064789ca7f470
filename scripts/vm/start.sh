#!/usr/bin/env bash
# Start the storage_vm guest: a qcow2 overlay of the cached base image (scripts/vm/build-base.sh),
# booted with the guest's own kernel/initrd, ssh forwarded on 127.0.0.1:$PORT only.
# Disks (sparse qcow2, created on first start, kept across reboots of the same run dir):
#   2 emulated NVMe controllers (hot tier; nvme1 on NUMA node 1 behind a pxb-pcie),
#   1 spare NVMe (adversarial cases), 3 SCSI + 3 SATA disks with rotation_rate=7200 and WWNs
#   (cold tier + adversarial cases). Two NUMA nodes, TCG (no usable KVM here).
# usage: start.sh RUN_DIR PORT [ORDER]   ORDER=reverse attaches the disks in reverse order
#        (device names shuffled between boots; the ids stay the same).
set -euo pipefail
RUN=${1:?run dir}; PORT=${2:?ssh port}; ORDER=${3:-normal}
CACHE=${DLRACK_VM_CACHE:-/var/cache/dlrack-vm}
SIZE=${DLRACK_VM_DISK_SIZE:-1G}
mkdir -p "$RUN"
[ -f "$RUN/root.qcow2" ] || qemu-img create -q -f qcow2 -b "$CACHE/base.raw" -F raw "$RUN/root.qcow2"
nvme=(DLNVME0001 DLNVME0002 DLNVME0003)
hdd=(0x5000c500dead0001 0x5000c500dead0002 0x5000c500dead0003 0x5000c500dead0004 0x5000c500dead0005 0x5000c500dead0006)
for s in "${nvme[@]}" "${hdd[@]}"; do
  [ -f "$RUN/$s.qcow2" ] || qemu-img create -q -f qcow2 "$RUN/$s.qcow2" "$SIZE"
done
args=()
add_nvme() { # serial bus
  args+=(-drive "if=none,id=d$1,file=$RUN/$1.qcow2,format=qcow2,cache=unsafe"
         -device "nvme,serial=$1,drive=d$1,bus=$2")
}
add_hdd() { # index wwn
  local i=$1 w=$2
  args+=(-drive "if=none,id=d$w,file=$RUN/$w.qcow2,format=qcow2,cache=unsafe")
  if [ "$i" -lt 3 ]; then
    args+=(-device "scsi-hd,drive=d$w,bus=scsi0.0,channel=0,scsi-id=$i,lun=0,rotation_rate=7200,wwn=$w,serial=HDS$i")
  else
    args+=(-device "ide-hd,drive=d$w,bus=ahci0.$((i-3)),rotation_rate=7200,wwn=$w,serial=HDA$i")
  fi
}
idx=(0 1 2 3 4 5); nidx=(0 1 2)
if [ "$ORDER" = reverse ]; then idx=(5 4 3 2 1 0); nidx=(2 1 0); fi
for n in "${nidx[@]}"; do
  if [ "$n" = 1 ]; then add_nvme "${nvme[$n]}" rp1; else add_nvme "${nvme[$n]}" pcie.0; fi
done
for i in "${idx[@]}"; do add_hdd "$i" "${hdd[$i]}"; done
rm -f "$RUN/console.log" "$RUN/qemu.pid"
# A reboot test copies the guest's regenerated /boot/initrd.img-* to $RUN/initrd.img; use it then.
INITRD="$CACHE/initrd.img"; [ -s "$RUN/initrd.img" ] && INITRD="$RUN/initrd.img"
# erms=off: with ERMS the guest kernel copies with `rep movsb`, which TCG runs a byte at a time;
# without it reading a 1 GiB disk (the suite's digests) took 21 s instead of 38 s.
qemu-system-x86_64 -name dlrack-vm -machine q35 -accel tcg,thread=multi -cpu "${DLRACK_VM_CPU:-max,erms=off}" -smp 2 -m 1536 \
  -object memory-backend-ram,id=m0,size=768M -object memory-backend-ram,id=m1,size=768M \
  -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
  -kernel "$CACHE/vmlinuz" -initrd "$INITRD" \
  -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet" \
  -drive "if=none,id=root,file=$RUN/root.qcow2,format=qcow2,cache=unsafe" \
  -device virtio-blk-pci,drive=root,bus=pcie.0 \
  -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$PORT-:22" -device virtio-net-pci,netdev=n0,bus=pcie.0 \
  -device pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0 \
  -device pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1 \
  -device virtio-scsi-pci,id=scsi0,bus=pcie.0 -device ich9-ahci,id=ahci0,bus=pcie.0 \
  "${args[@]}" \
  -display none -serial "file:$RUN/console.log" -monitor none \
  -pidfile "$RUN/qemu.pid" -daemonize
"$(dirname "$0")/wait-ssh.sh" "$RUN" "$PORT"
