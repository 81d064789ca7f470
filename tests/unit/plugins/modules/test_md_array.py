"""Unit tests of md_array's decision (create / assemble / nothing / refuse) and its module flow."""
import json

import pytest

from ansible_collections.dlrack.node.plugins.modules import md_array as m

from blocktrees import lsblk_tree

NV = ["/dev/nvme0n1", "/dev/nvme1n1"]
DETAIL_OUT = """MD_LEVEL=raid0
MD_DEVICES=2
MD_METADATA=1.2
MD_UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9
MD_DEVNAME=dlrack-hot
MD_NAME=dlrack-vm:dlrack-hot
MD_DEVICE_dev_nvme0n1_ROLE=0
MD_DEVICE_dev_nvme0n1_DEV=/dev/nvme0n1
MD_DEVICE_dev_nvme1n1_ROLE=1
MD_DEVICE_dev_nvme1n1_DEV=/dev/nvme1n1
"""
EXAMINE_OUT = """MD_LEVEL=raid0
MD_DEVICES=2
MD_NAME=dlrack-vm:dlrack-hot
MD_ARRAY_SIZE=2.14 GB
MD_UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9
MD_DEV_UUID=11111111:22222222:33333333:44444444
"""


def decide(running=None, examined=None, signatures=None, holders=None, allow=(), level=0, members=NV, usage=None):
    return m.decide("dlrack-hot", level, members, running or {}, examined or {}, signatures or {},
                    holders or {}, set(allow), 512, "1.2", usage=usage)


def test_parse_export():
    d = m.parse_export(DETAIL_OUT)
    assert d["MD_LEVEL"] == "raid0" and m.detail_members(d) == NV


def test_create_on_blank_members():
    action, argv, _ = decide()
    assert action == "create"
    assert argv == ["mdadm", "--create", "/dev/md/dlrack-hot", "--run", "--assume-clean", "--metadata=1.2",
                    "--level=0", "--raid-devices=2", "--name=dlrack-hot", "--chunk=512"] + NV


def test_raid1_has_no_chunk():
    _a, argv, _ = decide(level=1)
    assert not any(a.startswith("--chunk") for a in argv)


def test_running_and_matching_is_a_noop():
    action, argv, info = decide(running={"/dev/md127": m.parse_export(DETAIL_OUT)})
    assert (action, argv) == ("none", [])
    assert info["uuid"] == "0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9" and info["md_device"] == "/dev/md127"


def test_running_with_other_level_or_members_refused():
    det = m.parse_export(DETAIL_OUT)
    with pytest.raises(m.MdError, match="running as raid0, wanted raid6"):
        decide(running={"/dev/md127": det}, level=6)
    with pytest.raises(m.MdError, match="not changing an existing array"):
        decide(running={"/dev/md127": det}, members=["/dev/nvme0n1", "/dev/nvme2n1"])


def test_degraded_running_array_warns():
    det = m.parse_export(DETAIL_OUT)
    del det["MD_DEVICE_dev_nvme1n1_DEV"]
    action, _argv, info = decide(running={"/dev/md127": det})
    assert action == "none" and "degraded" in info["warning"]


def test_interrupted_run_is_assembled_not_recreated():
    ex = m.parse_export(EXAMINE_OUT)
    action, argv, info = decide(examined={NV[0]: ex, NV[1]: ex})
    assert action == "assemble"
    assert argv == ["mdadm", "--assemble", "/dev/md/dlrack-hot",
                    "--uuid=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"] + NV


def test_partial_superblocks_refused():
    ex = m.parse_export(EXAMINE_OUT)
    with pytest.raises(m.MdError, match="only some members"):
        decide(examined={NV[0]: ex})


def test_foreign_member_filesystem_partition_refused():
    foreign = {"MD_UUID": "9:9:9:9", "MD_NAME": "oldbox:data"}
    with pytest.raises(m.MdError, match="member of another md array oldbox:data"):
        decide(examined={NV[0]: foreign})
    with pytest.raises(m.MdError, match="carries a ext4 signature \\(label scratch\\)"):
        decide(signatures={NV[1]: {"TYPE": "ext4", "LABEL": "scratch"}})
    with pytest.raises(m.MdError, match="has a gpt partition table"):
        decide(signatures={NV[1]: {"PTTYPE": "gpt"}})
    with pytest.raises(m.MdError, match="held by dm-0"):
        decide(holders={NV[0]: ["dm-0"]})


def test_allowed_signatures_pass():
    action, _argv, _ = decide(signatures={NV[1]: {"TYPE": "ext4"}}, allow={NV[1]})
    assert action == "create"


class FakeModule:
    """Just enough of AnsibleModule for main(): records commands, never runs one."""

    def __init__(self, params, check_mode, responses):
        self.params = params
        self.check_mode = check_mode
        self.responses = responses
        self.calls = []
        self.warnings = []

    def get_bin_path(self, name):
        return "/sbin/" + name

    def run_command(self, argv, check_rc=False):
        self.calls.append(list(argv))
        for prefix, resp in self.responses:
            if argv[:len(prefix)] == prefix:
                return resp
        return (1, "", "")

    def warn(self, msg):
        self.warnings.append(msg)

    def exit_json(self, **kw):
        raise SystemExit(("exit", kw))

    def fail_json(self, **kw):
        raise SystemExit(("fail", kw))


LSBLK = """NAME MAJ:MIN RM SIZE RO TYPE MOUNTPOINTS
nvme0n1 259:0 0 1T 0 disk
nvme1n1 259:1 0 1T 0 disk
nvme2n1 259:2 0 1T 0 disk
`-nvme2n1p1 259:3 0 1T 0 part /
"""


def run_main(monkeypatch, check_mode, responses, tmp_path, lsblk=LSBLK, devices=NV, allow=(), root=None):
    params = {"name": "dlrack-hot", "level": 0, "devices": list(devices), "chunk_kb": 512, "metadata": "1.2",
              "allow_signatures": list(allow)}
    fake = FakeModule(params, check_mode, list(responses) + [(["blkid"], (2, "", ""))])   # blank: exit 2, silent
    monkeypatch.setattr(m, "AnsibleModule", lambda **kw: fake)
    monkeypatch.setattr(m, "ROOT", root or lsblk_tree(str(tmp_path), lsblk))
    monkeypatch.setattr(m.os.path, "realpath", lambda p: p)
    monkeypatch.setattr(m.os.path, "exists", lambda p: True)
    with pytest.raises(SystemExit) as e:
        m.main()
    return fake, e.value.args[0]


def test_check_mode_reports_and_runs_only_read_commands(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, True, [], tmp_path)
    assert kind == "exit" and res["changed"] and res["action"] == "create"
    assert all(c[0] in ("blkid",) or c[:2] == ["mdadm", "--examine"] for c in fake.calls), fake.calls


def test_real_run_creates_then_reads_uuid(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, False, [(["mdadm", "--create"], (0, "", "")),
                                                       (["mdadm", "--detail"], (0, DETAIL_OUT, ""))], tmp_path)
    assert kind == "exit" and res["changed"]
    assert ["mdadm", "--create"] == fake.calls[-3][:2]
    assert res["conf_line"] == "ARRAY /dev/md/dlrack-hot metadata=1.2 UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"
    json.dumps(res)


def test_create_failure_is_reported(monkeypatch, tmp_path):
    _fake, (kind, res) = run_main(monkeypatch, False, [(["mdadm", "--create"], (1, "", "mdadm: no md support"))], tmp_path)
    assert kind == "fail" and "no md support" in res["msg"]


def test_system_disk_or_mounted_member_refused_even_when_allowed():
    usage = {NV[0]: {"system": True, "mounted": ["/", "/boot"], "holders": []}}
    with pytest.raises(m.MdError, match=r"/dev/nvme0n1 is the system disk \(/, /boot\). Nothing was changed"):
        decide(usage=usage, allow=NV)
    usage = {NV[1]: {"system": False, "mounted": ["/srv"], "holders": ["md5"]}}
    with pytest.raises(m.MdError, match="/dev/nvme1n1 is mounted at /srv"):
        decide(usage=usage, allow=NV)
    # mounted through this very array (a rerun): fine
    usage = dict((n, {"system": False, "mounted": ["/mnt/hot"], "holders": ["md127"]}) for n in NV)
    det = m.parse_export(DETAIL_OUT)
    assert decide(usage=usage, running={"/dev/md127": det})[0] == "none"


def test_main_reads_holders_and_mounts_from_the_tree(monkeypatch, tmp_path):
    lsblk = LSBLK.replace("nvme1n1 259:1 0 1T 0 disk\n", "nvme1n1 259:1 0 1T 0 disk\n`-md5 9:5 0 1T 0 raid1 /srv\n")
    plain = lsblk_tree(str(tmp_path / "plain"), LSBLK)
    _fake, (kind, res) = run_main(monkeypatch, True, [], tmp_path, lsblk=lsblk, allow=NV)
    assert kind == "fail" and res["msg"] == ("md_array dlrack-hot: refusing to touch /dev/md/dlrack-hot: /dev/nvme1n1 "
                                             "is mounted at /srv. Nothing was changed.")
    _fake, (kind, res) = run_main(monkeypatch, True, [], None, root=plain, devices=[NV[0], "/dev/nvme2n1"], allow=NV)
    assert kind == "fail" and "/dev/nvme2n1 is the system disk (/)" in res["msg"]


def test_blkid_that_cannot_read_a_member_refuses(monkeypatch, tmp_path):
    perm = (2, "", "blkid: error: /dev/nvme1n1: Operation not permitted")
    fake, (kind, res) = run_main(monkeypatch, False, [(["blkid", "-p", "-o", "export", NV[1]], perm)], tmp_path)
    assert kind == "fail" and "blkid -p /dev/nvme1n1 failed (rc=2)" in res["msg"] and "Nothing was changed" in res["msg"]
    assert not any(c[:2] == ["mdadm", "--create"] or c[0] == "wipefs" for c in fake.calls), fake.calls
