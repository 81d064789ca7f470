#!/usr/bin/env bash
# Acceptance run on one real GPU machine, from the repository root, as root:
#   OUT=/some/dir scripts/device-check.sh
# 1. the GPU measurement alone, straight from its file (python3 only, no Ansible):
#      python3 plugins/module_utils/acceptance/gpu.py  -> $OUT/acc/gpu-standalone.json
# 2. the playbook against localhost, the hot tier = a temporary directory on local disk (storage is
#    measured when fio is installed, else skipped with the reason), no cold tier:
#      ansible-playbook playbooks/acceptance.yml -i localhost, -c local -e dlrack_report_dir=$OUT/acc ...
#    -> $OUT/acc/acceptance.{json,xml,html}; then prints acceptance.json.
# Needs ansible-core importable by python3 (ansible-playbook on PATH, or `python3 -m ansible`).
# Leaves nothing behind but $OUT/acc (the temporary collection link and hot directory are removed).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/reports/device-check}
ACC=$OUT/acc
mkdir -p "$ACC"
PY=${PYTHON:-$(command -v python3)}
WORK=$(mktemp -d /var/tmp/dlrack-device-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1

echo "== host: $(uname -n) $(uname -r), $($PY -V 2>&1), fio: $(command -v fio || echo absent), dcgmi: $(command -v dcgmi || echo absent)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -q -x > "$ACC/nvidia-smi-q-x.xml" 2>&1 || true
  nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.current,persistence_mode --format=csv || true
fi

echo "== 1. GPU bandwidth, standalone (python3 plugins/module_utils/acceptance/gpu.py)"
timeout 300 "$PY" plugins/module_utils/acceptance/gpu.py > "$ACC/gpu-standalone.json"
echo "rc=$?"; cat "$ACC/gpu-standalone.json"

echo "== 2. ansible-playbook playbooks/acceptance.yml"
mkdir -p "$WORK/coll/ansible_collections/dlrack" "$WORK/hot"
ln -s "$ROOT" "$WORK/coll/ansible_collections/dlrack/node"
cat > "$WORK/ansible.cfg" <<EOF
[defaults]
collections_path = $WORK/coll
interpreter_python = $PY
callback_result_format = yaml
retry_files_enabled = False
host_key_checking = False
EOF
export ANSIBLE_CONFIG=$WORK/ansible.cfg ANSIBLE_LOCAL_TEMP=$WORK/tmp ANSIBLE_FORCE_COLOR=0
if command -v ansible-playbook >/dev/null; then AP=(ansible-playbook); else AP=("$PY" -m ansible playbook); fi
timeout 480 "${AP[@]}" playbooks/acceptance.yml -i localhost, -c local \
  -e dlrack_report_dir="$ACC" -e acceptance_hot_path="$WORK/hot" -e acceptance_cold_path= \
  -e acceptance_require_mount=false -e acceptance_become=false 2>&1 | tee "$ACC/ansible.log"
rc=${PIPESTATUS[0]}
echo "ansible-playbook rc=$rc (non-zero also when a host has an error verdict: dlrack_fail_on=error)"
left=$(find "$WORK/hot" -mindepth 1 | wc -l)
echo "scratch files left in the hot directory: $left"
if [ -f "$ACC/acceptance.json" ]; then cat "$ACC/acceptance.json"; else echo "no acceptance.json written"; fi
exit "$rc"
