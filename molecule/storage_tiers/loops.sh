#!/usr/bin/env bash
# Loop devices for the storage_tiers container scenario, made on the HOST (loop devices are
# host-global) from sparse files under $DIR; only loops backed by these files are ever detached.
#   loops.sh setup    -> creates the files, attaches them, writes $DIR/loops.json and loops.env
#   loops.sh teardown -> detaches the loops backed by $DIR/*.img and deletes the files
# Devices: hot, cold (converge), fs (ext4 with a file), pt (GPT + partition), mnt (ext4, mounted in
# the container by prepare), fresh1, fresh2 (check-mode vs real run on a fresh node), spare1, spare2
# (blank; plans refused for where they would mount must leave them blank).
set -euo pipefail
DIR=${DLRACK_LOOP_DIR:-/var/tmp/dlrack-storage-tiers}
NAMES="hot cold fs pt mnt fresh1 fresh2 spare1 spare2"
teardown() {
  for f in "$DIR"/*.img; do
    [ -e "$f" ] || continue
    for dev in $(losetup -j "$f" -O NAME -n 2>/dev/null); do losetup -d "$dev" || true; done
  done
  rm -rf "$DIR"
}
case "${1:-}" in
  teardown) teardown ;;
  setup)
    teardown
    mkdir -p "$DIR/seed"
    head -c 1048576 /dev/urandom > "$DIR/seed/data.bin"
    echo '{' > "$DIR/loops.json.tmp"; : > "$DIR/loops.env"
    sep=""
    for n in $NAMES; do
      truncate -s 320M "$DIR/$n.img"
      case $n in
        fs)  mkfs.ext4 -q -F -L olddata -d "$DIR/seed" "$DIR/$n.img" ;;
        mnt) mkfs.ext4 -q -F -L busy "$DIR/$n.img" ;;
        pt)  printf 'label: gpt\n,64M\n' | sfdisk -q "$DIR/$n.img" ;;
      esac
      partscan=()
      [ "$n" = pt ] && partscan=(-P)
      dev=$(losetup --find --show "${partscan[@]}" "$DIR/$n.img")
      printf '%s"%s": "%s"' "$sep" "$n" "$dev" >> "$DIR/loops.json.tmp"; sep=", "
      echo "LOOP_$n=$dev" >> "$DIR/loops.env"
    done
    echo '}' >> "$DIR/loops.json.tmp"; mv "$DIR/loops.json.tmp" "$DIR/loops.json"
    sha256sum "$DIR/seed/data.bin" | cut -d' ' -f1 > "$DIR/data.sha256"
    cat "$DIR/loops.json" ;;
  *) echo "usage: $0 setup|teardown" >&2; exit 2 ;;
esac
