#!/bin/sh
# What the second nvidia-smi call costs: run on a GPU host from the repository root.
#   sh benchmarks/nvlink_cost.sh OUTDIR
# Times `nvidia-smi -q -x` and `nvidia-smi nvlink -s` (5 runs each, alternating), keeps their
# outputs, and times hw_facts' gather() on the live host with and without nvidia-smi.
set -u
out=${1:-/tmp/nvlink-cost}
mkdir -p "$out"
nvidia-smi -L > "$out/nvidia-smi-L.txt" 2>&1
nvidia-smi -q -x > "$out/nvidia-smi-q-x.xml" 2>&1; echo "q -x rc=$?" > "$out/rc.txt"
nvidia-smi nvlink -s > "$out/nvidia-smi-nvlink-s.txt" 2>&1; echo "nvlink -s rc=$?" >> "$out/rc.txt"
nvidia-smi topo -m > "$out/nvidia-smi-topo-m.txt" 2>&1; echo "topo -m rc=$?" >> "$out/rc.txt"
tmp=$(mktemp -d)
mkdir -p "$tmp/ansible_collections/dlrack"
ln -s "$PWD" "$tmp/ansible_collections/dlrack/node"
PYTHONPATH="$tmp" python3 - "$out" <<'PY'
import json, os, subprocess, sys, time
out = sys.argv[1]
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers.nvidia_smi import parse_nvlink_status

def timed(argv):
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t

res = {"q_x_s": [], "nvlink_s_s": [], "gather_s": [], "gather_no_smi_s": []}
for _ in range(5):
    res["q_x_s"].append(timed(["nvidia-smi", "-q", "-x"]))
    res["nvlink_s_s"].append(timed(["nvidia-smi", "nvlink", "-s"]))
for _ in range(3):
    t = time.perf_counter(); doc = gather(); res["gather_s"].append(time.perf_counter() - t)
    t = time.perf_counter(); gather(nvidia_smi="never"); res["gather_no_smi_s"].append(time.perf_counter() - t)
with open(os.path.join(out, "nvidia-smi-nvlink-s.txt")) as fh:
    res["nvlink_parsed"] = parse_nvlink_status(fh.read())
res["median"] = dict((k, sorted(v)[len(v) // 2]) for k, v in res.items() if k.endswith("_s"))
res["gathered"] = doc
json.dump(res, open(os.path.join(out, "nvlink_cost.json"), "w"), indent=1, default=str)
print(json.dumps(res["median"]), json.dumps(res["nvlink_parsed"]), doc["errors"])
print(json.dumps([{k: g.get(k) for k in ("model", "pci_bus_id", "memory_mb", "nvlink_active", "local_cpus", "pcie")} for g in doc["gpus"]]))
PY
rm -rf "$tmp"
cat "$out/rc.txt"
