"""Issue 9: a hostile fleet is validated and reported within a hard address-space limit (the
`ulimit -v` of a pipeline runner). 2,000 hosts declaring absurd counts, cpulists and non-finite
values go through the same path as the action plugin (collect_host_inputs -> run_preflight ->
report.json/xml/html) in a child process whose RLIMIT_AS is 1.5 GiB: every host gets a verdict,
no MemoryError, strict JSON."""
import json
import os
import subprocess
import sys

from testpaths import COLLECTIONS  # noqa: E402  (tests/ is on sys.path: conftest)

CHILD = r"""
import json, resource, sys
limit = 1536 * 1024 * 1024
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
hostile = [
    {"source": "declared", "cpu": {"model": "AMD EPYC 9654 96-Core Processor", "sockets": 1000000000000,
                                   "numa_nodes": [{"id": 0, "cpus": "0-4294967295"}, {"id": 1, "cpus": "0-99999999"}]},
     "memory": {"total_mb": float("nan")}, "gpus": {"model": "NVIDIA H100 80GB HBM3", "count": 1000000},
     "disks": {"kind": "nvme", "count": 10 ** 9}},
    {"source": "declared", "cpu": {"cores": int("9" * 400), "threads": "\u00b2"}, "gpus": None,
     "workload": {"kind": "lora", "model_params_b": float("inf")}},
    {"source": "declared", "cpu": {"model": "x\" onmouseover=\"alert(1)", "sockets": 2},
     "gpus": [{"index": 0, "numa_node": 7}, {"index": 0}], "disks": "nvme"},
]
settings = [{}, {"dlrack_thresholds": "fast"}, {"dlrack_severity": {"memory.ecc": "off"}, "dlrack_workload": []}]
inputs = {}
for i in range(2000):
    hv = dict(settings[i % 3], dlrack_hw=hostile[i % 3])
    inputs["h%04d-\u2603\x01" % i] = collect_host_inputs("h%04d" % i, hv)
out = run_preflight(inputs, report_dir=sys.argv[1])
print(json.dumps({"hosts": len(out["host_status"]), "statuses": sorted(set(out["host_status"].values())),
                  "report_error": out.get("report_error")}))
"""


def test_hostile_fleet_under_an_address_space_limit(tmp_path):
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["hosts"] == 2000 and res["report_error"] is None
    assert res["statuses"] == ["fail"]

    def no_constants(name):
        raise ValueError("report.json holds %s: not strict JSON" % name)
    with open(str(tmp_path / "report.json")) as f:
        doc = json.loads(f.read(), parse_constant=no_constants)
    assert len(doc["hosts"]) == 2000
