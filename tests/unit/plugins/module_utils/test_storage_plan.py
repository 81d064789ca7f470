"""Unit tests of the storage-tier planner: selection, refusals, RAID geometry, XFS alignment."""
import copy

import pytest

from ansible_collections.dlrack.node.plugins.module_utils import storage_plan as sp

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
        sp.plan_storage(disks, cfg(hot_enabled=False, cold_devices=["HD00", "/dev/disk/by-id/ata-MODEL_HD01", "HD02",
                                                                  "HD03"]))
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
