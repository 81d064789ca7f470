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


# -------------------------------------------------------------------- the mount points on the node (issue 18.7)
import os  # noqa: E402

from ansible_collections.dlrack.node.plugins.module_utils.storage import plan as sp  # noqa: E402

from blocktrees import TOSHIBA_ID, toshiba  # noqa: E402
from testpaths import DATA  # noqa: E402

# the captured container table (tests/data/storage/README.md) plus a data mount in the documented format
CAPTURED = os.path.join(DATA, "storage", "mountinfo-podman-bookworm.txt")
EXTRA = ("200 127 259:7 / /srv/busy rw,relatime - ext4 /dev/nvme9n1 rw\n"
         "201 127 0:70 / /data/with\\040space rw - tmpfs tmpfs rw\n")


def node_tree(tmp_path):
    root = toshiba(tmp_path)
    with open(CAPTURED) as fh:
        write(root, "/proc/self/mountinfo", fh.read() + EXTRA)
    link(root, "/data", "/etc")                        # absolute: starts again at the node's root
    link(root, "/srv/rel", "../etc")
    link(root, "/srv/loop1", "loop2")
    link(root, "/srv/loop2", "loop1")
    os.makedirs(os.path.join(root, "opt", "ml"))
    return root


def test_read_mounts_from_a_captured_table(tmp_path):
    root = node_tree(tmp_path)
    mounts, error = mod.read_mounts(root)
    assert error is None
    targets = [m["target"] for m in mounts]
    assert targets[:4] == ["/", "/proc", "/dev", "/sys"] and "/etc/hosts" in targets
    assert {"target": "/etc/resolv.conf", "fstype": "ext4", "source": "/dev/vda"} in mounts
    assert mounts[-2:] == [{"target": "/srv/busy", "fstype": "ext4", "source": "/dev/nvme9n1"},
                           {"target": "/data/with space", "fstype": "tmpfs", "source": "tmpfs"}]


def test_a_table_too_long_or_missing_is_no_answer(tmp_path, monkeypatch):
    root = node_tree(tmp_path)
    monkeypatch.setattr(mod, "MOUNTINFO_LIMIT", 1 << 10)
    assert mod.read_mounts(root) == (None, "/proc/self/mountinfo is over 0 MiB")
    monkeypatch.setattr(mod, "MOUNTINFO_LIMIT", 8 << 20)
    assert mod.read_mounts(str(tmp_path / "nothing")) == (
        None, "cannot read /proc/self/mountinfo: No such file or directory")


def test_resolve_under_follows_links_as_the_kernel_does(tmp_path):
    root = node_tree(tmp_path)
    assert mod.resolve_under(root, "/data/hot") == "/etc/hot"
    assert mod.resolve_under(root, "/srv/rel/x") == "/etc/x"
    assert mod.resolve_under(root, "/srv/loop1/x") is None
    assert mod.resolve_under(root, "/opt/ml") == "/opt/ml"
    assert mod.resolve_under(root, "/not/there/yet") == "/not/there/yet"
    view = mod.node_view(root, {"hot_mount": "/data/hot", "cold_mount": "relative"})
    assert view["realpath"] == {"/data/hot": "/etc/hot"} and view["mounts_error"] is None


class FakeModule(object):
    def __init__(self, params):
        self.params, self.check_mode, self.calls, self.warnings = params, True, [], []

    def get_bin_path(self, name):
        return "/sbin/" + name

    def run_command(self, argv):
        self.calls.append(list(argv))
        return 2, "", ""          # blkid -p: nothing found

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **kw):
        raise SystemExit(("fail", kw))

    def exit_json(self, **kw):
        raise SystemExit(("exit", kw))


def run_main(monkeypatch, tmp_path, **params):
    p = sp.with_defaults(dict(params, hot_devices=[TOSHIBA_ID], cold_enabled=False))
    p["var_prefix"] = "storage_tiers_"
    fake = FakeModule(p)
    monkeypatch.setattr(mod, "AnsibleModule", lambda **kw: fake)
    monkeypatch.setattr(mod, "bounded_run", fake.run_command, raising=False)
    monkeypatch.setattr(mod, "ROOT", node_tree(tmp_path))
    with pytest.raises(SystemExit) as e:
        mod.main()
    return fake, e.value.args[0]


@pytest.mark.parametrize("mount,why", [
    ("/data/hot", '"/data/hot" resolves to "/etc/hot" (a symbolic link), inside the system directory /etc; choose a '
                  "dedicated path such as /data/hot"),
    ("/srv/busy", '"/srv/busy" is the mount point of "/dev/nvme9n1" ("ext4") now; a tier needs a mount point of its own'),
    ("/srv/loop1/hot", '"/srv/loop1/hot" is a loop of symbolic links'),
    ("/etc/hostname", '"/etc/hostname" is inside the system directory /etc'),
])
def test_main_refuses_where_the_node_shows_the_system(monkeypatch, tmp_path, mount, why):
    fake, (kind, res) = run_main(monkeypatch, tmp_path, hot_mount=mount)
    assert kind == "fail", res
    assert len(res["errors"]) == 1 and res["errors"][0].startswith(
        "%s: storage_tiers_hot_mount: %s" % (mod.socket.gethostname(), why)), res["errors"]
    assert res["msg"].startswith("storage_tiers: refusing to touch any device: ")
    assert all(c[:2] == ["/sbin/blkid", "-p"] for c in fake.calls), fake.calls   # read-only


def test_main_plans_a_dedicated_mount_point(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, tmp_path, hot_mount="/opt/ml/hot")
    assert kind == "exit" and res["changed"] is False, res
    assert res["plan"]["hot"]["filesystems"][0]["mount"] == "/opt/ml/hot"


def test_main_bounds_a_hung_blkid_and_never_takes_it_for_blank(monkeypatch, tmp_path):
    """A blkid -p that never answers (a dying disk, a wedged controller) is stopped by the bounded
    runner after BLKID_TIMEOUT_S: the disk's signatures are unknown (never "blank"), the warning
    names the command and the limit, and the module answers in bounded time. The module's own
    run (the real stand-in blkid is started), not the test's fake."""
    import time
    tool = tmp_path / "bin" / "blkid"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexec sleep 8\n")
    tool.chmod(0o755)
    p = sp.with_defaults(dict(hot_devices=[TOSHIBA_ID], cold_enabled=False, hot_mount="/opt/ml/hot"))
    p["var_prefix"] = "storage_tiers_"
    fake = FakeModule(p)
    fake.get_bin_path = lambda name: str(tool)

    def unbounded(argv):   # what AnsibleModule.run_command does: no time limit
        import subprocess
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    fake.run_command = unbounded
    monkeypatch.setattr(mod, "AnsibleModule", lambda **kw: fake)
    monkeypatch.setattr(mod, "BLKID_TIMEOUT_S", 1, raising=False)
    monkeypatch.setattr(mod, "ROOT", node_tree(tmp_path))
    started = time.monotonic()
    with pytest.raises(SystemExit) as e:
        mod.main()
    assert time.monotonic() - started < 6
    kind, res = e.value.args[0]
    problems = res.get("probe_errors") or fake.warnings
    assert any("did not answer within 1 s and was killed; the signatures of /dev/" in w for w in problems), (kind, res)
    assert [d["probe"] for d in res["disks"] if d["name"] == "nvme0n1"] == [None]   # unknown, not blank
    assert kind == "fail" and "its signatures are unknown (not probed with blkid -p). Nothing was changed." in res["msg"]
