"""read_edac_sysfs / detect_edac_driver against trees built from real EDAC captures."""
import json
import os
import re

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.ecc import edac

from testpaths import DATA  # noqa: E402  (tests/ is on sys.path: conftest)
TREES = os.path.join(DATA, "edac")
REAL = os.path.join(DATA, "real", "edac")
MC = "sys/devices/system/edac/mc"


def tree(name):
    return os.path.join(TREES, name)


def real(name):
    with open(os.path.join(REAL, name)) as handle:
        return handle.read()


def write(base, rel, text):
    path = os.path.join(str(base), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


# ---- trees built from captures ------------------------------------------------------------

def test_edac_utils_issue15_trusts_sysfs_over_edac_util():
    result = edac.read_edac_sysfs(tree("edac-utils-issue15-4mc"))
    assert result["controllers"] == 4
    assert result["corrected"] == 1          # sysfs: mc0/rank4 dimm_ce_count = 1
    assert result["uncorrected"] is None     # no ue file was captured: unknown, not 0
    mc0 = result["mcs"][0]
    assert [d["name"] for d in mc0["dimms"]] == ["rank0", "rank1", "rank4", "rank5"]
    assert [d["ce_count"] for d in mc0["dimms"]] == [0, 0, 1, 0]
    assert mc0["ce_count"] == 1
    assert [mc["ce_count"] for mc in result["mcs"]] == [1, 0, 0, 0]
    # edac-util --report=full on that same machine says CE 0 on every mc
    report = real("edac-utils-issue15-4mc-edac-util-report-full.txt")
    util_ce = sum(int(m.group(1)) for m in re.finditer(r"^mc\d+:noinfo:all:CE:(\d+)$", report, re.M))
    assert util_ce == 0 and result["corrected"] == 1


def test_netdata_serverb_all_zero():
    result = edac.read_edac_sysfs(tree("netdata-issue1508-serverB"))
    assert edac.edac_summary(result) == {"driver": None, "controllers": 1, "corrected": 0,
                                         "uncorrected": 0}
    assert [c["name"] for c in result["mcs"][0]["csrows"]] == ["csrow0", "csrow1", "csrow2", "csrow3"]


def test_rasdaemon_issue121_channels_and_labels():
    result = edac.read_edac_sysfs(tree("rasdaemon-issue121-ryzen7800x3d"))
    rows = result["mcs"][0]["csrows"]
    labels = sorted(ch["label"] for row in rows for ch in row["channels"])
    assert labels == ["mc#0csrow#2channel#0", "mc#0csrow#2channel#1",
                      "mc#0csrow#3channel#0", "mc#0csrow#3channel#1"]
    assert [r["ce_count"] for r in rows] == [0, 0]   # summed from chN_ce_count
    assert result["corrected"] == 0 and result["uncorrected"] == 0


def test_rasdaemon_pr232_layout_sizes_without_counters():
    result = edac.read_edac_sysfs(tree("rasdaemon-pr232-romed8-2t"))
    dimms = result["mcs"][0]["dimms"]
    assert len(dimms) == 8 and all(d["size_mb"] == 32768 for d in dimms)
    assert all(d["ce_count"] is None for d in dimms)
    assert result["corrected"] is None and result["uncorrected"] is None


def test_trees_match_their_capture():
    """Every value in the built trees is the value the capture shows."""
    listing = real("edac-utils-issue15-4mc-sysfs-dimm_ce_count-one-ce.txt")
    seen = 0
    for match in re.finditer(r"^/(sys/\S+):(\d+)$", listing, re.M):
        with open(os.path.join(tree("edac-utils-issue15-4mc"), match.group(1))) as handle:
            assert handle.read().strip() == match.group(2)
        seen += 1
    assert seen == 16
    lines = real("netdata-issue1508-serverB-sysfs-edac-ce-ue-count-listing.txt").splitlines()
    for path, value in zip(lines[0::2], lines[1::2]):
        with open(os.path.join(tree("netdata-issue1508-serverB"), path.lstrip("/"))) as handle:
            assert handle.read().strip() == value.strip()
    counts = real("rasdaemon-issue121-ryzen7800x3d-ecc-udimm-ras-mc-ctl-error-count.txt")
    result = edac.read_edac_sysfs(tree("rasdaemon-issue121-ryzen7800x3d"))
    by_label = {ch["label"]: ch["ce_count"] for row in result["mcs"][0]["csrows"]
                for ch in row["channels"]}
    for match in re.finditer(r"^(mc#\S+)\t(\d+)\t(\d+)$", counts, re.M):
        assert by_label[match.group(1)] == int(match.group(2))
    layout = real("rasdaemon-pr232-asrockrack-romed8-2t-epyc-ras-mc-ctl-layout.txt")
    populated = sum(1 for m in re.finditer(r"(\d+) MB", layout) if m.group(1) != "0")
    assert populated == len(edac.read_edac_sysfs(tree("rasdaemon-pr232-romed8-2t"))["mcs"][0]["dimms"])


# ---- synthetic edge cases -------------------------------------------------------------------

def test_no_edac_returns_none(tmp_path):
    assert edac.read_edac_sysfs(str(tmp_path)) is None
    os.makedirs(os.path.join(str(tmp_path), MC, "power"))
    assert edac.read_edac_sysfs(str(tmp_path)) is None
    assert edac.read_edac_sysfs(os.path.join(str(tmp_path), "does-not-exist")) is None


def test_garbled_counters_are_none_not_exceptions(tmp_path):
    write(tmp_path, MC + "/mc0/ce_count", "garbage\n")
    write(tmp_path, MC + "/mc0/ue_count", "-3\n")
    write(tmp_path, MC + "/mc0/dimm0/dimm_ce_count", "\x00\xff")
    write(tmp_path, MC + "/mc0/dimm0/dimm_ue_count", "")
    write(tmp_path, MC + "/mc0/dimm0/size", "99999999999999999999999999")
    write(tmp_path, MC + "/mc1/ce_count", "7\n")
    write(tmp_path, MC + "/mc1/ue_count", "2\n")
    os.makedirs(os.path.join(str(tmp_path), MC, "mc0", "dimm1", "dimm_ce_count"))  # dir, not file
    result = edac.read_edac_sysfs(str(tmp_path))
    mc0, mc1 = result["mcs"]
    assert mc0["ce_count"] is None and mc0["ue_count"] is None
    assert mc0["dimms"][0]["ce_count"] is None and mc0["dimms"][0]["size_mb"] is None
    assert mc0["dimms"][1]["ce_count"] is None
    assert result["corrected"] == 7 and result["uncorrected"] == 2


def test_full_tree_and_driver_from_module(tmp_path):
    write(tmp_path, MC + "/mc0/mc_name", "Skylake Socket#0 IMC#0\n")
    for key, value in (("ce_count", 3), ("ue_count", 0), ("ce_noinfo_count", 0),
                       ("ue_noinfo_count", 0), ("size_mb", 65536), ("seconds_since_reset", 86400)):
        write(tmp_path, MC + "/mc0/" + key, "%d\n" % value)
    for i, label in enumerate(("CPU_SrcID#0_MC#0_Chan#0_DIMM#0", "CPU_SrcID#0_MC#0_Chan#1_DIMM#0")):
        d = MC + "/mc0/dimm%d/" % i
        write(tmp_path, d + "dimm_label", label + "\n")
        write(tmp_path, d + "dimm_location", "channel %d slot 0 \n" % i)
        write(tmp_path, d + "size", "32768\n")
        write(tmp_path, d + "dimm_mem_type", "Registered-DDR4\n")
        write(tmp_path, d + "dimm_edac_mode", "SECDED\n")
        write(tmp_path, d + "dimm_ce_count", "%d\n" % (3 if i else 0))
        write(tmp_path, d + "dimm_ue_count", "0\n")
    os.makedirs(os.path.join(str(tmp_path), "sys/module/skx_edac"))
    os.makedirs(os.path.join(str(tmp_path), "sys/module/edac_core"))
    result = edac.read_edac_sysfs(str(tmp_path))
    assert result["driver"] == "skx_edac"
    dimm = result["mcs"][0]["dimms"][1]
    assert dimm == {"name": "dimm1", "label": "CPU_SrcID#0_MC#0_Chan#1_DIMM#0",
                    "location": "channel 1 slot 0", "size_mb": 32768,
                    "mem_type": "Registered-DDR4", "edac_mode": "SECDED",
                    "ce_count": 3, "ue_count": 0}
    assert result["mcs"][0]["size_mb"] == 65536
    assert result["corrected"] == 3 and result["uncorrected"] == 0


def test_natural_mc_order(tmp_path):
    for n in (0, 2, 10, 1):
        write(tmp_path, MC + "/mc%d/ce_count" % n, "%d\n" % n)
    assert [m["name"] for m in edac.read_edac_sysfs(str(tmp_path))["mcs"]] == ["mc0", "mc1", "mc2", "mc10"]


@pytest.mark.parametrize("mc_name,driver", [
    ("Skylake Socket#1 IMC#2", "skx_edac"),
    ("Intel_10nm Socket#0 IMC#0", "i10nm_edac"),
    ("Haswell SrcID#0_Ha#0", "sb_edac"),
    ("Broadwell SrcID#1_Ha#0", "sb_edac"),
    ("F17h", "amd64_edac"),
    ("F19h_M10h", "amd64_edac"),
    ("ghes_edac", "ghes_edac"),
    ("mystery", None),
    ("", None),
    (None, None),
])
def test_driver_from_mc_name(mc_name, driver):
    assert edac.driver_from_mc_name(mc_name) == driver


# ---- driver detection -------------------------------------------------------------------------

@pytest.mark.parametrize("vendor,family,model,driver", [
    ("GenuineIntel", 6, 0x8F, "i10nm_edac"),      # Sapphire Rapids
    ("GenuineIntel", 6, 0x6A, "i10nm_edac"),      # Ice Lake-SP
    ("intel", 6, "0x55", "skx_edac"),             # Skylake-SP / Cascade Lake
    ("GenuineIntel", 6, 0x4F, "sb_edac"),         # Broadwell-EP
    ("GenuineIntel", 6, 0x3F, "sb_edac"),         # Haswell-EP
    ("GenuineIntel", 6, 0x2D, "sb_edac"),         # Sandy Bridge-EP
    ("AuthenticAMD", 0x19, 1, "amd64_edac"),      # Milan
    ("amd", 0x17, 0x31, "amd64_edac"),            # Rome
    ("AuthenticAMD", 0x1A, 2, "amd64_edac"),      # Zen 5
    ("GenuineIntel", 6, 0x9E, None),              # Coffee Lake desktop: none known
    ("CentaurHauls", 6, 1, None),
    (None, None, None, None),
])
def test_detect_by_cpu(vendor, family, model, driver):
    found, reason = edac.detect_edac_driver(vendor, family, model, virtualization="none")
    assert found == driver
    assert isinstance(reason, str) and reason


def test_detect_from_cpuinfo_text():
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nflags\t\t: fpu sse\n"
    assert edac.detect_edac_driver(cpuinfo=cpuinfo)[0] == "skx_edac"
    vm = cpuinfo.replace("fpu sse", "fpu hypervisor sse")
    driver, reason = edac.detect_edac_driver(cpuinfo=vm)
    assert driver is None and "unknown" in reason


@pytest.mark.parametrize("virt", ["kvm", "vmware", "podman", "docker", "container"])
def test_detect_virtualized_is_unknown(virt):
    driver, reason = edac.detect_edac_driver("AuthenticAMD", 0x19, 1, virtualization=virt)
    assert driver is None and "unknown" in reason


def test_detect_loaded_and_ghes():
    assert edac.detect_edac_driver("GenuineIntel", 6, 0x9E, loaded_modules=["ie31200_edac"],
                                   virtualization="none")[0] == "ie31200_edac"
    modules = "amd64_edac 40960 0 - Live 0x0\nedac_mce_amd 28672 1 amd64_edac, Live 0x0\n"
    assert edac.detect_edac_driver(loaded_modules=modules)[0] == "amd64_edac"
    assert edac.detect_edac_driver("GenuineIntel", 6, 0x9E, ghes=True,
                                   virtualization="none")[0] == "ghes_edac"
    assert edac.detect_edac_driver(loaded_modules=12)[0] is None   # garbage, no exception


def test_detect_host_and_cli(tmp_path, capsys):
    write(tmp_path, "proc/cpuinfo", "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n")
    write(tmp_path, "proc/modules", "")
    result = edac.detect_host(str(tmp_path), virtualization="none")
    assert result == {"driver": "amd64_edac", "reason": "AMD family 0x19", "loaded": False,
                      "virtualization": "none", "sysfs_present": False}
    write(tmp_path, "run/systemd/container", "podman\n")
    assert edac.detect_host(str(tmp_path), virtualization="none")["driver"] is None
    assert edac.main(["detect", "--root", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["virtualization"] == "podman"
    assert edac.main(["read", "--root", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) is None
