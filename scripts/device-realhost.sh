#!/usr/bin/env bash
# Issue 11's real-host path on one GPU machine, from the repository root, as root (OUT=dir):
#  1. hw_facts live vs ansible's setup (wall time of each, via ansible's ad-hoc command);
#  2. the pre-flight on localhost with gathering (report under $OUT/rh/pf);
#  3. the affinity plan from the gathered document, the node library installed the way the
#     role does it, the dlrack-gpu-bind launcher rendered from the role's template, and a venv
#     made with --without-pip (system site-packages for torch) running a real DataLoader whose
#     workers are split with WorkerPinner(split=True) -- imported through the launcher only.
# Needs ansible-core importable by python3. Writes only under $OUT/rh and a temporary directory.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/reports/device-realhost}
RH=$OUT/rh
mkdir -p "$RH"
PY=${PYTHON:-$(command -v python3)}
WORK=$(mktemp -d /var/tmp/dlrack-realhost.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
mkdir -p "$WORK/coll/ansible_collections/dlrack"
ln -s "$ROOT" "$WORK/coll/ansible_collections/dlrack/node"
cat > "$WORK/ansible.cfg" <<EOF
[defaults]
collections_path = $WORK/coll
interpreter_python = $PY
retry_files_enabled = False
EOF
export ANSIBLE_CONFIG=$WORK/ansible.cfg ANSIBLE_LOCAL_TEMP=$WORK/tmp ANSIBLE_FORCE_COLOR=0
if command -v ansible >/dev/null; then AN=(ansible); AP=(ansible-playbook); else AN=("$PY" -m ansible adhoc); AP=("$PY" -m ansible playbook); fi

STEPS=${STEPS:-123}   # which of the three steps to run
echo "== 1. hw_facts vs setup (3 runs each, wall seconds)"
for i in 1 2 3; do
  case $STEPS in *1*) ;; *) break ;; esac
  for m in dlrack.node.hw_facts setup; do
    t0=$(date +%s%N); "${AN[@]}" localhost -i localhost, -c local -m "$m" > "$RH/$m.$i.out" 2>&1; rc=$?; t1=$(date +%s%N)
    echo "$m run $i: rc=$rc $(( (t1 - t0) / 1000000 )) ms"
  done
done
sed -n '1,400p' "$RH/dlrack.node.hw_facts.1.out" | head -c 20000 > "$RH/hw_facts.txt"

echo "== 2. pre-flight with gathering"
case $STEPS in *2*) ;; *) echo skipped ;; esac
[[ $STEPS == *2* ]] && timeout 300 "${AP[@]}" playbooks/preflight.yml -i localhost, -c local -e dlrack_report_dir="$RH/pf" \
  -e dlrack_fail_on=never -e dlrack_become=false 2>&1 | tail -40
echo "preflight rc=${PIPESTATUS[0]}"

echo "== 3. affinity plan, launcher, venv DataLoader"
"$PY" - "$WORK" "$ROOT" <<'PYEOF'
import json, os, sys
work, root = sys.argv[1], sys.argv[2]
sys.path[:0] = [os.path.join(work, "coll"), os.path.join(root, "tests")]
from ansible_collections.dlrack.node.plugins.module_utils.hw.gather import gather
from ansible_collections.dlrack.node.plugins.plugin_utils.affinity import plan_gpu_affinity_report
from nodelib import install_node_lib
hw = gather()
print("errors:", hw.get("errors"))
print("gpus:", [(g.get("index"), g.get("model"), g.get("pci_bus_id"), g.get("numa_node"), g.get("pcie"),
                 g.get("ecc_enabled"), g.get("nvlink_active")) for g in hw.get("gpus") or []])
rep = plan_gpu_affinity_report(hw, reserved_cores_per_socket=1)
print("plan:", json.dumps(rep["gpus"]), "warnings:", rep["warnings"])
json.dump(rep, open(os.path.join(work, "plan.json"), "w"))
lib = install_node_lib(os.path.join(work, "lib"), root=root)
tpl = open(os.path.join(root, "roles/gpu_affinity/templates/dlrack-gpu-bind.j2")).read()
tpl = (tpl.replace("{{ gpu_affinity_launcher_python }}", sys.executable)
          .replace("{{ ansible_managed }}", "rendered by scripts/device-realhost.sh")
          .replace("{{ gpu_affinity_lib_dir | to_json }}", json.dumps(lib))
          .replace("{{ gpu_affinity_lib_dir }}", lib)
          .replace("{{ gpu_affinity_plan_path | to_json }}", json.dumps(os.path.join(work, "plan.json")))
          .replace("{{ gpu_affinity_plan_path }}", os.path.join(work, "plan.json")))
with open(os.path.join(work, "dlrack-gpu-bind"), "w") as f:
    f.write(tpl)
os.chmod(os.path.join(work, "dlrack-gpu-bind"), 0o755)
PYEOF
"$PY" -m venv --without-pip "$WORK/venv"
# torch for the loader: python3 may itself be a venv (its site-packages are not "system" ones),
# so the new venv sees torch's directory through a .pth; dlrack_affinity is not there.
torch_dir=$("$PY" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))" 2>/dev/null)
[ -n "$torch_dir" ] && echo "$torch_dir" > "$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch-site.pth"
cat > "$WORK/loader.py" <<'PYEOF'
import os, sys, torch
from torch.utils.data import DataLoader, Dataset
import dlrack_affinity
class D(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        return torch.tensor([torch.utils.data.get_worker_info().id, len(os.sched_getaffinity(0)), min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))])
def main():
    seen = {}
    loader = DataLoader(D(), batch_size=4, num_workers=4, multiprocessing_context="spawn",
                        worker_init_fn=dlrack_affinity.WorkerPinner(split=True))
    for b in loader:
        for w, n, lo, hi in b.tolist():
            seen[w] = (n, lo, hi)
    print("python", sys.executable, "main process CPUs", sorted(os.sched_getaffinity(0)))
    print("workers (count, first, last CPU):", sorted(seen.items()))
    x = torch.ones(1 << 20, device="cuda")
    print("cuda ok", float(x.sum()))


if __name__ == "__main__":
    main()
PYEOF
echo "-- without the launcher (control: expected ImportError):"
"$WORK/venv/bin/python" -c "import dlrack_affinity" 2>&1 | tail -1
echo "-- through dlrack-gpu-bind --gpu 0:"
timeout 240 "$WORK/dlrack-gpu-bind" --gpu 0 "$WORK/venv/bin/python" "$WORK/loader.py" 2>&1 | tail -8
echo "launcher rc=${PIPESTATUS[0]}"
cp "$WORK/plan.json" "$RH/plan.json" 2>/dev/null
