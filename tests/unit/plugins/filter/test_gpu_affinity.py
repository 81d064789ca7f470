# -*- coding: utf-8 -*-
"""The gpu_affinity filters validate what a user or an inventory can hand them (issue 9): options
are taken as Ansible means them or refused naming the option; bad documents fail naming host and
field; nothing else escapes (hypothesis over hostile documents, options and reports)."""
import json
import math
import os

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.dlrack.node.plugins.filter.gpu_affinity import (
    FilterModule,
    gpu_affinity_gres_conf,
    gpu_affinity_plan,
    gpu_affinity_service_pins,
)

TOPO_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "topologies")


def load(name):
    with open(os.path.join(TOPO_DIR, name + ".json")) as f:
        return json.load(f)


V100 = load("dlperf-8xv100-2s-xeon5118")          # 2x Xeon Gold 5118 (SMT), 8x V100
SMT_OFF = [e["cpus"] for e in gpu_affinity_plan(V100, include_smt=False)]
SMT_ON = [e["cpus"] for e in gpu_affinity_plan(V100, include_smt=True)]


def test_filters_are_registered():
    assert sorted(FilterModule().filters()) == [
        "gpu_affinity_gres_conf", "gpu_affinity_plan", "gpu_affinity_service_pins"]


def test_smt_on_and_off_differ_on_this_host():
    assert SMT_OFF[0] == "1-3" and SMT_ON[0] == "1-3,25-27"


@pytest.mark.parametrize("value", [False, "false", "False", "no", "off", "0", "n", 0, " false "])
def test_include_smt_false_in_any_ansible_spelling_is_false(value):
    assert [e["cpus"] for e in gpu_affinity_plan(V100, include_smt=value)] == SMT_OFF


@pytest.mark.parametrize("value", [True, "true", "yes", "on", "1", "y", 1])
def test_include_smt_true_in_any_ansible_spelling_is_true(value):
    assert [e["cpus"] for e in gpu_affinity_plan(V100, include_smt=value)] == SMT_ON


@pytest.mark.parametrize("value", ["maybe", "", None, 2, 0.5, [], {}, "tru"])
def test_include_smt_anything_else_is_refused_naming_the_option(value):
    with pytest.raises(AnsibleFilterError) as exc:
        gpu_affinity_plan(V100, include_smt=value, host="gpu-a01")
    msg = str(exc.value)
    assert msg.startswith("gpu_affinity_plan (host gpu-a01): option include_smt: expected true or false, got ")
    assert repr(value) in msg


@pytest.mark.parametrize("option", ["reserved_cores_per_socket", "max_cores_per_gpu"])
@pytest.mark.parametrize("value", [0.9, 1.5, -1, "-1", True, "²", "1e3", "one", float("nan"),
                                   float("inf"), 10 ** 30, "9" * 400, None, [1], "0x2"])
def test_counts_refuse_fractions_negatives_and_non_numbers(option, value):
    with pytest.raises(AnsibleFilterError) as exc:
        gpu_affinity_plan(V100, host="gpu-a01", **{option: value})
    msg = str(exc.value)
    assert ("option %s: expected a whole number from 0 to 16383" % option) in msg
    assert "(host gpu-a01)" in msg


def test_reserved_point_nine_is_not_truncated_to_zero():
    with pytest.raises(AnsibleFilterError, match=r"reserved_cores_per_socket.*got 0\.9 \(float\)"):
        gpu_affinity_plan(V100, reserved_cores_per_socket=0.9)


@pytest.mark.parametrize("value,same_as", [("2", 2), (2.0, 2), (" 0 ", 0), ("0", 0)])
def test_counts_accept_digit_strings_and_integral_floats(value, same_as):
    """-e gpu_affinity_reserved_cores_per_socket=2 arrives as the string "2"; Jinja math as 2.0."""
    assert gpu_affinity_plan(V100, reserved_cores_per_socket=value) == \
        gpu_affinity_plan(V100, reserved_cores_per_socket=same_as)
    assert gpu_affinity_plan(V100, report=True, reserved_cores_per_socket=value)["options"][
        "reserved_cores_per_socket"] == same_as


def test_max_cores_exactly_at_the_even_share_changes_nothing_and_one_less_caps():
    even = gpu_affinity_plan(V100, max_cores_per_gpu=3)
    assert [e["cores"] for e in even] == [3, 3, 3, 2, 3, 3, 3, 2]
    capped = gpu_affinity_plan(V100, max_cores_per_gpu=2)
    assert [e["cores"] for e in capped] == [2] * 8


@pytest.mark.parametrize("policy", ["NUMA_LOCAL", "", None, 1, ["socket"]])
def test_policy_is_one_of_the_choices(policy):
    with pytest.raises(AnsibleFilterError, match="option policy: .* is not one of numa_local, socket"):
        gpu_affinity_plan(V100, policy=policy)


def test_report_option_takes_ansible_booleans():
    assert isinstance(gpu_affinity_plan(V100, report="yes"), dict)
    assert isinstance(gpu_affinity_plan(V100, report="false"), list)
    with pytest.raises(AnsibleFilterError, match="option report"):
        gpu_affinity_plan(V100, report="sometimes")


GPU = {"index": 0, "numa_node": 0, "pci_bus_id": "0000:3b:00.0"}


@pytest.mark.parametrize("cpu,needle", [
    ({"numa_nodes": [{"id": 0, "cpus": ""}]}, "cpu.numa_nodes: no node lists any CPU"),
    ({"numa_nodes": [{"id": 0, "cpus": ""}, {"id": 1, "cpus": None}]}, "cpu.numa_nodes: no node lists any CPU"),
    ({"core_cpus": ["", " "]}, "cpu.core_cpus lists no CPU"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "core_cpus": "0-3"}, "cpu.core_cpus: expected a list, got str"),
    ({"numa_nodes": "0-3"}, "cpu.numa_nodes: expected a list, got str"),
    ({"numa_nodes": [{"id": -1, "cpus": "0-3"}]}, "cpu.numa_nodes[0].id: expected a node id >= 0, got -1"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "socket_cpus": "0-3"}, "socket_cpus: expected a list, got str"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-99999999"}]}, "cpu.numa_nodes[0].cpus: cpu id 99999999 is above 16383"),
    ({"numa_nodes": [{"id": 0, "cpus": "0-3"}], "sockets": -2}, "cpu.sockets: expected a count >= 1"),
    ({"threads": 10 ** 12}, "cpu.threads: expected 1 to 16384"),
    ({"threads": 1.5}, "cpu.threads: expected an integer, got 1.5"),
    ({"threads": "²"}, "cpu.threads: expected an integer"),
    ({"threads": float("inf")}, "cpu.threads: expected an integer, got inf"),
])
def test_empty_or_hostile_cpu_fields_name_host_and_field(cpu, needle):
    with pytest.raises(AnsibleFilterError) as exc:
        gpu_affinity_plan({"cpu": cpu, "gpus": [GPU]}, host="gpu-b07")
    msg = str(exc.value)
    assert msg.startswith("gpu_affinity_plan (host gpu-b07): ") and needle in msg
    assert "max()" not in msg


@pytest.mark.parametrize("gpu,needle", [
    ({"index": 0, "numa_node": 0.5}, "gpus[0].numa_node: expected an integer, got 0.5"),
    ({"index": 0, "numa_node": 0, "local_cpus": "3-1"}, "gpus[0].local_cpus: descending range"),
    ({"index": "x"}, "gpus[0].index: expected an integer"),
])
def test_hostile_gpu_fields_name_the_gpu_and_field(gpu, needle):
    with pytest.raises(AnsibleFilterError, match="host n1.*" + needle.replace("[", r"\[").replace("]", r"\]")):
        gpu_affinity_plan({"cpu": {"numa_nodes": [{"id": 0, "cpus": "0-3"}]}, "gpus": [gpu]}, host="n1")


def test_gpu_on_a_node_with_empty_cpus_falls_back_and_says_so():
    hw = {"cpu": {"numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": ""}], "sockets": 1},
          "gpus": [{"index": 0, "numa_node": 1, "local_cpus": ""}]}
    report = gpu_affinity_plan(hw, report=True, reserved_cores_per_socket=0)
    assert report["gpus"][0]["cpus"] == "0-3" and report["gpus"][0]["fallback"] == "all"
    assert "numa_node 1 has no CPUs and local_cpus are unknown" in report["warnings"][-1]


def test_gres_and_pins_refuse_bad_reports_and_templates():
    plan = gpu_affinity_plan(V100)
    with pytest.raises(AnsibleFilterError, match=r"file_template '/dev/nvidia\{idx\}': KeyError"):
        gpu_affinity_gres_conf(plan, file_template="/dev/nvidia{idx}")
    with pytest.raises(AnsibleFilterError, match="file_template .*AttributeError"):
        gpu_affinity_gres_conf(plan, file_template="{index.nope}")
    with pytest.raises(AnsibleFilterError, match="expected the gpu_affinity_plan report"):
        gpu_affinity_gres_conf("not a report")
    with pytest.raises(AnsibleFilterError, match=r"gpu_affinity_systemd_services: expected a list"):
        gpu_affinity_service_pins(plan, 5)
    with pytest.raises(AnsibleFilterError, match=r"\(host h\): gpu_affinity_systemd_services\[0\].gpus: expected an integer, got 1.5"):
        gpu_affinity_service_pins(plan, [{"name": "t", "gpus": [1.5]}], host="h")
    with pytest.raises(AnsibleFilterError, match="plan GPU 0 cpus: bad range"):
        gpu_affinity_service_pins([{"index": 0, "cpus": "1-x"}], [{"name": "t", "gpus": [0]}])
    assert gpu_affinity_service_pins(plan, [{"name": "t", "gpus": ["1"]}])[0]["gpus"] == [1]
    with pytest.raises(AnsibleFilterError, match="expected the gpu_affinity_plan report or its list of GPUs, got list"):
        gpu_affinity_gres_conf([1, 2])
    with pytest.raises(AnsibleFilterError, match="gres.conf: plan entry 0 has no slurm_cores"):
        gpu_affinity_gres_conf([{"index": 0, "cpus": "1"}])


@pytest.mark.parametrize("policy,expected", [("bind", "bind"), ("none", "none"), ("preferred", "preferred")])
def test_service_numa_policy_is_taken_from_the_service(policy, expected):
    pins = gpu_affinity_service_pins(gpu_affinity_plan(V100), [{"name": "t", "gpus": [0], "numa_policy": policy}])
    assert pins == [{"name": "t.service", "gpus": [0], "cpus": "1-3,25-27", "mems": "0", "policy": expected}]
    with pytest.raises(AnsibleFilterError, match=r"\(t\): numa_policy must be bind, preferred or none"):
        gpu_affinity_service_pins(gpu_affinity_plan(V100), [{"name": "t", "gpus": [0], "numa_policy": "interleave"}])


# --- hostile inputs: a verdict or an AnsibleFilterError, never anything else -----------------

HOSTILE_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10 ** 20), max_value=10 ** 20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", " ", "0", "-1", "²", "٣", "0-3", "3-1", "0-99999999", "0-4294967295",
                     "0-62:2", "0-3:0", "1,,2", "x", "0x10", "1e3", "false", "yes", "N/A",
                     "\x00", "0-3,8-11", "{index}", "{0}", "{index.real}"]),
    st.text(max_size=12))
HOSTILE = st.recursive(HOSTILE_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)
CPULIST = st.one_of(HOSTILE_SCALARS, st.sampled_from(["0-7", "8-15", "0-3,8-11", "4-7,12-15", "16-31"]))
NODE = st.fixed_dictionaries({"id": st.one_of(st.integers(-2, 3), HOSTILE_SCALARS), "cpus": CPULIST})
GPU_DOC = st.fixed_dictionaries({}, optional={
    "index": st.one_of(st.integers(-1, 8), HOSTILE_SCALARS), "numa_node": st.one_of(st.integers(-1, 3), HOSTILE_SCALARS),
    "local_cpus": CPULIST, "pci_bus_id": HOSTILE_SCALARS, "uuid": HOSTILE_SCALARS})
CPU_DOC = st.fixed_dictionaries({}, optional={
    "numa_nodes": st.one_of(st.lists(NODE, max_size=4), HOSTILE), "core_cpus": st.one_of(st.lists(CPULIST, max_size=6), HOSTILE),
    "sockets": st.one_of(st.integers(-1, 4), HOSTILE_SCALARS), "threads": st.one_of(st.integers(-1, 64), HOSTILE_SCALARS),
    "socket_cpus": st.one_of(st.lists(CPULIST, max_size=3), HOSTILE)})
HW = st.one_of(HOSTILE, st.fixed_dictionaries({"cpu": st.one_of(CPU_DOC, HOSTILE),
                                               "gpus": st.one_of(st.lists(GPU_DOC, max_size=5), HOSTILE)}))
OPTIONS = st.fixed_dictionaries({}, optional={
    "reserved_cores_per_socket": st.one_of(st.integers(0, 3), HOSTILE_SCALARS),
    "include_smt": st.one_of(st.booleans(), HOSTILE_SCALARS),
    "policy": st.one_of(st.sampled_from(["numa_local", "socket"]), HOSTILE_SCALARS),
    "max_cores_per_gpu": st.one_of(st.integers(0, 4), HOSTILE_SCALARS),
    "report": st.one_of(st.booleans(), HOSTILE_SCALARS)})


def _finite(value):
    return not isinstance(value, float) or math.isfinite(value)


@settings(max_examples=1500, deadline=None)
@given(HW, OPTIONS)
def test_hostile_documents_and_options_give_a_plan_or_a_named_error(hw, options):
    try:
        out = gpu_affinity_plan(hw, host="h-1", **options)
    except AnsibleFilterError as exc:
        msg = str(exc)
        assert msg.startswith("gpu_affinity_plan (host h-1): ") and len(msg) > 40
        assert "Traceback" not in msg and "max() arg" not in msg
        return
    plan = out["gpus"] if isinstance(out, dict) else out
    seen = set()
    for entry in plan:
        cpus = set(int(c) for part in entry["cpus"].split(",") if part
                   for c in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)))
        assert cpus and not cpus & seen, plan        # every GPU has CPUs, none shared
        seen |= cpus
        assert max(cpus) <= 16383
    json.dumps(out, allow_nan=False)                 # a strict-JSON plan


@settings(max_examples=600, deadline=None)
@given(HOSTILE, HOSTILE, st.one_of(st.just("/dev/nvidia{index}"), HOSTILE_SCALARS))
def test_hostile_reports_services_and_templates_give_lines_or_a_named_error(report, services, template):
    for call in (lambda: gpu_affinity_gres_conf(report, file_template=template, host="h-2"),
                 lambda: gpu_affinity_service_pins(report, services, host="h-2")):
        try:
            call()
        except AnsibleFilterError as exc:
            assert "(host h-2): " in str(exc)


@pytest.mark.parametrize("option", ["reserved_cores_per_socket", "max_cores_per_gpu"])
def test_count_bounds_are_inclusive(option):
    assert gpu_affinity_plan({"cpu": {"threads": 4}, "gpus": []}, **{option: 16383}) == []
    with pytest.raises(AnsibleFilterError, match="got 16384 \\(int\\)"):
        gpu_affinity_plan({"cpu": {"threads": 4}, "gpus": []}, **{option: 16384})
    with pytest.raises(AnsibleFilterError, match=r"got '9{36}\.\.\. \(str\)"):
        gpu_affinity_plan({"cpu": {"threads": 4}, "gpus": []}, **{option: "9" * 400})


def test_pins_against_an_empty_plan_say_it_has_no_gpus():
    with pytest.raises(AnsibleFilterError, match=r"GPU 0 is not in the plan \(GPUs none\)"):
        gpu_affinity_service_pins([], [{"name": "t", "gpus": [0]}])
