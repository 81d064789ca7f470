"""Node state after storage_tiers converged (converge.yml: a single-device hot tier and a single-disk
cold tier on the loop devices of $DLRACK_LOOP_DIR/loops.json), checked the way a person would by
hand on the node (pytest-testinfra over `podman exec`, no Ansible): findmnt, /etc/fstab, blkid -p,
stat, dpkg-query, systemctl. verify.yml runs this first:

    DLRACK_LOOP_DIR=/var/tmp/dlrack-storage-tiers python -m pytest -p no:cacheprovider \
        --hosts=podman://dlrack-storage-tiers molecule/storage_tiers/tests/test_node.py

Everything is read in one `podman exec` (the `node` fixture); the data-safety cases (suite.py) and
idempotence stay on the Ansible side. Expected values: the role's defaults (roles/storage_tiers/
defaults/main.yml) with converge.yml's directories.
"""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiers  # noqa: E402  pylint: disable=wrong-import-position,import-error

HOT_DIRS = [("datasets", "root", "root", "755"), ("checkpoints", "nobody", "nogroup", "750"),
            ("scratch", "root", "root", "1777")]   # converge.yml's storage_tiers_hot_dirs
DIRS = ([("/mnt/hot/" + d[0],) + d[1:] for d in HOT_DIRS]
        + [("/mnt/archive/" + d[0],) + d[1:] for d in tiers.COLD_DIRS])


@pytest.fixture(scope="module")
def loops():
    return tiers.loop_devices()


@pytest.fixture(scope="module")
def node(host, loops):
    commands = tiers.tier_commands([loops["hot"], loops["cold"]], [d[0] for d in DIRS]) + [
        ("packages", "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' xfsprogs mdadm"),
        ("fstrim", "systemctl is-enabled fstrim.timer"),
        ("mdadm_conf", "cat /etc/mdadm/mdadm.conf"),
    ]
    return tiers.read_sections(host, commands)


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_tier_mounted_from_its_device_as_xfs_noatime(node, loops, tier):
    mount_point = tiers.TIERS[tier][0]
    got = tiers.mounts(node["findmnt"][1]).get(mount_point)
    assert got is not None, "%s is not mounted" % mount_point
    assert (got["source"], got["fstype"]) == (loops[tier], "xfs")
    assert tiers.MOUNT_OPTIONS <= got["options"] and "discard" not in got["options"], got["options"]


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_device_is_xfs_with_the_tier_label(node, loops, tier):
    probe = tiers.blkid_export(node["blkid"][1]).get(loops[tier], {})
    assert (probe.get("TYPE"), probe.get("LABEL")) == ("xfs", tiers.TIERS[tier][1]), probe
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", probe.get("UUID", "")), probe


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_fstab_line_by_the_filesystems_uuid(node, loops, tier):
    mount_point = tiers.TIERS[tier][0]
    uuid = tiers.blkid_export(node["blkid"][1])[loops[tier]]["UUID"]
    lines = [f for f in tiers.fstab_lines(node["fstab"][1]) if len(f) > 1 and f[1] == mount_point]
    # exactly one line for the tier, by the UUID blkid reads off the device (never the /dev/loopN path)
    assert lines == [["UUID=" + uuid, mount_point, "xfs", tiers.FSTAB_OPTIONS, "0", "0"]], node["fstab"][1]
    assert not [f for f in tiers.fstab_lines(node["fstab"][1]) if f[0] in (loops[tier], "LABEL=" + tiers.TIERS[tier][1])]


def test_findmnt_verify_passes(node):
    rc, out = node["verify"]
    # "Success, no errors or warnings detected", or "0 parse errors, 0 errors, N warnings" (here: systemd's
    # view of fstab is older than the file, which the role does not reload)
    assert rc == 0 and re.search(r"^Success, no errors|(?<![0-9])0 parse errors, 0 errors,", out, re.M), out


@pytest.mark.parametrize("path,owner,group,mode", DIRS, ids=[d[0] for d in DIRS])
def test_tier_directory(node, path, owner, group, mode):
    got = tiers.stats(node["stat"][1]).get(path)
    assert got is not None, node["stat"][1]
    # on the tier's own filesystem (%m), not on the root filesystem under the mount point
    assert got == (owner, group, mode, "directory", path.rsplit("/", 1)[0])


def test_tools_installed(node):
    assert sorted(node["packages"][1].splitlines()) == ["mdadm ii ", "xfsprogs ii "]


def test_fstrim_timer_enabled(node):
    # enabled (not started: in a container the role only enables it, there is nothing to trim)
    assert node["fstrim"] == (0, "enabled")


def test_no_md_array_recorded_for_single_device_tiers(node):
    rc, conf = node["mdadm_conf"]
    assert rc == 0 and "dlrack.node.storage_tiers arrays" not in conf and not re.search(r"(?m)^ARRAY\s", conf), conf
