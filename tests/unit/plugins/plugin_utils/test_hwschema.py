"""hwschema.check_hw against hostile declarations: every bad value is a problem naming the field and
what is expected, the cleaned document is plain bounded data, and gathered documents are valid
declarations."""
import copy
import json
import os
import tracemalloc

import pytest
from jinja2 import StrictUndefined

from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import (
    Unresolved, check_hw, describe, to_int, to_number)

from conftest import DATA  # noqa: E402
from hwdocs import GATHERED, GOOD  # noqa: E402
from testpaths import sysfs_tree, sysfs_trees  # noqa: E402


def _doc(**sections):
    doc = {"schema": 1, "source": "declared"}
    doc.update(sections)
    return doc


def _problems(doc):
    clean, problems = check_hw(doc)
    return clean, {p.path: p for p in problems}


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "2\u00b2", "1e3", "8 cores", "0x10", True, 2.5,
                                   float("nan"), float("inf"), -1, 0, 65, 1000000000000, 10 ** 400, "9" * 400,
                                   "{{ sockets }}", [2], {"n": 2}, StrictUndefined(name="sockets"), Unresolved("x")])
def test_bad_socket_counts_are_named_problems(value):
    clean, probs = _problems(_doc(cpu={"sockets": value}))
    assert list(probs) == ["cpu.sockets"]
    assert "an integer from 1 to 64" in probs["cpu.sockets"].message()
    assert clean["cpu"]["sockets"] is None
    json.dumps(clean, allow_nan=False)
    json.dumps(probs["cpu.sockets"].observed(), allow_nan=False)


@pytest.mark.parametrize("value,expected", [(2, 2), ("2", 2), (" 4 ", 4), (8.0, 8), ("+3", 3)])
def test_integral_values_that_yaml_or_jinja_produce_are_accepted(value, expected):
    clean, probs = _problems(_doc(cpu={"sockets": value}))
    assert probs == {} and clean["cpu"]["sockets"] == expected


def test_describe_names_the_usual_causes():
    assert "unresolved Jinja" in describe("{{ gpu_model }}")
    assert "undefined variable (gpu_model)" in describe(StrictUndefined(name="gpu_model"))
    assert "could not template ('x' is undefined)" in describe(Unresolved("'x' is undefined"))
    assert "digits" in describe(10 ** 400) and len(describe("x" * 10000)) <= 60


def test_number_parsing_is_ascii_and_finite():
    assert [to_int(v) for v in ("12", "\u00b2", "1.0", 1.0, float("nan"), True)] == [12, None, None, 1, None, None]
    assert [to_number(v) for v in ("1.5", "1e3", "nan", "inf", "1e999", "\u0661", float("-inf"))] == \
        [1.5, 1000.0, None, None, None, None, None]


@pytest.mark.parametrize("field,value", [("model_params_b", float("nan")), ("model_params_b", float("inf")),
                                         ("model_params_b", "NaN"), ("dataset_gb", "Infinity"),
                                         ("model_params_b", 10 ** 400), ("model_params_b", -7)])
def test_non_finite_workload_is_a_problem(field, value):
    clean, probs = _problems(_doc(workload={"kind": "lora", field: value}))
    assert list(probs) == ["workload." + field] and "a number from 0 to" in probs["workload." + field].message()
    json.dumps(clean, allow_nan=False)


@pytest.mark.parametrize("section,value", [("cpu", "EPYC"), ("memory", [1]), ("gpus", "eight"), ("disks", {"x": 1}),
                                           ("workload", "lora 7b"), ("cpu", None)])
def test_strings_where_mappings_are_expected(section, value):
    clean, probs = _problems(_doc(**{section: value}))
    if value is None:
        assert probs == {}
    else:
        assert list(probs) == [section] and "expected a" in probs[section].message()
    assert isinstance(clean["cpu"], dict) and isinstance(clean["memory"], dict)


def test_gpus_null_is_unknown_and_empty_list_is_none():
    assert check_hw(_doc(gpus=None))[0]["gpus"] is None
    assert check_hw(_doc())[0]["gpus"] is None
    assert check_hw(_doc(gpus=[]))[0]["gpus"] == []
    assert check_hw(_doc(gpus="eight"))[0]["gpus"] is None         # invalid: unknown, never "no GPU"


def test_non_finite_free_form_data_is_rejected():
    clean, probs = _problems(_doc(host={"rack": "r1", "temp": float("nan")}, notes=["ok", {"deep": [[[[[[[[[1]]]]]]]]]}]))
    assert set(probs) == {"host", "notes"} and clean["host"] is None and clean["notes"] is None
    clean, probs = _problems(_doc(host={"rack": "r1", "u": 42}))
    assert probs == {} and clean["host"] == {"rack": "r1", "u": 42}


def test_duplicate_numa_ids_overlapping_cpus_and_absent_nodes():
    nodes = [{"id": 0, "cpus": "0-15"}, {"id": 0, "cpus": "16-31"}]
    clean, probs = _problems(_doc(cpu={"numa_nodes": nodes}))
    assert "a unique NUMA node id (also cpu.numa_nodes[0])" in probs["cpu.numa_nodes[1].id"].message()
    assert clean["cpu"]["numa_nodes"] is None
    nodes = [{"id": 0, "cpus": "0-15"}, {"id": 1, "cpus": "8-31"}]
    clean, probs = _problems(_doc(cpu={"numa_nodes": nodes}))
    assert "CPU 8 is also in node 0" in probs["cpu.numa_nodes[1].cpus"].message()
    nodes = [{"id": 0, "cpus": "0-15"}, {"id": 1, "cpus": "16-31"}]
    gpus = [{"model": "NVIDIA H200", "numa_node": 1}, {"model": "NVIDIA H200", "numa_node": 3},
            {"model": "NVIDIA H200", "numa_node": -1}]
    clean, probs = _problems(_doc(cpu={"numa_nodes": nodes}, gpus=gpus))
    assert list(probs) == ["gpus[1].numa_node"]
    assert "one of the NUMA nodes in cpu.numa_nodes (0, 1) or -1" in probs["gpus[1].numa_node"].message()
    assert [g["numa_node"] for g in clean["gpus"]] == [1, None, -1]
    clean, probs = _problems(_doc(cpu={"numa_nodes": [{"cpus": "0-3"}]}))
    assert "the NUMA node id" in probs["cpu.numa_nodes[0].id"].message()


def test_duplicate_gpu_indexes():
    clean, probs = _problems(_doc(gpus=[{"index": 0, "model": "NVIDIA L40S"}, {"index": 0, "model": "NVIDIA L40S"}]))
    assert list(probs) == ["gpus[1].index"] and "a unique GPU index (also gpus[0])" in probs["gpus[1].index"].message()
    clean, probs = _problems(_doc(gpus={"model": "NVIDIA L40S", "count": 4}))
    assert probs == {} and [g["index"] for g in clean["gpus"]] == [0, 1, 2, 3]


@pytest.mark.parametrize("doc,path,expected", [
    (_doc(cpu={"sockets": 1000000000000}), "cpu.sockets", "from 1 to 64"),
    (_doc(cpu={"cores": 10 ** 6}), "cpu.cores", "from 1 to 16384"),
    (_doc(cpu={"threads": 10 ** 9}), "cpu.threads", "from 1 to 16384"),
    (_doc(cpu={"numa_nodes": [{"id": i, "cpus": ""} for i in range(2000)]}), "cpu.numa_nodes", "at most 1024"),
    (_doc(cpu={"numa_nodes": [{"id": 0, "cpus": "0-99999999"}]}), "cpu.numa_nodes[0].cpus", "below 16384"),
    (_doc(cpu={"core_cpus": ["0"] * 20000}), "cpu.core_cpus", "at most 16384"),
    (_doc(memory={"total_mb": 10 ** 12}), "memory.total_mb", "from 1 to 268435456"),
    (_doc(gpus={"model": "NVIDIA H200", "count": 1000}), "gpus[0].count", "from 1 to 128"),
    (_doc(gpus=[{"model": "NVIDIA H200", "count": 100}, {"model": "NVIDIA H100", "count": 100}]),
     "gpus[1].count", "at most 128 entries"),
    (_doc(gpus=[{"local_cpus": "0-4294967295"}]), "gpus[0].local_cpus", "below 16384"),
    (_doc(disks=[{"kind": "hdd", "count": 10 ** 9}]), "disks[0].count", "from 1 to 1024"),
    (_doc(disks=[{"kind": "hdd", "size_bytes": 1 << 70}]), "disks[0].size_bytes", "from 1 to"),
    (_doc(disks=[{"kind": "hdd"}] * 1100), "disks", "at most 1024"),
    (_doc(cpu={"model": "x" * 100000}), "cpu.model", "at most 1024 characters"),
])
def test_declared_counts_have_sane_bounds(doc, path, expected):
    tracemalloc.start()
    clean, probs = _problems(doc)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert path in probs and expected in probs[path].message(), [p.message() for p in probs.values()]
    assert peak < 8 * 1024 * 1024         # no per-host cost grows with the declared number
    json.dumps(clean, allow_nan=False)


def test_good_documents_have_no_problems():
    for doc in (GOOD, GATHERED):
        clean, problems = check_hw(copy.deepcopy(doc))
        assert problems == []
    assert len(check_hw(copy.deepcopy(GOOD))[0]["gpus"]) == 8


class _Run(object):
    """Stand-in for commands: nvidia-smi answers with a real capture (tests/data/real), the rest are absent."""

    def __init__(self, xml=None):
        self.xml = xml

    def __call__(self, argv):
        tool = os.path.basename(argv[0])
        if self.xml and tool == "nvidia-smi":
            with open(os.path.join(DATA, "real", "nvidia-smi-q-xml", self.xml)) as fh:
                return 0, fh.read(), ""
        if tool == "dmidecode":
            with open(os.path.join(DATA, "real", "dmidecode",
                                   "linuxhw-asus-esc8000g4-8gpu-server-2s-xeon4214-single-bit-ecc.txt")) as fh:
                return 0, fh.read(), ""
        return 127, "", "not found"


_TREES = sysfs_trees()   # generated at test time (testpaths.sysfs_tree): tests/data/sysfs holds only their recipe


@pytest.mark.parametrize("tree", _TREES)
@pytest.mark.parametrize("is_root", [False, True])
def test_every_gathered_document_is_a_valid_declaration(tree, is_root):
    """Issue 11.3: gather a golden node, save it as the rack's declaration: no inventory.schema finding."""
    xml = "telegraf-dual_2070-v13.xml" if tree == "dual-2070-x8" else None
    doc = gather(root=sysfs_tree(tree), run_command=_Run(xml), is_root=is_root,
                 dmidecode="/usr/sbin/dmidecode" if is_root else "never")
    if is_root:
        assert doc["memory"]["installed_mb"] and doc["memory"]["dimms"]     # dmidecode's keys are covered too
    declared = json.loads(json.dumps(doc))       # as written to host_vars and read back
    declared["source"] = "declared"
    clean, problems = check_hw(declared, strict=True)
    assert [p.message() for p in problems] == []
    for section in ("cpu", "memory"):                # values survive the round trip unchanged
        assert {k: v for k, v in clean[section].items() if v is not None and k != "numa_nodes"} == \
            {k: v for k, v in declared[section].items() if v is not None and k != "numa_nodes"}
    assert len(clean["disks"] or []) == len(declared["disks"] or [])
    gathered_clean, gathered_problems = check_hw(doc)
    assert [p.message() for p in gathered_problems] == []
