#!/usr/bin/env bash
# One loop device for the acceptance scenario, made on the HOST from a sparse file under $DIR
# (loop devices are host-global); only the loop backed by that file is ever detached.
#   loops.sh setup    -> creates $DIR/hot.img (ext4), attaches it, writes $DIR/loops.json
#   loops.sh teardown -> detaches it and deletes $DIR
set -euo pipefail
DIR=${DLRACK_LOOP_DIR:-/var/tmp/dlrack-acceptance}
teardown() {
  if [ -e "$DIR/hot.img" ]; then
    for dev in $(losetup -j "$DIR/hot.img" -O NAME -n 2>/dev/null); do losetup -d "$dev" || true; done
  fi
  rm -rf "$DIR"
}
case "${1:-}" in
  teardown) teardown ;;
  setup)
    teardown
    mkdir -p "$DIR"
    truncate -s 512M "$DIR/hot.img"
    mkfs.ext4 -q -F -L dlrack-acc-hot "$DIR/hot.img"
    dev=$(losetup --find --show "$DIR/hot.img")
    printf '{"hot": "%s"}\n' "$dev" > "$DIR/loops.json"
    cat "$DIR/loops.json" ;;
  *) echo "usage: $0 setup|teardown" >&2; exit 2 ;;
esac
