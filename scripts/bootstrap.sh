#!/usr/bin/env bash
# Create .venv with the pinned Python dependencies and the Ansible collections the code uses,
# and make this checkout importable as the collection dlrack.node.
# Idempotent: a stamp file records what was installed; a second run reuses it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-/usr/bin/python3}
ANSIBLE_WHEEL_VERSION=12.3.0   # bundles containers.podman, community.general, ansible.posix, kubernetes.core
VENV=$ROOT/.venv
COLL=$ROOT/.collections/ansible_collections
stamp=$VENV/.dlrack-stamp
want="$(sha256sum requirements-dev.txt scripts/bootstrap.sh | sha256sum | cut -c1-16)"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # ansible-core 2.19 (requirements-dev.txt) needs Python 3.11 or newer: say so instead of pip's
  # "no matching distribution" (Ubuntu 22.04 has 3.10).
  pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo "unknown")
  case "$pyver" in
    3.1[1-9]|3.[2-9][0-9]) ;;
    *) echo "bootstrap: $PY is Python $pyver; the pinned ansible-core 2.19 needs Python 3.11 or newer" \
            "(Debian 12 has 3.11, Ubuntu 24.04 3.12): run with PYTHON=/path/to/python3.11" >&2
       exit 1 ;;
  esac
  if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "bootstrap: python3-venv is missing; installing it with apt" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null
  fi
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  # Collections from the ansible wheel (Galaxy is not reachable): extract only what we use.
  tmp=$(mktemp -d)
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
      "ansible==$ANSIBLE_WHEEL_VERSION" -d "$tmp"
  rm -rf "$VENV/collections"
  mkdir -p "$VENV/collections"
  "$VENV/bin/python" - "$tmp"/ansible-*.whl "$VENV/collections" <<'PYEOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
keep = ("ansible_collections/containers/podman/", "ansible_collections/community/general/",
        "ansible_collections/ansible/posix/", "ansible_collections/kubernetes/core/")
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith(keep)])
PYEOF
  rm -rf "$tmp"
  echo "$want" > "$stamp"
fi

# This checkout is the collection dlrack.node: link it where Ansible looks for collections.
mkdir -p "$COLL/dlrack"
ln -sfn "$ROOT" "$COLL/dlrack/node"
for c in containers/podman community/general ansible/posix kubernetes/core; do
  mkdir -p "$COLL/${c%/*}"
  ln -sfn "$VENV/collections/ansible_collections/$c" "$COLL/$c"
done
# The version from the package itself: `ansible --version | head -1` under pipefail made ansible
# print a "Broken pipe" traceback whenever head closed the pipe before ansible had written it all.
echo "bootstrap: .venv ready (ansible-core $("$VENV/bin/python" -c 'from ansible.release import __version__; print(__version__)'))"
