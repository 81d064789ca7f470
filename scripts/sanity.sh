#!/usr/bin/env bash
# ansible-test sanity on this checkout as ansible-test wants it: the collection's files (tracked
# and new, not ignored) copied to .cache/sanity/ansible_collections/dlrack/node, its dependencies
# (from .venv/collections, see bootstrap.sh) next to it, a git repository there so ansible-test
# sees exactly those files. Extra arguments go to ansible-test (e.g. --test pylint).
#   make sanity            # every test that can run here; exit status 0 when clean
#   ./scripts/sanity.sh units   # ansible-test units on the same copy
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=$ROOT/.cache/sanity
DEST=$BASE/ansible_collections/dlrack/node
PY=${SANITY_PYTHON:-3.11}
cmd=sanity
if [ "${1:-}" = units ]; then cmd=units; shift; fi

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
cd "$DEST"
git init -q
git add -A
git -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity --no-verify

if [ "$cmd" = units ]; then
  exec ansible-test units --local --python "$PY" --color no "$@"
fi
# shellcheck is an apt package (scripts/test-deps.sh installs it); without it ansible-test skips
# the shellcheck test with a warning, which must not pass silently.
command -v shellcheck >/dev/null || { echo "sanity: shellcheck missing (scripts/test-deps.sh)" >&2; exit 2; }
exec ansible-test sanity --local --python "$PY" --color no "$@"
