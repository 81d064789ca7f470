"""Reading a node's storage tiers the way a person would by hand (findmnt, /etc/fstab, blkid -p,
stat), for the pytest-testinfra checks of molecule/storage_tiers and molecule/site
(tests/test_node.py of each). Only reading and parsing is here; the assertions are in the tests.

Every `podman exec` costs ~0.7 s, so a test module reads everything it needs in one `host.run`
(`read_sections`) from a module-scoped fixture and its tests parse their part of it.
"""
import json
import os

# The role's fstab options with its defaults: storage_tiers_mount_options ([noatime]), then nofail and
# x-systemd.device-timeout=<storage_tiers_device_timeout> (30s) always; `discard` never (fstrim.timer).
FSTAB_OPTIONS = "noatime,nofail,x-systemd.device-timeout=30s"
# What every tier shows in findmnt: read-write, noatime, and never the discard option.
MOUNT_OPTIONS = {"rw", "noatime"}
# The role's defaults: the mount points and the XFS label of each tier (plugins/module_utils/storage/plan.py fs_label).
TIERS = {"hot": ("/mnt/hot", "dlrack-hot"), "cold": ("/mnt/archive", "dlrack-cold")}
COLD_DIRS = [("datasets", "root", "root", "755"), ("weights", "root", "root", "755"),
             ("logs", "root", "root", "755"), ("results", "root", "root", "755")]


def loop_devices():
    """The loop devices of the scenario, as its verify.yml reads them: $DLRACK_LOOP_DIR/loops.json."""
    loop_dir = os.environ.get("DLRACK_LOOP_DIR")
    if not loop_dir:
        raise RuntimeError("DLRACK_LOOP_DIR is not set: run this through `molecule verify` (the scenario's env sets it)")
    with open(os.path.join(loop_dir, "loops.json"), encoding="utf-8") as f:
        return json.load(f)


MARK = "@@dlrack-section "


def read_sections(host, commands):
    """Run every (name, shell command) of `commands` in ONE host.run; {name: (rc, output)}.

    Each command's stderr goes with its stdout, so a failing test shows what the command said."""
    # `echo` before the rc line: output without a final newline still ends its own line
    script = "".join("echo '%s%s'; { %s; } 2>&1; rc=$?; echo; echo \"%src $rc\"\n" % (MARK, name, cmd, MARK)
                     for name, cmd in commands)
    out = host.run(script)
    sections, name, lines = {}, None, []
    for line in out.stdout.splitlines():
        if line.startswith(MARK + "rc ") and name is not None:
            if lines and not lines[-1]:
                lines.pop()          # the newline that echo added
            sections[name] = (int(line[len(MARK) + 3:]), "\n".join(lines))
            name, lines = None, []
        elif line.startswith(MARK) and name is None:
            name = line[len(MARK):]
        elif name is not None:
            lines.append(line)
    missing = [n for n, dummy in commands if n not in sections]
    assert not missing, "no output for %s from the node (rc=%s): %s %s" % (missing, out.rc, out.stdout[-2000:], out.stderr[-2000:])
    return sections


def tier_commands(devices, dirs):
    """The commands that read the tiers: mounts, fstab, the devices' signatures, the directories."""
    return [
        ("findmnt", "findmnt -J -l -o TARGET,SOURCE,FSTYPE,OPTIONS"),
        ("fstab", "cat /etc/fstab"),
        ("blkid", "blkid -p -o export %s" % " ".join(devices)),
        # %m: the mount point the directory lives on (it must be the tier, not the root under it)
        ("stat", "stat -c '%%n|%%U|%%G|%%a|%%F|%%m' %s" % " ".join(dirs)),
        ("verify", "findmnt --verify"),
    ]


def mounts(findmnt_json):
    """{target: {source, fstype, options (a set)}} from `findmnt -J -l`."""
    return {fs["target"]: {"source": fs["source"], "fstype": fs["fstype"], "options": set(fs["options"].split(","))}
            for fs in json.loads(findmnt_json)["filesystems"]}


def fstab_lines(fstab):
    """The entries of /etc/fstab: each a list of its fields (comments and blank lines left out)."""
    return [line.split() for line in fstab.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def blkid_export(text):
    """{device: {LABEL, UUID, TYPE, ...}} from `blkid -p -o export DEV...`."""
    out, cur = {}, {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if cur.get("DEVNAME"):
                out[cur["DEVNAME"]] = cur
            cur = {}
        elif "=" in line:
            key, value = line.split("=", 1)
            cur[key] = value
    return out


def stats(text):
    """{path: (owner, group, mode, type, mount point)} from the `stat` section."""
    out = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 6:
            out[fields[0]] = tuple(fields[1:])
    return out
