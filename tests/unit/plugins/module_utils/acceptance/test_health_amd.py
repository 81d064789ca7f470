"""AMD GPU health for acceptance from amdgpu RAS sysfs (issue 21), on trees built in the kernel's
documented formats (tests/data/amd/build_trees.py; Documentation/gpu/amdgpu/ras.rst): no AMD GPU
and no amd-smi/rocm-smi capture of a faulty GPU was available, so nothing here is a real capture."""
import importlib.util
import os

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.acceptance import health as ah
from ansible_collections.dlrack.node.plugins.plugin_utils.acceptance import judge_health
from testpaths import DATA, sysfs_tree

TH = {"require_persistence": True}


def _trees():
    spec = importlib.util.spec_from_file_location("dlrack_amd_trees", os.path.join(DATA, "amd", "build_trees.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    mod = _trees()
    out = tmp_path_factory.mktemp("amd-health")
    mod.build_all(str(out))
    # one faulty MI300X: 2 uncorrected UMC errors, a bad page pending and one the driver could not reserve
    root = mod.fresh(str(out), "mi300x-faulty")
    mod.gpu(root, "0000:05:00.0", "0x74a1", "0x120000", (mod.GEN5, "16", mod.GEN5, "16"), 0, "0-47",
            vram=192 * mod.GIB, product="AMD Instinct MI300X", unique_id="%016x" % 0x77,
            ras=((1 << 14) - 1, {"umc": [("ue", 2), ("ce", 40), ("de", 1)]}),
            bad_pages=[(0x10, "R"), (0x20, "P"), (0x30, "F")], card=0)
    return lambda name: str(out / name)


def test_healthy_mi300x_passes_and_says_what_it_did_not_check(trees):
    doc = ah.node_gpu_health(None, None, root=trees("mi300x-8gpu"))
    assert doc["status"] == "ok" and doc["source"] == "amdgpu sysfs" and len(doc["gpus"]) == 8
    g3 = doc["gpus"][3]
    assert (g3["vendor"], g3["ecc_mode"], g3["ecc_volatile_uncorrected"]) == ("amd", True, 0)
    assert g3["retired_pages"] == {"retired": 1, "pending": False, "failed": 0}
    ms = judge_health(doc, TH)
    assert [m["verdict"] for m in ms] == ["pass"] * 8
    assert ms[3]["reason"] == "not checked: " + ah.AMD_NOT_CHECKED and "throttl" in ms[3]["reason"]


def test_faulty_mi300x_is_an_error_naming_each_fault(trees):
    (m,) = judge_health(ah.node_gpu_health(None, None, root=trees("mi300x-faulty")), TH)
    assert m["verdict"] == "error" and m["target"] == "GPU0 0000:05:00.0"
    for part in ("2 volatile uncorrectable ECC errors since the driver loaded",
                 "1 bad page(s) could not be retired (no reserve left): replace the GPU",
                 "a page retirement is pending"):
        assert part in m["reason"]
    assert m["details"]["vendor"] == "amd"


def test_gpu_without_ras_is_not_checked_never_a_pass(trees):
    ms = judge_health(ah.node_gpu_health(None, None, root=trees("mi210-2gpu-pcie")), TH)
    assert [m["verdict"] for m in ms] == ["skip", "skip"]
    assert "no RAS files" in ms[0]["reason"]


def test_mixed_node_gets_both_vendors_and_nvidia_only_is_unchanged(trees):
    xml = open(os.path.join(DATA, "real", "nvidia-smi-q-xml", "telegraf-dual_a5000-v13.xml")).read()
    doc = ah.node_gpu_health("/usr/bin/nvidia-smi", lambda argv, t: (0, xml, ""), root=trees("mixed-2nvidia-2mi210"))
    assert [(g.get("vendor"), g["index"]) for g in doc["gpus"]] == [(None, 0), (None, 1), ("amd", 2), ("amd", 3)]
    # a failed nvidia-smi stays an error on a mixed node
    doc = ah.node_gpu_health("/usr/bin/nvidia-smi", lambda argv, t: (9, "", "boom"), root=trees("mixed-2nvidia-2mi210"))
    assert doc["status"] == "error"
    # an NVIDIA-only node: exactly gpu_health's document
    root = sysfs_tree("esc8000a-e12")

    def run(argv, timeout):
        return 0, xml, ""
    assert ah.node_gpu_health("/usr/bin/nvidia-smi", run, root=root) == ah.gpu_health("/usr/bin/nvidia-smi", run)
    assert ah.node_gpu_health(None, None, root=root) == ah.gpu_health(None, None)
