"""The one block-device reader on real layouts: system disk, in use, stable id, role.

Trees: tests/blocktrees.py (what each holds and what was filled in).
"""
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.storage import blockdev as bd
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather

from blocktrees import (TOSHIBA_EUI, TOSHIBA_ID, TOSHIBA_MODEL, fake_blkid, h200_tree, kingston, lsblk_tree, puget,
                        toshiba, write)
from realdata import read, real


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    return h200_tree(tmp_path_factory.mktemp("h200"))


def by_name(disks):
    return dict((d["name"], d) for d in disks)


# ---------------------------------------------------------------- h200-vm (issue 11.4)

def test_h200_vm_system_disk_and_read_only_squashfs(h200):
    disks = by_name(bd.BlockDevices(h200).disks())
    assert sorted(disks) == ["vda", "vdb"]          # zram0 and loop0-7 are not disks
    vda, vdb = disks["vda"], disks["vdb"]
    assert vda["in_use"]["system"] and vda["in_use"]["mounted"] == ["/"] and vda["role"] == "system"
    assert vda["size_bytes"] == 536870912 * 512 and vda["transport"] == "virtio"
    assert vdb["read_only"] is True and vdb["role"] == "read_only"
    assert vdb["in_use"] == {"mounted": ["/usr/local/nvidia"], "holders": [], "partitions": [], "signatures": [],
                             "system": False}
    assert vdb["size_bytes"] == 621744 * 512 < bd.MIN_DATA_BYTES
    # virtio says rotational=1 whatever backs it: media unknown, so neither is counted as an HDD
    assert vda["rotational"] is True and vda["kind"] is None and vdb["kind"] is None
    assert not any(bd.is_data_disk(d) for d in disks.values())
    assert (vda["serial"], vdb["serial"], vda["by_id"]) == ("overlayblk", "199048143072", None)


def test_h200_vm_through_hw_facts_gather(h200):
    doc = gather(root=h200, subset=["disks"], is_root=False)
    assert doc["errors"] == []
    assert [(d["name"], d["role"], d["in_use"]["system"], d["probe"]) for d in doc["disks"]] == [
        ("vda", "system", True, None), ("vdb", "read_only", False, None)]


# ---------------------------------------------------------------- system disk / in use

def test_puget_lvm_root_and_boot_make_the_system_disk(tmp_path):
    disks = by_name(bd.BlockDevices(puget(tmp_path)).disks())
    sysd = disks["nvme6n1"]
    assert sysd["in_use"]["system"] and sysd["role"] == "system"
    assert sysd["in_use"]["partitions"] == ["nvme6n1p1", "nvme6n1p2", "nvme6n1p3"]
    assert sysd["in_use"]["holders"] == ["dm-0"]
    assert sorted(sysd["in_use"]["mounted"]) == ["/", "/boot", "/boot/efi"]
    members = [d for n, d in disks.items() if n != "nvme6n1"]
    assert len(members) == 8
    for d in members:
        assert d["in_use"]["holders"] == ["md127"] and d["in_use"]["mounted"] == ["/mnt/nvme-raid"]
        assert not d["in_use"]["system"] and d["role"] == "data" and d["kind"] == "nvme"
        assert bd.in_use_reasons(d)[:2] == ["mounted at /mnt/nvme-raid", "held by md127"]


def test_kingston_sata_hdd_nvme(tmp_path):
    disks = by_name(bd.BlockDevices(kingston(tmp_path)).disks())
    assert disks["sda"]["in_use"]["system"] and disks["sda"]["kind"] == "ssd" and disks["sda"]["transport"] == "sata"
    sdb = disks["sdb"]
    assert sdb["kind"] == "hdd" and not sdb["in_use"]["system"] and sdb["in_use"]["mounted"] == ["/home/archive"]
    nv = disks["nvme0n1"]
    assert not nv["in_use"]["system"] and sorted(nv["in_use"]["mounted"]) == ["/home", "/home/test"]
    assert [bd.is_data_disk(disks[n]) for n in ("sda", "sdb", "nvme0n1")] == [False, True, True]


@pytest.mark.parametrize("mount", ["/var", "/usr", "/boot"])
def test_var_usr_boot_on_a_partition_make_a_system_disk(tmp_path, mount):
    root = kingston(tmp_path)
    write(root, "/proc/self/mounts", "/dev/sdb1 %s ext4 rw 0 0\n" % mount)
    disks = by_name(bd.BlockDevices(root).disks())
    assert disks["sdb"]["in_use"]["system"] and not disks["sda"]["in_use"]["system"]


def test_swap_partition_makes_a_system_disk(tmp_path):
    root = kingston(tmp_path, swaps=["/dev/nvme0n1p1"])
    nv = by_name(bd.BlockDevices(root).disks())["nvme0n1"]
    assert nv["in_use"]["system"] and "[SWAP]" in nv["in_use"]["mounted"]


def test_mountinfo_by_major_minor_wins_over_names(tmp_path):
    root = kingston(tmp_path)
    # /dev/root is what the kernel calls the root device; only maj:min says it is sda4
    write(root, "/proc/self/mountinfo", "22 1 8:4 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
                                        "23 22 8:17 / /data rw - xfs /dev/sdb1 rw\n")
    disks = by_name(bd.BlockDevices(root).disks())
    assert disks["sda"]["in_use"]["mounted"] == ["/"] and disks["sda"]["in_use"]["system"]
    assert disks["sdb"]["in_use"]["mounted"] == ["/data"]
    assert disks["nvme0n1"]["in_use"]["mounted"] == []


@pytest.mark.parametrize("udev,sig", [({"ID_FS_TYPE": "zfs_member"}, "nvme0n1:zfs_member"),
                                      ({"DM_MULTIPATH_DEVICE_PATH": "1"}, "nvme0n1:mpath_member"),
                                      ({"ID_PART_TABLE_TYPE": "gpt"}, "nvme0n1:gpt")])
def test_udev_signatures_mark_a_disk_in_use(tmp_path, udev, sig):
    d = bd.BlockDevices(toshiba(tmp_path, udev={"nvme0n1": udev}), run=fake_blkid({}), blkid="/sbin/blkid").disks()[0]
    assert d["in_use"]["signatures"] == [sig]
    assert d["probe"] == {"type": None, "label": None, "uuid": None, "pttype": None}   # blkid saw nothing
    assert bd.in_use_reasons(d) == ["carries signatures %s" % sig]


def test_multipath_disabled_flag_is_not_a_signature(tmp_path):
    d = bd.BlockDevices(toshiba(tmp_path, udev={"nvme0n1": {"DM_MULTIPATH_DEVICE_PATH": "0"}}),
                        run=fake_blkid({}), blkid="/sbin/blkid").disks()[0]
    assert d["in_use"]["signatures"] == [] and bd.in_use_reasons(d) == []


def test_blkid_zfs_member_and_unprobed_disks(tmp_path):
    root = toshiba(tmp_path)
    run = fake_blkid({"nvme0n1": "DEVNAME=/dev/nvme0n1\nLABEL=tank\nTYPE=zfs_member\n"})
    d = bd.BlockDevices(root, run=run, blkid="/sbin/blkid").disks()[0]
    assert run.calls == [["/sbin/blkid", "-p", "-o", "export", "/dev/nvme0n1"]]
    assert d["in_use"]["signatures"] == ["nvme0n1:zfs_member"]
    assert bd.in_use_reasons(d) == ["carries a zfs_member filesystem labelled tank"]
    # without blkid (not root) nothing says the disk is blank: it is not known to be free
    d = bd.BlockDevices(root).disks()[0]
    assert d["probe"] is None and bd.in_use_reasons(d) == ["its signatures are unknown (not probed with blkid -p)"]


def test_blkid_failure_is_an_error_not_a_verdict(tmp_path):
    errors = []
    d = bd.BlockDevices(toshiba(tmp_path), run=lambda argv: (4, "", "permission denied"), blkid="/sbin/blkid",
                        errors=errors).disks()[0]
    assert d["probe"] is None and errors == ["blkid -p /dev/nvme0n1 failed (rc=4): permission denied"]


# ---------------------------------------------------------------- stable id

def test_model_serial_is_the_stable_id_and_every_alias_resolves(tmp_path):
    reader = bd.BlockDevices(toshiba(tmp_path))
    d = reader.disks()[0]
    assert d["by_id"] == "/dev/disk/by-id/" + TOSHIBA_ID
    assert d["by_id_all"] == ["/dev/disk/by-id/" + x for x in (TOSHIBA_ID, TOSHIBA_ID + "_1", TOSHIBA_EUI)]
    assert d["serial"] == "19FA109SK07N" and d["model"] == TOSHIBA_MODEL and d["role"] == "data"
    for alias in ("/dev/disk/by-id/" + TOSHIBA_EUI, TOSHIBA_EUI, TOSHIBA_ID + "_1", "19FA109SK07N", "/dev/nvme0n1"):
        assert reader.resolve(alias) == "nvme0n1", alias
    assert reader.resolve("/dev/disk/by-id/nvme-NOPE") is None and reader.resolve("NOPE") is None
    assert reader.resolve("") is None


def test_hw_facts_and_the_planner_agree_on_the_id(tmp_path):
    root = kingston(tmp_path)
    gathered = by_name(gather(root=root, subset=["disks"], is_root=False)["disks"])
    read = by_name(bd.BlockDevices(root).disks())
    for name in ("sda", "sdb", "nvme0n1"):
        assert gathered[name]["by_id"] == read[name]["by_id"]
    assert gathered["sda"]["by_id"] == "/dev/disk/by-id/ata-KINGSTON_SH103S3240G_50026B722A0B1C2D"
    assert gathered["sda"]["wwn"] == "0x50026b722a0b1c2d"
    assert gathered["nvme0n1"]["by_id"] == "/dev/disk/by-id/nvme-KINGSTON_SKC1000240G_50026B7282A1B2C3"


@pytest.mark.parametrize("links,best", [
    (["nvme-eui.0025388b91b2c3d4", "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001"],
     "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001"),
    (["nvme-nvme.1b36-444c4e564d4530303031-51454d55204e564d65204374726c-00000001", "nvme-QEMU_NVMe_Ctrl_DL1"],
     "nvme-QEMU_NVMe_Ctrl_DL1"),
    (["wwn-0x5000c500a1b2c3d4", "ata-ST4000NM0035-1V4107_ZC1ABCDE"], "ata-ST4000NM0035-1V4107_ZC1ABCDE"),
    (["scsi-35000c500a1b2c3d4", "wwn-0x5000c500a1b2c3d4"], "wwn-0x5000c500a1b2c3d4"),
    (["scsi-35000c500a1b2c3d4", "scsi-SSEAGATE_ST4000NM0025_ZC1ABCDE", "wwn-0x5000c500a1b2c3d4"],
     "scsi-SSEAGATE_ST4000NM0025_ZC1ABCDE"),
    (["nvme-uuid.8c1e5a0e-0000-4000-8000-000000000001", "lvm-pv-uuid-x"], "nvme-uuid.8c1e5a0e-0000-4000-8000-000000000001"),
])
def test_by_id_rank(links, best):
    assert sorted(links, key=bd.by_id_rank)[0] == best
    assert sorted(reversed(links), key=bd.by_id_rank)[0] == best


# ---------------------------------------------------------------- kinds and roles

@pytest.mark.parametrize("name,transport,rot,kind", [
    ("nvme0n1", "nvme", 0, "nvme"), ("sda", "sata", 1, "hdd"), ("sda", "sas", 0, "ssd"),
    ("sda", "sata", None, None), ("vdb", "virtio", 1, None), ("sdc", "usb", 1, "hdd")])
def test_media_kind(name, transport, rot, kind):
    assert bd.media_kind(name, transport, rot) == kind


@pytest.mark.parametrize("disk,role", [
    ({"in_use": {"system": True}, "read_only": True}, "system"),
    ({"read_only": True, "size_bytes": 4 << 40}, "read_only"),
    ({"size_bytes": (1 << 30) - 1}, "small"),
    ({"size_bytes": 1 << 30}, "data"),
    ({"size_bytes": 1 << 40, "removable": True}, "removable"),
    ({"kind": "hdd"}, "data"),   # a declared entry without the gathered keys
])
def test_roles(disk, role):
    assert bd.disk_role(disk) == role
    assert bd.is_data_disk(disk) is (role == "data")
    assert bd.is_data_disk(dict(disk, role="system")) is False


def test_partition_entry_and_unknown_names(tmp_path):
    reader = bd.BlockDevices(kingston(tmp_path))
    p = reader.device(reader.resolve("/dev/sdb1"))
    assert p["kind"] == "partition" and p["in_use"]["mounted"] == ["/home/archive"]
    assert reader.device("sdz") is None and reader.device(None) is None


def test_empty_root(tmp_path):
    assert bd.BlockDevices(str(tmp_path)).disks() == []
    assert bd.read_int(os.path.join(str(tmp_path), "nope")) is None


def test_blkid_exit_2_with_an_error_is_not_blank(tmp_path):
    # real blkid 2.38 on a device it may not open: rc 2 (its "nothing found" code) plus this line
    errors = []

    def run(argv):
        return 2, "", "blkid: error: /dev/nvme0n1: Operation not permitted\n"
    d = bd.BlockDevices(toshiba(tmp_path), run=run, blkid="/sbin/blkid", errors=errors).disks()[0]
    assert d["probe"] is None and "its signatures are unknown" in bd.in_use_reasons(d)[0]
    assert errors == ["blkid -p /dev/nvme0n1 failed (rc=2): blkid: error: /dev/nvme0n1: Operation not permitted"]


def test_live_root_missing_device_node_is_not_blank(monkeypatch):
    # on the live root, blkid -p exits 2 silently for a node that does not exist
    reader = bd.BlockDevices("/", run=lambda argv: (2, "", ""), blkid="/sbin/blkid")
    sigs, probe = reader.signatures("dlrack-no-such-disk", ["dlrack-no-such-disk"])
    assert probe is None and sigs == []
    assert reader.errors == ["blkid -p /dev/dlrack-no-such-disk: no such device node; its signatures are unknown"]


# ---------------------------------------------------------------- details pinned for mutation testing

def test_by_id_rank_full_order():
    links = ["lvm-pv-uuid-abc", "nvme-eui.0025388b91b2c3d4", "scsi-35000c500a1b2c3d4", "wwn-0x5000c500a1b2c3d4",
             "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001_1", "usb-Generic_Flash_123", "ata-ST4000_ZC1",
             "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001"]
    assert sorted(links, key=bd.by_id_rank) == [
        "ata-ST4000_ZC1", "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001", "usb-Generic_Flash_123",
        "nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0R000001_1", "wwn-0x5000c500a1b2c3d4", "scsi-35000c500a1b2c3d4",
        "nvme-eui.0025388b91b2c3d4", "lvm-pv-uuid-abc"]


@pytest.mark.parametrize("name,devpath,transport", [
    ("vda", "/devices/pci0000:00/0000:00:01.0/virtio0/block/vda", "virtio"),
    ("sda", "/devices/pci0000:00/0000:00:03.0/virtio1/host0/target0:0:0/0:0:0:0/block/sda", "scsi"),
    ("sdb", "/devices/pci0000:00/0000:00:1f.2/ata2/host1/target1:0:0/1:0:0:0/block/sdb", "sata"),
    ("sdc", "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/host2/target2:0:0/2:0:0:0/block/sdc", "usb"),
    ("sdd", "/devices/pci0000:3a/0000:3b:00.0/host3/port-3:0/end_device-3:0/target3:0:0/3:0:0:0/block/sdd", "sas"),
    ("sde", "/devices/pci0000:3a/0000:3b:00.0/host3/port-3:1/target3:0:1/block/sde", "sas"),
    ("sdf", "/devices/pci0000:00/0000:00:05.0/target4:0:0/block/sdf", "scsi"),
    ("mmcblk0", "/devices/platform/soc/mmc0/mmc_host/mmc0/mmc0:0001/block/mmcblk0", "unknown"),
])
def test_transport(tmp_path, name, devpath, transport):
    assert bd.transport_of(name, devpath, str(tmp_path)) == transport


def test_in_use_reason_wording():
    assert bd.in_use_reasons({"in_use": {"system": True}, "probe": {}}) == [
        "it is the system disk (holds the root filesystem)"]
    assert bd.in_use_reasons({"in_use": {"partitions": ["sdb1", "sdb2"]}, "probe": {"pttype": "dos"}}) == [
        "has partitions sdb1, sdb2", "has a dos partition table"]
    assert bd.in_use_reasons({"in_use": {}, "probe": {"type": "linux_raid_member"}}) == [
        "is a member of md array ? (UUID ?)"]
    assert bd.in_use_reasons({"in_use": {}, "probe": {"type": "linux_raid_member", "label": "h:d", "uuid": "1:2"}}) == [
        "is a member of md array h:d (UUID 1:2)"]


def test_mount_tables(tmp_path):
    root = kingston(tmp_path)
    write(root, "/dev/mapper/.keep", "")
    # short lines are skipped; an unknown maj:min (btrfs) falls back to the source device
    write(root, "/proc/self/mountinfo", "garbage\n22 1 0:31 / / rw - btrfs /dev/sdb1 rw\n"
                                        "24 22 8:4 / /srv rw,relatime - ext4\n")
    disks = by_name(bd.BlockDevices(root).disks())
    assert disks["sdb"]["in_use"]["mounted"] == ["/"] and disks["sda"]["in_use"]["mounted"] == ["/srv"]
    os.remove(os.path.join(root, "proc/self/mountinfo"))
    write(root, "/proc/self/mounts", "x\n/dev/sdb1 /data xfs rw 0 0\n/dev/mapper/nope /m xfs rw 0 0\n")
    disks = by_name(bd.BlockDevices(root).disks())
    assert disks["sdb"]["in_use"]["mounted"] == ["/data"] and disks["sda"]["in_use"]["mounted"] == []


def test_tiny_and_empty_disks(tmp_path):
    root = lsblk_tree(str(tmp_path), "NAME MAJ:MIN RM SIZE RO TYPE MOUNTPOINTS\nsda 8:0 1 0B 0 disk\n"
                                     "sdb 8:16 0 512B 0 disk\n`-sdbX 8:17 0 0B 0 part\n")
    os.remove(os.path.join(root, "sys/block/sdb/sdbX/partition"))   # a subdir that is not a partition
    (d,) = bd.BlockDevices(root).disks()                              # sda (0 sectors, empty tray) left out
    assert (d["name"], d["size_bytes"], d["role"], d["in_use"]["partitions"]) == ("sdb", 512, "small", [])


def test_resolve_by_serial_attribute_link_suffix_and_mapper(tmp_path):
    root = kingston(tmp_path)
    os.remove(os.path.join(root, "dev/disk/by-id/ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234"))
    lsblk_tree(str(tmp_path / "p"), read(real("lsblk", "stelline-puget-wrx90-nvme-raid.txt")))
    reader = bd.BlockDevices(root)
    assert reader.resolve("WD-WMAM9ABC1234") == "sdb"                      # serial file only
    write(root, "/sys/block/nvme0n1/device/serial", "OTHER\n")
    assert bd.BlockDevices(root).resolve("50026B7282A1B2C3") == "nvme0n1"   # by-id suffix only
    preader = bd.BlockDevices(str(tmp_path / "p"))
    assert preader.resolve("/dev/mapper/ubuntu--vg-ubuntu--lv") == "dm-0"
    assert preader.resolve("/dev/mapper/nope") is None


def test_udev_database_lines_and_signature_dedupe(tmp_path):
    root = toshiba(tmp_path)
    write(root, "/run/udev/data/b259:0", "S:disk/by-id/x\nX:ID_FS_TYPE=ext4\nE:ID_FS_TYPE=zfs_member\n")
    d = bd.BlockDevices(root, run=fake_blkid({"nvme0n1": "TYPE=zfs_member\n"}), blkid="/sbin/blkid").disks()[0]
    assert d["in_use"]["signatures"] == ["nvme0n1:zfs_member"]


def test_wwid_and_vpd_serial(tmp_path):
    root = kingston(tmp_path)
    write(root, "/sys/block/sdb/device/wwid", "t10.ATA     WDC WD800JD\n")
    assert bd.BlockDevices(root).device("sdb")["wwid"] == "t10.ATA     WDC WD800JD"
    vpd = os.path.join(str(tmp_path), "vpd")
    for data, serial in ((b"\x00\x80\x00\x08ZC1ABCDE\x00", "ZC1ABCDE"), (b"\x00\x80\x00\x01Z", "Z"),
                         (b"\x00\x80\x00\x00", None), (b"\x00\x80\x00\x03   ", None)):
        with open(vpd, "wb") as fh:
            fh.write(data)
        assert bd._vpd_serial(vpd) == serial, data
    assert bd._vpd_serial(vpd + ".missing") is None
