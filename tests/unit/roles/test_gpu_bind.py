# -*- coding: utf-8 -*-
"""dlrack-gpu-bind (launcher) and dlrack_affinity (helper, plugins/module_utils/programs/gpu_bind.py).

The helper is stdlib-only and runs on the node, copied there by roles/gpu_affinity (tests/nodelib.py
does the same into a temporary <lib>). The launcher is rendered the way the role does it
(template with that lib dir and the plan path) and run as a real process; pinning is checked in
/proc/<pid>/status of the exec'd command, importability in the Python it starts (a venv too).
"""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.dlrack.node.plugins.module_utils.programs import gpu_bind as da

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
TEMPLATE = os.path.join(ROOT, "roles", "gpu_affinity", "templates", "dlrack-gpu-bind.j2")
DATA = os.path.join(ROOT, "tests", "data", "topologies")

ALLOWED = sorted(os.sched_getaffinity(0))
needs_two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs 2 CPUs to see pinning")


def make_plan(tmp_path):
    """Two GPUs on the CPUs this test may use: GPU 0 -> first CPU, GPU 1 -> the rest."""
    first, rest = ALLOWED[:1], ALLOWED[1:] or ALLOWED[:1]
    plan = {"schema": 1, "gpus": [
        {"index": 0, "uuid": "GPU-aaaaaaaa-1111-2222-3333-444444444444",
         "pci_bus_id": "00000000:3B:00.0", "numa_node": 0, "cpus": da.format_cpulist(first),
         "mems": "0", "cores": 1, "fallback": None},
        {"index": 1, "uuid": "GPU-bbbbbbbb-1111-2222-3333-444444444444",
         "pci_bus_id": "0000:d8:00.0", "numa_node": 0, "cpus": da.format_cpulist(rest),
         "mems": "0", "cores": len(rest), "fallback": None},
    ]}
    path = tmp_path / "gpu-affinity.json"
    path.write_text(json.dumps(plan))
    return str(path), plan


@pytest.fixture
def launcher(tmp_path, node_lib):
    """The launcher as the role renders it (Jinja, with the real template) over <lib>."""
    from jinja2 import Environment
    plan_path, plan = make_plan(tmp_path)
    env = Environment(keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    text = env.from_string(open(TEMPLATE).read()).render(
        ansible_managed="test", gpu_affinity_lib_dir=node_lib, gpu_affinity_plan_path=plan_path,
        gpu_affinity_launcher_python=sys.executable)
    exe = tmp_path / "dlrack-gpu-bind"
    exe.write_text(text)
    exe.chmod(0o755)
    return str(exe), plan


def run(exe, args, **env):
    e = dict((k, v) for k, v in os.environ.items()
             if k not in da.RANK_VARS + ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                         "DLRACK_GPU_AFFINITY_PLAN", "PYTHONPATH"))
    e.update(env)
    return subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=e, timeout=60, check=False)


def allowed_of(stdout):
    for line in stdout.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(stdout)


# --- resolution ---------------------------------------------------------------------------

PLAN = {"_path": "plan.json", "gpus": [
    {"index": 0, "uuid": "GPU-aaaaaaaa-1111", "pci_bus_id": "00000000:3B:00.0", "cpus": "1-3", "mems": "0"},
    {"index": 1, "uuid": "GPU-bbbbbbbb-2222", "pci_bus_id": "0000:d8:00.0", "cpus": "5-7", "mems": "1"},
]}


@pytest.mark.parametrize("env,gpus,cpus", [
    ({"LOCAL_RANK": "1"}, [1], "5-7"),
    ({"SLURM_LOCALID": "0"}, [0], "1-3"),
    ({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}, [1], "5-7"),
    # LOCAL_RANK indexes CUDA_VISIBLE_DEVICES, as torch.cuda.set_device(local_rank) does
    ({"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "1,0"}, [1], "5-7"),
    ({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "GPU-bbbbbbbb-2222,GPU-aaaaaaaa-1111"}, [0], "1-3"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-aaaa"}, [0], "1-3"),                     # unique UUID prefix
    ({"CUDA_VISIBLE_DEVICES": "bbbbbbbb"}, [1], "5-7"),                     # without GPU-
    ({"CUDA_VISIBLE_DEVICES": "MIG-GPU-bbbbbbbb-2222/1/0"}, [1], "5-7"),    # old MIG form
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, [0, 1], "1-3,5-7"),                   # union (torchrun)
    ({"CUDA_VISIBLE_DEVICES": "1,-1,0"}, [1], "5-7"),                       # CUDA stops at -1
])
def test_resolve(env, gpus, cpus):
    res = da.resolve(PLAN, env)
    assert [g["index"] for g in res["gpus"]] == gpus
    assert da.format_cpulist(res["cpus"]) == cpus


def test_resolve_by_bus_id_any_spelling():
    assert da.find_gpu(PLAN, "0000:3b:00.0")["index"] == 0
    assert da.find_gpu(PLAN, "00000000:D8:00.0")["index"] == 1
    assert da.find_gpu(PLAN, "d8:00.0")["index"] == 1


def test_new_style_mig_uuid_through_nvidia_smi_list():
    """Real `nvidia-smi -L` of an H100 with MIG (utkuozdemir/nvidia_gpu_exporter capture)."""
    with open(os.path.join(DATA, "utkuozdemir-h100-mig-nvidia-smi-L.txt")) as f:
        mig = da.parse_nvidia_smi_list(f.read())
    assert mig["mig-00000002-0000-0000-0000-000000000002"] == "GPU-00000000-0000-0000-0000-000000000000"
    plan = {"gpus": [{"index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000",
                      "cpus": "0-3", "mems": "0"}]}
    res = da.resolve(plan, {"CUDA_VISIBLE_DEVICES": "MIG-00000002-0000-0000-0000-000000000002"},
                     mig_map=mig)
    assert res["gpus"][0]["index"] == 0
    with pytest.raises(da.BindError, match="cannot map MIG device"):
        da.resolve(plan, {"CUDA_VISIBLE_DEVICES": "MIG-99999999-0000-0000-0000-000000000000"},
                   mig_map=mig)


def _stand_in_nvidia_smi(tmp_path, monkeypatch, body):
    """An nvidia-smi on PATH that runs the shell ``body`` (the MIG lookup's `nvidia-smi -L`)."""
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent) + os.pathsep + os.environ.get("PATH", ""))


MIG_PLAN = {"gpus": [{"index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000", "cpus": "0-3", "mems": "0"}]}
MIG_ENV = {"CUDA_VISIBLE_DEVICES": "MIG-00000002-0000-0000-0000-000000000002"}


def test_mig_lookup_runs_nvidia_smi_through_the_bounded_runner(tmp_path, monkeypatch):
    """The real `nvidia-smi -L` capture from a stand-in nvidia-smi: the MIG id maps to its GPU."""
    listing = os.path.join(DATA, "utkuozdemir-h100-mig-nvidia-smi-L.txt")
    _stand_in_nvidia_smi(tmp_path, monkeypatch, "cat '%s'" % listing)
    assert da.resolve(MIG_PLAN, MIG_ENV)["gpus"][0]["index"] == 0


def test_mig_lookup_with_a_hung_nvidia_smi_gives_up_after_its_time_limit(tmp_path, monkeypatch):
    """A wedged driver (nvidia-smi never answers) costs the training process MIG_LIST_TIMEOUT_S,
    not the 30 s the old subprocess.run call had fixed; the MIG id is then unmapped, said clearly."""
    import time
    monkeypatch.setattr(da, "MIG_LIST_TIMEOUT_S", 1, raising=False)
    _stand_in_nvidia_smi(tmp_path, monkeypatch, "exec sleep 60")
    started = time.monotonic()
    with pytest.raises(da.BindError, match="cannot map MIG device"):
        da.resolve(MIG_PLAN, MIG_ENV)
    assert time.monotonic() - started < 10


def test_mig_lookup_with_a_runaway_nvidia_smi_output_is_not_used(tmp_path, monkeypatch):
    """An `nvidia-smi -L` that prints past MIG_LIST_OUTPUT_LIMIT is stopped (at most that many
    bytes held) and its cut-off listing is not trusted: the MIG id is unmapped, said clearly."""
    monkeypatch.setattr(da, "MIG_LIST_OUTPUT_LIMIT", 64 * 1024, raising=False)
    listing = os.path.join(DATA, "utkuozdemir-h100-mig-nvidia-smi-L.txt")
    _stand_in_nvidia_smi(tmp_path, monkeypatch, "cat '%s'; head -c 2000000 /dev/zero" % listing)
    with pytest.raises(da.BindError, match="cannot map MIG device"):
        da.resolve(MIG_PLAN, MIG_ENV)


@pytest.mark.parametrize("env,needle,code", [
    ({"LOCAL_RANK": "4"}, "GPU 4 is not in plan.json (it plans GPUs 0,1)", 3),
    ({"LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "0,1"}, "shows 2 device(s)", 3),
    ({"CUDA_VISIBLE_DEVICES": "GPU-cccc"}, "no GPU with UUID GPU-cccc", 3),
    ({"CUDA_VISIBLE_DEVICES": ""}, "shows no GPU", 3),
    ({}, "which GPU?", 2),
    ({"LOCAL_RANK": "x"}, "not a rank number", 2),
])
def test_resolve_errors(env, needle, code):
    with pytest.raises(da.BindError) as exc:
        da.resolve(PLAN, env)
    assert needle in str(exc.value)
    assert exc.value.code == code


def test_build_exec_numactl_and_fallback():
    res = da.resolve(PLAN, {"LOCAL_RANK": "1"})
    assert da.build_exec(res, ["python", "t.py"], "preferred", "/usr/bin/numactl") == [
        "/usr/bin/numactl", "--physcpubind=5-7", "--preferred=1", "--", "python", "t.py"]
    assert da.build_exec(res, ["x"], "bind", "/usr/bin/numactl")[2] == "--membind=1"
    assert da.build_exec(res, ["x"], "none", "/usr/bin/numactl") == [
        "/usr/bin/numactl", "--physcpubind=5-7", "--", "x"]
    assert da.build_exec(res, ["x"], "preferred", None) == ["x"]


# --- worker_init_fn -----------------------------------------------------------------------

def test_split_cpus_whole_cores(tmp_path):
    sysfs = tmp_path / "cpu"
    for c in range(8):   # 4 cores, siblings c and c+4
        d = sysfs / ("cpu%d" % c) / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text("%d,%d\n" % (c % 4, c % 4 + 4))
    cpus = list(range(8))
    parts = [da.split_cpus(cpus, 3, p, str(sysfs)) for p in range(3)]
    assert parts == [[0, 1, 4, 5], [2, 6], [3, 7]]
    # more workers than cores: round-robin over whole cores
    assert [da.split_cpus(cpus, 6, p, str(sysfs)) for p in (4, 5)] == [[0, 4], [1, 5]]
    # unknown siblings: each CPU a core
    assert da.split_cpus([0, 1, 2], 2, 1, str(tmp_path / "none")) == [2]


def test_worker_pinner_does_not_import_torch_and_pins(node_lib):
    code = ("import sys, os, dlrack_affinity as d;"
            "p=d.WorkerPinner(split=True, num_workers=2, cpus=%r);"
            "print(p(1) == sorted(os.sched_getaffinity(0)), 'torch' in sys.modules)"
            % da.format_cpulist(ALLOWED))
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True,
                         env=dict(os.environ, PYTHONPATH=node_lib)).stdout.split()
    assert out == ["True", "False"]
    import pickle
    assert pickle.loads(pickle.dumps(da.WorkerPinner(split=True))).split is True


def test_worker_init_fn_uses_env_set_by_launcher(monkeypatch):
    calls = []
    monkeypatch.setenv("DLRACK_GPU_CPUS", da.format_cpulist(ALLOWED[:1]))
    monkeypatch.setattr(da.os, "sched_setaffinity", lambda pid, cpus: calls.append(list(cpus)))
    assert da.worker_init_fn(3) == ALLOWED[:1]
    chained = []
    da.WorkerPinner(chain=chained.append)(5)
    assert calls == [ALLOWED[:1], ALLOWED[:1]] and chained == [5]


# --- the launcher as a real process -------------------------------------------------------

@needs_two_cpus
@pytest.mark.parametrize("numactl", [True, False])
def test_launcher_pins_a_real_process(launcher, numactl):
    exe, plan = launcher
    args = ([] if numactl else ["--no-numactl"]) + ["grep", "Cpus_allowed_list", "/proc/self/status"]
    r = run(exe, args, LOCAL_RANK="1")
    assert r.returncode == 0, r.stderr
    assert allowed_of(r.stdout) == plan["gpus"][1]["cpus"]
    r = run(exe, args, CUDA_VISIBLE_DEVICES="GPU-aaaaaaaa")
    assert allowed_of(r.stdout) == plan["gpus"][0]["cpus"]


def test_launcher_exports_device_order_and_set(launcher):
    exe, plan = launcher
    r = run(exe, ["--no-numactl", sys.executable, "-c",
                  "import os, json; print(json.dumps({k: os.environ.get(k) for k in "
                  "('CUDA_DEVICE_ORDER', 'DLRACK_GPU_CPUS', 'DLRACK_GPU_INDEX')}))"],
            LOCAL_RANK="0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                    "DLRACK_GPU_CPUS": plan["gpus"][0]["cpus"],
                                    "DLRACK_GPU_INDEX": "0"}


def test_launcher_print_and_errors(launcher):
    exe, dummy = launcher
    r = run(exe, ["--print", "--gpu", "d8:00.0"])
    assert r.returncode == 0 and json.loads(r.stdout)["gpus"] == [1]
    r = run(exe, ["true"], LOCAL_RANK="9")
    assert r.returncode == 3
    assert "dlrack-gpu-bind: GPU 9 is not in" in r.stderr and "plans GPUs 0,1" in r.stderr
    r = run(exe, ["true"])
    assert r.returncode == 2 and "which GPU?" in r.stderr
    r = run(exe, [], LOCAL_RANK="0")
    assert r.returncode == 2 and "no command" in r.stderr
    r = run(exe, ["/nonexistent/cmd"], LOCAL_RANK="0")
    assert r.returncode == 127
    r = run(exe, ["true"], LOCAL_RANK="0", DLRACK_GPU_AFFINITY_PLAN="/nonexistent.json")
    # the plan path from the template is the default; the environment overrides it
    assert r.returncode == 3 and "cannot read the GPU affinity plan /nonexistent.json" in r.stderr


def test_launcher_warns_about_fastest_first_order(launcher):
    exe, dummy = launcher
    r = run(exe, ["--no-numactl", "true"], CUDA_VISIBLE_DEVICES="0",
            CUDA_DEVICE_ORDER="FASTEST_FIRST")
    assert r.returncode == 0 and "CUDA_DEVICE_ORDER=FASTEST_FIRST" in r.stderr


# --- import dlrack_affinity in whatever Python the launcher starts --------------------------

SPLIT_WORKERS = os.path.join(ROOT, "molecule", "gpu_affinity", "split_workers.py")


@pytest.fixture
def venv_python(tmp_path):
    """A venv as users make them, without pip: it does not see the system's site-packages."""
    venv = tmp_path / "train-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python"), str(venv)


def test_without_launcher_a_venv_cannot_import_the_helper(venv_python):
    py, dummy = venv_python
    r = subprocess.run([py, "-c", "import dlrack_affinity"], stderr=subprocess.PIPE,
                       universal_newlines=True, env={"PATH": os.environ["PATH"]}, check=False)
    assert r.returncode == 1 and "No module named 'dlrack_affinity'" in r.stderr


@needs_two_cpus
def test_launcher_makes_the_helper_importable_in_a_venv_and_workers_split(launcher, venv_python, node_lib):
    exe, plan = launcher
    py, venv = venv_python
    r = run(exe, ["--no-numactl", py, SPLIT_WORKERS, "2"], CUDA_VISIBLE_DEVICES="0,1",
            PYTHONPATH="/elsewhere")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["prefix"] == venv and out["module"].startswith(node_lib)
    w0, w1 = out["workers"]
    # two workers on the union of both GPUs' CPUs (all this test may use, one CPU a core here
    # or SMT pairs): disjoint whole-core shares that together are the whole set
    cores = da._cores_of(ALLOWED)
    if len(cores) >= 2:
        assert w0 and w1 and not set(w0) & set(w1)
        assert sorted(w0 + w1) == ALLOWED
        assert all(set(c) <= set(w0) or set(c) <= set(w1) for c in cores)


def test_launcher_prepends_its_lib_to_pythonpath_once(launcher, node_lib):
    exe, dummy = launcher
    code = "import os; print(os.environ['PYTHONPATH'])"
    r = run(exe, ["--no-numactl", sys.executable, "-c", code], LOCAL_RANK="0",
            PYTHONPATH=os.pathsep.join(["/a", node_lib, "", "/b"]))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.pathsep.join([node_lib, "/a", "/b"])
    r = run(exe, ["--no-numactl", sys.executable, "-c", code], LOCAL_RANK="0")
    assert r.stdout.strip() == node_lib


def test_print_pythonpath_is_the_documented_non_launcher_way(launcher, venv_python, node_lib):
    exe, dummy = launcher
    r = run(exe, ["--print-pythonpath"])
    assert r.returncode == 0 and r.stdout == node_lib + "\n"
    py, dummy = venv_python
    r = subprocess.run([py, "-c", "import dlrack_affinity as d; print(d.bind_main.__name__)"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       env={"PATH": os.environ["PATH"], "PYTHONPATH": r.stdout.strip()}, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "bind_main", r.stderr


def test_pth_file_is_the_other_non_launcher_way(venv_python, node_lib):
    """What the role's gpu_affinity_pth_pythons task writes: <purelib>/dlrack-affinity.pth."""
    py, dummy = venv_python
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "dlrack-affinity.pth"), "w") as f:
        f.write(node_lib + "\n")
    r = subprocess.run([py, "-c", "import dlrack_affinity as d; print(d.split_cpus([0, 1, 2], 2, 0, '/none'))"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       env={"PATH": os.environ["PATH"]}, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "[0, 1]", r.stderr


@pytest.mark.parametrize("current,expected", [
    (None, "/L"), ("", "/L"), ("/a", "/L:/a"), ("/L", "/L"), ("/a::/L:/b", "/L:/a:/b")])
def test_python_path(current, expected):
    assert da.python_path("/L", current) == expected.replace(":", os.pathsep)


@pytest.mark.parametrize("env,needle", [
    ({"DLRACK_GPU_CPUS": "1-x"}, "DLRACK_GPU_CPUS: bad range"),
])
def test_bad_cpulists_are_bind_errors(env, needle, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(da.BindError, match=needle):
        da.WorkerPinner().cpus_for(0)
    plan = {"_path": "p.json", "gpus": [{"index": 0, "cpus": "3-1", "mems": "0"}]}
    with pytest.raises(da.BindError, match="p.json: GPU 0 cpus: descending range"):
        da.resolve(plan, {"LOCAL_RANK": "0"})
