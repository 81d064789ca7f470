#!/usr/bin/env bash
# Stop the guest of RUN_DIR (poweroff over ssh when it answers, then the qemu pid); with --clean
# also delete the run dir (overlay and disk images). Only the pid recorded in RUN_DIR is touched.
set -uo pipefail
RUN=${1:?run dir}; PORT=${2:-}; CLEAN=${3:-}
CACHE=${DLRACK_VM_CACHE:-/var/cache/dlrack-vm}
pid=$(cat "$RUN/qemu.pid" 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  if [ -n "$PORT" ]; then
    ssh -q -i "$CACHE/id_ed25519" -p "$PORT" -o BatchMode=yes -o ConnectTimeout=5 \
      -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1 'sync; systemctl poweroff' 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
fi
rm -f "$RUN/qemu.pid"
[ "$CLEAN" = --clean ] && rm -rf "$RUN"
exit 0
