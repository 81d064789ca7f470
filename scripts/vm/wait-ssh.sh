#!/usr/bin/env bash
# Wait until the guest answers ssh on 127.0.0.1:PORT (or give up after $DLRACK_VM_BOOT_TIMEOUT s).
set -euo pipefail
RUN=${1:?run dir}; PORT=${2:?port}
CACHE=${DLRACK_VM_CACHE:-/var/cache/dlrack-vm}
deadline=$(( $(date +%s) + ${DLRACK_VM_BOOT_TIMEOUT:-300} ))
start=$(date +%s)
while :; do
  if ssh -q -i "$CACHE/id_ed25519" -p "$PORT" -o BatchMode=yes -o ConnectTimeout=5 \
       -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1 true 2>/dev/null; then
    echo "vm: ssh up on 127.0.0.1:$PORT after $(( $(date +%s) - start ))s"; exit 0
  fi
  if [ -f "$RUN/qemu.pid" ] && ! kill -0 "$(cat "$RUN/qemu.pid")" 2>/dev/null; then
    echo "vm: qemu exited; console tail:" >&2; tail -30 "$RUN/console.log" >&2 || true; exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "vm: no ssh after ${DLRACK_VM_BOOT_TIMEOUT:-300}s; console tail:" >&2; tail -30 "$RUN/console.log" >&2; exit 1
  fi
  sleep 3
done
