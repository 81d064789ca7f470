"""gather() on broken trees (issue 9): garbage, unreadable files and absurd values become lines
in ``errors`` and nulls, never a failed module or silently dropped GPUs; NVLink state from one
``nvidia-smi nvlink -s`` (issue 11.5) on the real captures."""
import errno
import os
import shutil
import tracemalloc

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.hw import gather as gather_mod
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import nvidia as nvidia_seam
from ansible_collections.dlrack.node.plugins.module_utils.hw import hostfs
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather, wants_nvlink_status
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import check_hw

from realdata import read, real
from testpaths import sysfs_tree

ESC = sysfs_tree("esc8000a-e12")                               # 4x RTX 6000 Ada, 2x EPYC 9374F
DUAL = sysfs_tree("dual-2070-x8")                             # 2x RTX 2070 at x8
ESC_BUSES = ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]


def no_tools(argv):
    return 127, "", "%s: not found" % argv[0]


@pytest.fixture
def esc(tmp_path):
    """A writable copy of the esc8000a-e12 tree (links kept as links)."""
    root = tmp_path / "root"
    shutil.copytree(ESC, str(root), symlinks=True)
    return root


def pci(root, bus, name):
    return root / "sys" / "bus" / "pci" / "devices" / bus / name


def replace(path, text):
    """Write through a sysfs link target, or replace the file."""
    target = os.path.realpath(str(path))
    with open(target, "w") as handle:
        handle.write(text)


# --------------------------------------------------------------------------------------------
# /proc/cpuinfo

@pytest.mark.parametrize("junk", [
    "vendor_id\t: GenuineIntel\ncpu family\t: \u00b2\nmodel\t\t: \u0663\nstepping\t: 9\n",   # non-ASCII digits
    "vendor_id\t: GenuineIntel\ncpu family\t: 99999999999999999999999999\nmodel\t\t: 6\n",
    "\x00\xff\xfe garbage without colons \x1b[31m\n" * 1000,
    "model name\t: " + "A" * 200000 + "\n",
])
def test_cpuinfo_garbage_lands_in_errors(esc, junk):
    (esc / "proc" / "cpuinfo").write_bytes(junk.encode("utf-8", "surrogateescape"))
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    cpu = d["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["threads"]) == (2, 64, 64)   # the rest still gathered
    assert cpu["family"] is None or cpu["family"] == 6
    if "\u00b2" in junk:
        assert cpu["family"] is None and cpu["model_id"] is None and cpu["stepping"] == 9
        assert "/proc/cpuinfo: cpu family '\u00b2' is not a number; left null" in d["errors"]
        assert "/proc/cpuinfo: model '\u0663' is not a number; left null" in d["errors"]
    if "9999" in junk:
        assert [e for e in d["errors"] if e.startswith("/proc/cpuinfo: cpu family '9999")]
    assert len(d["gpus"]) == 4
    check_hw(d)


def test_cpuinfo_reader_failure_keeps_the_other_sections(esc, monkeypatch):
    def broken(text):
        raise RuntimeError("simulated parser bug")
    monkeypatch.setattr(gather_mod, "parse_cpuinfo", lambda text=None: broken(text) if text else
                        hostfs.parse_cpuinfo(None))
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    assert "/proc/cpuinfo: unexpected RuntimeError: simulated parser bug" in d["errors"]
    assert d["cpu"]["model"] is None and d["cpu"]["cores"] == 64 and len(d["gpus"]) == 4


# --------------------------------------------------------------------------------------------
# unreadable files (what an unprivileged run meets)

@pytest.fixture
def deny(monkeypatch):
    """Make reads of paths ending in one of the given suffixes fail with EACCES, as for a
    non-root user (tests may run as root, where chmod would not stop the read)."""
    denied = []
    real_open = open

    def fake_open(path, *args, **kwargs):
        if any(str(path).endswith(s) for s in denied):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(hostfs, "open", fake_open, raising=False)
    return denied


def test_unreadable_gpu_files_are_listed_and_no_gpu_is_dropped(esc, deny):
    deny.extend(["0000:41:00.0/vendor", "0000:c1:00.0/local_cpulist", "0000:e1:00.0/current_link_width"])
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    by = dict((g["pci_bus_id"], g) for g in d["gpus"])
    # 41:00.0 cannot be recognised without its vendor file: said so, never silently
    assert "cannot read /sys/bus/pci/devices/0000:41:00.0/vendor: Permission denied" in d["errors"]
    assert ("PCI device 0000:41:00.0: vendor/class unreadable, so a GPU there cannot be recognised; "
            "run hw_facts with become: true") in d["errors"]
    assert sorted(by) == ["0000:01:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    assert by["0000:c1:00.0"]["local_cpus"] is None and by["0000:01:00.0"]["local_cpus"] == "0-31"
    assert "cannot read /sys/bus/pci/devices/0000:c1:00.0/local_cpulist: Permission denied" in d["errors"]
    assert by["0000:e1:00.0"]["pcie"]["width"] is None and by["0000:e1:00.0"]["pcie"]["width_max"] == 16
    assert "cannot read /sys/bus/pci/devices/0000:e1:00.0/current_link_width: Permission denied" in d["errors"]


def test_unreadable_cpu_and_memory_files_are_listed(esc, deny):
    deny.extend(["/proc/meminfo", "node1/cpulist", "cpu5/topology/thread_siblings_list", "/proc/cpuinfo"])
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    assert d["memory"]["total_mb"] is None and d["cpu"]["model"] is None
    assert d["cpu"]["numa_nodes"][1]["cpus"] is None and d["cpu"]["numa_nodes"][0]["cpus"] == "0-31"
    assert d["cpu"]["cores"] == 64   # cpu5 counted as its own core
    for path in ("/proc/meminfo", "/sys/devices/system/node/node1/cpulist", "/proc/cpuinfo",
                 "/sys/devices/system/cpu/cpu5/topology/thread_siblings_list"):
        assert "cannot read %s: Permission denied" % path in d["errors"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads mode-000 files")
def test_unreadable_for_real_as_non_root(esc):
    path = os.path.realpath(str(pci(esc, "0000:01:00.0", "class")))
    os.chmod(path, 0)
    try:
        d = gather(root=str(esc), run_command=no_tools, is_root=False)
    finally:
        os.chmod(path, 0o644)
    assert [g["pci_bus_id"] for g in d["gpus"]] == ESC_BUSES[1:]
    assert any("0000:01:00.0" in e and "cannot be recognised" in e for e in d["errors"])


def test_unreadable_tree_errors_are_bounded(esc, deny):
    deny.append("")   # every file
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    assert len(d["errors"]) == gather_mod.MAX_ERRORS + 1 and d["errors"][-1].startswith("... and ")
    assert len(set(d["errors"])) == len(d["errors"])


# --------------------------------------------------------------------------------------------
# absurd values: bounded parsing, one GPU's problem stays that GPU's

def test_huge_local_cpulist_is_one_gpus_error(esc):
    replace(pci(esc, "0000:c1:00.0", "local_cpulist"), "0-4294967295\n")
    tracemalloc.start()
    try:
        d = gather(root=str(esc), run_command=no_tools, is_root=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024   # the unbounded parse took gigabytes
    assert [g["pci_bus_id"] for g in d["gpus"]] == ESC_BUSES
    assert [g["local_cpus"] for g in d["gpus"]] == ["0-31", "0-31", None, "32-63"]
    assert d["errors"] == ["GPU 0000:c1:00.0 local_cpulist: '0-4294967295' is not a usable cpulist "
                           "(names CPU id 4294967295, above the bound 16383)"]
    check_hw(d)


@pytest.mark.parametrize("text,why", [
    ("0-" + "9" * 5000, "names CPU id 999999999999..."),   # longer than int() may convert
    ("\u0663-7", "is not part of a cpulist"),              # non-ASCII digit
    ("0-16384", "above the bound 16383"),
])
def test_other_absurd_cpulists(esc, text, why):
    replace(pci(esc, "0000:01:00.0", "local_cpulist"), text)
    replace(esc / "sys" / "devices" / "system" / "node" / "node1" / "cpulist", text)
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    assert d["gpus"][0]["local_cpus"] is None and d["cpu"]["numa_nodes"][1]["cpus"] is None
    assert len(d["errors"]) == 2 and all(why in e for e in d["errors"])


def test_unexpected_failure_in_one_gpu_keeps_it_and_the_others(esc, monkeypatch):
    real_gpu = nvidia_seam.sysfs_gpu

    def flaky(rd, d, bus, *vendor_id):
        if bus == "0000:41:00.0":
            raise OverflowError("simulated")
        return real_gpu(rd, d, bus, *vendor_id)
    monkeypatch.setattr(nvidia_seam, "sysfs_gpu", flaky)   # the per-device reader moved into the vendor seam
    d = gather(root=str(esc), run_command=no_tools, is_root=False)
    assert [g["pci_bus_id"] for g in d["gpus"]] == ESC_BUSES
    assert d["gpus"][1]["local_cpus"] is None and d["gpus"][2]["local_cpus"] == "32-63"
    assert d["errors"] == ["GPU 0000:41:00.0: unexpected OverflowError reading sysfs: simulated"]


def test_nan_uptime_is_null(esc):
    (esc / "proc" / "uptime").write_text("nan 12.0\n")
    assert gather(root=str(esc), run_command=no_tools, is_root=False)["uptime_s"] is None


# --------------------------------------------------------------------------------------------
# NVLink: one `nvidia-smi nvlink -s` for all GPUs, only where it can matter

class Smi(object):
    """nvidia-smi stand-in answering from real captures; records its calls."""

    def __init__(self, xml, nvlink=None):
        self.xml, self.nvlink, self.calls = xml, nvlink, []

    def __call__(self, argv):
        self.calls.append(argv[1:])
        if argv[1:] == ["-q", "-x"]:
            return 0, read(real("nvidia-smi-q-xml", self.xml)), ""
        if argv[1:] == ["nvlink", "-s"] and self.nvlink is not None:
            return self.nvlink if isinstance(self.nvlink, tuple) else (0, self.nvlink, "")
        return 127, "", "not found"


def nvlink_capture(name, index=0, uuid=None):
    text = read(real("nvidia-smi-nvlink", name)).replace("GPU 0:", "GPU %d:" % index)
    if uuid:
        text = text.replace("GPU-00000000-0000-0000-0000-000000000000", uuid)
    return text


def test_nvlink_inactive_on_two_gpus():
    # what nvidia-smi prints for an RTX 2080 SUPER without a bridge, once per GPU
    block = "utkuozdemir-rtx2080super-desktop-drv595.txt"
    smi = Smi("telegraf-dual_2070-v13.xml", nvlink_capture(block, 0) + nvlink_capture(block, 1))
    d = gather(root=DUAL, run_command=smi, is_root=False, nvidia_smi="/usr/bin/nvidia-smi")
    assert smi.calls == [["-q", "-x"], ["nvlink", "-s"]]
    assert [g["nvlink_active"] for g in d["gpus"]] == [0, 0] and d["errors"] == []
    check_hw(d)


def test_nvlink_matched_by_uuid_not_position():
    xml = "telegraf-dual_2070-v13.xml"
    uuids = [g["uuid"] for g in nvidia_seam.nvsmi.parse_xml(read(real("nvidia-smi-q-xml", xml)))["gpus"]]
    text = (nvlink_capture("utkuozdemir-h200-1gpu-vm-drv590.txt", 0, uuids[1])
            + nvlink_capture("utkuozdemir-l40s-1gpu-vm-drv595.txt", 1, uuids[0]))
    d = gather(root=DUAL, run_command=Smi(xml, text), is_root=False, nvidia_smi="/usr/bin/nvidia-smi")
    assert [(g["uuid"], g["nvlink_active"]) for g in d["gpus"]] == [(uuids[0], 0), (uuids[1], 18)]


def test_nvlink_failure_is_an_error_and_unknown():
    smi = Smi("telegraf-dual_2070-v13.xml", (3, "", "Failed to initialize NVML: Unknown Error"))
    d = gather(root=DUAL, run_command=smi, is_root=False, nvidia_smi="/usr/bin/nvidia-smi")
    assert [g["nvlink_active"] for g in d["gpus"]] == [None, None]
    assert d["errors"] == ["nvidia-smi nvlink -s failed (rc=3): Failed to initialize NVML: Unknown Error"]
    smi = Smi("telegraf-dual_2070-v13.xml", "\t Link 0: 26.562 GB/s\n")
    d = gather(root=DUAL, run_command=smi, is_root=False, nvidia_smi="/usr/bin/nvidia-smi")
    assert [g["nvlink_active"] for g in d["gpus"]] == [None, None] and len(d["errors"]) == 1


@pytest.mark.parametrize("xml", ["telegraf-a100-sxm4-v12.xml", "telegraf-tesla-t4.xml"])
def test_single_gpu_pays_no_second_call(xml):
    smi = Smi(xml, "must not be asked")
    d = gather(root=DUAL, run_command=smi, is_root=False, nvidia_smi="/usr/bin/nvidia-smi", subset=["gpus"])
    assert smi.calls == [["-q", "-x"]]
    assert all(g["nvlink_active"] is None for g in d["gpus"])


def test_wants_nvlink_status():
    def g(mig):
        return {"mig_mode": {"current": mig}}
    assert wants_nvlink_status([g(False), g(None)]) is True
    assert wants_nvlink_status([g(True), g(False)]) is True
    assert wants_nvlink_status([g(True), g(True)]) is False    # refused in MIG mode
    assert wants_nvlink_status([g(False)]) is False            # nothing to link to
    assert wants_nvlink_status([]) is False
