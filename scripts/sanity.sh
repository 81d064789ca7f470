#!/usr/bin/env bash
# ansible-test sanity on this checkout as ansible-test wants it: the collection's files (tracked
# and new, not ignored) copied to .cache/sanity/ansible_collections/dlrack/node, its dependencies
# (from .venv/collections, see bootstrap.sh) next to it, a git repository there so ansible-test
# sees exactly those files. Extra arguments go to ansible-test (e.g. --test pylint).
#   make sanity            # every test that can run here; exit status 0 when clean
#   ./scripts/sanity.sh units [TARGETS]  # ansible-test units on a copy in .cache/units (make units-ansible-test)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${SANITY_PYTHON:-3.11}
cmd=sanity
if [ "${1:-}" = units ]; then cmd=units; shift; fi
# units in a copy of its own (.cache/units): make sanity and make units-ansible-test can run at once.
BASE=$ROOT/.cache/$cmd
DEST=$BASE/ansible_collections/dlrack/node

rm -rf "$DEST"
mkdir -p "$DEST"
# Copy the files git would commit (tracked and untracked-but-not-ignored, minus deleted ones).
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done \
  | tar -C "$ROOT" --null -T - -cf - | tar -C "$DEST" -xf -
for c in ansible/posix community/general containers/podman; do
  mkdir -p "$BASE/ansible_collections/${c%/*}"
  ln -sfn "$ROOT/.venv/collections/ansible_collections/$c" "$BASE/ansible_collections/$c"
done

# ansible-test bootstraps pip in each of its test venvs with a get-pip.py it downloads from
# ci-files.testing.ansible.com; where that host is unreachable (an offline CI runner, this lab) but a
# package index is, stand in for it with the pip of .venv (get-pip.py does the same: pip install ARGS
# with a pip that is not installed in the target). ansible-test looks for it in its cache first.
pipver=$(python - <<'PY'
import re, ansible_test, os
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
getpip=$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py
if [ ! -f "$getpip" ] && ! python -c 'import urllib.request as u; u.urlopen("https://ci-files.testing.ansible.com/", timeout=10)' 2>/dev/null; then
  mkdir -p "$HOME/.ansible/test/cache/dlrack-pip"
  rm -rf "$HOME/.ansible/test/cache/dlrack-pip/pip"
  cp -r "$(python -c 'import os, pip; print(os.path.dirname(pip.__file__))')" "$HOME/.ansible/test/cache/dlrack-pip/pip"
  cat > "$getpip" <<PY
# Offline stand-in for get-pip.py, written by dlrack.node scripts/sanity.sh: pip install ARGS with a
# copy of .venv's pip (not installed in the target venv, so pip==$pipver is installed for real).
import sys
sys.path.insert(0, "$HOME/.ansible/test/cache/dlrack-pip")
from pip._internal.cli.main import main
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--no-cache-dir"] + args))
PY
fi

cd "$DEST"
git init -q
git add -A
git -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity --no-verify

if [ "$cmd" = units ]; then
  # A venv of ansible-test's own (its pinned pytest, pytest-xdist, mock...) plus
  # tests/unit/requirements.txt, so that .venv keeps the project's pins.
  exec ansible-test units --venv --requirements --python "$PY" --color no "$@"
fi
# The shellcheck tool is an apt package (scripts/test-deps.sh installs it); without it ansible-test
# skips that test with a warning, which must not pass silently.
command -v shellcheck >/dev/null || { echo "sanity: shellcheck missing (scripts/test-deps.sh)" >&2; exit 2; }
exec ansible-test sanity --local --python "$PY" --color no "$@"
