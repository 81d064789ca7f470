"""storage_tiers_plan's own code: which devices it hands the planner (the listing plus every
requested device the listing leaves out), and its container check. The reading itself is
blockdev's (test_blockdev.py); the planning is storage_plan's (test_storage_plan.py)."""
import pytest

from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import BlockDevices
from ansible_collections.dlrack.node.plugins.module_utils.storage.plan import StoragePlanError, plan_storage
from ansible_collections.dlrack.node.plugins.modules import storage_tiers_plan as mod

from blocktrees import fake_blkid, kingston, link, lsblk_tree, write


def test_requests_outside_the_listing_are_probed(tmp_path):
    lsblk_tree(str(tmp_path), "NAME MAJ:MIN RM SIZE RO TYPE MOUNTPOINTS\nloop3 7:3 0 320M 0 loop\n")
    root = kingston(tmp_path)   # writes the mount table last
    link(root, "/dev/disk/by-path/pci-0000:00:1d.0-nvme-1", "../../nvme0n1")
    reader = BlockDevices(root, run=fake_blkid({}), blkid="/sbin/blkid")
    disks = mod.probe_disks(reader, ["/dev/loop3", "/dev/sdb1", "/dev/disk/by-path/pci-0000:00:1d.0-nvme-1",
                                     "/dev/disk/by-id/nvme-NOPE", "ata-NOPE"])
    names = [d["name"] for d in disks]
    assert names == ["nvme0n1", "sda", "sdb", "loop3", "sdb1", None]   # loop3 and sdb1 only because named
    loop = disks[3]
    assert loop["role"] == "small" and loop["probe"] == {"type": None, "label": None, "uuid": None, "pttype": None}
    assert disks[4]["kind"] == "partition"
    assert disks[0]["aliases"] == ["/dev/disk/by-path/pci-0000:00:1d.0-nvme-1"]
    assert disks[5] == {"name": None, "path": "/dev/disk/by-id/nvme-NOPE", "exists": False}
    # and the planner takes the loop by path (no stable id: warned), refuses the partition
    plan = plan_storage(disks, {"host": "h", "hot_devices": ["/dev/loop3"], "cold_enabled": False})
    assert plan["hot"]["devices"][0]["path"] == "/dev/loop3"
    assert any("/dev/loop3 has no stable id" in w for w in plan["warnings"])
    with pytest.raises(StoragePlanError) as e:
        plan_storage(disks, {"host": "h", "hot_devices": ["/dev/disk/by-path/pci-0000:00:1d.0-nvme-1", "/dev/sdb1"],
                             "cold_enabled": False})
    assert e.value.messages == [
        "h: hot_devices: /dev/disk/by-path/pci-0000:00:1d.0-nvme-1 mounted at /home, /home/test; has partitions "
        "nvme0n1p1, nvme0n1p2, nvme0n1p3. Unmount it (and remove it from /etc/fstab) first; then, to re-use it, add "
        "/dev/disk/by-path/pci-0000:00:1d.0-nvme-1 to wipe_allowed and set safe_mode: false for that run.",
        "h: hot_devices: /dev/sdb1 is a partition; storage tiers use whole disks. Name the whole disk by stable id "
        "instead."]


def test_in_container(tmp_path):
    assert mod.in_container(str(tmp_path)) is False
    write(str(tmp_path), "/run/systemd/container", "\n")      # an empty marker still marks a container
    assert mod.in_container(str(tmp_path)) is True
    write(str(tmp_path), "/run/systemd/container", "podman\n")
    assert mod.in_container(str(tmp_path)) is True
    write(str(tmp_path / "d"), "/.dockerenv", "")
    assert mod.in_container(str(tmp_path / "d")) is True
