#!/usr/bin/env bash
# Two loop devices for the acceptance scenario, made on the HOST (loop devices are host-global),
# two very different tiers: hot.img on tmpfs (/dev/shm: memory speed) and cold.img on the disk
# under $DIR, attached with --direct-io=on so its reads reach the disk, not the host's page cache.
# Only the loops backed by these files are ever detached.
#   loops.sh setup    -> creates both images (ext4), attaches them, writes $DIR/loops.json
#   loops.sh teardown -> detaches them and deletes $DIR and the tmpfs image
set -euo pipefail
DIR=${DLRACK_LOOP_DIR:-/var/tmp/dlrack-acceptance}
SHM=${DLRACK_LOOP_SHM:-/dev/shm/dlrack-acceptance-hot.img}
teardown() {
  for img in "$SHM" "$DIR/cold.img" "$DIR/hot.img"; do
    if [ -e "$img" ]; then
      for dev in $(losetup -j "$img" -O NAME -n 2>/dev/null); do losetup -d "$dev" || true; done
    fi
  done
  rm -rf "$DIR"
  rm -f "$SHM"
}
case "${1:-}" in
  teardown) teardown ;;
  setup)
    teardown
    mkdir -p "$DIR"
    truncate -s 512M "$SHM"
    mkfs.ext4 -q -F -L dlrack-acc-hot "$SHM"
    truncate -s 512M "$DIR/cold.img"
    mkfs.ext4 -q -F -L dlrack-acc-cold "$DIR/cold.img"
    hot=$(losetup --find --show "$SHM")
    cold=$(losetup --find --show --direct-io=on "$DIR/cold.img")
    printf '{"hot": "%s", "cold": "%s"}\n' "$hot" "$cold" > "$DIR/loops.json"
    cat "$DIR/loops.json" ;;
  *) echo "usage: $0 setup|teardown" >&2; exit 2 ;;
esac
