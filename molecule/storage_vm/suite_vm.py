"""VM half of the storage_tiers suite (imported by ../storage_tiers/suite.py): md for real."""
import os
import subprocess
import time

CACHE = os.environ.get("DLRACK_VM_CACHE", "/var/cache/dlrack-vm")
RUN = os.environ.get("DLRACK_VM_RUN", "/var/tmp/dlrack-storage-vm")
PORT = os.environ.get("DLRACK_VM_PORT", "22922")
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts", "vm")
NV = ["/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_DLNVME0001", "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_DLNVME0002"]
NV_OLD = "/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_DLNVME0003"
HDD = ["/dev/disk/by-id/wwn-0x5000c500dead000%d" % i for i in (1, 2, 3, 4)]
MD_OLD = "/dev/disk/by-id/wwn-0x5000c500dead0005"
PT = "/dev/disk/by-id/wwn-0x5000c500dead0006"
# Role defaults (auto selection, raid0 hot, raid6 cold) but a device timeout for an emulated guest:
# with the default 30s a reboot under TCG on a loaded host assembled the arrays (in userspace: the
# initramfs is MODULES=dep) 65 s after the mount jobs started, so both mounts had failed (nofail)
# and the reboot case failed by timing, not by what it checks (device order). Real hardware
# assembles in well under a second.
DEVICE_TIMEOUT = "180s"
AUTO = {"storage_tiers_device_timeout": DEVICE_TIMEOUT}


def target(s):
    # One shared connection (ControlMaster): a fresh ssh login costs ~4 s of the TCG guest's CPU, and the
    # suite runs ~60 commands. The master goes away with the guest (reboot case) and is started anew.
    return s.Target(["ssh", "-q", "-i", os.path.join(CACHE, "id_ed25519"), "-p", PORT, "-o", "BatchMode=yes",
                     "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", "ControlMaster=auto", "-o", "ControlPath=%s/ssh-%%C" % RUN, "-o", "ControlPersist=300s",
                     "root@127.0.0.1"])


def members(tgt, md):
    det = tgt.sh("mdadm --detail --export %s" % md)
    return sorted(v for k, v in (l.split("=", 1) for l in det.splitlines() if "=" in l)
                  if k.startswith("MD_DEVICE_") and k.endswith("_DEV")), det


ARRAYS = (("dlrack-hot", "/mnt/hot"), ("dlrack-cold", "/mnt/archive"))


def arrays_state(s, tgt):
    """What a refused run must leave of the live tiers: each array's md UUID, name, level and members,
    and its filesystem (suite.fs_state: mount, UUID, every file). Not the members' raw bytes: a running
    array and a mounted XFS write to them on their own schedule (md superblock event counts on each
    active/clean transition, XFS log covering every fs.xfs.xfssyncd_centisecs = 30 s after a change),
    which is what made "a former md member named explicitly is refused" pass or fail by timing."""
    out = {}
    for md, mnt in ARRAYS:
        have, det = members(tgt, "/dev/md/%s" % md)
        keep = dict(kv for kv in (l.split("=", 1) for l in det.splitlines() if "=" in l)
                    if kv[0] in ("MD_UUID", "MD_NAME", "MD_LEVEL", "MD_DEVICES", "MD_METADATA"))
        keep["members"] = have
        keep.update(s.fs_state(tgt, "/dev/md/%s" % md, mnt))
        out[md] = keep
    return out


def converge(s):
    tgt = target(s)

    @s.case("VM fresh node: check mode (auto) reports exactly the real run's changes, touches nothing; rerun changed=0")
    def _fresh():
        watch = NV + HDD
        # Arrays: none of ours and nothing holding the disks the run will take. (Not all of /proc/mdstat:
        # udev may assemble the former member as an inactive foreign md127 at any time, which is not
        # the role's doing; prepare.yml stops it once.)
        arrays = ("ls /dev/md 2>/dev/null | grep -c '^dlrack-';"
                  " for d in $(readlink -f %s); do ls /sys/class/block/${d#/dev/}/holders; done" % " ".join(watch))
        before = [tgt.sha(p) for p in ["/etc/fstab", "/etc/mdadm/mdadm.conf"]] + [tgt.sh(arrays, check=False)]
        assert before[-1] == "0", "arrays before the first run: %s" % before[-1]
        rc, c_check, msg = s.apply(AUTO, check=True)
        assert rc == 0, "check mode failed: %s" % msg
        after = [tgt.sha(p) for p in ["/etc/fstab", "/etc/mdadm/mdadm.conf"]] + [tgt.sh(arrays, check=False)]
        assert before == after, "check mode changed fstab/mdadm.conf/arrays: %s -> %s" % (before, after)
        assert tgt.sh("blkid -p %s >/dev/null; echo $?" % " ".join(watch)) == "2", "check mode wrote a signature"
        rc, c_real, msg = s.apply(AUTO)
        assert rc == 0, "real run failed: %s" % msg
        assert s.normalize(c_check) == s.normalize(c_real), "check %s\n!= real %s" % (c_check, c_real)
        rc, c_again, msg = s.apply(AUTO)
        assert rc == 0 and c_again == [], "second run: rc=%d changed=%s %s" % (rc, c_again, msg)
    _fresh()
    return s.summary()


def verify(s):
    tgt = target(s)
    safety = tgt.sh("cat /root/safety.b2")
    data_sha = tgt.sh("cat /root/data.sha256")

    def protected_intact():
        assert tgt.sh("b2sum %s %s %s" % (NV_OLD, MD_OLD, PT)) == safety, "an adversarial disk changed"
        got = tgt.sh("mkdir -p /run/ro && mount -o ro,noload %s /run/ro && sha256sum /run/ro/data.bin | cut -d' ' -f1;"
                     " umount /run/ro" % NV_OLD)
        assert got == data_sha, "data.bin changed"

    # The arrays, mdadm.conf, XFS, mounts, fstab lines, units and directories converge left are
    # checked before this suite runs, by tests/test_node.py (pytest-testinfra, from verify.yml).
    @s.case("VM: after converge the adversarial disks are unchanged byte for byte, data.bin intact")
    def _untouched():
        protected_intact()
    _untouched()

    fix = "add %s to storage_tiers_wipe_allowed and set storage_tiers_safe_mode: false"

    def live():
        return arrays_state(s, tgt)

    @s.case("VM: a former md member named explicitly is refused; it is unchanged byte for byte, the live arrays "
            "keep their md and filesystem UUIDs, members and files")
    def _old_md():
        tgt.sh("echo archived > /mnt/archive/results/before-refusal && sync")
        s.expect_refusal(tgt, {"storage_tiers_hot_enabled": False, "storage_tiers_cold_devices": HDD[:3] + [MD_OLD]},
                         [MD_OLD], ["storage_tiers_cold_devices: %s is a member of md array oldbox:data" % MD_OLD,
                                    fix % MD_OLD], live=live)
        assert tgt.sh("cat /mnt/archive/results/before-refusal") == "archived"
    _old_md()

    @s.case("VM: the system disk is refused, even with wipe allowed and safe mode off")
    def _system():
        s.expect_refusal(tgt, {"storage_tiers_cold_enabled": False, "storage_tiers_hot_devices": ["/dev/vda"],
                               "storage_tiers_wipe_allowed": ["/dev/vda"], "storage_tiers_safe_mode": False},
                         ["/etc/fstab"], ["storage_tiers_hot_devices: /dev/vda it is the system disk",
                                          "The system disk is never used"], live=live)
    _system()

    @s.case("VM: an NVMe with a filesystem and a file, and a GPT disk, named explicitly, are refused; data intact")
    def _fs_pt():
        s.expect_refusal(tgt, {"storage_tiers_hot_devices": NV + [NV_OLD], "storage_tiers_cold_devices": HDD[:3] + [PT]},
                         [NV_OLD, PT], ["storage_tiers_hot_devices: %s carries a ext4 filesystem labelled olddata" % NV_OLD,
                                        "storage_tiers_cold_devices: %s has partitions" % PT,
                                        "has a gpt partition table", fix % PT], live=live)
        protected_intact()
    _fs_pt()

    @s.case("VM: the same NVMe in both tiers is an error")
    def _both():
        s.expect_refusal(tgt, {"storage_tiers_hot_devices": NV, "storage_tiers_cold_devices": [NV[0]],
                               "storage_tiers_cold_level": "single"}, [],
                         ["%s is listed in both storage_tiers_hot_devices and storage_tiers_cold_devices" % NV[0]], live=live)
    _both()

    @s.case("VM: interrupted run (array created, no filesystem yet, array stopped) is assembled and completed")
    def _interrupted():
        uuid = tgt.sh("mdadm --detail --export /dev/md/dlrack-hot | sed -n 's/^MD_UUID=//p'")
        tgt.sh("umount /mnt/hot && sed -i '\\# /mnt/hot #d' /etc/fstab && wipefs -q -a /dev/md/dlrack-hot && "
               "mdadm --stop /dev/md/dlrack-hot && udevadm settle")
        rc, changed, msg = s.apply(AUTO)
        assert rc == 0, msg
        got = s.normalize(changed)
        assert "Create or assemble the md arrays" in got and "Create the XFS filesystems (aligned to the array)" in got, got
        assert tgt.sh("mdadm --detail --export /dev/md/dlrack-hot | sed -n 's/^MD_UUID=//p'") == uuid, "array re-created"
        assert tgt.sh("findmnt -rn -o FSTYPE /mnt/hot") == "xfs"
        tgt.sh("echo precious > /mnt/hot/datasets/marker && echo cold > /mnt/archive/results/marker && sync")
        rc, changed, msg = s.apply(AUTO)
        assert rc == 0 and changed == [], "rerun after completion: %s %s" % (changed, msg)
        protected_intact()
    _interrupted()

    @s.case("VM: reboot with the disks attached in reverse order: both tiers mount again, rerun changed=0")
    def _reboot():
        every = NV + [NV_OLD] + HDD + [MD_OLD, PT]
        names_before = tgt.sh("readlink -f %s" % " ".join(every)).split()
        # Boot the guest's own initramfs (the role regenerated it with the ARRAY lines), not the
        # one cached when the base image was built.
        kver = tgt.sh("uname -r")
        with open(os.path.join(RUN, "initrd.img"), "wb") as f:
            f.write(subprocess.run(target(s).prefix + ["cat /boot/initrd.img-%s" % kver], check=True,
                                   stdout=subprocess.PIPE).stdout)
        subprocess.run([os.path.join(SCRIPTS, "stop.sh"), RUN, PORT], check=True)
        subprocess.run([os.path.join(SCRIPTS, "start.sh"), RUN, PORT, "reverse"], check=True)
        tgt.sh("systemctl is-system-running --wait || true")
        names_after = tgt.sh("readlink -f %s" % " ".join(every)).split()
        # Any one disk's new name depends on probe order (nvme and SCSI probe asynchronously); that
        # some moved is what the case needs, so every disk is compared, not the first of each kind.
        assert names_before != names_after, "the reverse attach order changed no device name: %s" % names_after
        # (`findmnt /mnt/hot /mnt/archive` would mean source /mnt/hot on target /mnt/archive: never true)
        for dummy in range(40):
            if tgt.sh("(findmnt -rn -M /mnt/hot; findmnt -rn -M /mnt/archive) | wc -l") == "2":
                break
            time.sleep(3)
        else:
            raise AssertionError("the tiers did not mount after the reboot:\n" + tgt.sh(
                "cat /proc/mdstat; ls -l /dev/md; systemctl --no-pager status mnt-hot.mount mnt-archive.mount;"
                " journalctl -b --no-pager | grep -iE 'md|raid|mnt|xfs' | tail -40", check=False))
        assert tgt.sh("findmnt -rn -o TARGET,FSTYPE /mnt/hot") == "/mnt/hot xfs"
        assert tgt.sh("findmnt -rn -o TARGET,FSTYPE /mnt/archive") == "/mnt/archive xfs"
        assert tgt.sh("cat /mnt/hot/datasets/marker /mnt/archive/results/marker") == "precious\ncold"
        tgt.sh("findmnt --verify")
        rc, changed, msg = s.apply(AUTO)
        assert rc == 0 and changed == [], "rerun after the shuffled reboot: rc=%d %s %s" % (rc, changed, msg)
        protected_intact()
    _reboot()
    return s.summary()


def main(mode, s):
    return converge(s) if mode == "vm-converge" else verify(s)
