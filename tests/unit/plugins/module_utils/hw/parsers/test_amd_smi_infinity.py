"""amd-smi printing `Infinity` (or NaN) as a VRAM size (issue 30.8).

Python's json module reads the bare literals as float('inf') / float('nan'); the size then raised
OverflowError in the parser, the whole GPU section of hw_facts was lost (gpus: null, "unknown"),
and the pre-flight's gpu.present became a warning ("the GPUs are not declared (unknown)") on a
node that fails it. The literal is unknown for that one field: the GPUs stay listed, their VRAM
from sysfs, and the failing node still fails.

The input is the MI300X amd-smi static document of tests/data/amd (see its README) with the first
GPU's `"value": 196592` replaced by `"value": Infinity` (no public capture of this output was
found; the edit is this test's, stated here)."""
import importlib.util
import os
import shutil

import pytest
from testpaths import DATA

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import amd_smi as a
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_fleet

AMD = os.path.join(DATA, "amd")


def _static(literal):
    with open(os.path.join(AMD, "amd-smi-static-mi300x-gpu_data.json")) as fh:
        text = fh.read()
    assert text.count('"value": 196592') == 8
    return text.replace('"value": 196592', '"value": %s' % literal, 1)


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN", '"Infinity"'])
def test_a_non_finite_vram_size_is_unknown(literal):
    got = a.parse_amd_smi_static(_static(literal))
    assert [g["memory_mib"] for g in got] == [None] + [196592] * 7
    assert a.value_of(float("inf")) == (None, None) and a.value_of({"value": float("nan"), "unit": "MB"}) == (None, None)


@pytest.fixture(scope="module")
def mi300x(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("dlrack_amd_trees", os.path.join(AMD, "build_trees.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("amd-trees")
    mod.build_all(str(out))
    return str(out / "mi300x-8gpu")


def _run(static_text):
    def run(argv):
        if os.path.basename(argv[0]) == "amd-smi" and argv[1] == "static":
            return 0, static_text, ""
        return 127, "", "%s: not found" % argv[0]
    return run


def test_the_gpus_stay_listed_and_a_failing_node_still_fails(mi300x, tmp_path):
    root = str(tmp_path / "t")
    shutil.copytree(mi300x, root, symlinks=True)
    doc = gather(root=root, subset=["gpus"], run_command=_run(_static("Infinity")), is_root=False, amd_smi="/opt/rocm/bin/amd-smi")
    assert isinstance(doc["gpus"], list) and len(doc["gpus"]) == 8, doc.get("errors")
    assert [g["memory_mb"] for g in doc["gpus"]] == [196608] * 8          # sysfs mem_info_vram_total
    # the node fails the gate on its GPU count (16 required); with the GPUs lost it was a warning
    hw = {"schema": 1, "source": "declared", "gpus": [{"model": g["model"], "memory_mb": g["memory_mb"]} for g in doc["gpus"]]}
    results, dummy = evaluate_fleet({"mi300x": collect_host_inputs("mi300x", {"dlrack_hw": hw, "dlrack_thresholds": {"min_gpus": 16}})})
    present = [f for f in results["mi300x"]["findings"] if f["rule"] == "gpu.present"]
    assert [f["severity"] for f in present] == ["error"] and results["mi300x"]["status"] == "fail"


def test_why_it_mattered_lost_gpus_are_only_a_warning():
    """What the old parser's exception left: gpus null, which the gate can only warn about."""
    hw = {"schema": 1, "source": "declared", "gpus": None}
    results, dummy = evaluate_fleet({"mi300x": collect_host_inputs("mi300x", {"dlrack_hw": hw, "dlrack_thresholds": {"min_gpus": 16}})})
    present = [f for f in results["mi300x"]["findings"] if f["rule"] == "gpu.present"]
    assert [f["severity"] for f in present] == ["warning"]
