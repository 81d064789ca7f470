"""Unit tests of the storage-tier planner: selection, refusals, RAID geometry, XFS alignment."""
import copy
import json

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.storage import plan as sp

FREE = {"mounted": [], "holders": [], "partitions": [], "signatures": [], "system": False}


def disk(name, kind, serial, **kw):
    d = {"name": name, "kind": kind, "serial": serial, "path": "/dev/" + name,
         "transport": "nvme" if kind == "nvme" else "sata", "size_bytes": 4 * 10 ** 12,
         "by_id": "/dev/disk/by-id/%s-MODEL_%s" % ("nvme" if kind == "nvme" else "ata", serial),
         "in_use": copy.deepcopy(FREE), "probe": {}}
    d.update(kw)
    return d


def node(n_nvme=8, n_hdd=12):
    disks = [disk("vda", "hdd", "ROOT", transport="virtio", by_id=None,
                  in_use=dict(FREE, mounted=["/"], system=True), probe={"type": "ext4"})]
    disks += [disk("nvme%dn1" % i, "nvme", "NV%02d" % i) for i in range(n_nvme)]
    disks += [disk("sd%s" % chr(ord("a") + i), "hdd", "HD%02d" % i) for i in range(n_hdd)]
    return disks


def cfg(**kw):
    c = {"host": "gpu01", "var_prefix": "storage_tiers_", "hot_devices": "auto", "cold_devices": "auto", "hot_layout": "raid0",
         "cold_level": "raid6", "hot_chunk_kb": 512, "cold_chunk_kb": 512, "hot_mount": "/mnt/hot",
         "cold_mount": "/mnt/archive", "wipe_allowed": [], "safe_mode": True,
         "mount_options": ["noatime"], "device_timeout": "30s"}
    c.update(kw)
    return c


def test_auto_8_nvme_12_hdd():
    plan = sp.plan_storage(node(), cfg())
    hot, cold = plan["hot"], plan["cold"]
    assert hot["md"]["level"] == 0 and len(hot["md"]["devices"]) == 8
    assert hot["filesystems"][0]["alignment"] == {"su_kb": 512, "sw": 8}
    assert hot["filesystems"][0]["mkfs_opts"] == "-L dlrack-hot -d su=512k,sw=8"
    assert cold["md"]["level"] == 6 and len(cold["md"]["devices"]) == 12
    assert cold["filesystems"][0]["mkfs_opts"] == "-L dlrack-cold -d su=512k,sw=10"
    assert cold["filesystems"][0]["mount_opts"] == "noatime,nofail,x-systemd.device-timeout=30s"
    # the rotational virtio system disk is never chosen
    assert all("vda" not in p for p in cold["md"]["devices"])
    assert plan["wipe"] == []


def test_auto_skips_in_use_and_reports_why():
    disks = node(2, 4)
    disks[1]["probe"] = {"type": "ext4", "label": "data"}
    disks[1]["in_use"]["signatures"] = ["ext4"]
    plan = sp.plan_storage(disks, cfg())
    assert len(plan["hot"]["devices"]) == 1 and plan["hot"]["md"] is None
    assert plan["hot"]["filesystems"][0]["device"] == "/dev/nvme1n1"
    assert plan["skipped"][0]["device"].endswith("NV00")
    assert "ext4" in plan["skipped"][0]["reasons"][0]


@pytest.mark.parametrize("level,n,sw", [("raid0", 2, 2), ("raid0", 8, 8), ("raid10", 4, 2), ("raid10", 8, 4),
                                        ("raid5", 3, 2), ("raid6", 4, 2), ("raid6", 12, 10)])
def test_alignment(level, n, sw):
    assert sp.xfs_alignment(level, n, 256) == {"su_kb": 256, "sw": sw}


def test_no_alignment_for_mirror_and_single():
    assert sp.xfs_alignment("raid1", 2, 512) is None
    assert sp.xfs_alignment("single", 1, 512) is None
    assert sp.mkfs_options("dlrack-cold", None) == "-L dlrack-cold"


@pytest.mark.parametrize("level,minimum", [("raid6", 4), ("raid5", 3), ("raid10", 4), ("raid1", 2)])
def test_cold_minimum_devices(level, minimum):
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(0, minimum - 1), cfg(cold_level=level, hot_enabled=False))
    assert "needs at least %d" % minimum in str(e.value)
    plan = sp.plan_storage(node(0, minimum), cfg(cold_level=level, hot_enabled=False))
    assert plan["cold"]["md"]["level"] == sp.MD_LEVELS[level]


def test_single_cold_disk_requires_single_level():
    with pytest.raises(sp.StoragePlanError, match="cold_level: single"):
        sp.plan_storage(node(0, 1), cfg())
    plan = sp.plan_storage(node(0, 1), cfg(cold_level="single"))
    assert plan["cold"]["md"] is None and plan["cold"]["filesystems"][0]["device"] == "/dev/sda"


def test_hot_raid10_needs_four():
    with pytest.raises(sp.StoragePlanError, match="raid10 needs at least 4"):
        sp.plan_storage(node(3, 0), cfg(hot_layout="raid10", cold_enabled=False))


def test_jbod_one_mount_per_device():
    plan = sp.plan_storage(node(3, 0), cfg(hot_layout="jbod"))
    fss = plan["hot"]["filesystems"]
    assert [f["mount"] for f in fss] == ["/mnt/hot/0", "/mnt/hot/1", "/mnt/hot/2"]
    assert [f["label"] for f in fss] == ["dlrack-hot0", "dlrack-hot1", "dlrack-hot2"]
    assert plan["hot"]["md"] is None


def test_explicit_by_id_wwn_serial():
    disks = node(2, 4)
    disks[3]["wwn"] = "0x5000c500a0000001"
    c = cfg(hot_devices=["/dev/disk/by-id/nvme-MODEL_NV01", "NV00"],
            cold_devices=["0x5000c500a0000001", "ata-MODEL_HD01", "HD02", "HD03"])
    plan = sp.plan_storage(disks, c)
    assert plan["hot"]["md"]["devices"] == ["/dev/nvme1n1", "/dev/nvme0n1"]
    assert plan["cold"]["md"]["devices"] == ["/dev/sda", "/dev/sdb", "/dev/sdc", "/dev/sdd"]


def test_kernel_name_refused_when_stable_id_exists():
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(2, 0), cfg(hot_devices=["/dev/nvme0n1"], cold_enabled=False))
    assert "kernel name" in str(e.value) and "/dev/disk/by-id/nvme-MODEL_NV00" in str(e.value)


def test_path_without_stable_id_warns():
    loop = disk("loop3", "hdd", None, by_id=None)
    plan = sp.plan_storage([loop], cfg(hot_devices=["/dev/loop3"], cold_enabled=False))
    assert plan["hot"]["filesystems"][0]["device"] == "/dev/loop3"
    assert any("no stable id" in w for w in plan["warnings"])


def test_nonexistent_and_both_tiers_error_together():
    disks = node(2, 4)
    c = cfg(hot_devices=["NV00", "/dev/disk/by-id/nvme-NOPE"], cold_devices=["NV00", "HD01", "HD02", "HD03"])
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, c)
    msgs = e.value.messages
    assert any("nvme-NOPE does not exist" in m for m in msgs)
    assert any("listed in both" in m and "NV00" in m for m in msgs)


def test_missing_probe_entry_marked_absent():
    absent = {"name": None, "path": "/dev/disk/by-id/wwn-0xdead", "exists": False}
    with pytest.raises(sp.StoragePlanError, match="does not exist"):
        sp.plan_storage([absent], cfg(hot_devices=["/dev/disk/by-id/wwn-0xdead"], cold_enabled=False))


@pytest.mark.parametrize("mutate,phrase", [
    (lambda d: d.update(probe={"type": "ext4", "label": "old", "uuid": "u"}), "carries a ext4 filesystem labelled old"),
    (lambda d: d.update(probe={"pttype": "gpt"}, in_use=dict(FREE, partitions=["sdb1"])), "has partitions sdb1"),
    (lambda d: d.update(probe={"type": "linux_raid_member", "label": "oldhost:data", "uuid": "a:b:c:d"}),
     "is a member of md array oldhost:data"),
    (lambda d: d.update(in_use=dict(FREE, holders=["dm-0"])), "held by dm-0"),
])
def test_in_use_refused_with_fix(mutate, phrase):
    disks = node(0, 4)
    mutate(disks[2])
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_enabled=False,
                                   cold_devices=["HD00", "/dev/disk/by-id/ata-MODEL_HD01", "HD02", "HD03"]))
    (msg,) = e.value.messages
    assert msg.startswith("gpu01: storage_tiers_cold_devices: /dev/disk/by-id/ata-MODEL_HD01 ")
    assert phrase in msg
    assert "add /dev/disk/by-id/ata-MODEL_HD01 to storage_tiers_wipe_allowed" in msg
    assert "set storage_tiers_safe_mode: false" in msg


def test_wipe_needs_both_list_and_safe_mode_off():
    disks = node(0, 4)
    disks[2]["probe"] = {"type": "ext4"}
    c = cfg(hot_enabled=False, cold_devices=["HD00", "ata-MODEL_HD01", "HD02", "HD03"],
            wipe_allowed=["/dev/disk/by-id/ata-MODEL_HD01"])
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, c)
    assert "set storage_tiers_safe_mode: false" in str(e.value)
    assert "add /dev/disk/by-id" not in str(e.value)
    with pytest.raises(sp.StoragePlanError, match="add ata-MODEL_HD01 to storage_tiers_wipe"):
        sp.plan_storage(disks, dict(c, wipe_allowed=[], safe_mode=False))
    plan = sp.plan_storage(disks, dict(c, safe_mode=False))
    assert plan["wipe"] == ["/dev/sdb"]
    assert [d["state"] for d in plan["cold"]["devices"]] == ["free", "wipe", "free", "free"]


def test_wipe_allowed_rejects_kernel_names():
    with pytest.raises(sp.StoragePlanError, match="wipe_allowed: /dev/sdb is a kernel name"):
        sp.plan_storage(node(0, 4), cfg(wipe_allowed=["/dev/sdb"], safe_mode=False))


def test_system_disk_and_mounted_never_used_even_with_wipe():
    disks = node(1, 0)
    disks[0]["by_id"] = "/dev/disk/by-id/virtio-ROOT"
    c = cfg(hot_devices=["/dev/disk/by-id/virtio-ROOT"], cold_enabled=False,
            wipe_allowed=["/dev/disk/by-id/virtio-ROOT"], safe_mode=False)
    with pytest.raises(sp.StoragePlanError, match="system disk is never used"):
        sp.plan_storage(disks, c)
    disks[1]["in_use"]["mounted"] = ["/data"]
    disks[1]["probe"] = {"type": "ext4"}
    c = cfg(hot_devices=["NV00"], cold_enabled=False, wipe_allowed=["NV00"], safe_mode=False)
    with pytest.raises(sp.StoragePlanError, match="mounted at /data; carries a ext4 filesystem. Unmount it"):
        sp.plan_storage(disks, c)


def test_ours_recognised_on_rerun_and_interrupted_run():
    disks = node(2, 4)
    for d in disks[1:3]:
        d["probe"] = {"type": "linux_raid_member", "label": "gpu01:dlrack-hot", "uuid": "1:2:3:4"}
        d["in_use"]["holders"] = ["md127"]
        d["in_use"]["signatures"] = ["linux_raid_member"]
    for d in disks[3:]:   # interrupted: array members written, array not assembled, no fs
        d["probe"] = {"type": "linux_raid_member", "label": "gpu01:dlrack-cold", "uuid": "5:6:7:8"}
    plan = sp.plan_storage(disks, cfg())
    assert [d["state"] for d in plan["hot"]["devices"]] == ["ours", "ours"]
    assert [d["state"] for d in plan["cold"]["devices"]] == ["ours"] * 4
    assert plan["cold"]["md"]["level"] == 6


def test_other_tier_member_refused_when_named():
    disks = node(2, 0)
    disks[1]["probe"] = {"type": "xfs", "label": "dlrack-cold"}
    with pytest.raises(sp.StoragePlanError, match="(the cold tier's)"):
        sp.plan_storage(disks, cfg(hot_devices=["NV00"], cold_enabled=False))


def test_single_ours_mounted_elsewhere_is_refused():
    disks = node(1, 0)
    disks[1]["probe"] = {"type": "xfs", "label": "dlrack-hot"}
    disks[1]["in_use"]["mounted"] = ["/mnt/hot"]
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert plan["hot"]["devices"][0]["state"] == "ours"
    disks[1]["in_use"]["mounted"] = ["/srv"]
    with pytest.raises(sp.StoragePlanError, match="mounted at /srv"):
        sp.plan_storage(disks, cfg(hot_devices=["NV00"], cold_enabled=False))
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))   # auto: skipped, not taken
    assert plan["hot"]["devices"] == [] and "mounted at /srv" in plan["skipped"][0]["reasons"][0]


def test_names_shuffled_between_runs_same_plan_by_id():
    a = node(2, 4)
    b = copy.deepcopy(a)
    # the kernel handed out names in a different order on the next boot
    b[1]["name"], b[2]["name"] = b[2]["name"], b[1]["name"]
    b[1]["path"], b[2]["path"] = b[2]["path"], b[1]["path"]
    c = cfg(hot_devices=["NV00", "NV01"], cold_level="raid6")
    pa, pb = sp.plan_storage(a, c), sp.plan_storage(b, c)
    assert [d["id"] for d in pa["hot"]["devices"]] == [d["id"] for d in pb["hot"]["devices"]]
    assert pa["hot"]["md"]["devices"] == ["/dev/nvme0n1", "/dev/nvme1n1"]
    assert pb["hot"]["md"]["devices"] == ["/dev/nvme1n1", "/dev/nvme0n1"]


def test_duplicate_and_bad_layout():
    with pytest.raises(sp.StoragePlanError, match="listed twice"):
        sp.plan_storage(node(2, 0), cfg(hot_devices=["NV00", "/dev/disk/by-id/nvme-MODEL_NV00"], cold_enabled=False))
    with pytest.raises(sp.StoragePlanError, match="storage_tiers_hot_layout: 'raid7' is not one of raid0, raid10, jbod"):
        sp.plan_storage(node(2, 0), cfg(hot_layout="raid7"))


def test_mount_options():
    assert sp.mount_options(["defaults", "discard", "relatime"], "10s") == "noatime,nofail,x-systemd.device-timeout=10s"
    assert sp.mount_options("noatime,inode64", "1min") == "noatime,inode64,nofail,x-systemd.device-timeout=1min"
    with pytest.raises(sp.StoragePlanError):
        sp.mount_options([], "forever")


def test_md_name_matches():
    assert sp.md_name_matches("gpu01:dlrack-hot", "dlrack-hot")
    assert sp.md_name_matches("dlrack-hot", "dlrack-hot")
    assert not sp.md_name_matches("gpu01:dlrack-hotter", "dlrack-hot")
    assert not sp.md_name_matches(None, "dlrack-hot")


def test_both_tiers_reported_even_when_the_device_is_already_in_the_hot_array():
    disks = node(2, 0)
    for d in disks[1:3]:
        d["probe"] = {"type": "linux_raid_member", "label": "gpu01:dlrack-hot", "uuid": "1:2:3:4"}
        d["in_use"]["holders"] = ["md127"]
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_devices=["NV00", "NV01"], cold_devices=["NV00"], cold_level="single"))
    (msg,) = e.value.messages
    assert msg == ("gpu01: NV00 is listed in both storage_tiers_hot_devices and storage_tiers_cold_devices; "
                   "a disk belongs to one tier only")


# ---------------------------------------------------------------- plans on block-device trees
# Trees from real captures (tests/unit/plugins/module_utils/test_blockdev.py says what each holds and
# what was filled in), read by the same reader the module uses.

from ansible_collections.dlrack.node.plugins.module_utils.storage.blockdev import BlockDevices  # noqa: E402

from blocktrees import TOSHIBA_EUI, TOSHIBA_ID, fake_blkid, h200_tree, kingston, puget, toshiba  # noqa: E402


def read_tree(root, blkid=None):
    return BlockDevices(root, run=fake_blkid(blkid or {}), blkid="/sbin/blkid").disks()


def test_puget_tree_auto_takes_nothing_in_use(tmp_path):
    plan = sp.plan_storage(read_tree(puget(tmp_path), {"nvme0n1": "TYPE=linux_raid_member\nLABEL=puget:0\n"}), cfg())
    assert plan["hot"]["devices"] == [] and plan["cold"]["devices"] == [] and plan["arrays"] == []
    skipped = dict((s["device"], s["reasons"]) for s in plan["skipped"])
    assert skipped["/dev/nvme6n1"] == ["it is the system disk (/boot/efi, /boot, /)"]
    assert skipped["/dev/nvme0n1"] == ["mounted at /mnt/nvme-raid", "held by md127",
                                       "is a member of md array puget:0 (UUID ?)"]
    assert len(skipped) == 9
    assert "gpu01: no device for the hot tier (none free)" in plan["warnings"]


def test_toshiba_free_nvme_named_by_any_alias_planned_under_its_model_serial_id(tmp_path):
    disks = read_tree(toshiba(tmp_path))
    for alias in (TOSHIBA_EUI, "/dev/disk/by-id/" + TOSHIBA_EUI, TOSHIBA_ID + "_1", "19FA109SK07N"):
        plan = sp.plan_storage(disks, cfg(hot_devices=[alias], cold_enabled=False))
        assert plan["hot"]["devices"] == [{"id": "/dev/disk/by-id/" + TOSHIBA_ID, "path": "/dev/nvme0n1",
                                           "name": "nvme0n1", "state": "free"}], alias
    auto = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert auto["hot"]["devices"][0]["id"] == "/dev/disk/by-id/" + TOSHIBA_ID
    assert auto["filesystems"] == [{"device": "/dev/nvme0n1", "label": "dlrack-hot", "mkfs_opts": "-L dlrack-hot",
                                    "mount": "/mnt/hot", "mount_opts": "noatime,nofail,x-systemd.device-timeout=30s",
                                    "alignment": None, "tier": "hot", "wipe": False, "on_md": False}]


@pytest.mark.parametrize("udev,blkid", [({"nvme0n1": {"ID_FS_TYPE": "zfs_member"}}, {}),
                                        ({}, {"nvme0n1": "TYPE=zfs_member\nLABEL=tank\n"})])
def test_zfs_member_is_in_use_never_auto_selected_and_refused_quoting_the_typed_id(tmp_path, udev, blkid):
    disks = read_tree(toshiba(tmp_path, udev=udev), blkid)
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert plan["hot"]["devices"] == [] and plan["filesystems"] == [] and plan["wipe"] == []
    assert plan["skipped"][0]["device"] == "/dev/disk/by-id/" + TOSHIBA_ID
    assert "zfs_member" in plan["skipped"][0]["reasons"][0]
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_devices=[TOSHIBA_EUI], cold_enabled=False))
    (msg,) = e.value.messages
    assert msg.startswith("gpu01: storage_tiers_hot_devices: %s carries " % TOSHIBA_EUI)
    assert "add %s to storage_tiers_wipe_allowed and set storage_tiers_safe_mode: false" % TOSHIBA_EUI in msg


def test_kingston_mounted_hdd_and_system_ssd_refused(tmp_path):
    disks = read_tree(kingston(tmp_path))
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_enabled=False, cold_level="raid1",
                                   cold_devices=["ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234", "wwn-0x50026b722a0b1c2d"],
                                   wipe_allowed=["ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234"], safe_mode=False))
    a, b = e.value.messages
    assert a.startswith("gpu01: storage_tiers_cold_devices: ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234 mounted at "
                        "/home/archive; has partitions sdb1")
    assert a.endswith("Unmount it (and remove it from /etc/fstab) first; then, to re-use it, add "
                      "ata-WDC_WD800JD-00MSA1_WD-WMAM9ABC1234 to storage_tiers_wipe_allowed and set "
                      "storage_tiers_safe_mode: false for that run.")
    assert b == ("gpu01: storage_tiers_cold_devices: wwn-0x50026b722a0b1c2d it is the system disk (/boot/efi, /boot, /). "
                 "The system disk is never used for a storage tier; remove it from the list.")


def test_h200_vm_has_no_data_disk_to_plan(tmp_path):
    disks = read_tree(h200_tree(tmp_path))
    plan = sp.plan_storage(disks, cfg())
    assert plan["hot"]["devices"] == [] and plan["cold"]["devices"] == []
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_enabled=False, cold_level="single", cold_devices=["199048143072"]))
    assert e.value.messages == ["gpu01: storage_tiers_cold_devices: 199048143072 is read-only. A read-only device "
                                "cannot hold a tier; remove it from the list."]
    with pytest.raises(sp.StoragePlanError, match="overlayblk it is the system disk"):
        sp.plan_storage(disks, cfg(hot_enabled=False, cold_level="single", cold_devices=["overlayblk"]))


# ---------------------------------------------------------------- behaviours pinned for mutation testing

def test_wipe_flag_handed_to_the_filesystem_task():
    disks = node(1, 4)
    disks[1]["probe"] = {"type": "ext4", "label": "scratch"}     # the single hot NVMe carries an old ext4
    c = cfg(hot_devices=["NV00"], cold_devices=["HD00", "HD01", "HD02", "HD03"], wipe_allowed=["NV00"], safe_mode=False)
    disks[3]["probe"] = {"type": "xfs", "label": "old"}          # one md member too
    plan = sp.plan_storage(disks, dict(c, wipe_allowed=["NV00", "HD01"]))
    fs = dict((f["tier"], f) for f in plan["filesystems"])
    assert fs["hot"]["wipe"] is True and fs["hot"]["device"] == "/dev/nvme0n1"   # mkfs must force over the ext4
    assert fs["cold"]["wipe"] is False and fs["cold"]["on_md"] is True            # the new md device is blank
    assert plan["arrays"][0]["wipe"] == ["/dev/sdb"] and plan["wipe"] == ["/dev/nvme0n1", "/dev/sdb"]
    assert any("/dev/disk/by-id" not in w and "NV00 will be erased (carries a ext4 filesystem labelled scratch): it "
               "is in storage_tiers_wipe_allowed and safe mode is off" in w for w in plan["warnings"])
    free = sp.plan_storage(node(1, 0), cfg(cold_enabled=False))
    assert free["filesystems"][0]["wipe"] is False and free["wipe"] == []


@pytest.mark.parametrize("level,md,sw", [("raid5", 5, 3), ("raid6", 6, 2), ("raid10", 10, 2), ("raid1", 1, None)])
def test_cold_level_builds_exactly_that_level(level, md, sw):
    plan = sp.plan_storage(node(0, 4), cfg(hot_enabled=False, cold_level=level))
    arr = plan["arrays"][0]
    assert (arr["level"], arr["tier"], arr["name"], arr["device"]) == (md, "cold", "dlrack-cold", "/dev/md/dlrack-cold")
    assert arr["chunk_kb"] == (None if level == "raid1" else 512)
    fs = plan["filesystems"][0]
    assert fs["alignment"] == (None if sw is None else {"su_kb": 512, "sw": sw})
    assert fs["mkfs_opts"] == "-L dlrack-cold" + ("" if sw is None else " -d su=512k,sw=%d" % sw)
    assert plan["cold"]["layout"] == level


def test_hot_layouts_and_chunk():
    plan = sp.plan_storage(node(4, 0), cfg(hot_layout="raid10", hot_chunk_kb=256, cold_enabled=False))
    assert plan["arrays"][0]["level"] == 10 and plan["arrays"][0]["chunk_kb"] == 256
    assert plan["filesystems"][0]["mkfs_opts"] == "-L dlrack-hot -d su=256k,sw=2"
    assert [d["path"] for d in plan["dirs"]] == ["/mnt/hot/datasets", "/mnt/hot/checkpoints", "/mnt/hot/scratch"]


def test_defaults_fill_missing_options():
    plan = sp.plan_storage(node(2, 4), {"host": "n1"})
    assert plan["hot"]["md"]["level"] == 0 and plan["cold"]["md"]["level"] == 6
    assert plan["hot"]["mount"] == "/mnt/hot" and plan["cold"]["mount"] == "/mnt/archive"
    assert [d["path"] for d in plan["dirs"]] == ["/mnt/hot/datasets", "/mnt/hot/checkpoints", "/mnt/hot/scratch",
                                                 "/mnt/archive/datasets", "/mnt/archive/weights", "/mnt/archive/logs",
                                                 "/mnt/archive/results"]
    assert [d["mode"] for d in plan["dirs"]][:3] == ["0755", "0755", "1777"]
    # without a prefix, messages name the module's own options
    with pytest.raises(sp.StoragePlanError, match="^n1: cold_level: raid6 needs at least 4 disks, 1 given"):
        sp.plan_storage(node(0, 1), {"host": "n1", "hot_enabled": False})


def test_unprobed_disk_is_never_auto_selected():
    disks = node(2, 0)
    del disks[1]["probe"]
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert [d["name"] for d in plan["hot"]["devices"]] == ["nvme1n1"]
    assert plan["skipped"][-1]["reasons"] == ["its signatures are unknown (not probed with blkid -p)"]


@pytest.mark.parametrize("change,reason", [
    ({"role": "read_only", "read_only": True}, "is read-only"),
    ({"role": "removable"}, "removable disk, never auto-selected"),
    ({"transport": "virtio"}, "virtio disk, never auto-selected"),
    ({"role": "small"}, "small disk, never auto-selected"),
    ({"transport": "usb"}, "usb disk, never auto-selected"),
])
def test_non_data_disks_never_auto_selected(change, reason):
    disks = node(2, 0)
    disks[1].update(change)
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert [d["name"] for d in plan["hot"]["devices"]] == ["nvme1n1"]
    assert plan["skipped"] == [{"device": "/dev/disk/by-id/nvme-MODEL_NV00", "tier": "hot", "reasons": [reason]}]


def test_read_only_named_explicitly_is_refused():
    disks = node(1, 0)
    disks[1]["read_only"] = True
    with pytest.raises(sp.StoragePlanError, match="NV00 is read-only. A read-only device cannot hold a tier"):
        sp.plan_storage(disks, cfg(hot_devices=["NV00"], cold_enabled=False, safe_mode=False, wipe_allowed=["NV00"]))


def test_partition_named_is_refused():
    part = disk("sdb1", "partition", None, by_id="/dev/disk/by-id/ata-MODEL_HD00-part1")
    with pytest.raises(sp.StoragePlanError, match="is a partition; storage tiers use whole disks. Name the whole disk"):
        sp.plan_storage([part], cfg(hot_devices=["ata-MODEL_HD00-part1"], cold_enabled=False))


def test_jbod_and_single_layout_checks():
    with pytest.raises(sp.StoragePlanError, match="cold_level: single takes exactly one disk, 2 given"):
        sp.plan_storage(node(0, 2), cfg(hot_enabled=False, cold_level="single"))
    plan = sp.plan_storage(node(2, 0), cfg(hot_layout="jbod", cold_enabled=False))
    assert plan["dirs"] == [] and plan["arrays"] == [] and plan["hot"]["layout"] == "jbod"


def test_devices_must_be_auto_or_a_list():
    with pytest.raises(sp.StoragePlanError, match="storage_tiers_cold_devices: must be 'auto' or a list"):
        sp.plan_storage(node(0, 4), cfg(cold_devices="HD00"))


def test_ambiguous_request_and_bad_dirs():
    disks = node(0, 2)
    disks[1]["serial"] = disks[2]["serial"] = "SAME"
    with pytest.raises(sp.StoragePlanError, match="SAME matches 2 disks"):
        sp.plan_storage(disks, cfg(hot_enabled=False, cold_devices=["SAME"], cold_level="raid1"))
    with pytest.raises(sp.StoragePlanError, match="storage_tiers_hot_dirs: path '../etc' must be relative"):
        sp.plan_storage(node(1, 0), cfg(cold_enabled=False, hot_dirs=[{"path": "../etc"}]))


def test_explicit_empty_list_warns():
    plan = sp.plan_storage(node(1, 0), cfg(hot_devices=[], cold_enabled=False))
    assert plan["warnings"] == ["gpu01: no device for the hot tier (empty list)"]
    assert plan["hot"]["enabled"] is False


def test_label_length_limit():
    assert sp.fs_label("hot", 99) == "dlrack-hot99"                 # 12 characters: XFS takes it
    with pytest.raises(sp.StoragePlanError, match="'dlrack-hot100' is longer than 12 characters"):
        sp.fs_label("hot", 100)


def test_safe_mode_is_on_unless_switched_off():
    disks = node(1, 0)
    disks[1]["probe"] = {"type": "ext4"}
    c = {"host": "n1", "hot_devices": ["NV00"], "cold_enabled": False, "wipe_allowed": ["NV00"]}
    with pytest.raises(sp.StoragePlanError, match="To erase it and use it anyway: set safe_mode: false"):
        sp.plan_storage(disks, c)
    assert sp.plan_storage(disks, dict(c, safe_mode=False))["wipe"] == ["/dev/nvme0n1"]


def test_argument_spec_and_defaults():
    spec = sp.argument_spec()
    assert sorted(spec) == sorted(sp.OPTIONS)
    assert spec["cold_level"] == {"type": "str", "default": "raid6", "choices": ["raid6", "raid10", "raid5", "raid1",
                                                                                 "single"]}
    assert spec["safe_mode"] == {"type": "bool", "default": True}
    merged = sp.with_defaults({"hot_mount": None, "host": None, "extra": 1})
    assert merged["hot_mount"] == "/mnt/hot" and merged["host"] is None and merged["extra"] == 1
    assert merged["hot_dirs"] is not sp.OPTIONS["hot_dirs"]["default"]


def test_md_name_and_data_disk_helpers():
    assert not sp.md_name_matches("oldname", "dlrack-hot")
    assert sp.data_disks("raid1", 2) == 1 and sp.data_disks("single", 1) == 1
    assert sp.stable_id({"name": "sdb"}) == "/dev/sdb"
    assert sp.stable_id({"name": "sdb", "wwn": "0x5000c500a0000001"}) == "0x5000c500a0000001"
    assert sp.stable_id({"name": "sdb", "by_id_all": ["/dev/disk/by-id/ata-X_1"]}) == "/dev/disk/by-id/ata-X_1"


def test_our_md_member_mounted_elsewhere_is_not_ours():
    disks = node(2, 0)
    for d in disks[1:3]:
        d["probe"] = {"type": "linux_raid_member", "label": "gpu01:dlrack-hot", "uuid": "1:2:3:4"}
        d["in_use"].update(holders=["md127"], mounted=["/mnt/hot"])
    plan = sp.plan_storage(disks, cfg(cold_enabled=False))
    assert [d["state"] for d in plan["hot"]["devices"]] == ["ours", "ours"]
    for d in disks[1:3]:
        d["in_use"]["mounted"] = ["/srv/data"]
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_devices=["NV00", "NV01"], cold_enabled=False))
    assert e.value.messages[0].startswith("gpu01: storage_tiers_hot_devices: NV00 mounted at /srv/data; held by md127; "
                                          "is a member of md array gpu01:dlrack-hot")


def test_only_the_other_tiers_label_is_called_the_other_tiers():
    disks = node(1, 0)
    disks[1]["probe"] = {"type": "xfs", "label": "old"}
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_devices=["NV00"], cold_enabled=False))
    assert "carries a xfs filesystem labelled old. Nothing was changed" in e.value.messages[0]


def test_every_bad_entry_is_reported_not_just_the_first():
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(0, 4), cfg(wipe_allowed=["/dev/sdb", "/dev/sdc"], safe_mode=False))
    assert [m.split(" is a kernel")[0] for m in e.value.messages] == [
        "gpu01: storage_tiers_wipe_allowed: /dev/sdb", "gpu01: storage_tiers_wipe_allowed: /dev/sdc"]
    disks = node(2, 4)
    disks[6]["probe"] = {"type": "ext4"}
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(hot_devices=["nvme-NOPE", "NV00"], cold_devices=["NV00", "HD00", "HD01", "HD03"]))
    msgs = e.value.messages
    assert len(msgs) == 3, msgs
    assert "nvme-NOPE does not exist" in msgs[0] and "HD03 carries a ext4" in msgs[1] and "listed in both" in msgs[2]


def test_auto_wipes_a_listed_disk_only_with_safe_mode_off():
    disks = node(2, 0)
    disks[1]["probe"] = {"type": "ext4"}
    c = cfg(cold_enabled=False, wipe_allowed=["NV00"])
    plan = sp.plan_storage(disks, dict(c, safe_mode=False))
    assert [(d["name"], d["state"]) for d in plan["hot"]["devices"]] == [("nvme0n1", "wipe"), ("nvme1n1", "free")]
    assert plan["arrays"][0]["wipe"] == ["/dev/nvme0n1"]
    plan = sp.plan_storage(disks, c)
    assert [d["name"] for d in plan["hot"]["devices"]] == ["nvme1n1"] and plan["skipped"][0]["reasons"] == [
        "carries a ext4 filesystem"]


def test_one_disk_listed_in_both_tiers_is_reported_once():
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(1, 0), cfg(hot_devices=["NV00"], cold_devices=["NV00"], cold_level="single"))
    assert e.value.messages == ["gpu01: NV00 is listed in both storage_tiers_hot_devices and storage_tiers_cold_devices;"
                                " a disk belongs to one tier only"]


def test_too_few_devices_message_names_them():
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(0, 3), cfg(hot_enabled=False, cold_level="raid6"))
    assert e.value.messages == ["gpu01: storage_tiers_cold_level: raid6 needs at least 4 devices, 3 given "
                                "(/dev/disk/by-id/ata-MODEL_HD00, /dev/disk/by-id/ata-MODEL_HD01, "
                                "/dev/disk/by-id/ata-MODEL_HD02)"]


def test_device_path_is_kept_and_one_device_is_single():
    mpath = disk("dm-3", "nvme", "MP0", path="/dev/mapper/mpatha", by_id="/dev/disk/by-id/dm-uuid-mpath-3600a0b8")
    plan = sp.plan_storage([mpath], cfg(hot_devices=["/dev/mapper/mpatha"], cold_enabled=False))
    assert plan["hot"]["devices"] == [{"id": "/dev/disk/by-id/dm-uuid-mpath-3600a0b8", "path": "/dev/mapper/mpatha",
                                       "name": "dm-3", "state": "free"}]
    assert plan["hot"]["layout"] == "single" and plan["filesystems"][0]["device"] == "/dev/mapper/mpatha"


# -------------------------------------------------------------------- where a tier mounts (issue 18.7)
def refused(disks, _node=None, **kw):
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(disks, cfg(**kw), *([_node] if _node is not None else []))
    return e.value.messages


@pytest.mark.parametrize("path,why", [
    ("/", '"/" is a system directory; choose a dedicated path such as /data/hot'),
    ("/etc", '"/etc" is a system directory; choose a dedicated path such as /data/hot'),
    ("/var", '"/var" is a system directory; choose a dedicated path such as /data/hot'),
    ("/boot/efi", '"/boot/efi" is a system directory'),
    ("/home", '"/home" is a system directory'),
    ("/usr/local", '"/usr/local" is a system directory'),
    ("/var/lib", '"/var/lib" is a system directory'),
    ("/mnt", '"/mnt" is a system directory'),
    ("/etc/hot", '"/etc/hot" is inside the system directory /etc; choose a dedicated path such as /data/hot'),
    ("/usr/share/data", '"/usr/share/data" is inside the system directory /usr'),
    ("/run/hot", '"/run/hot" is inside the system directory /run'),
    ("/proc/1", '"/proc/1" is inside the system directory /proc'),
    ("/tmp/hot", '"/tmp/hot" is inside the system directory /tmp'),
    ("data/hot", '"data/hot" is a relative path; a mount point is absolute, e.g. /data/hot'),
    ("../hot", '"../hot" is a relative path'),
    ("/mnt/../etc", '"/mnt/../etc" contains \'..\'; write the directory itself, e.g. /data/hot'),
    ("/data/hot/..", '"/data/hot/.." contains \'..\''),
    ("/data//hot", '"/data//hot" is not in normal form; write it as /data/hot'),
    ("/data/hot/", '"/data/hot/" is not in normal form; write it as /data/hot'),
    ("/data/./hot", '"/data/./hot" is not in normal form; write it as /data/hot'),
    ("//etc", '"//etc" is not in normal form; write it as /etc'),
    ("/data/hot\n/dev/sdb /etc", '"/data/hot\\n/dev/sdb /etc" contains a line break; a mount point may contain only '
                                 "letters, digits, '.', '_', '-' and '/' (the POSIX portable filename characters)"),
    ("/data/hot xfs", '"/data/hot xfs" contains whitespace'),
    ("/data/h\tot", '"/data/h\\tot" contains whitespace'),
    ("/data/#hot", '"/data/#hot" contains the character "#"'),
    ("/data/\x1b]52;c;aGk=\x07", '"/data/\\u001b]52;c;aGk=\\u0007" contains a control character "\\u001b"'),
    ("/data/h\\040ot", '"/data/h\\\\040ot" contains the character "\\\\"'),
    ("", '"" is not a path'),
])
def test_a_tier_never_mounts_on_the_system_or_an_odd_path(path, why):
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, hot_mount=path)
    assert len(msgs) == 1 and msgs[0].startswith("gpu01: storage_tiers_hot_mount: " + why), msgs


def test_the_issue_example_word_for_word_and_every_problem_at_once():
    disks = node(1, 1)
    disks[2]["probe"] = {"type": "ext4"}
    msgs = refused(disks, hot_devices=["NV00"], cold_devices=["HD00"], cold_level="single", hot_mount="/var",
                   cold_mount="/etc", mount_options=["noatime", "x#y"], device_timeout="30s\nUUID=1 / xfs")
    assert msgs == [
        'gpu01: storage_tiers_hot_mount: "/var" is a system directory; choose a dedicated path such as /data/hot',
        'gpu01: storage_tiers_cold_mount: "/etc" is a system directory; choose a dedicated path such as /data/archive',
        'gpu01: storage_tiers_mount_options: "x#y" contains the character "#"; a mount option may contain only '
        "letters, digits and . _ : = @ / + - (one option per list item)",
        'gpu01: storage_tiers_device_timeout: "30s\\nUUID=1 / xfs" is not a systemd time span such as 30s',
        "gpu01: storage_tiers_cold_devices: HD00 carries a ext4 filesystem. Nothing was changed. To erase it and use it "
        "anyway: add HD00 to storage_tiers_wipe_allowed and set storage_tiers_safe_mode: false for that run "
        "(everything on it is lost)."]


@pytest.mark.parametrize("opts,why", [
    (["noatime", "nodev\n/dev/sdb /etc xfs defaults 0 0"], '"nodev\\n/dev/sdb /etc xfs defaults 0 0" contains a line break'),
    (["noatime\r"], '"noatime\\r" contains a line break'),
    (["noatime nodev"], '"noatime nodev" contains whitespace'),
    (["context=\"system_u:object_r:a,b\""], 'contains the character "\\""'),
    (["uid=0;reboot"], 'contains the character ";"'),
    (["comment=\\012"], 'contains the character "\\\\"'),
    ("noatime,#x", '"noatime,#x" contains the character "#"'),
])
def test_mount_options_that_would_change_the_fstab_line_are_refused(opts, why):
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, mount_options=opts)
    assert len(msgs) == 1 and msgs[0].startswith("gpu01: storage_tiers_mount_options: ") and why in msgs[0], msgs


@pytest.mark.parametrize("timeout", ["30s\n", "30s\nUUID=x / xfs defaults 0 0", "30 s", "-1s", "30s#"])
def test_a_device_timeout_that_is_not_a_time_span_is_refused(timeout):
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, device_timeout=timeout)
    assert msgs == ["gpu01: storage_tiers_device_timeout: %s is not a systemd time span such as 30s" % json.dumps(timeout)]
    with pytest.raises(sp.StoragePlanError):
        sp.mount_options(["noatime"], timeout)


def test_real_options_and_dedicated_paths_still_plan():
    opts = ["noatime", "logbsize=256k,allocsize=64m", "x-systemd.requires=/dev/disk/by-id/x", "x-systemd.mount-timeout=5min",
            "context=system_u:object_r:container_file_t:s0", "", "uid=0"]
    plan = sp.plan_storage(node(1, 1), cfg(hot_devices=["NV00"], cold_devices=["HD00"], cold_level="single",
                                           hot_mount="/data/hot", cold_mount="/srv/archive", mount_options=opts))
    assert plan["hot"]["filesystems"][0]["mount"] == "/data/hot" and plan["cold"]["mount"] == "/srv/archive"
    assert plan["hot"]["filesystems"][0]["mount_opts"] == (
        "noatime,logbsize=256k,allocsize=64m,x-systemd.requires=/dev/disk/by-id/x,x-systemd.mount-timeout=5min,"
        "context=system_u:object_r:container_file_t:s0,uid=0,nofail,x-systemd.device-timeout=30s")
    for path in ("/var/lib/docker", "/home/data", "/opt/ml", "/mnt/hot", "/scratch", "/data-1/hot_2.x"):
        assert sp.mount_point_problem(path, "hot") is None, path


@pytest.mark.parametrize("hot,cold,option,why", [
    ("/data", "/data", "cold", '"/data" is also storage_tiers_hot_mount; each tier needs a mount point of its own '
                               "(e.g. /data/hot and /data/archive)"),
    ("/data", "/data/archive", "cold", '"/data/archive" is inside storage_tiers_hot_mount "/data"; the tiers\' mount '
                                       "points must not contain each other (e.g. /data/hot and /data/archive)"),
    ("/data/archive/hot", "/data/archive", "hot",
     '"/data/archive/hot" is inside storage_tiers_cold_mount "/data/archive"; the tiers\' mount points must not contain '
     "each other (e.g. /data/hot and /data/archive)"),
])
def test_the_tiers_never_share_or_nest_their_mount_points(hot, cold, option, why):
    msgs = refused(node(1, 1), hot_devices=["NV00"], cold_devices=["HD00"], cold_level="single", hot_mount=hot,
                   cold_mount=cold)
    assert msgs == ["gpu01: storage_tiers_%s_mount: %s" % (option, why)]
    # neighbours that share a prefix are not nested
    assert sp.plan_storage(node(1, 1), cfg(hot_devices=["NV00"], cold_devices=["HD00"], cold_level="single",
                                           hot_mount="/data/hot", cold_mount="/data/hot2"))


def test_a_disabled_tier_s_mount_point_is_not_judged():
    plan = sp.plan_storage(node(1, 0), cfg(hot_devices=["NV00"], cold_enabled=False, cold_mount="/etc",
                                           hot_mount="/data/hot"))
    assert plan["hot"]["mount"] == "/data/hot"
    assert sp.plan_storage(node(1, 0), cfg(hot_devices=["NV00"], cold_enabled=False, cold_mount="/data/hot"))


MOUNTS = [{"target": "/", "source": "/dev/vda1", "fstype": "ext4"},
          {"target": "/data", "source": "/dev/vda3", "fstype": "ext4"},
          {"target": "/srv/nfs", "source": "filer:/export", "fstype": "nfs4"},
          {"target": "/srv/nfs/a", "source": "filer:/a", "fstype": "nfs4"},
          {"target": "/mnt/hot", "source": "/dev/md127", "fstype": "xfs"}]


def view(mounts=None, **real):
    return {"mounts": MOUNTS if mounts is None else mounts, "mounts_error": None, "realpath": real}


def test_where_something_else_is_mounted_now_is_refused():
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, hot_mount="/data", _node=view())
    assert msgs == ['gpu01: storage_tiers_hot_mount: "/data" is the mount point of "/dev/vda3" ("ext4") now; a tier '
                    "needs a mount point of its own: choose a dedicated path such as /data/hot"]
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, hot_mount="/srv", _node=view())
    assert msgs[0].endswith('"/srv" is a system directory; choose a dedicated path such as /data/hot')
    msgs = refused(node(0, 1), cold_devices=["HD00"], hot_enabled=False, cold_level="single", cold_mount="/srv/nfs",
                   _node=view())
    assert msgs == ['gpu01: storage_tiers_cold_mount: "/srv/nfs" is the mount point of "filer:/export" ("nfs4") now; '
                    "a tier needs a mount point of its own: choose a dedicated path such as /data/archive"]


def test_a_link_to_the_system_over_other_mounts_is_refused_and_below_a_data_mount_is_fine():
    msgs = refused(node(0, 1), cold_devices=["HD00"], hot_enabled=False, cold_level="single", cold_mount="/data/x",
                   _node=view(**{"/data/x": "/etc"}))
    assert msgs == ['gpu01: storage_tiers_cold_mount: "/data/x" resolves to "/etc" (a symbolic link), a system '
                    "directory; choose a dedicated path such as /data/archive"]
    msgs = refused(node(0, 1), cold_devices=["HD00"], hot_enabled=False, cold_level="single", cold_mount="/data/x",
                   _node=view(**{"/data/x": "/srv/nfs"}))
    assert msgs == ['gpu01: storage_tiers_cold_mount: "/data/x" ("/srv/nfs") is the mount point of "filer:/export" '
                    '("nfs4") now; a tier needs a mount point of its own: choose a dedicated path such as /data/archive']
    msgs = refused(node(1, 1), hot_devices=["NV00"], cold_devices=["HD00"], cold_level="single", hot_mount="/data/h",
                   cold_mount="/data/c", _node=view(**{"/data/c": "/data/h/c"}))
    assert msgs == ['gpu01: storage_tiers_cold_mount: "/data/c" is inside storage_tiers_hot_mount "/data/h"; the '
                    "tiers' mount points must not contain each other (e.g. /data/hot and /data/archive)"]
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(0, 1), cfg(cold_devices=["HD00"], hot_enabled=False, cold_level="single"),
                        view([{"target": "/mnt/archive/nfs", "source": "filer:/x", "fstype": "nfs4"}]))
    assert e.value.messages == ['gpu01: storage_tiers_cold_mount: "/mnt/archive" holds the mount point '
                                '"/mnt/archive/nfs"; a tier mounted there would hide it: choose a dedicated path such '
                                "as /data/archive"]
    with pytest.raises(sp.StoragePlanError) as e:
        sp.plan_storage(node(0, 1), cfg(cold_devices=["HD00"], hot_enabled=False, cold_level="single",
                                        cold_mount="/srv/nfs0"), view([{"target": "/srv/nfs0/%d" % i, "source": "s",
                                                                        "fstype": "nfs"} for i in range(5)]))
    assert e.value.messages[0].endswith('"/srv/nfs0" holds the mount points "/srv/nfs0/0", "/srv/nfs0/1", "/srv/nfs0/2" '
                                        "and 2 more; a tier mounted there would hide them: choose a dedicated path such "
                                        "as /data/archive")
    plan = sp.plan_storage(node(1, 0), cfg(hot_devices=["NV00"], cold_enabled=False, hot_mount="/data/hot"), view())
    assert plan["hot"]["mount"] == "/data/hot"   # below /data (a mount of the system disk) is where data goes


def test_a_rerun_finds_its_own_filesystem_mounted_there():
    disks = node(2, 0)
    for d in disks[1:3]:
        d["probe"] = {"type": "linux_raid_member", "label": "gpu01:dlrack-hot", "uuid": "1:2:3:4"}
        d["in_use"].update(holders=["md127"], mounted=["/mnt/hot"])
    plan = sp.plan_storage(disks, cfg(cold_enabled=False), view())
    assert [d["state"] for d in plan["hot"]["devices"]] == ["ours", "ours"]
    jbod = node(2, 0)
    for i, d in enumerate(jbod[1:3]):
        d["probe"] = {"type": "xfs", "label": "dlrack-hot%d" % i}
        d["in_use"].update(signatures=["xfs"], mounted=["/mnt/hot/%d" % i])
    mounts = MOUNTS[:4] + [{"target": "/mnt/hot/%d" % i, "source": "/dev/nvme%dn1" % i, "fstype": "xfs"} for i in (0, 1)]
    plan = sp.plan_storage(jbod, cfg(cold_enabled=False, hot_layout="jbod"), view(mounts))
    assert [f["mount"] for f in plan["filesystems"]] == ["/mnt/hot/0", "/mnt/hot/1"]
    # someone else's mount stacked below the tier is still refused
    with pytest.raises(sp.StoragePlanError, match='"/mnt/hot" holds the mount point "/mnt/hot/scratch"'):
        sp.plan_storage(jbod, cfg(cold_enabled=False, hot_layout="jbod"),
                        view(mounts + [{"target": "/mnt/hot/scratch", "source": "tmpfs", "fstype": "tmpfs"}]))


def test_a_tier_without_devices_mounts_nothing_so_its_busy_mount_point_is_no_error():
    # the cold archive is an NFS mount at /mnt/archive and the node has no HDD: nothing is planned there
    plan = sp.plan_storage(node(1, 0), cfg(hot_devices=["NV00"], hot_mount="/data/hot"),
                           view(MOUNTS + [{"target": "/mnt/archive", "source": "filer:/archive", "fstype": "nfs4"}]))
    assert plan["cold"]["devices"] == [] and "gpu01: no device for the cold tier (none free)" in plan["warnings"]


def test_an_unreadable_mount_table_or_a_link_loop_is_refused():
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False,
                   _node={"mounts": None, "mounts_error": "/proc/self/mountinfo is over 8 MiB", "realpath": {}})
    assert msgs == ["gpu01: storage_tiers_hot_mount: the node's mount table (/proc/self/mountinfo) could not be read "
                    "completely (/proc/self/mountinfo is over 8 MiB); nothing is mounted without it"]
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, _node=view(**{"/mnt/hot": None}))
    assert msgs == ['gpu01: storage_tiers_hot_mount: "/mnt/hot" is a loop of symbolic links; choose a dedicated path '
                    "such as /data/hot"]


def test_node_strings_in_messages_are_escaped():
    mounts = [{"target": "/data/hot", "source": "/dev/x\x1b]52;c;aGk=\x07", "fstype": "ext4\n"}]
    msgs = refused(node(1, 0), hot_devices=["NV00"], cold_enabled=False, hot_mount="/data/hot", _node=view(mounts))
    assert "\x1b" not in msgs[0] and "\n" not in msgs[0] and '"/dev/x\\u001b]52;c;aGk=\\u0007" ("ext4\\n")' in msgs[0]


def test_parse_mountinfo_documented_and_escaped_fields():
    text = ("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"   # proc_pid_mountinfo(5)
            "40 27 8:17 / /data/my\\040disk\\012x rw,relatime shared:5 master:2 - xfs /dev/sdb1 rw\n"
            "41 27 0:50 / /run/user/0 rw - tmpfs tmpfs rw\n"
            "garbage\n")
    assert sp.parse_mountinfo(text) == [
        {"target": "/mnt2", "fstype": "ext3", "source": "/dev/root"},
        {"target": "/data/my disk\nx", "fstype": "xfs", "source": "/dev/sdb1"},
        {"target": "/run/user/0", "fstype": "tmpfs", "source": "tmpfs"}]
