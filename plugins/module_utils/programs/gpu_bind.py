# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dlrack_affinity: pin a training process and its DataLoader workers to its GPU's CPUs.

Node-side code (Python 3.6+, standard library only, never imports torch). The
dlrack.node.gpu_affinity role copies it with cpulist.py and parsers/__init__.py under
/usr/local/lib/dlrack/python/ansible_collections/dlrack/node/plugins/module_utils/ (same import
paths, no Ansible needed; docs/node_code.md), next to ``dlrack_affinity.py``, which makes
``import dlrack_affinity`` this module. It reads the plan the role wrote to
/etc/dlrack/gpu-affinity.json. ``dlrack-gpu-bind`` puts that directory on PYTHONPATH for the
command it starts; ``dlrack-gpu-bind --print-pythonpath`` prints it.

In a training script::

    import dlrack_affinity
    dlrack_affinity.bind_process()                  # this rank -> its GPU's CPUs
    loader = DataLoader(ds, num_workers=8,
                        worker_init_fn=dlrack_affinity.WorkerPinner(split=True))

or wrap the whole command: ``dlrack-gpu-bind python train.py`` (see ``bind_main``).

Which GPU is "mine":
  1. an explicit GPU (``--gpu`` / ``gpu=``): plan index, UUID or PCI bus id;
  2. else the local rank (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
     MV2_COMM_WORLD_LOCAL_RANK): the rank-th device of CUDA_VISIBLE_DEVICES when that is set
     (what ``torch.cuda.set_device(local_rank)`` picks), else plan index ``rank``;
  3. else CUDA_VISIBLE_DEVICES alone: its one device, or the union of its devices' CPUs.
CUDA_VISIBLE_DEVICES entries may be indices, GPU UUIDs (full or a unique prefix), or MIG ids
(``MIG-GPU-<uuid>/<gi>/<ci>``, or ``MIG-<uuid>`` resolved through ``nvidia-smi -L``). Integer
entries mean nvidia-smi/NVML indices, which are in PCI bus order; CUDA numbers devices
fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so the launcher exports
CUDA_DEVICE_ORDER=PCI_BUS_ID when it is unset (then CUDA device N is nvidia-smi GPU N).
On a plan of AMD GPUs (entries with ``vendor: amd``) ROCR_VISIBLE_DEVICES takes the place of
CUDA_VISIBLE_DEVICES (indices in ROCm's order, the plan's bus-id order, or ``GPU-<unique id>``),
and HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which HIP also reads) indexes into the devices
ROCR_VISIBLE_DEVICES leaves.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import sys

from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
)
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import (
    VisibleDevicesError,
    nvidia,
    visible_selection,
    visible_variables,
)
from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import (
    ParseError,
    normalize_pci_bus_id,
)
from ansible_collections.dlrack.node.plugins.module_utils.system.command import run as run_bounded

__all__ = ["load_plan", "resolve", "bind_process", "worker_init_fn", "WorkerPinner",
           "split_cpus", "parse_cpulist", "format_cpulist", "BindError", "bind_main",
           "python_path"]

DEFAULT_PLAN = "/etc/dlrack/gpu-affinity.json"
RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
             "MV2_COMM_WORLD_LOCAL_RANK")

EXIT_USAGE = 2
EXIT_NOT_IN_PLAN = 3
EXIT_NO_COMMAND = 127

# listing MIG ids (hw/gpu/nvidia.py: mig_parents) through the bounded runner (system/command.py)
MIG_LIST_TIMEOUT_S = nvidia.MIG_LIST_TIMEOUT_S
MIG_LIST_OUTPUT_LIMIT = nvidia.MIG_LIST_OUTPUT_LIMIT


class BindError(Exception):
    """The GPU cannot be resolved or is not in the plan; message says what to fix."""

    def __init__(self, message, code=EXIT_NOT_IN_PLAN):
        Exception.__init__(self, message)
        self.code = code


# --- the plan ------------------------------------------------------------------------------

def load_plan(path=None):
    path = path or os.environ.get("DLRACK_GPU_AFFINITY_PLAN") or DEFAULT_PLAN
    try:
        with open(path) as f:
            plan = json.load(f)
    except (IOError, OSError) as exc:
        raise BindError("cannot read the GPU affinity plan %s (%s); run the "
                        "dlrack.node.gpu_affinity role on this node" % (path, exc.strerror))
    except ValueError as exc:
        raise BindError("GPU affinity plan %s is not JSON: %s" % (path, exc))
    if isinstance(plan, list):
        plan = {"gpus": plan}
    if not isinstance(plan, dict) or not isinstance(plan.get("gpus"), list):
        raise BindError("GPU affinity plan %s has no 'gpus' list" % path)
    plan["_path"] = path
    return plan


def norm_bus_id(bus):
    """'00000000:C1:00.0' (nvidia-smi) and '0000:c1:00.0' (sysfs) -> '0000:c1:00.0'.

    The collection's normalize_pci_bus_id; a string that is not a bus id comes back lowered
    (it can then only match itself).
    """
    try:
        return normalize_pci_bus_id(bus)
    except ParseError:
        return str(bus).strip().lower()


def norm_uuid(uuid):
    u = str(uuid or "").strip().lower()
    return u[4:] if u.startswith("gpu-") else u


parse_nvidia_smi_list = nvidia.parse_gpu_list


def _mig_parents(mig_map):
    if mig_map is not None:
        return mig_map
    return nvidia.mig_parents(shutil.which, run_bounded, MIG_LIST_TIMEOUT_S, MIG_LIST_OUTPUT_LIMIT)


def find_gpu(plan, token, mig_map=None):
    """One plan entry for an index, UUID (or unique prefix), MIG id or PCI bus id."""
    gpus = plan["gpus"]
    tok = str(token).strip()
    where = plan.get("_path", "the plan")
    if re.match(r"^\d+$", tok):
        for g in gpus:
            if g.get("index") == int(tok):
                return g
        raise BindError("GPU %s is not in %s (it plans GPUs %s)" % (
            tok, where, ",".join(str(g.get("index")) for g in gpus) or "none"))
    low = tok.lower()
    if low.startswith("mig-"):
        m = re.match(r"^mig-(gpu-[0-9a-f-]+)/\d+/\d+$", low)
        if m:
            return find_gpu(plan, m.group(1), mig_map)
        parent = _mig_parents(mig_map).get(low)
        if not parent:
            raise BindError(nvidia.MIG_UNLISTED % tok)
        return find_gpu(plan, parent, mig_map)
    if re.match(r"^([0-9a-f]+:)?[0-9a-f]{1,2}:[0-9a-f]{1,2}\.[0-7]$", low):
        for g in gpus:
            if norm_bus_id(g.get("pci_bus_id")) == norm_bus_id(low):
                return g
        raise BindError("no GPU with PCI bus id %s in %s" % (tok, where))
    want = norm_uuid(low)
    hits = [g for g in gpus if g.get("uuid") and norm_uuid(g["uuid"]).startswith(want)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise BindError("GPU UUID prefix %s is ambiguous in %s" % (tok, where), EXIT_USAGE)
    raise BindError("no GPU with UUID %s in %s (the plan lists %s)" % (
        tok, where, ", ".join(str(g.get("uuid")) for g in gpus) or "no GPUs"))


def _local_rank(env):
    for var in RANK_VARS:
        val = env.get(var)
        if val not in (None, ""):
            if not re.match(r"^\d+$", val.strip()):
                raise BindError("%s=%r is not a rank number" % (var, val), EXIT_USAGE)
            return var, int(val)
    return None, None


def plan_gpus(plan):
    gpus = plan.get("gpus") if isinstance(plan, dict) else None
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []


def resolve(plan, env=None, gpu=None, mig_map=None):
    """Return {gpus: [plan entries], cpus: [...], mems: [...], why: str}."""
    env = os.environ if env is None else env
    try:
        selection = visible_selection(plan_gpus(plan), env)
    except VisibleDevicesError as exc:
        raise BindError(str(exc), EXIT_USAGE)
    var_name, visible, tokens = selection or (visible_variables()[0], None, None)
    if gpu is not None:
        chosen, why = [find_gpu(plan, gpu, mig_map)], "--gpu %s" % gpu
    else:
        var, rank = _local_rank(env)
        if rank is not None:
            if tokens is not None:
                if rank >= len(tokens):
                    raise BindError("%s=%d but %s=%r shows %d device(s)"
                                    % (var, rank, var_name, visible, len(tokens)))
                chosen = [find_gpu(plan, tokens[rank], mig_map)]
                why = "%s=%d -> %s[%d]=%s" % (var, rank, var_name, rank, tokens[rank])
            else:
                chosen, why = [find_gpu(plan, rank, mig_map)], "%s=%d" % (var, rank)
        elif tokens:
            chosen = []
            for t in tokens:
                g = find_gpu(plan, t, mig_map)
                if g not in chosen:
                    chosen.append(g)
            why = "%s=%s" % (var_name, visible)
        elif tokens is not None:
            raise BindError("%s=%r shows no GPU" % (var_name, visible))
        else:
            raise BindError("which GPU? set LOCAL_RANK (or SLURM_LOCALID) or "
                            "%s, or pass --gpu" % var_name, EXIT_USAGE)
    cpus, mems = set(), set()
    where = plan.get("_path", "the plan")
    for g in chosen:
        for key, into in (("cpus", cpus), ("mems", mems)):
            into.update(_cpulist(g.get(key), "%s: GPU %s %s" % (where, g.get("index"), key)))
    if not cpus:
        raise BindError("the plan gives GPU %s no CPUs" % chosen[0].get("index"))
    return {"gpus": chosen, "cpus": sorted(cpus), "mems": sorted(mems), "why": why}


def _cpulist(text, what):
    """parse_cpulist, with a BindError naming where the bad cpulist came from."""
    try:
        return parse_cpulist(text)
    except CpuListError as exc:
        raise BindError("%s: %s" % (what, exc), EXIT_USAGE)


# --- binding -------------------------------------------------------------------------------

def _cores_of(cpus, sysfs="/sys/devices/system/cpu"):
    """Group CPU ids into physical cores (thread_siblings_list); unknown -> one CPU a core."""
    cores, seen = [], set()
    for c in sorted(cpus):
        if c in seen:
            continue
        sib = [c]
        try:
            with open(os.path.join(sysfs, "cpu%d" % c, "topology", "thread_siblings_list")) as f:
                sib = [s for s in parse_cpulist(f.read()) if s in cpus] or [c]
        except (IOError, OSError, ValueError):
            pass
        seen.update(sib)
        cores.append(sorted(sib))
    return cores


def split_cpus(cpus, parts, part, sysfs="/sys/devices/system/cpu"):
    """The ``part``-th of ``parts`` contiguous shares of ``cpus``, in whole cores.

    Shares differ by at most one core. With more parts than cores, parts share cores
    round-robin (part p gets core p mod ncores).
    """
    cores = _cores_of(list(cpus), sysfs)
    if parts <= 1 or not cores:
        return sorted(cpus)
    if parts > len(cores):
        return cores[part % len(cores)]
    base, extra = divmod(len(cores), parts)
    start = part * base + min(part, extra)
    take = base + (1 if part < extra else 0)
    return sorted(c for core in cores[start:start + take] for c in core)


def _gpu_cpus_for_this_process(plan_path=None):
    env_cpus = os.environ.get("DLRACK_GPU_CPUS")
    if env_cpus:
        return _cpulist(env_cpus, "DLRACK_GPU_CPUS")
    try:
        return resolve(load_plan(plan_path))["cpus"]
    except BindError:
        return sorted(os.sched_getaffinity(0))


def bind_process(gpu=None, plan_path=None, pid=0):
    """Pin this process (a training rank) to its GPU's CPUs; return the CPU list."""
    res = resolve(load_plan(plan_path), gpu=gpu)
    os.sched_setaffinity(pid, res["cpus"])
    os.environ["DLRACK_GPU_CPUS"] = format_cpulist(res["cpus"])
    return res["cpus"]


def _num_workers_from_torch():
    # Only look at torch when the DataLoader already imported it in this process.
    data = sys.modules.get("torch.utils.data")
    if data is None:
        return None
    info = data.get_worker_info()
    return info.num_workers if info is not None else None


class WorkerPinner(object):
    """A picklable DataLoader ``worker_init_fn``: pin worker ``worker_id`` to the GPU's CPUs.

    split=True gives each worker its own share of the set (whole cores); num_workers defaults
    to what torch.utils.data.get_worker_info() says (when torch is already loaded). ``chain``
    is called afterwards with the worker id (your own worker_init_fn).
    """

    def __init__(self, split=False, num_workers=None, cpus=None, chain=None, plan_path=None,
                 sysfs="/sys/devices/system/cpu"):
        self.split = split
        self.num_workers = num_workers
        self.cpus = _cpulist(cpus, "WorkerPinner(cpus=...)") if cpus is not None else None
        self.chain = chain
        self.plan_path = plan_path
        self.sysfs = sysfs

    def cpus_for(self, worker_id):
        cpus = self.cpus if self.cpus else _gpu_cpus_for_this_process(self.plan_path)
        if not self.split:
            return sorted(cpus)
        n = self.num_workers or _num_workers_from_torch() or 1
        return split_cpus(cpus, n, worker_id % n, self.sysfs)

    def __call__(self, worker_id):
        cpus = self.cpus_for(worker_id)
        os.sched_setaffinity(0, cpus)
        if self.chain is not None:
            self.chain(worker_id)
        return cpus


def worker_init_fn(worker_id):
    """DataLoader worker_init_fn: pin the worker to the whole CPU set of the process's GPU."""
    return WorkerPinner(split=False)(worker_id)


# --- the launcher (dlrack-gpu-bind) ----------------------------------------------------------

USAGE = """usage: dlrack-gpu-bind [--gpu IDX|UUID|BUSID] [--plan FILE] [--mem bind|preferred|none]
                       [--no-numactl] [--print] [--verbose] [--] COMMAND [ARG...]
       dlrack-gpu-bind --print-pythonpath

Run COMMAND pinned to the CPUs and NUMA memory the dlrack GPU affinity plan gives its GPU.
The GPU is --gpu, else the local rank (LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK)
as an index into the visible-devices variable of the plan's GPUs (%s; into
the plan when it is unset), else the devices it lists. Per rank under torchrun:  torchrun --no-python ... dlrack-gpu-bind
python train.py ...   (wrapping torchrun itself pins all ranks to the union of the GPUs' CPUs).
COMMAND gets the helper's directory first on PYTHONPATH, so `import dlrack_affinity` works in
whatever Python it starts (venv, conda env). --print-pythonpath prints that directory for
shells that do not use the launcher:  export PYTHONPATH=$(dlrack-gpu-bind --print-pythonpath)
--print shows the binding as JSON and runs nothing. Exit 2: usage, 3: GPU not in the plan.
""" % ", ".join(visible_variables())


def _parse_args(argv):
    opts = {"gpu": None, "plan": None, "mem": "preferred", "numactl": True, "print": False,
            "verbose": False, "print_pythonpath": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        if a in ("--gpu", "--plan", "--mem"):
            if i + 1 >= len(argv):
                raise BindError("%s needs a value" % a, EXIT_USAGE)
            opts[a[2:]] = argv[i + 1]
            i += 2
            continue
        if a.startswith(("--gpu=", "--plan=", "--mem=")):
            k, v = a[2:].split("=", 1)
            opts[k] = v
        elif a == "--no-numactl":
            opts["numactl"] = False
        elif a == "--print":
            opts["print"] = True
        elif a == "--print-pythonpath":
            opts["print_pythonpath"] = True
        elif a in ("-v", "--verbose"):
            opts["verbose"] = True
        elif a.startswith("-"):
            raise BindError("unknown option %s\n%s" % (a, USAGE), EXIT_USAGE)
        else:
            break
        i += 1
    if opts["mem"] not in ("bind", "preferred", "none"):
        raise BindError("--mem must be bind, preferred or none", EXIT_USAGE)
    return opts, argv[i:]


def build_exec(res, command, mem="preferred", numactl=None):
    """The argv to exec: numactl in front when available, else the command itself."""
    cpus = format_cpulist(res["cpus"])
    if numactl:
        args = [numactl, "--physcpubind=" + cpus]
        if mem == "bind" and res["mems"]:
            args.append("--membind=" + format_cpulist(res["mems"]))
        elif mem == "preferred" and len(res["mems"]) == 1:
            args.append("--preferred=%d" % res["mems"][0])
        return args + ["--"] + list(command)
    return list(command)


def python_path(lib_dir, current=None):
    """PYTHONPATH value with ``lib_dir`` first (kept once; an empty entry would mean the cwd)."""
    rest = [p for p in (current or "").split(os.pathsep) if p and p != lib_dir]
    return os.pathsep.join([lib_dir] + rest)


def default_lib_dir():
    """Directory holding ``dlrack_affinity.py`` and this package tree (what goes on PYTHONPATH).

    This file is <lib>/ansible_collections/dlrack/node/plugins/module_utils/programs/gpu_bind.py.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for dummy in range(5):
        here = os.path.dirname(here)
    return here


def bind_main(argv=None, environ=None, lib_dir=None):
    """dlrack-gpu-bind: exec COMMAND pinned to its GPU's CPUs, with the helper on PYTHONPATH."""
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if environ is None else environ
    lib_dir = lib_dir or default_lib_dir()
    try:
        opts, command = _parse_args(argv)
        if opts["print_pythonpath"]:
            sys.stdout.write(lib_dir + "\n")
            return 0
        if not command and not opts["print"]:
            raise BindError("no command given\n" + USAGE, EXIT_USAGE)
        plan = load_plan(opts["plan"])
        res = resolve(plan, env, gpu=opts["gpu"])
    except BindError as exc:
        sys.stderr.write("dlrack-gpu-bind: %s\n" % exc)
        return exc.code
    if command and not shutil.which(command[0], path=env.get("PATH")):
        sys.stderr.write("dlrack-gpu-bind: command not found: %s\n" % command[0])
        return EXIT_NO_COMMAND
    numactl = shutil.which("numactl") if opts["numactl"] else None
    child_env = dict(env)
    child_env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    child_env["PYTHONPATH"] = python_path(lib_dir, env.get("PYTHONPATH"))
    child_env["DLRACK_GPU_CPUS"] = format_cpulist(res["cpus"])
    child_env["DLRACK_GPU_MEMS"] = format_cpulist(res["mems"])
    child_env["DLRACK_GPU_INDEX"] = ",".join(str(g.get("index")) for g in res["gpus"])
    args = build_exec(res, command, opts["mem"], numactl)
    order_warning = nvidia.visible_order_warning(env)
    if order_warning:
        sys.stderr.write("dlrack-gpu-bind: warning: %s\n" % order_warning)
    info = {"gpus": [g.get("index") for g in res["gpus"]], "cpus": format_cpulist(res["cpus"]),
            "mems": format_cpulist(res["mems"]), "why": res["why"],
            "method": "numactl" if numactl else "sched_setaffinity", "exec": args}
    if opts["print"]:
        sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
        return 0
    if opts["verbose"]:
        sys.stderr.write("dlrack-gpu-bind: GPU %s (%s): cpus %s mems %s via %s\n" % (
            info["gpus"], res["why"], info["cpus"], info["mems"] or "-", info["method"]))
    if not numactl:
        try:
            os.sched_setaffinity(0, res["cpus"])
        except OSError as exc:
            sys.stderr.write("dlrack-gpu-bind: cannot pin to CPUs %s: %s\n"
                             % (info["cpus"], exc))
            return EXIT_NOT_IN_PLAN
    try:
        os.execvpe(args[0], args, child_env)
    except OSError as exc:
        sys.stderr.write("dlrack-gpu-bind: cannot run %s: %s\n" % (args[0], exc.strerror))
        return EXIT_NO_COMMAND
    return 0  # not reached
