"""Node state after playbooks/site.yml (storage_tiers, ecc_monitor, gpu_affinity with the scenario's
host_vars in molecule.yml), checked the way a person would by hand on the node (pytest-testinfra
over `podman exec`, as root, no Ansible): findmnt, /etc/fstab, blkid -p, stat, dpkg-query,
systemctl, the installed files against the collection's, the launcher and the helper run as a
user would, sudo for the login user. verify.yml runs this first, before its drift checks change
the node:

    DLRACK_LOOP_DIR=/var/tmp/dlrack-site python -m pytest -p no:cacheprovider \
        --hosts=podman://dlrack-site molecule/site/tests/test_node.py

Everything is read in one `podman exec` (the `node` fixture). Expected values: the roles' defaults
with the scenario's host_vars. The site report, the login user Ansible uses and the drift runs stay
in verify.yml (they test Ansible and the controller's reports).
"""
import hashlib
import json
import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "molecule", "storage_tiers", "tests"))
import tiers  # noqa: E402  pylint: disable=wrong-import-position,import-error

HOT_DIRS = [("datasets", "root", "root", "755"), ("checkpoints", "root", "root", "755"),
            ("scratch", "root", "root", "1777")]   # storage_tiers' defaults
DIRS = ([("/mnt/hot/" + d[0],) + d[1:] for d in HOT_DIRS]
        + [("/mnt/archive/" + d[0],) + d[1:] for d in tiers.COLD_DIRS])

TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
COLLECTOR = "/usr/local/bin/dlrack-ecc-collector"
LAUNCHER = "/usr/local/bin/dlrack-gpu-bind"
LIB = "/usr/local/lib/dlrack/python"
PKG = LIB + "/ansible_collections/dlrack/node/plugins/module_utils/"
PLAN = "/etc/dlrack/gpu-affinity.json"
UNITS = ["rasdaemon.service", "dlrack-ecc-collector.timer", "dlrack-ecc-collector.service", "fstrim.timer"]
PACKAGES = ["xfsprogs", "mdadm", "rasdaemon", "edac-utils", "numactl"]
# The declared GPU of molecule.yml (gpu_affinity_hw): one socket of 2 cores (CPUs 0-1), one reserved.
GPU_UUID = "GPU-11111111-0000-0000-0000-000000000000"


def node_code_files():
    """The module_utils files ecc_monitor and gpu_affinity install (their vars/main.yml lists)."""
    files = set()
    for role, var in (("ecc_monitor", "__ecc_monitor_module_utils"), ("gpu_affinity", "__gpu_affinity_module_utils")):
        with open(os.path.join(ROOT, "roles", role, "vars", "main.yml"), encoding="utf-8") as f:
            files.update(yaml.safe_load(f)[var])
    return sorted(files)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# Installed from the collection, byte for byte: node path -> the checkout's file.
INSTALLED = {PKG + rel: os.path.join(ROOT, "plugins", "module_utils", rel) for rel in node_code_files()}
INSTALLED[LIB + "/dlrack_affinity.py"] = os.path.join(ROOT, "roles", "gpu_affinity", "files", "dlrack_affinity.py")
FILES = [  # path, owner, group, mode
    ("/etc/systemd/system/dlrack-ecc-collector.timer", "root", "root", "644"),
    ("/etc/systemd/system/dlrack-ecc-collector.service", "root", "root", "644"),
    (COLLECTOR, "root", "root", "755"),
    (LAUNCHER, "root", "root", "755"),
    (PLAN, "root", "root", "644"),
    ("/etc/dlrack", "root", "root", "755"),
    (TEXTFILE_DIR, "root", "root", "755"),
    ("/etc/sudoers.d/dlrack", "root", "root", "440"),
] + [(path, "root", "root", "644") for path in sorted(INSTALLED)]


@pytest.fixture(scope="module")
def loops():
    return tiers.loop_devices()


@pytest.fixture(scope="module")
def node(host, loops):
    stat_paths = [d[0] for d in DIRS] + [f[0] for f in FILES]
    commands = tiers.tier_commands([loops["hot"], loops["cold"]], stat_paths) + [
        ("packages", "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' %s" % " ".join(PACKAGES)),
        ("units", "systemctl show -p Id -p UnitFileState -p ActiveState -p Result -p ExecMainStatus %s" % " ".join(UNITS)),
        ("virt", "systemd-detect-virt"),
        ("timer_file", "cat /etc/systemd/system/dlrack-ecc-collector.timer"),
        ("service_file", "cat /etc/systemd/system/dlrack-ecc-collector.service"),
        ("textfile", "ls -A %s | tr '\\n' ' ' && echo && cat %s/dlrack_ecc.prom" % (TEXTFILE_DIR, TEXTFILE_DIR)),
        ("modules_load", "ls -A /etc/modules-load.d/"),
        ("sha256", "sha256sum %s" % " ".join(sorted(INSTALLED))),
        ("plan", "cat " + PLAN),
        # as a user would: the launcher shows GPU 0's binding; the system python imports the helper (.pth)
        ("bind", "%s --gpu 0 --print -- true" % LAUNCHER),
        ("import", "cd / && python3 -c 'import dlrack_affinity; print(dlrack_affinity.__name__)'"),
        ("gres", "ls /etc/slurm/gres.d/dlrack-gpu-affinity.conf"),
        ("sudoers", "cat /etc/sudoers.d/dlrack && visudo -c -q"),
        ("login", "getent passwd dlrack | cut -d: -f3,7 && su -s /bin/sh dlrack -c 'id -un; sudo -n id -u'"),
    ]
    return tiers.read_sections(host, commands)


# --- storage_tiers ---------------------------------------------------------------------------
@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_tier_mounted_with_its_fstab_line(node, loops, tier):
    mount_point, label = tiers.TIERS[tier]
    got = tiers.mounts(node["findmnt"][1]).get(mount_point)
    assert got is not None, "%s is not mounted" % mount_point
    assert (got["source"], got["fstype"]) == (loops[tier], "xfs")
    assert tiers.MOUNT_OPTIONS <= got["options"] and "discard" not in got["options"], got["options"]
    probe = tiers.blkid_export(node["blkid"][1]).get(loops[tier], {})
    assert (probe.get("TYPE"), probe.get("LABEL")) == ("xfs", label), probe
    lines = [f for f in tiers.fstab_lines(node["fstab"][1]) if len(f) > 1 and f[1] == mount_point]
    assert lines == [["UUID=" + probe["UUID"], mount_point, "xfs", tiers.FSTAB_OPTIONS, "0", "0"]], node["fstab"][1]


def test_findmnt_verify_passes(node):
    rc, out = node["verify"]
    assert rc == 0 and (out.startswith("Success, no errors") or "\n0 parse errors, 0 errors," in "\n" + out), out


@pytest.mark.parametrize("path,owner,group,mode", DIRS, ids=[d[0] for d in DIRS])
def test_tier_directory(node, path, owner, group, mode):
    got = tiers.stats(node["stat"][1]).get(path)
    assert got == (owner, group, mode, "directory", path.rsplit("/", 1)[0]), node["stat"][1]


# --- packages and units ----------------------------------------------------------------------
def test_packages_installed(node):
    assert sorted(node["packages"][1].splitlines()) == sorted("%s ii " % p for p in PACKAGES)


def units(text):
    """{Id: {property: value}} from `systemctl show -p ... UNIT...` (one block per unit)."""
    out = {}
    for block in text.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        out[props.get("Id")] = props
    return out


@pytest.mark.parametrize("unit,enabled,active", [
    ("rasdaemon.service", "enabled", "active"),
    ("dlrack-ecc-collector.timer", "enabled", "active"),
    ("fstrim.timer", "enabled", None),   # only enabled in a container (nothing to trim)
])
def test_unit_enabled(node, unit, enabled, active):
    props = units(node["units"][1])[unit]
    assert props["UnitFileState"] == enabled, props
    if active:
        assert props["ActiveState"] == active, props


def test_collector_ran_and_wrote_its_textfile(node):
    props = units(node["units"][1])["dlrack-ecc-collector.service"]
    assert (props["Result"], props["ExecMainStatus"]) == ("success", "0"), props
    rc, out = node["textfile"]
    listing, prom = out.split("\n", 1)
    # node_exporter reads *.prom: only the finished file (the collector writes .dlrack_ecc.prom.XXXX, then
    # renames it; the timer may be running it right now, so a temporary file may be there for a moment)
    assert rc == 0 and [n for n in listing.split() if n.endswith(".prom")] == ["dlrack_ecc.prom"], out
    assert "dlrack_edac_supported 0" in prom.splitlines()       # no EDAC in a container: unknown, not healthy


def test_collector_units(node):
    timer = node["timer_file"][1].splitlines()
    assert "OnUnitActiveSec=1min" in timer and "WantedBy=timers.target" in timer
    service = node["service_file"][1].splitlines()
    virt = node["virt"][1].strip()
    assert virt == "podman"
    assert ("ExecStart=%s --textfile-dir %s --name dlrack_ecc.prom --budget-24h 9 --virtualization %s"
            % (COLLECTOR, TEXTFILE_DIR, virt)) in service
    assert "ReadWritePaths=" + TEXTFILE_DIR in service


def test_no_edac_module_forced_on_the_container(node):
    assert not [n for n in node["modules_load"][1].split() if "edac" in n.lower()]


# --- files -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path,owner,group,mode", FILES, ids=[f[0] for f in FILES])
def test_installed_file_owner_and_mode(node, path, owner, group, mode):
    got = tiers.stats(node["stat"][1]).get(path)
    assert got is not None, "%s is missing: %s" % (path, node["stat"][1])
    assert got[:3] == (owner, group, mode)


def test_node_code_is_the_collections(node):
    rc, out = node["sha256"]
    assert rc == 0, out
    got = {path: digest for digest, path in (line.split(None, 1) for line in out.splitlines())}
    assert got == {path: sha256(src) for path, src in INSTALLED.items()}


# --- gpu_affinity ----------------------------------------------------------------------------
def test_affinity_plan(node):
    plan = json.loads(node["plan"][1])
    # CPU 0 (the socket's first core) reserved for the system, GPU 0 gets CPU 1 and NUMA node 0's memory
    assert (plan.get("reserved_cpus"), plan.get("warnings")) == ("0", []), plan
    assert [(g["index"], g["uuid"], g["cpus"], g["mems"]) for g in plan.get("gpus", [])] == [(0, GPU_UUID, "1", "0")], plan


def test_launcher_binds_gpu0_to_its_cpus(node):
    rc, out = node["bind"]
    assert rc == 0, out
    binding = json.loads(out)
    # numactl is installed (gpu_affinity_install_numactl): CPUs and memory, not CPUs only
    assert (binding.get("cpus"), binding.get("mems"), binding.get("method")) == ("1", "0", "numactl"), binding
    assert binding["exec"] == ["/usr/bin/numactl", "--physcpubind=1", "--preferred=0", "--", "true"], binding


def test_system_python_imports_the_helper(node):
    assert node["import"] == (0, "ansible_collections.dlrack.node.plugins.module_utils.programs.gpu_bind")


def test_no_slurm_gres_fragment(node):
    # gpu_affinity_slurm_gres is false: nothing is written for Slurm
    rc, out = node["gres"]
    assert rc != 0 and "No such file or directory" in out, out


# --- the login user ----------------------------------------------------------------------------
def test_login_user_has_passwordless_sudo(node):
    rc, out = node["sudoers"]
    assert rc == 0 and out.splitlines() == ["dlrack ALL=(ALL) NOPASSWD: ALL"], out   # visudo -c -q: valid
    rc, out = node["login"]
    uid_shell, name, sudo_uid = out.splitlines()
    assert rc == 0 and uid_shell.split(":")[1] == "/bin/bash" and uid_shell.split(":")[0] != "0", out
    assert (name, sudo_uid) == ("dlrack", "0"), out
