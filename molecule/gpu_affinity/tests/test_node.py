"""Node state after gpu_affinity, checked the way a person would by hand on the node (pytest-testinfra
over `podman exec`, no Ansible): the plan, the launcher and the helper it installed (owner, mode,
content), the .pth files, the gres.conf fragment, the pinned unit's drop-in as systemd reads it and
the CPUs its running process may use, and the launcher and the helper pinning real processes.
verify.yml runs this first:

    python -m pytest -p no:cacheprovider --hosts=podman://CONTAINER molecule/gpu_affinity/tests/test_node.py

Each `podman exec` costs ~0.7 s here, so the node is read twice in all: `state` (stat, cat, sha256sum,
systemctl show) and `runs` (the launcher and the helper); the tests parse their sections. The
Ansible-side checks (idempotence, check mode, the named failure of a missing interpreter, the
planner filter on a big topology) stay in verify.yml. Values are converge.yml's (GPU 0 -> CPU 0,
GPU 1 -> CPU 1, dlrack-affinity-test.service pinned to GPU 1) and the role's defaults.
"""
import hashlib
import json
import os
import re
import shlex

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIB = "/usr/local/lib/dlrack/python"
MODULE_UTILS = LIB + "/ansible_collections/dlrack/node/plugins/module_utils"
PLAN = "/etc/dlrack/gpu-affinity.json"
LAUNCHER = "/usr/local/bin/dlrack-gpu-bind"
GRES = "/etc/slurm/gres.d/dlrack-gpu-affinity.conf"
UNIT = "dlrack-affinity-test.service"
DROPIN = "/etc/systemd/system/%s.d/50-dlrack-gpu-affinity.conf" % UNIT
# `import dlrack_affinity` is the installed gpu_bind module (dlrack_affinity.py aliases it)
HELPER = MODULE_UTILS + "/programs/gpu_bind.py"
# roles/gpu_affinity/vars/main.yml: the collection files the launcher and the helper import
CODE = ["programs/gpu_bind.py", "hw/cpulist.py", "hw/parsers/__init__.py", "system/command.py"]
# path -> (type, owner, group, mode) as `stat -c '%F %U %G %a'` prints them
INSTALLED = {
    "/etc/dlrack": ("directory", "root", "root", "755"),
    PLAN: ("regular file", "root", "root", "644"),
    LAUNCHER: ("regular file", "root", "root", "755"),
    LIB + "/dlrack_affinity.py": ("regular file", "root", "root", "644"),
    "/etc/slurm/gres.d": ("directory", "root", "root", "755"),
    GRES: ("regular file", "root", "root", "644"),
    os.path.dirname(DROPIN): ("directory", "root", "root", "755"),
    DROPIN: ("regular file", "root", "root", "644"),
}
INSTALLED.update((MODULE_UTILS + "/" + path, ("regular file", "root", "root", "644")) for path in CODE)


@pytest.fixture(scope="module")
def state(host, read_sections):
    files = " ".join(sorted(INSTALLED))
    return read_sections(host, [
        ("stat", "stat -c '%%n|%%F|%%U|%%G|%%a' %s" % files),
        ("sha256", "sha256sum %s %s/dlrack_affinity.py" % (" ".join(MODULE_UTILS + "/" + p for p in CODE), LIB)),
        ("pth", "find /usr/local/lib /usr/lib /opt/venvs -name dlrack-affinity.pth | sort"),
        ("pth-content", "cat /usr/local/lib/python3*/dist-packages/dlrack-affinity.pth /opt/venvs/train/lib/python3*/site-packages/dlrack-affinity.pth"),
        ("plan", "cat " + PLAN),
        ("launcher", "head -n 12 " + LAUNCHER),
        ("gres", "cat " + GRES),
        ("dropin", "cat " + DROPIN),
        ("unit", "systemctl show %s -p ActiveState -p SubState -p CPUAffinity -p NUMAPolicy -p NUMAMask -p DropInPaths -p NeedDaemonReload" % UNIT),
        ("pinned", "grep Cpus_allowed_list /proc/$(systemctl show -p MainPID --value %s)/status" % UNIT),
    ])


def run_case(env, argv):
    """One launcher/helper run for the `runs` fixture: its output (stderr too) and then `rc=N`."""
    return "%s %s 2>&1; echo rc=$?" % (" ".join("%s=%s" % kv for kv in env.items()), " ".join(shlex.quote(a) for a in argv))


HELPER_SPLIT = ("import os, sys, dlrack_affinity as d; p = d.WorkerPinner(split=True, num_workers=2, cpus='0-1'); "
                "print(p(1), sorted(os.sched_getaffinity(0)), %s)")


@pytest.fixture(scope="module")
def runs(host, read_sections):
    with open(os.path.join(ROOT, "molecule", "gpu_affinity", "split_workers.py")) as handle:
        workers = handle.read()
    return read_sections(host, [
        ("rank", run_case({"LOCAL_RANK": "1"}, [LAUNCHER, "grep", "Cpus_allowed_list", "/proc/self/status"])),
        ("uuid", run_case({"CUDA_VISIBLE_DEVICES": "GPU-11111111"}, [LAUNCHER, "--no-numactl", "/bin/sh", "-c", "taskset -cp $$"])),
        ("missing", run_case({"LOCAL_RANK": "7"}, [LAUNCHER, "true"])),
        ("system-python", run_case({}, ["/usr/bin/python3", "-c", HELPER_SPLIT % "'torch' in sys.modules"])),
        ("venv-bare", run_case({}, ["/opt/venvs/other/bin/python", "-c", "import dlrack_affinity"])),
        ("venv-pth", run_case({}, ["/opt/venvs/train/bin/python", "-c", HELPER_SPLIT % "sys.prefix"])),
        ("pythonpath", run_case({}, [LAUNCHER, "--print-pythonpath"])),
        ("venv-pythonpath", run_case({"PYTHONPATH": "$(%s --print-pythonpath)" % LAUNCHER},
                                     ["/opt/venvs/other/bin/python", "-c", "import dlrack_affinity as d; print(d.__file__)"])),
        # DataLoader-style spawned workers in a venv that has no .pth, through the launcher
        ("venv-launcher", "cat > /tmp/split_workers.py <<'EOF'\n%sEOF\n%s" % (workers, run_case(
            {"CUDA_VISIBLE_DEVICES": "0,1"}, [LAUNCHER, "--no-numactl", "/opt/venvs/other/bin/python", "/tmp/split_workers.py", "2"]))),
    ])


def case(runs, name):
    """(output lines, rc) of one case of the `runs` fixture."""
    lines = runs[0].get(name, [])
    assert lines and lines[-1].startswith("rc="), (name, lines, runs[1])
    return lines[:-1], int(lines[-1][3:])


def test_installed_files_owner_and_mode(state, stat_lines):
    got = stat_lines(state[0]["stat"])
    assert got == INSTALLED, state[1]


def test_installed_python_is_the_collections(state):
    # sha256sum on the node against the checkout: the helper and its imports are copies, not stale
    sources = dict((MODULE_UTILS + "/" + p, os.path.join(ROOT, "plugins", "module_utils", p)) for p in CODE)
    sources[LIB + "/dlrack_affinity.py"] = os.path.join(ROOT, "roles", "gpu_affinity", "files", "dlrack_affinity.py")
    want = {}
    for dest, src in sources.items():
        with open(src, "rb") as handle:
            want[dest] = hashlib.sha256(handle.read()).hexdigest()
    got = dict(reversed(line.split(None, 1)) for line in state[0]["sha256"])
    assert got == want, state[1]


def test_plan_gives_gpu0_cpu0_and_gpu1_cpu1(state):
    plan = json.loads("\n".join(state[0]["plan"]))
    assert [(g["index"], g["cpus"]) for g in plan["gpus"]] == [(0, "0"), (1, "1")]
    assert plan["gpus"][1]["fallback"] is None and plan["gpus"][1]["numa_node"] == -1
    assert plan["reserved_cpus"] == ""


def test_launcher_runs_the_system_python_on_the_plan(state):
    lines = state[0]["launcher"]
    assert lines[0] == "#!/usr/bin/python3"
    assert 'LIB = os.environ.get("DLRACK_AFFINITY_LIB", "%s")' % LIB in lines
    assert 'os.environ.setdefault("DLRACK_GPU_AFFINITY_PLAN", "%s")' % PLAN in lines


def test_pth_files_in_the_listed_pythons_only(state):
    # gpu_affinity_pth_pythons: the system python and /opt/venvs/train; /opt/venvs/other gets none
    found = state[0]["pth"]
    assert len(found) == 2, found
    assert re.match(r"^/opt/venvs/train/lib/python3\.\d+/site-packages/dlrack-affinity\.pth$", found[0]), found
    assert re.match(r"^/usr/local/lib/python3\.\d+/dist-packages/dlrack-affinity\.pth$", found[1]), found
    assert state[0]["pth-content"] == [LIB, LIB], state[1]


def test_gres_conf_cores_per_gpu(state):
    lines = [line for line in state[0]["gres"] if not line.startswith("#")]
    assert lines == ["Name=gpu File=/dev/nvidia0 Cores=0", "Name=gpu File=/dev/nvidia1 Cores=1"], state[0]["gres"]
    assert "# GPU 1 00000000:D8:00.0: CPUs 1" in state[0]["gres"]


def test_dropin_pins_the_service_to_gpu1(state):
    lines = [line for line in state[0]["dropin"] if not line.startswith("#")]
    # numa_policy preferred: memory preferred on NUMA node 0, the node of CPU 1 (GPU 1 has none of its own)
    assert lines == ["[Service]", "CPUAffinity=1", "NUMAPolicy=preferred", "NUMAMask=0"], state[0]["dropin"]


def test_systemd_applied_the_dropin_and_the_process_is_pinned(state):
    props = dict(line.split("=", 1) for line in state[0]["unit"])
    assert props["ActiveState"] == "active" and props["SubState"] == "running", props
    assert DROPIN in props["DropInPaths"].split(), props
    assert props["CPUAffinity"] == "1" and props["NeedDaemonReload"] == "no", props
    assert props["NUMAPolicy"] == "preferred" and props["NUMAMask"] == "0", props
    # restarted after the drop-in was written: the running main process has CPU 1 only
    assert [line.split() for line in state[0]["pinned"]] == [["Cpus_allowed_list:", "1"]], state[1]


def test_launcher_pins_local_rank_1_to_cpu1(runs):
    assert case(runs, "rank") == (["Cpus_allowed_list:\t1"], 0)


def test_launcher_pins_by_uuid_without_numactl(runs):
    lines, rc = case(runs, "uuid")
    assert rc == 0 and len(lines) == 1 and lines[0].endswith("affinity list: 0"), lines


def test_launcher_refuses_a_gpu_not_in_the_plan(runs):
    lines, rc = case(runs, "missing")
    assert rc == 3 and "not in" in "\n".join(lines), lines


def test_helper_splits_in_the_system_python_without_torch(runs):
    assert case(runs, "system-python") == (["[1] [1] False"], 0)


def test_venv_without_pth_cannot_import_the_helper(runs):
    lines, rc = case(runs, "venv-bare")
    assert rc == 1 and "dlrack_affinity" in lines[-1], lines


def test_helper_imports_by_pth_in_the_listed_venv(runs):
    assert case(runs, "venv-pth") == (["[1] [1] /opt/venvs/train"], 0)


def test_helper_imports_by_pythonpath(runs):
    assert case(runs, "pythonpath") == ([LIB], 0)
    lines, rc = case(runs, "venv-pythonpath")
    assert rc == 0 and lines == [HELPER], lines


def test_launcher_spawned_workers_split_the_set(runs):
    lines, rc = case(runs, "venv-launcher")
    assert rc == 0, lines
    got = json.loads(lines[-1])
    assert got["prefix"] == "/opt/venvs/other" and got["module"] == HELPER, got
    assert got["workers"] == [[0], [1]], got
