# -*- coding: utf-8 -*-
"""dlrack-gpu-bind (launcher) and dlrack_affinity (helper) from roles/gpu_affinity.

The helper is stdlib-only and runs on the node; here it is imported from the role's files/.
The launcher is rendered the way the role does it (template with the lib dir and plan path)
and run as a real process; pinning is checked in /proc/<pid>/status of the exec'd command.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = os.path.join(ROOT, "roles", "gpu_affinity", "files")
TEMPLATE = os.path.join(ROOT, "roles", "gpu_affinity", "templates", "dlrack-gpu-bind.j2")
DATA = os.path.join(ROOT, "tests", "data", "topologies")

if FILES not in sys.path:
    sys.path.insert(0, FILES)  # importable by name, as on the node (pickling WorkerPinner)
import dlrack_affinity as da  # noqa: E402

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
def launcher(tmp_path):
    """The launcher as the role renders it (Jinja, with the real template)."""
    from jinja2 import Environment
    plan_path, plan = make_plan(tmp_path)
    env = Environment(keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    text = env.from_string(open(TEMPLATE).read()).render(
        ansible_managed="test", gpu_affinity_lib_dir=FILES, gpu_affinity_plan_path=plan_path)
    exe = tmp_path / "dlrack-gpu-bind"
    exe.write_text(text.replace("#!/usr/bin/python3", "#!" + sys.executable, 1))
    exe.chmod(0o755)
    return str(exe), plan


def run(exe, args, **env):
    e = dict((k, v) for k, v in os.environ.items()
             if k not in da.RANK_VARS + ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                         "DLRACK_GPU_AFFINITY_PLAN"))
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


def test_worker_pinner_does_not_import_torch_and_pins():
    code = ("import sys, os, importlib.util as u;"
            "s=u.spec_from_file_location('d', %r); d=u.module_from_spec(s); s.loader.exec_module(d);"
            "p=d.WorkerPinner(split=True, num_workers=2, cpus=%r);"
            "print(p(1), sorted(os.sched_getaffinity(0)), 'torch' in sys.modules)"
            % (os.path.join(FILES, "dlrack_affinity.py"), da.format_cpulist(ALLOWED)))
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.split()
    assert out[-1] == "False"
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
