"""Data-safety suite for dlrack.node.storage_tiers, shared by the container and the VM scenario.

Each case runs the role through `ansible-playbook apply.yml` (json callback) with its own variables
and asserts the exact refusal (or completion) AND that the protected data is unchanged: the BLAKE2b
digest (b2sum) of every protected device that nothing has mounted or assembled (and the sha256 of the
file on it) is taken before and compared after. A device that is mounted, or a member of a running
md array, is never compared byte for byte: the kernel writes to it on its own schedule (ext4 lazy
inode-table init and superblock, the XFS log, md superblock event counts on clean/active
transitions), so raw digests would pass or fail by timing. For those the case compares what a
refusal must keep: where it is mounted, the filesystem (and md array) UUID and every file's name,
mode, owner, size and content (:func:`fs_state`).

usage: suite.py container LOOPS_JSON | suite.py vm-converge | suite.py vm-verify
Environment: MOLECULE_INVENTORY_FILE, MOLECULE_PROJECT_DIRECTORY; VM: DLRACK_VM_RUN, DLRACK_VM_PORT.
Each apply prints its wall time; DLRACK_SUITE_TRACE=DIR also keeps each apply's json (task durations).
DLRACK_SUITE_ONLY=TEXT[|TEXT] runs only the cases whose name contains one of them (to re-run a case, or
run new cases against old code; a case that needs an earlier one's state then fails).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY") or os.path.dirname(os.path.dirname(HERE))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE")
RESULTS = []


class Target:
    def __init__(self, argv_prefix):
        self.prefix = argv_prefix

    def sh(self, cmd, check=True):
        p = subprocess.run(self.prefix + ["sh", "-c", cmd] if self.prefix[0] == "podman" else self.prefix + [cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        if check and p.returncode != 0:
            raise AssertionError("target command failed (rc=%d): %s\n%s%s" % (p.returncode, cmd, p.stdout,
                                                                              p.stderr[-1500:]))
        return p.stdout.strip()

    def sha(self, path):
        # BLAKE2b (b2sum), not sha256sum: as strong a digest of a whole device, and ~5x cheaper -
        # under the VM's TCG emulation sha256sum took ~55 s per 1 GiB disk, ~22 min of the scenario.
        return self.sh("b2sum %s | cut -d' ' -f1" % path)


def apply(role_vars, check=False):
    """Run the role; returns (rc, [changed task names], failure message)."""
    if not INVENTORY or not os.path.isfile(INVENTORY):
        # never `-i ""`: ansible-playbook would take the working directory as the inventory and run
        # every executable file in it as an inventory script
        raise SystemExit("suite.py: MOLECULE_INVENTORY_FILE is %r, not the scenario's inventory file" % INVENTORY)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(role_vars, f)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_ROLES_PATH=os.path.join(ROOT, "roles"))
    argv = ["ansible-playbook", "-i", INVENTORY, os.path.join(HERE, "apply.yml"), "-e", "@" + f.name]
    if check:
        argv.append("--check")
    t0 = time.time()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env, check=False)
    os.unlink(f.name)
    if os.environ.get("DLRACK_SUITE_TRACE"):
        n = len(os.listdir(os.environ["DLRACK_SUITE_TRACE"]))
        with open(os.path.join(os.environ["DLRACK_SUITE_TRACE"], "%03d%s.json" % (n, "-check" if check else "")), "w") as t:
            t.write(json.dumps({"elapsed": time.time() - t0, "vars": role_vars}) + "\n" + p.stdout)
    print("  apply%s rc=%d %.0fs" % (" --check" if check else "", p.returncode, time.time() - t0), flush=True)
    try:
        out = json.loads(p.stdout[p.stdout.index("{"):])
    except ValueError:
        raise AssertionError("no json from ansible-playbook (rc=%d): %s %s" % (p.returncode, p.stdout[-2000:],
                                                                               p.stderr[-2000:]))
    changed, msg = [], ""
    for play in out.get("plays", []):
        for task in play.get("tasks", []):
            for _h, res in task.get("hosts", {}).items():
                name = task["task"]["name"]
                if res.get("changed"):
                    changed.append(name)
                if res.get("failed"):
                    msg = res.get("msg", "") or json.dumps(res)[:2000]
    return p.returncode, changed, msg


def normalize(names):
    """Check mode reports the XFS of a not-yet-created array with a stand-in task."""
    m = {"Report the XFS that the new arrays will get (check mode only)": "Create the XFS filesystems (aligned to the array)",
         "Update initramfs (check mode only)": "Update initramfs"}
    short = [n.split(" : ")[-1] for n in names]
    return sorted(m.get(n, n) for n in short)


def case(name):
    def wrap(fn):
        def run(*a):
            only = [o for o in os.environ.get("DLRACK_SUITE_ONLY", "").split("|") if o]
            if only and not any(o in name for o in only):
                return
            t0 = time.time()
            try:
                fn(*a)
                RESULTS.append((name, "PASS", "", time.time() - t0))
            except AssertionError as e:
                RESULTS.append((name, "FAIL", str(e), time.time() - t0))
            print("%s %s (%.0fs)" % (RESULTS[-1][1], name, RESULTS[-1][3]), flush=True)
            if RESULTS[-1][1] == "FAIL":
                print("   " + RESULTS[-1][2].replace("\n", "\n   "), flush=True)
        return run
    return wrap


def fs_state(tgt, dev, mnt):
    """What a refusal must keep of a mounted filesystem: mount source and type, filesystem UUID, and
    every entry below the mount point (type, mode, owner, size, name) with each file's sha256."""
    return {"mount": tgt.sh("findmnt -rn -o SOURCE,FSTYPE -M %s" % mnt),
            "uuid": tgt.sh("blkid -p -s UUID -o value %s" % dev),
            "tree": tgt.sh("find %s -xdev -printf '%%y %%m %%U %%G %%s %%P\\n' | LC_ALL=C sort" % mnt),
            "files": tgt.sh("cd %s && find . -xdev -type f -exec sha256sum {} + | LC_ALL=C sort -k2" % mnt)}


def expect_refusal(tgt, role_vars, protected, phrases, live=None):
    """``protected``: devices (and files) that nothing mounts, compared byte for byte. ``live``: a
    function returning the state of what is mounted or assembled (fs_state), compared before/after."""
    before = dict((p, tgt.sha(p)) for p in protected)
    live_before = live() if live else None
    rc, changed, msg = apply(role_vars)
    assert rc != 0, "expected a refusal, the run succeeded (changed: %s)" % changed
    for ph in phrases:
        assert ph in msg, "refusal lacks %r:\n%s" % (ph, msg)
    assert not changed, "a refused run changed tasks: %s" % changed
    after = dict((p, tgt.sha(p)) for p in protected)
    assert before == after, "protected devices changed: %s -> %s" % (before, after)
    if live:
        live_after = live()
        assert live_after == live_before, "the live filesystems changed: %s -> %s" % (live_before, live_after)


def summary():
    failed = [r for r in RESULTS if r[1] != "PASS"]
    print("\n%d cases, %d passed, %d failed" % (len(RESULTS), len(RESULTS) - len(failed), len(failed)))
    return 1 if failed else 0


# ---------------------------------------------------------------- container (loop devices)
def container(loops_json):
    L = json.load(open(loops_json))
    data_sha = open(os.path.join(os.path.dirname(loops_json), "data.sha256")).read().strip()
    tgt = Target(["podman", "exec", "dlrack-storage-tiers"])
    base = {"storage_tiers_hot_mount": "/mnt/t-hot", "storage_tiers_cold_mount": "/mnt/t-cold",
            "storage_tiers_cold_level": "single", "storage_tiers_hot_dirs": [], "storage_tiers_cold_dirs": []}
    hot_only = dict(base, storage_tiers_cold_enabled=False)
    fix = "add %s to storage_tiers_wipe_allowed and set storage_tiers_safe_mode: false"
    # Each case hashes the devices it could harm (hashing every loop on every case costs minutes).

    @case("disk with an ext4 filesystem and a file is refused; the file is intact")
    def _fs():
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=[L["fs"]]), [L["fs"]],
                       ["storage_tiers_hot_devices: %s carries a ext4 filesystem labelled olddata" % L["fs"],
                        "Nothing was changed", fix % L["fs"]])
        got = tgt.sh("mkdir -p /run/ro && mount -o ro,noload %s /run/ro && sha256sum /run/ro/data.bin | cut -d' ' -f1;"
                     " umount /run/ro" % L["fs"])
        assert got == data_sha, "data.bin checksum %s != %s" % (got, data_sha)
    _fs()

    @case("wipe_allowed alone (safe mode on) still refuses")
    def _fs_listed():
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=[L["fs"]], storage_tiers_wipe_allowed=[L["fs"]]),
                       [L["fs"]], ["To erase it and use it anyway: set storage_tiers_safe_mode: false"])
    _fs_listed()

    @case("safe mode off without wipe_allowed still refuses")
    def _fs_unsafe():
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=[L["fs"]], storage_tiers_safe_mode=False),
                       [L["fs"]], ["To erase it and use it anyway: add %s to storage_tiers_wipe_allowed for" % L["fs"]])
    _fs_unsafe()

    @case("disk with a partition table is refused")
    def _pt():
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=[L["pt"]]), [L["pt"]],
                       ["storage_tiers_hot_devices: %s" % L["pt"], "gpt partition table", fix % L["pt"]])
    _pt()

    def busy():   # the mounted ext4 (prepare.yml): mounted, its raw bytes move with ext4's own writes
        return fs_state(tgt, L["mnt"], "/srv/mounted")

    @case("mounted disk is refused, even when wipe is allowed; still mounted, same UUID, its file intact")
    def _mnt():
        state = busy()
        assert state["mount"] == "%s ext4" % L["mnt"] and "f 644 0 0 21 keep.txt" in state["tree"], state
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=[L["mnt"]], storage_tiers_wipe_allowed=[L["mnt"]],
                                 storage_tiers_safe_mode=False), [],
                       ["%s mounted at /srv/mounted" % L["mnt"], "Unmount it (and remove it from /etc/fstab) first"],
                       live=busy)
    _mnt()

    spares = dict(base, storage_tiers_hot_devices=[L["spare1"]], storage_tiers_cold_devices=[L["spare2"]])

    def still_blank():
        got = tgt.sh("blkid -p %s %s; echo rc=$?" % (L["spare1"], L["spare2"]), check=False)
        assert got.endswith("rc=2"), "a spare disk got a signature: %s" % got
        assert tgt.sh("findmnt -rn -o SOURCE | grep -c -x -e %s -e %s" % (L["spare1"], L["spare2"]), check=False) == "0"

    @case("tiers on /etc, on a link to /var, with an fstab line in the mount options: refused, nothing changed")
    def _system_mounts():
        tgt.sh("ln -sfn /var /mnt/t-link")
        expect_refusal(tgt, dict(spares, storage_tiers_hot_mount="/etc", storage_tiers_cold_mount="/mnt/t-link",
                                 storage_tiers_mount_options=["noatime", "nodev\n%s / ext4 defaults 0 0" % L["spare1"]]),
                       [L["spare1"], L["spare2"], "/etc/fstab"],
                       ['storage_tiers_hot_mount: "/etc" is a system directory; choose a dedicated path such as /data/hot',
                        'storage_tiers_cold_mount: "/mnt/t-link" resolves to "/var" (a symbolic link), a system directory',
                        'storage_tiers_mount_options: "nodev\\n%s / ext4 defaults 0 0" contains a line break' % L["spare1"]],
                       live=busy)
        still_blank()
        assert not tgt.sh("findmnt -rn -M /etc; findmnt -rn -M /var", check=False), "something was mounted there"
    _system_mounts()

    @case("a tier where a disk is mounted now, the other tier inside it: refused, the mounted disk untouched")
    def _busy_mounts():
        expect_refusal(tgt, dict(spares, storage_tiers_hot_mount="/srv/mounted",
                                 storage_tiers_cold_mount="/srv/mounted/archive"),
                       [L["spare1"], L["spare2"], "/etc/fstab"],
                       ['storage_tiers_hot_mount: "/srv/mounted" is the mount point of "%s" ("ext4") now' % L["mnt"],
                        'storage_tiers_cold_mount: "/srv/mounted/archive" is inside storage_tiers_hot_mount "/srv/mounted"'],
                       live=busy)
        still_blank()
        assert not tgt.sh("ls -A /srv/mounted | grep -v -x -e keep.txt -e lost+found", check=False)
    _busy_mounts()

    @case("same device in both tiers is an error before anything is touched")
    def _both():
        expect_refusal(tgt, dict(base, storage_tiers_hot_devices=[L["fresh1"]], storage_tiers_cold_devices=[L["fresh1"]]),
                       [L["fresh1"]], ["%s is listed in both storage_tiers_hot_devices and storage_tiers_cold_devices"
                                       % L["fresh1"]])
    _both()

    @case("nonexistent device is an error")
    def _missing():
        expect_refusal(tgt, dict(hot_only, storage_tiers_hot_devices=["/dev/disk/by-id/nvme-DOES_NOT_EXIST"]),
                       [L["fresh1"]], ["/dev/disk/by-id/nvme-DOES_NOT_EXIST does not exist on this host"])
    _missing()

    @case("one refused device stops the whole run: the free one is not touched either")
    def _mixed():
        expect_refusal(tgt, dict(base, storage_tiers_hot_devices=[L["fresh1"]], storage_tiers_cold_devices=[L["fs"]]),
                       [L["fs"], L["fresh1"]], ["storage_tiers_cold_devices: %s carries a ext4" % L["fs"]])
        assert tgt.sh("blkid -p %s; echo rc=$?" % L["fresh1"], check=False).endswith("rc=2"), "fresh1 got a signature"
    _mixed()

    @case("auto-selection refuses to run inside a container")
    def _auto():
        expect_refusal(tgt, dict(base), [L["fresh1"]], ["auto-selection is disabled inside a container"])
    _auto()

    fresh = dict(base, storage_tiers_hot_devices=[L["fresh1"]], storage_tiers_cold_devices=[L["fresh2"]],
                 storage_tiers_hot_dirs=[{"path": "datasets", "owner": "root", "group": "root", "mode": "0755"}])

    @case("check mode on a fresh node reports exactly the real run's changes and touches nothing; rerun changed=0")
    def _check():
        before = [tgt.sha(p) for p in (L["fresh1"], L["fresh2"], "/etc/fstab")]
        rc, c_check, msg = apply(fresh, check=True)
        assert rc == 0, "check mode failed: %s" % msg
        assert [tgt.sha(p) for p in (L["fresh1"], L["fresh2"], "/etc/fstab")] == before, "check mode wrote something"
        assert not tgt.sh("findmnt -rn /mnt/t-hot || true"), "check mode mounted something"
        rc, c_real, msg = apply(fresh)
        assert rc == 0, "real run failed: %s" % msg
        assert normalize(c_check) == normalize(c_real), "check %s != real %s" % (c_check, c_real)
        assert c_real, "the real run changed nothing on a fresh node"
        rc, c_again, msg = apply(fresh)
        assert rc == 0 and c_again == [], "second run: rc=%d changed=%s %s" % (rc, c_again, msg)
        rc, c_check2, msg = apply(fresh, check=True)
        assert rc == 0 and c_check2 == [], "check mode after convergence: rc=%d changed=%s" % (rc, c_check2)
    _check()

    @case("device names shuffled between runs: the tiers' own disks swapped are refused, data intact")
    def _shuffled():
        tgt.sh("echo precious > /mnt/t-hot/datasets/marker && sync")
        swapped = dict(fresh, storage_tiers_hot_devices=[L["fresh2"]], storage_tiers_cold_devices=[L["fresh1"]])
        expect_refusal(tgt, swapped, [L["fs"], L["pt"]],
                       ["storage_tiers_hot_devices: %s mounted at /mnt/t-cold" % L["fresh2"],
                        "storage_tiers_cold_devices: %s mounted at /mnt/t-hot" % L["fresh1"]])
        assert tgt.sh("cat /mnt/t-hot/datasets/marker") == "precious"
        rc, changed, msg = apply(fresh)
        assert rc == 0 and changed == [], "correct order after the shuffle attempt: rc=%d %s %s" % (rc, changed, msg)
    _shuffled()

    @case("unmounted tier disk of the other tier is refused by label")
    def _label():
        tgt.sh("umount /mnt/t-cold")
        try:
            swapped = dict(hot_only, storage_tiers_hot_devices=[L["fresh2"]], storage_tiers_hot_mount="/mnt/t-x")
            expect_refusal(tgt, swapped, [L["fresh2"]],
                           ["%s carries a xfs filesystem labelled dlrack-cold (the cold tier's)" % L["fresh2"]])
        finally:
            tgt.sh("mount /mnt/t-cold")
    _label()

    @case("interrupted run (filesystem made, not mounted, not in fstab) is completed, not re-made")
    def _interrupted():
        tgt.sh("umount /mnt/t-hot && sed -i '\\# /mnt/t-hot #d' /etc/fstab")
        uuid_before = tgt.sh("blkid -p -s UUID -o value %s" % L["fresh1"])
        rc, changed, msg = apply(fresh)
        assert rc == 0, msg
        assert "Create the XFS filesystems (aligned to the array)" not in normalize(changed), changed
        assert normalize(changed) == ["Mount the tiers by UUID (fstab with nofail and x-systemd.device-timeout)"], changed
        assert tgt.sh("blkid -p -s UUID -o value %s" % L["fresh1"]) == uuid_before
        assert tgt.sh("cat /mnt/t-hot/datasets/marker") == "precious"
        assert "UUID=%s /mnt/t-hot xfs" % uuid_before in tgt.sh("cat /etc/fstab")
    _interrupted()

    @case("named in wipe_allowed with safe mode off: the ext4 disk is erased and used")
    def _wipe():
        rc, changed, msg = apply(dict(hot_only, storage_tiers_hot_devices=[L["fs"]], storage_tiers_wipe_allowed=[L["fs"]],
                                      storage_tiers_safe_mode=False, storage_tiers_hot_mount="/mnt/t-wiped"))
        assert rc == 0, msg
        assert tgt.sh("blkid -p -s TYPE -s LABEL -o value %s | tr '\\n' ' '" % L["fs"]).split() == ["dlrack-hot", "xfs"] or \
            tgt.sh("blkid -p -s TYPE -o value %s" % L["fs"]) == "xfs"
        rc, changed, msg = apply(dict(hot_only, storage_tiers_hot_devices=[L["fs"]], storage_tiers_hot_mount="/mnt/t-wiped"))
        assert rc == 0 and changed == [], "after the wipe, safe mode on, rerun: rc=%d %s %s" % (rc, changed, msg)
    _wipe()

    tgt.sh("findmnt --verify")
    return summary()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "container":
        sys.exit(container(sys.argv[2]))
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "storage_vm"))
    import suite_vm  # noqa: E402  (the VM cases live next to the VM scenario)
    sys.exit(suite_vm.main(mode, sys.modules[__name__]))
