"""Node state of the storage_vm guest after converge, checked the way a person would by hand on the
node (pytest-testinfra over ssh, no Ansible): the md arrays as mdadm shows them, mdadm.conf, the XFS
filesystems, what is mounted where, the fstab lines, the units, the tier directories, the packages.
verify.yml runs this before the data-safety cases (suite_vm.py) change the state:

    DLRACK_VM_RUN=/var/tmp/dlrack-storage-vm python -m pytest -p no:cacheprovider \\
        --hosts='ssh://root@127.0.0.1:22922?controlpersist=300' \\
        --ssh-identity-file=/var/cache/dlrack-vm/id_ed25519 \\
        --ssh-config=molecule/storage_vm/tests/ssh_config molecule/storage_vm/tests/test_node.py

ssh_config names the ssh ControlMaster socket suite_vm.target() uses ($DLRACK_VM_RUN/ssh-%C), so
both share one login: a fresh login costs ~4 s of the TCG guest's CPU. For the same reason every fact
is read by one command (the ``facts`` fixture) and each test only parses its part.

Expected values: the role's defaults (roles/storage_tiers/defaults) with auto selection, as
converge applies them (suite_vm.AUTO: the device timeout for an emulated guest), on the guest's
disks (suite_vm.NV, HDD; the adversarial disks NV_OLD, MD_OLD, PT must be in no array).
"""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import suite_vm  # noqa: E402  (the guest's disks and the converge variables)

HOT, COLD = "/mnt/hot", "/mnt/archive"
MD = {"hot": "/dev/md/dlrack-hot", "cold": "/dev/md/dlrack-cold"}
DIRS = {HOT: [("datasets", "755"), ("checkpoints", "755"), ("scratch", "1777")],
        COLD: [("datasets", "755"), ("weights", "755"), ("logs", "755"), ("results", "755")]}
MDADM_CONF = "/etc/mdadm/mdadm.conf"
DISKS = suite_vm.NV + [suite_vm.NV_OLD] + suite_vm.HDD + [suite_vm.MD_OLD, suite_vm.PT]

# name -> shell command; all run as one ssh command, each followed by a marker line with its rc.
FACTS = {
    "packages": "dpkg-query -W -f '${Package} ${Status}\\n' xfsprogs mdadm",
    "disks": "for l in %s %s %s; do echo \"$l $(readlink -f $l)\"; done" % (" ".join(DISKS), MD["hot"], MD["cold"]),
    "export_hot": "mdadm --detail --export " + MD["hot"],
    "export_cold": "mdadm --detail --export " + MD["cold"],
    "detail_hot": "mdadm --detail " + MD["hot"],
    "detail_cold": "mdadm --detail " + MD["cold"],
    "mdstat": "cat /proc/mdstat",
    "mdadm_conf": "cat " + MDADM_CONF,
    "blkid_hot": "blkid -p -o export " + MD["hot"],
    "blkid_cold": "blkid -p -o export " + MD["cold"],
    "xfs_hot": "xfs_info " + HOT,
    "xfs_cold": "xfs_info " + COLD,
    "mount_hot": "findmnt -rn -o TARGET,SOURCE,FSTYPE,UUID,OPTIONS -M " + HOT,
    "mount_cold": "findmnt -rn -o TARGET,SOURCE,FSTYPE,UUID,OPTIONS -M " + COLD,
    "fstab": "cat /etc/fstab",
    "findmnt_verify": "findmnt --verify",
    "active": "systemctl is-active mdmonitor.service fstrim.timer mnt-hot.mount mnt-archive.mount",
    "enabled": "systemctl is-enabled fstrim.timer",
    "stat_conf": "stat -c '%n|%F|%a|%U|%G' " + MDADM_CONF,
    # %m: the mount point the file lives on
    "stat_dirs": "stat -c '%%n|%%F|%%a|%%U|%%G|%%m' %s" % " ".join(
        "%s/%s" % (mnt, d) for mnt, dirs in DIRS.items() for d, _m in dirs),
    "mtimes": "stat -c '%Y %n' " + MDADM_CONF + " /boot/initrd.img-$(uname -r)",
}
MARK = "@@dlrack-fact@@"


@pytest.fixture(scope="module")
def facts(host):
    """{name: (rc, output)} for every command in FACTS, read with one ssh command."""
    script = "".join("{ %s; } 2>&1; echo \"%s %s rc=$?\"\n" % (cmd, MARK, name) for name, cmd in FACTS.items())
    out = host.run(script)
    assert out.rc == 0, out.stderr
    got, lines = {}, []
    for line in out.stdout.splitlines():
        m = re.match(r"^%s (\w+) rc=(\d+)$" % MARK, line)
        if m:
            got[m.group(1)] = (int(m.group(2)), "\n".join(lines))
            lines = []
        else:
            lines.append(line)
    assert sorted(got) == sorted(FACTS), out.stdout
    return got


def ok(facts, name):
    rc, text = facts[name]
    assert rc == 0, "%s: rc=%d\n%s" % (FACTS[name], rc, text)
    return text


def pairs(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def real(facts):
    return dict(line.split(" ", 1) for line in ok(facts, "disks").splitlines())


def test_packages_installed(facts):
    assert sorted(ok(facts, "packages").splitlines()) == ["mdadm install ok installed",
                                                          "xfsprogs install ok installed"]


@pytest.mark.parametrize("tier,level,disks", [("hot", "raid0", suite_vm.NV), ("cold", "raid6", suite_vm.HDD)])
def test_md_array(facts, tier, level, disks):
    exp = pairs(ok(facts, "export_" + tier))
    members = sorted(v for k, v in exp.items() if k.startswith("MD_DEVICE_") and k.endswith("_DEV"))
    links = real(facts)
    # auto took exactly the free disks of its kind (by stable id), none of the adversarial ones
    assert members == sorted(links[d] for d in disks), exp
    assert (exp["MD_LEVEL"], exp["MD_DEVICES"], exp["MD_METADATA"]) == (level, str(len(disks)), "1.2"), exp
    assert exp["MD_NAME"].split(":", 1)[1] == "dlrack-" + tier, exp
    detail = ok(facts, "detail_" + tier)
    assert re.search(r"(?m)^\s+Chunk Size : 512K$", detail), detail
    assert re.search(r"(?m)^\s+State : (clean|active)\s*$", detail), detail       # not degraded, not resyncing
    assert re.search(r"(?m)^\s+Failed Devices : 0$", detail), detail
    md = os.path.basename(links[MD[tier]])
    assert re.search(r"(?m)^%s : active %s " % (md, level), ok(facts, "mdstat")), ok(facts, "mdstat")


def test_adversarial_disks_in_no_array(facts):
    links = real(facts)
    held = set()
    for tier in MD:
        held.update(v for k, v in pairs(ok(facts, "export_" + tier)).items() if k.endswith("_DEV"))
    for disk in (suite_vm.NV_OLD, suite_vm.MD_OLD, suite_vm.PT):
        assert links[disk] not in held, (disk, held)


def test_mdadm_conf(facts):
    conf = ok(facts, "mdadm_conf").splitlines()
    begin = conf.index("# BEGIN dlrack.node.storage_tiers arrays")
    end = conf.index("# END dlrack.node.storage_tiers arrays")
    uuid = dict((t, pairs(ok(facts, "export_" + t))["MD_UUID"]) for t in MD)
    assert conf[begin + 1:end] == ["ARRAY %s metadata=1.2 UUID=%s" % (MD[t], uuid[t]) for t in ("hot", "cold")], conf
    # exactly one ARRAY line per array in the whole file (no stale copy outside the block)
    for tier in MD:
        assert len([l for l in conf if l.split()[:1] == ["ARRAY"] and "UUID=" + uuid[tier] in l.split()]) == 1, conf
    assert [l for l in conf if re.match(r"MAILADDR\s", l)] == ["MAILADDR root"], conf
    assert not [l for l in conf if re.match(r"PROGRAM\s", l)], conf
    assert ok(facts, "stat_conf") == "%s|regular file|644|root|root" % MDADM_CONF


def test_initramfs_rebuilt_after_mdadm_conf(facts):
    # the arrays assemble at boot from the initramfs' copy of mdadm.conf (update-initramfs -u)
    (conf_mtime, conf), (initrd_mtime, initrd) = [l.split(" ", 1) for l in ok(facts, "mtimes").splitlines()]
    assert conf == MDADM_CONF and initrd.startswith("/boot/initrd.img-")
    assert int(initrd_mtime) >= int(conf_mtime), ok(facts, "mtimes")


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_xfs_aligned_and_labelled(facts, tier):
    blk = pairs(ok(facts, "blkid_" + tier))
    assert (blk["TYPE"], blk["LABEL"]) == ("xfs", "dlrack-" + tier), blk
    # su=512k = 128 blocks of 4k; RAID0 x2 and RAID6 x4 both have 2 data disks -> swidth 256
    info = ok(facts, "xfs_" + tier)
    assert re.search(r"sunit=128\s+swidth=256 blks", info), info


@pytest.mark.parametrize("tier,mnt", [("hot", HOT), ("cold", COLD)])
def test_mounted(facts, tier, mnt):
    rows = [l.split(" ") for l in ok(facts, "mount_" + tier).splitlines()]
    assert len(rows) == 1 and rows[0][0] == mnt, rows                      # one filesystem there, not stacked
    source, fstype, uuid, options = rows[0][1:]
    assert (source, fstype, uuid) == (real(facts)[MD[tier]], "xfs", pairs(ok(facts, "blkid_" + tier))["UUID"]), rows
    assert {"rw", "noatime"} <= set(options.split(",")), options
    assert "discard" not in options.split(","), options                    # fstrim.timer instead


@pytest.mark.parametrize("tier,mnt", [("hot", HOT), ("cold", COLD)])
def test_fstab_line_by_uuid(facts, tier, mnt):
    lines = [l for l in ok(facts, "fstab").splitlines() if l.split()[1:2] == [mnt]]
    uuid = pairs(ok(facts, "blkid_" + tier))["UUID"]
    assert lines == ["UUID=%s %s xfs noatime,nofail,x-systemd.device-timeout=%s 0 0"
                     % (uuid, mnt, suite_vm.DEVICE_TIMEOUT)], ok(facts, "fstab")


def test_findmnt_verify_is_clean(facts):
    ok(facts, "findmnt_verify")


def test_units(facts):
    units = FACTS["active"].split()[2:]
    assert dict(zip(units, ok(facts, "active").splitlines())) == dict((u, "active") for u in units)
    assert ok(facts, "enabled") == "enabled"


def test_tier_directories(facts):
    want = ["%s/%s|directory|%s|root|root|%s" % (mnt, d, mode, mnt) for mnt, dirs in DIRS.items() for d, mode in dirs]
    # the last field (%m) is the mount point the directory lives on: the tier, not the root disk below it
    got = ok(facts, "stat_dirs").splitlines()
    assert got == want, "\n".join(["got:"] + got + ["want:"] + want)
