"""Unit tests of md_array's decision (create / assemble / nothing / refuse) and its module flow."""
import json
import os

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


def decide(running=None, examined=None, signatures=None, holders=None, allow=(), level=0, members=None, usage=None):
    return m.decide("dlrack-hot", level, NV if members is None else members, running or {}, examined or {}, signatures or {},
                    holders or {}, set(allow), 512, "1.2", usage=usage)


def test_parse_export():
    d = m.parse_export(DETAIL_OUT)
    assert d["MD_LEVEL"] == "raid0" and m.detail_members(d) == NV


def test_create_on_blank_members():
    action, argv, dummy = decide()
    assert action == "create"
    assert argv == ["mdadm", "--create", "/dev/md/dlrack-hot", "--run", "--assume-clean", "--metadata=1.2",
                    "--level=0", "--raid-devices=2", "--name=dlrack-hot", "--chunk=512"] + NV


def test_raid1_has_no_chunk():
    _a, argv, dummy = decide(level=1)
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
    action, _argv, dummy = decide(signatures={NV[1]: {"TYPE": "ext4"}}, allow={NV[1]})
    assert action == "create"


REAL_BOUNDED_RUN = m.bounded_run


@pytest.fixture(autouse=True)
def commands_answer_from_the_fake_module(monkeypatch):
    """The module runs its commands through bounded_run (system/command.py); here each one is
    answered by the test's fake module.run_command instead, so that no test runs mdadm or blkid."""
    monkeypatch.setattr(m, "bounded_run", lambda module, argv, timeout: module.run_command(argv))


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


def run_main(monkeypatch, check_mode, responses, tmp_path, lsblk=LSBLK, devices=None, allow=(), root=None,
             module=None):
    """Run main() with ``module`` (default a FakeModule) built from the parameters; returns it and
    what main() exited with."""
    params = {"name": "dlrack-hot", "level": 0, "devices": list(NV if devices is None else devices), "chunk_kb": 512, "metadata": "1.2",
              "allow_signatures": list(allow)}
    fake = (module or FakeModule)(params, check_mode, list(responses) + [(["blkid"], (2, "", ""))])   # blank: exit 2, silent
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
    responses = [(["mdadm", "--create"], (0, "", "")), (["mdadm", "--detail"], (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path)
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


# --- the decision, pinned exactly ------------------------------------------------------------------

UUID = "0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"


def detail(level_name="raid0", members=None, name="dlrack-vm:dlrack-hot"):
    det = {"MD_LEVEL": level_name, "MD_UUID": UUID, "MD_NAME": name}
    for dev in NV if members is None else members:
        det["MD_DEVICE_dev_%s_DEV" % dev.rsplit("/", 1)[-1]] = dev
    return det


@pytest.mark.parametrize("level", [0, 1, 5, 6, 10])
def test_running_array_of_every_level_is_a_noop(level):
    det = detail("raid%d" % level)
    assert decide(running={"/dev/md127": det}, level=level) == ("none", [], {"md_device": "/dev/md127", "uuid": UUID})


def test_running_array_of_another_level_names_both_levels():
    with pytest.raises(m.MdError) as e:
        decide(running={"/dev/md127": detail("raid10")}, level=5)
    assert str(e.value) == ("array /dev/md/dlrack-hot (/dev/md127) is running as raid10, wanted raid5; "
                            "not changing an existing array")


def test_name_matches_the_name_with_or_without_homehost():
    assert m.name_matches("dlrack-vm:dlrack-hot", "dlrack-hot") is True
    assert m.name_matches("dlrack-hot", "dlrack-hot") is True
    assert m.name_matches("scratch", "dlrack-hot") is False
    assert m.name_matches("dlrack-hot:scratch", "dlrack-hot") is False
    assert m.name_matches("", "") is False
    assert m.name_matches(None, "dlrack-hot") is False


def test_running_array_of_another_name_is_not_ours():
    # an array without homehost, on other disks: this array is still created
    other = detail(name="scratch", members=["/dev/sdb", "/dev/sdc"])
    action, argv, info = decide(running={"/dev/md126": other})
    assert (action, argv[:2], info) == ("create", ["mdadm", "--create"], {})


def test_degraded_running_array_exact_info():
    action, argv, info = decide(running={"/dev/md127": detail(members=NV[:1])})
    assert (action, argv) == ("none", [])
    assert info == {"md_device": "/dev/md127", "uuid": UUID,
                    "warning": "array /dev/md/dlrack-hot is degraded: /dev/nvme1n1 missing"}


def test_running_array_without_members_or_with_extra_ones_refused():
    with pytest.raises(m.MdError, match="running with members , wanted /dev/nvme0n1, /dev/nvme1n1"):
        decide(running={"/dev/md127": detail(members=[])})
    with pytest.raises(m.MdError, match="running with members /dev/nvme0n1, /dev/nvme1n1, /dev/nvme2n1"):
        decide(running={"/dev/md127": detail(members=NV + ["/dev/nvme2n1"])})


def test_members_with_different_uuids_refused():
    ex0 = m.parse_export(EXAMINE_OUT)
    ex1 = dict(ex0, MD_UUID="ffffffff:ffffffff:ffffffff:ffffffff")
    with pytest.raises(m.MdError) as e:
        decide(examined={NV[0]: ex0, NV[1]: ex1})
    assert str(e.value) == ("members of /dev/md/dlrack-hot carry different array UUIDs (%s, "
                            "ffffffff:ffffffff:ffffffff:ffffffff); assemble or clean them by hand" % UUID)


def test_held_member_is_not_assembled():
    ex = m.parse_export(EXAMINE_OUT)
    with pytest.raises(m.MdError) as e:
        decide(examined={NV[0]: ex, NV[1]: ex}, holders={NV[1]: ["md127"]})
    assert str(e.value) == ("/dev/nvme1n1 is held by md127 (an inactive or partly assembled array?); run mdadm --stop "
                            "on it first")


def test_signature_without_label_message():
    with pytest.raises(m.MdError) as e:
        decide(signatures={NV[1]: {"TYPE": "xfs"}})
    assert str(e.value) == "refusing to create /dev/md/dlrack-hot: /dev/nvme1n1 carries a xfs signature. Nothing was changed."


def test_every_problem_member_is_named():
    with pytest.raises(m.MdError) as e:
        decide(signatures={NV[0]: {"PTTYPE": "dos"}, NV[1]: {"TYPE": "ext4", "LABEL": "x"}})
    assert str(e.value) == ("refusing to create /dev/md/dlrack-hot: /dev/nvme0n1 has a dos partition table; "
                            "/dev/nvme1n1 carries a ext4 signature (label x). Nothing was changed.")


def test_held_member_refused_even_when_allowed():
    with pytest.raises(m.MdError, match="nvme0n1 is held by dm-0, dm-1"):
        decide(holders={NV[0]: ["dm-0", "dm-1"]}, allow=NV)


def test_raid1_argv_exact_and_chunk_metadata_passed_through():
    _a, argv, dummy = decide(level=1)
    assert argv == ["mdadm", "--create", "/dev/md/dlrack-hot", "--run", "--assume-clean", "--metadata=1.2",
                    "--level=1", "--raid-devices=2", "--name=dlrack-hot"] + NV
    three = ["/dev/sdc", "/dev/sda", "/dev/sdb"]
    assert m.decide("cold", 5, three, {}, {}, {}, {}, set(), 64, "1.0") == (
        "create", ["mdadm", "--create", "/dev/md/cold", "--run", "--assume-clean", "--metadata=1.0", "--level=5",
                   "--raid-devices=3", "--name=cold", "--chunk=64", "/dev/sda", "/dev/sdb", "/dev/sdc"], {})


def test_conf_line_needs_a_uuid():
    assert m.conf_line("/dev/md/x", None, "x", "1.2") is None
    assert m.conf_line("/dev/md/x", "1:2:3:4", "x", "1.0") == "ARRAY /dev/md/x metadata=1.0 UUID=1:2:3:4"


# --- the commands it runs (Runner over a fake run_command) ----------------------------------------

ARRAYS_LSBLK = """NAME MAJ:MIN RM SIZE RO TYPE MOUNTPOINTS
loop0 7:0 0 1G 1 loop
nvme0n1 259:0 0 1T 0 disk
`-md127 9:127 0 2T 0 raid0
nvme1n1 259:1 0 1T 0 disk
`-md127 9:127 0 2T 0 raid0
sda 8:0 0 1T 0 disk
`-md126 9:126 0 1T 0 raid1
"""


def test_running_arrays_asks_mdadm_about_md_devices_only(tmp_path):
    tree = lsblk_tree(str(tmp_path), ARRAYS_LSBLK)
    fake = FakeModule({}, False, [(["mdadm", "--detail", "--export", "/dev/md127"], (0, DETAIL_OUT, ""))])
    arrays = m.Runner(fake).running_arrays(m.BlockDevices(tree))
    assert fake.calls == [["mdadm", "--detail", "--export", "/dev/md126"],   # rc 1: left out
                          ["mdadm", "--detail", "--export", "/dev/md127"]]
    assert arrays == {"/dev/md127": m.parse_export(DETAIL_OUT)}


def test_examine_reads_a_superblock_only_on_success():
    fake = FakeModule({}, False, [(["mdadm", "--examine", "--export", NV[0]], (0, EXAMINE_OUT, "")),
                                  (["mdadm", "--examine", "--export", NV[1]], (1, EXAMINE_OUT, ""))])
    runner = m.Runner(fake)
    assert runner.examine(NV[0]) == m.parse_export(EXAMINE_OUT)
    assert runner.examine(NV[1]) == {}
    assert fake.calls == [["mdadm", "--examine", "--export", NV[0]], ["mdadm", "--examine", "--export", NV[1]]]


def test_blkid_exit_codes():
    err = "blkid: " + "x" * 300
    fake = FakeModule({}, False, [(["blkid", "-p", "-o", "export", "/dev/a"], (0, "TYPE=xfs\nUUID=1\n", "")),
                                  (["blkid", "-p", "-o", "export", "/dev/b"], (2, "", "")),
                                  (["blkid", "-p", "-o", "export", "/dev/c"], (4, "", err))])
    runner = m.Runner(fake)
    assert runner.blkid("/dev/a") == {"TYPE": "xfs", "UUID": "1"}
    assert runner.blkid("/dev/b") == {}
    with pytest.raises(m.MdError) as e:
        runner.blkid("/dev/c")
    assert str(e.value) == ("blkid -p /dev/c failed (rc=4): %s; cannot tell whether it is blank. Nothing was changed."
                            % err[:200])


def test_run_with_check_rc_reports_the_command():
    fake = FakeModule({}, False, [(["wipefs"], (1, "out only\n", ""))])
    with pytest.raises(m.MdError) as e:
        m.Runner(fake).run(["wipefs", "--all", "/dev/a"], check_rc=True)
    assert str(e.value) == "wipefs --all /dev/a failed (rc=1): out only"
    assert m.Runner(fake).run(["wipefs", "--all", "/dev/a"]) == (1, "out only\n", "")


def _stand_in(tmp_path, name, body):
    tool = tmp_path / "bin" / name
    tool.parent.mkdir(exist_ok=True)
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    return str(tool)


class CommandModule(FakeModule):
    """A module whose run_command really runs the command, as AnsibleModule's does (no time limit),
    with the programs taken from a folder of stand-ins."""

    def __init__(self, bindir):
        FakeModule.__init__(self, {}, False, [])
        self.bindir = bindir

    def get_bin_path(self, name):
        return os.path.join(self.bindir, name)

    def run_command(self, argv, check_rc=False):
        import subprocess
        argv = [self.get_bin_path(argv[0])] + list(argv[1:])
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr


def test_a_hung_mdadm_examine_refuses_in_bounded_time(tmp_path, monkeypatch):
    """mdadm --examine of a member that never answers (a dying disk) is stopped after READ_TIMEOUT_S
    and refuses, naming the command and the limit; it is never taken for "no superblock" ({}),
    which would let the module create an array over the disk. The real stand-in runs."""
    import time
    monkeypatch.setattr(m, "bounded_run", REAL_BOUNDED_RUN)
    monkeypatch.setattr(m, "READ_TIMEOUT_S", 1, raising=False)
    _stand_in(tmp_path, "mdadm", "exec sleep 8")
    fake = CommandModule(str(tmp_path / "bin"))
    started = time.monotonic()
    with pytest.raises(m.MdError) as e:
        m.Runner(fake).examine(NV[0])
    assert time.monotonic() - started < 6
    assert str(e.value).startswith("mdadm --examine --export %s did not answer within 1 s and was killed; "
                                   "cannot tell what the disks hold" % NV[0]), str(e.value)


def test_a_runaway_blkid_output_refuses(tmp_path, monkeypatch):
    """blkid -p printing past OUTPUT_LIMIT is stopped; the member's signatures are not taken from
    the cut-off text."""
    monkeypatch.setattr(m, "bounded_run", REAL_BOUNDED_RUN)
    monkeypatch.setattr(m, "OUTPUT_LIMIT", 4096, raising=False)
    _stand_in(tmp_path, "blkid", "head -c 100000 /dev/zero | tr '\\0' x")
    fake = CommandModule(str(tmp_path / "bin"))
    with pytest.raises(m.MdError, match="printed more than 4 KiB on stdout and was stopped"):
        m.Runner(fake).blkid("/dev/a")


# --- main() with a fake module: the exact result and the exact commands -------------------------

READS = [["mdadm", "--examine", "--export", NV[0]], ["mdadm", "--examine", "--export", NV[1]],
         ["blkid", "-p", "-o", "export", NV[0]], ["blkid", "-p", "-o", "export", NV[1]]]
CREATE = ["mdadm", "--create", "/dev/md/dlrack-hot", "--run", "--assume-clean", "--metadata=1.2", "--level=0",
          "--raid-devices=2", "--name=dlrack-hot", "--chunk=512"] + NV
SETTLE = ["udevadm", "settle", "--timeout=30"]
DETAIL = ["mdadm", "--detail", "--export", "/dev/md/dlrack-hot"]
CONF = "ARRAY /dev/md/dlrack-hot metadata=1.2 UUID=" + UUID
RUNNING_LSBLK = LSBLK.replace("nvme0n1 259:0 0 1T 0 disk\nnvme1n1 259:1 0 1T 0 disk\n",
                              "nvme0n1 259:0 0 1T 0 disk\n`-md127 9:127 0 2T 0 raid0\n"
                              "nvme1n1 259:1 0 1T 0 disk\n`-md127 9:127 0 2T 0 raid0\n")


class ToolsModule(FakeModule):
    """A host where only ``bins`` are installed."""

    def __init__(self, params, check_mode, responses, bins):
        FakeModule.__init__(self, params, check_mode, responses)
        self.bins = bins

    def get_bin_path(self, name):
        return "/sbin/" + name if name in self.bins else None


def test_check_mode_result_and_commands_exact(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, True, [], tmp_path)
    assert kind == "exit"
    assert res == {"changed": True, "action": "create", "argv": CREATE, "device": "/dev/md/dlrack-hot",
                   "md_device": None, "uuid": None, "members": NV,
                   "conf_line": "ARRAY /dev/md/dlrack-hot metadata=1.2 UUID=<assigned-at-creation>"}
    assert fake.calls == READS


def test_real_create_result_and_commands_exact(monkeypatch, tmp_path):
    responses = [(["mdadm", "--create"], (0, "", "")), (DETAIL, (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path)
    assert kind == "exit"
    assert res == {"changed": True, "action": "create", "argv": CREATE, "device": "/dev/md/dlrack-hot",
                   "md_device": "/dev/md/dlrack-hot", "uuid": UUID, "members": NV, "conf_line": CONF}
    assert fake.calls == READS + [CREATE, SETTLE, DETAIL]
    assert fake.warnings == []


def test_real_create_wipes_only_the_allowed_members_first(monkeypatch, tmp_path):
    responses = [(["blkid", "-p", "-o", "export", NV[1]], (0, "TYPE=ext4\n", "")), (["wipefs"], (0, "", "")),
                 (["mdadm", "--create"], (0, "", "")), (DETAIL, (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path, allow=[NV[1]])
    assert kind == "exit" and res["action"] == "create" and res["uuid"] == UUID
    assert fake.calls == READS + [["wipefs", "--all", NV[1]], CREATE, SETTLE, DETAIL]


def test_failing_wipefs_stops_before_the_create(monkeypatch, tmp_path):
    responses = [(["blkid", "-p", "-o", "export", NV[1]], (0, "TYPE=ext4\n", "")),
                 (["wipefs"], (1, "", "wipefs: busy"))]
    fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path, allow=[NV[1]])
    assert kind == "fail"
    assert res["msg"] == "md_array dlrack-hot: wipefs --all /dev/nvme1n1 failed (rc=1): wipefs: busy"
    assert res["changed"] is True and res["action"] == "create"
    assert fake.calls == READS + [["wipefs", "--all", NV[1]]]


def test_real_assemble_wipes_nothing(monkeypatch, tmp_path):
    assemble = ["mdadm", "--assemble", "/dev/md/dlrack-hot", "--uuid=" + UUID] + NV
    responses = [(["mdadm", "--examine"], (0, EXAMINE_OUT, "")), (["mdadm", "--assemble"], (0, "", "")),
                 (DETAIL, (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path, allow=NV)
    assert kind == "exit"
    assert res == {"changed": True, "action": "assemble", "argv": assemble, "device": "/dev/md/dlrack-hot",
                   "md_device": "/dev/md/dlrack-hot", "uuid": UUID, "members": NV, "conf_line": CONF}
    assert fake.calls == READS + [assemble, SETTLE, DETAIL]


def test_check_mode_assemble_knows_the_uuid(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, True, [(["mdadm", "--examine"], (0, EXAMINE_OUT, ""))], tmp_path)
    assert kind == "exit" and res["action"] == "assemble" and res["changed"] is True
    assert (res["uuid"], res["md_device"], res["conf_line"]) == (UUID, None, CONF)
    assert fake.calls == READS


@pytest.mark.parametrize("check_mode", [True, False])
def test_running_array_is_left_alone(monkeypatch, tmp_path, check_mode):
    responses = [(["mdadm", "--detail", "--export", "/dev/md127"], (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_main(monkeypatch, check_mode, responses, tmp_path, lsblk=RUNNING_LSBLK)
    assert kind == "exit"
    assert res == {"changed": False, "action": "none", "argv": [], "device": "/dev/md/dlrack-hot",
                   "md_device": "/dev/md127", "uuid": UUID, "members": NV, "conf_line": CONF}
    assert fake.calls == [["mdadm", "--detail", "--export", "/dev/md127"]] + READS
    assert fake.warnings == []


def test_degraded_running_array_warns_through_the_module(monkeypatch, tmp_path):
    degraded = DETAIL_OUT.replace("MD_DEVICE_dev_nvme1n1_DEV=/dev/nvme1n1\n", "")
    responses = [(["mdadm", "--detail", "--export", "/dev/md127"], (0, degraded, ""))]
    _fake, (kind, res) = run_main(monkeypatch, False, responses, tmp_path, lsblk=RUNNING_LSBLK)
    assert kind == "exit" and res["changed"] is False and res["md_device"] == "/dev/md127"
    assert _fake.warnings == ["array /dev/md/dlrack-hot is degraded: /dev/nvme1n1 missing"]


def run_tools(monkeypatch, tmp_path, bins, responses=(), check_mode=False):
    return run_main(monkeypatch, check_mode, responses, tmp_path,
                    module=lambda params, check, resp: ToolsModule(params, check, resp, bins))


def test_without_mdadm_fails_before_any_command(monkeypatch, tmp_path):
    fake, (kind, res) = run_tools(monkeypatch, tmp_path, ("udevadm", "blkid", "wipefs"))
    assert kind == "fail"
    assert res == {"msg": "mdadm is not installed on dlrack-hot; install the mdadm package", "changed": False,
                   "action": "none", "argv": [], "device": "/dev/md/dlrack-hot", "md_device": None, "uuid": None,
                   "conf_line": None, "members": []}
    assert fake.calls == []


def test_without_udevadm_nothing_is_settled(monkeypatch, tmp_path):
    responses = [(["mdadm", "--create"], (0, "", "")), (DETAIL, (0, DETAIL_OUT, ""))]
    fake, (kind, res) = run_tools(monkeypatch, tmp_path, ("mdadm", "blkid", "wipefs"), responses)
    assert kind == "exit" and res["uuid"] == UUID
    assert fake.calls == READS + [CREATE, DETAIL]


def test_missing_or_repeated_member_fails_with_nothing_run(monkeypatch, tmp_path):
    fake, (kind, res) = run_main(monkeypatch, True, [], tmp_path, devices=[NV[0], NV[1], NV[0]])
    assert kind == "fail" and fake.calls == []
    assert res["msg"] == "md_array dlrack-hot: a device is listed twice: /dev/nvme0n1, /dev/nvme1n1, /dev/nvme0n1"
    monkeypatch.setattr(m.os.path, "exists", lambda p: p != "/dev/nvme9n1")
    params = {"name": "dlrack-hot", "level": 0, "devices": [NV[0], "/dev/nvme9n1"], "chunk_kb": 512,
              "metadata": "1.2", "allow_signatures": []}
    fake = FakeModule(params, True, [])
    monkeypatch.setattr(m, "AnsibleModule", lambda **kw: fake)
    with pytest.raises(SystemExit) as e:
        m.main()
    kind, res = e.value.args[0]
    assert kind == "fail" and fake.calls == []
    assert res["msg"] == "md_array dlrack-hot: member devices do not exist: /dev/nvme9n1"
    assert res["members"] == []


def test_main_reads_the_live_block_devices_by_default(monkeypatch, tmp_path):
    tree = lsblk_tree(str(tmp_path), LSBLK)
    seen = []
    real_reader = m.BlockDevices

    def reader(root):
        seen.append(real_reader(root).block)   # what the module would read on the host
        return real_reader(tree)

    params = {"name": "dlrack-hot", "level": 0, "devices": list(NV), "chunk_kb": 512, "metadata": "1.2",
              "allow_signatures": []}
    fake = FakeModule(params, True, [(["blkid"], (2, "", ""))])
    monkeypatch.setattr(m, "AnsibleModule", lambda **kw: fake)
    monkeypatch.setattr(m, "BlockDevices", reader)
    monkeypatch.setattr(m.os.path, "realpath", lambda p: p)
    monkeypatch.setattr(m.os.path, "exists", lambda p: True)
    with pytest.raises(SystemExit) as e:
        m.main()
    assert e.value.args[0][0] == "exit" and seen == ["/sys/block"]


# --- the argument spec, as the real AnsibleModule applies it ------------------------------------

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:   # ansible-core < 2.19
    import contextlib

    from ansible.module_utils import basic as _basic

    @contextlib.contextmanager
    def patch_module_args(args):
        saved = _basic._ANSIBLE_ARGS
        _basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
        try:
            yield
        finally:
            _basic._ANSIBLE_ARGS = saved


def run_real(monkeypatch, capsys, tmp_path, args, responses=()):
    """main() under the real AnsibleModule (argument parsing, check mode, exit/fail JSON), on a host whose
    commands answer from ``responses`` (blkid: blank) and whose disks are files under tmp_path."""
    from ansible.module_utils.basic import AnsibleModule

    calls = []

    class HostModule(AnsibleModule):
        def get_bin_path(self, arg, required=False, opt_dirs=None):
            return "/sbin/" + arg

        def run_command(self, args, check_rc=False, **kw):   # pylint: disable=arguments-differ
            calls.append(list(args))
            for prefix, resp in list(responses) + [(["blkid"], (2, "", ""))]:
                if args[:len(prefix)] == prefix:
                    return resp
            return (1, "", "")

    monkeypatch.setattr(m, "AnsibleModule", HostModule)
    monkeypatch.setattr(m, "ROOT", lsblk_tree(str(tmp_path / "root"), LSBLK))
    with patch_module_args(args), pytest.raises(SystemExit) as e:
        m.main()
    res = json.loads(capsys.readouterr().out)
    return calls, e.value.code, res


@pytest.fixture(name="disks")
def disks_fixture(tmp_path):
    """Member 'devices': plain files nvme0n1 and nvme1n1 and a by-id link to the second."""
    base = os.path.join(os.path.realpath(str(tmp_path)), "dev")
    os.makedirs(os.path.join(base, "disk", "by-id"))
    for name in ("nvme0n1", "nvme1n1"):
        open(os.path.join(base, name), "w").close()
    os.symlink("../../nvme1n1", os.path.join(base, "disk", "by-id", "nvme-disk2"))
    return base


def test_real_module_defaults_and_check_mode(monkeypatch, capsys, tmp_path, disks):
    members = [disks + "/nvme0n1", disks + "/nvme1n1"]
    calls, rc, res = run_real(monkeypatch, capsys, tmp_path, {
        "name": "dlrack-hot", "level": 0, "devices": [members[0], disks + "/disk/by-id/nvme-disk2"],
        "_ansible_check_mode": True})
    assert rc == 0 and "skipped" not in res and "failed" not in res
    assert res["invocation"]["module_args"] == {
        "name": "dlrack-hot", "level": 0, "devices": [members[0], disks + "/disk/by-id/nvme-disk2"],
        "chunk_kb": 512, "metadata": "1.2", "allow_signatures": []}
    assert (res["changed"], res["action"], res["members"]) == (True, "create", members)
    assert res["argv"] == ["mdadm", "--create", "/dev/md/dlrack-hot", "--run", "--assume-clean", "--metadata=1.2",
                           "--level=0", "--raid-devices=2", "--name=dlrack-hot", "--chunk=512"] + members
    assert all(c[0] == "blkid" or c[:2] == ["mdadm", "--examine"] for c in calls), calls


def test_real_module_converts_and_expands_arguments(monkeypatch, capsys, tmp_path, disks):
    monkeypatch.setenv("DLRACK_DISKS", disks)
    members = [disks + "/nvme0n1", disks + "/nvme1n1"]
    responses = [(["blkid", "-p", "-o", "export", members[1]], (0, "TYPE=ext4\n", ""))]
    calls, rc, res = run_real(monkeypatch, capsys, tmp_path, {
        "name": "cold", "level": "5", "devices": "${DLRACK_DISKS}/nvme1n1,${DLRACK_DISKS}/nvme0n1", "chunk_kb": "64",
        "metadata": 1.0, "allow_signatures": ["${DLRACK_DISKS}/disk/by-id/nvme-disk2"], "_ansible_check_mode": True})
    assert rc == 0 and "failed" not in res, res
    assert res["invocation"]["module_args"] == {
        "name": "cold", "level": 5, "devices": [members[1], members[0]], "chunk_kb": 64, "metadata": "1.0",
        "allow_signatures": [disks + "/disk/by-id/nvme-disk2"]}
    assert res["argv"] == ["mdadm", "--create", "/dev/md/cold", "--run", "--assume-clean", "--metadata=1.0",
                           "--level=5", "--raid-devices=2", "--name=cold", "--chunk=64"] + members
    assert calls.count(["wipefs", "--all", members[1]]) == 0   # check mode


@pytest.mark.parametrize("level", [0, 1, 5, 6, 10])
def test_real_module_accepts_each_level(monkeypatch, capsys, tmp_path, disks, level):
    _calls, rc, res = run_real(monkeypatch, capsys, tmp_path, {
        "name": "x", "level": level, "devices": [disks + "/nvme0n1", disks + "/nvme1n1"], "_ansible_check_mode": True})
    assert rc == 0 and res["action"] == "create" and "--level=%d" % level in res["argv"]


@pytest.mark.parametrize("args, msg", [
    ({"level": 0, "devices": ["/dev/null"]}, "missing required arguments: name"),
    ({"name": "x", "devices": ["/dev/null"]}, "missing required arguments: level"),
    ({"name": "x", "level": 0}, "missing required arguments: devices"),
    ({"name": "x", "level": 2, "devices": ["/dev/null"]}, "value of level must be one of: 0, 1, 5, 6, 10, got: 2"),
    ({"name": "x", "level": 7, "devices": ["/dev/null"]}, "value of level must be one of: 0, 1, 5, 6, 10, got: 7"),
    ({"name": "x", "level": 0, "devices": ["/dev/null"], "chunk_kb": "big"}, "chunk_kb"),
    ({"name": "x", "level": 0, "devices": ["/dev/null"], "spare": 1}, "Unsupported parameters"),
])
def test_real_module_rejects_bad_arguments(monkeypatch, capsys, tmp_path, args, msg):
    calls, rc, res = run_real(monkeypatch, capsys, tmp_path, args)
    assert rc == 1 and res["failed"] is True and msg in res["msg"], res
    assert calls == []
