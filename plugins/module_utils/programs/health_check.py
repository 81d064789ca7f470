# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dlrack-health-check: the node judges itself between Ansible runs (Slurm HealthCheckProgram).

Shipped to the node by roles/scheduler (docs/node_code.md) and run by slurmd every
HealthCheckInterval seconds (it must end well inside slurmd's 60 s limit; it takes a few tens
of milliseconds plus one or two scontrol calls). From the node alone it judges what can change
between runs:

- ``gpu.present``: every GPU of the last accepted state (PCI address) is still on the bus;
- ``gpu.pcie_link``: each one's negotiated link width is still the accepted width (idle speed
  downshift is no fault, so the speed is not compared);
- ``memory.ecc_errors``: the ECC collector's textfile (roles/ecc_monitor, metric names of
  ecc/metrics.py) counts an uncorrected EDAC error (``dlrack_edac_uncorrected_errors_total``
  > 0) or says ``dlrack_edac_status{status="error"} 1``;
- ``gpu.ecc_errors``: an uncorrected GPU error since the driver loaded
  (``dlrack_gpu_ecc_uncorrected_errors_total{scope="volatile"}`` > 0) or a failed row remap;
- ``storage.hot_tier_mounted``: the hot tier's mount point is mounted.

A textfile that is missing or older than ``textfile_max_age_s``, or a fresh one that says no EDAC
controller watches the memory (``dlrack_edac_supported 0``) or holds no EDAC sample, gives no ECC
verdict (unknown is not failing, and not healthy: the output says so). Then it drains its own node with the reason
``dlrack: <rule ids> health-<time>`` or resumes it - but only a drain whose run id starts with
``health-`` (its own): a drain by a dlrack Ansible run is the run's to lift, one by a person is
never touched (module_utils/scheduler/slurm.py has the ownership rule).

The last accepted state (``--accept`` writes it, the role runs that after a passing run) is JSON:
``{"schema": 1, "gpus": [{"pci_bus_id": "0000:18:00.0", "width": 16}, ...]}``.

Standard library only, Python 3.6+.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import random
import re
import socket
import sys
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_text, under, write_atomic
import ansible_collections.dlrack.node.plugins.module_utils.scheduler.modes as rule_modes
import ansible_collections.dlrack.node.plugins.module_utils.scheduler.node_guard as guard
try:  # issue 29; a node installed before gpu_faults/ shipped judges without GPU fault events
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.health import judge_health as judge_gpu_faults
    from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.health import replay as replay_kernel_log
except ImportError:
    def judge_gpu_faults(conf, accepted, now, rules, notes, unknown):
        notes.append("GPU faults: not judged (module_utils/gpu_faults is not installed on this node)")

    def replay_kernel_log(args, default_config, load, error):
        sys.stderr.write("dlrack-health-check: --kernel-log needs module_utils/gpu_faults (re-run roles/scheduler)\n")
        return 2
from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import (
    NAME_RE, Scontrol, SlurmError, decide, format_reason, needs_service, new_health_run_id, parse_reason, skip_reason)

DEFAULT_CONFIG = "/etc/dlrack/health-check.json"
DEFAULTS = {
    "node": None,                    # Slurm node name; default: the short host name
    "root": "/",                     # where /sys and /proc are (tests: a captured tree)
    "state_file": "/var/lib/dlrack/health-accepted.json",
    "textfile": "/var/lib/node_exporter/textfile_collector/dlrack_ecc.prom",
    "textfile_max_age_s": 3600,
    "hot_mount": "",
    "scontrol": "scontrol",
    "timeout_s": 10,
    "act": True,                     # False: judge and print only
    # rule modes (scheduler/modes.py): run-wide, and the modes of this node's inventory groups
    "rule_modes": {},
    "rule_modes_groups": {},
    # validated return (issue 28.6): before resuming a node it drained, where the accepted state
    # has GPUs: every accepted GPU present at its width, no uncorrected ECC in the textfile, and
    # (return_copy) a host-to-GPU copy at >= return_copy_min_share of the negotiated link
    "return_validation": True,
    "return_copy": True,
    "return_copy_min_share": 0.8,
    "return_copy_bytes": 256 * 1024 * 1024,
    "return_copy_timeout_s": 30,
    # issue 29: GPU fault events from the kernel log (module_utils/gpu_faults/health.py; {"source": "off"}: off)
    "gpu_faults": {},
}
DEFAULTS.update(guard.GUARD_DEFAULTS)
# Exit status: 0 healthy (or only shadow rules fail), 1 unhealthy, 2 bad configuration,
# 3 scontrol failed, 4 a drain refused (or given back) over the fleet cap.
RC_HEALTHY, RC_UNHEALTHY, RC_CONFIG, RC_SCONTROL, RC_CAP = 0, 1, 2, 3, 4
# slurmd runs HealthCheckProgram at the same time on all nodes and kills it after 60 s (slurm.conf(5),
# HealthCheckProgram): every scontrol call and the copy check end within this many seconds of the
# start, and a drain starts only with time left to count again and give it back (a kill between the
# drain and the count could leave the fleet over the cap).
RUN_BUDGET_S = 50
RUN_PREFIX = "health-"
TEXTFILE_LIMIT = 4 * 1024 * 1024
# {PCI vendor id: GPU classes} of every vendor, from the vendor seam (hw/gpu/: NVIDIA, AMD, Hygon, Ascend)
from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import pci_classes  # noqa: E402 (the seam's one table)
GPU_VENDORS = pci_classes()
_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class ConfigError(Exception):
    pass


def load_config(path, overrides=None):
    """DEFAULTS, the JSON object in ``path`` over them, then ``overrides``; checked (ConfigError:
    one sentence naming the file, the key and the fix). The default file may be missing (the
    defaults); a file named on the command line must exist."""
    conf = dict(DEFAULTS)
    if path and path != DEFAULT_CONFIG and not os.path.exists(path):
        raise ConfigError("%s does not exist: name the file roles/scheduler writes (%s by default)" % (path, DEFAULT_CONFIG))
    if path and os.path.exists(path):
        text = read_text(path, limit=65536)
        if text is None:
            raise ConfigError("%s cannot be read: run dlrack-health-check as root (slurmd does)" % path)
        try:
            data = json.loads(text or "")
        except ValueError as exc:
            raise ConfigError("%s is not JSON (%s); the role writes it, re-run roles/scheduler" % (path, exc))
        if not isinstance(data, dict):
            raise ConfigError("%s: expected a JSON object" % path)
        unknown = sorted(set(data) - set(DEFAULTS))
        if unknown:
            raise ConfigError("%s: unknown key(s) %s; expected %s" % (path, ", ".join(unknown), ", ".join(sorted(DEFAULTS))))
        conf.update(data)
    conf.update(overrides or {})
    return settle_config(conf, path)


# The kind of each setting (the guard's are checked by node_guard.check_guard): a wrong one is a
# sentence naming it, not a traceback or a check that silently "cannot judge" every run.
_PATHS = ("root", "state_file", "textfile", "scontrol", "history_file")
_OPTIONAL_PATHS = ("hot_mount", "audit_log", "metrics_textfile")
_FLAGS = ("act", "return_validation", "return_copy")
_POSITIVE = ("textfile_max_age_s", "timeout_s", "return_copy_timeout_s", "return_copy_bytes")


def check_settings(conf):
    """ConfigError (without the file name) for a setting of the wrong kind."""
    def bad(key, want):
        raise ConfigError("%s is %s: %s" % (key, ascii(conf[key])[:80], want))
    for key in _PATHS:
        if not isinstance(conf[key], str) or not conf[key]:
            bad(key, "use a path (a string)")
    for key in _OPTIONAL_PATHS:
        if not isinstance(conf[key], str) and conf[key] is not None:
            bad(key, "use a path, or \"\" for none")
    for key in _FLAGS:
        if not isinstance(conf[key], bool):
            bad(key, "use true or false")
    for key in _POSITIVE:
        if isinstance(conf[key], bool) or not isinstance(conf[key], (int, float)) or conf[key] <= 0:
            bad(key, "use a number above 0")
    # the drain, the count after it and a give-back (3 calls), or the copy check and the resume, must fit
    # in a run, with a few seconds for the judgement and the first calls
    if conf["timeout_s"] * 3 > RUN_BUDGET_S - 5:
        bad("timeout_s", "use at most %d s (a drain, the count after it and a give-back must fit in the %d s of a run: "
                         "slurmd kills the program after 60 s)" % ((RUN_BUDGET_S - 5) // 3, RUN_BUDGET_S))
    if conf["return_copy_timeout_s"] + conf["timeout_s"] > RUN_BUDGET_S - 5:
        bad("return_copy_timeout_s", "use at most %d s with timeout_s %s (the copy check and the resume must fit in the %d s "
                                     "of a run)" % (RUN_BUDGET_S - 5 - conf["timeout_s"], conf["timeout_s"], RUN_BUDGET_S))
    share = conf["return_copy_min_share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        bad("return_copy_min_share", "use a share above 0 and at most 1 (0.8: 80 %)")
    if not isinstance(conf["gpu_faults"], dict):
        bad("gpu_faults", "use a JSON object ({} for the defaults)")
    if conf["node"] is not None and not (isinstance(conf["node"], str) and NAME_RE.match(conf["node"])):
        bad("node", "use the Slurm node name (letters, digits, '.', '_', '-'), or null for the short host name")


def settle_config(conf, path=None):
    """The node name (slurmd's SLURMD_NODENAME for the node it runs the check for - several slurmd
    on one host each run it -, else the configured name, else the short host name), ``{node}`` in
    the guard's file names, and the settings, rule modes and guard settings checked."""
    try:
        check_settings(conf)
    except ConfigError as exc:
        raise ConfigError("%s: %s" % (path or "configuration", exc))
    conf["node"] = os.environ.get("SLURMD_NODENAME") or conf["node"] or socket.gethostname().split(".")[0]
    if not NAME_RE.match(conf["node"]):
        raise ConfigError("node name %s (SLURMD_NODENAME or the host name) is not a Slurm node name: set node in %s"
                          % (ascii(conf["node"])[:80], path or "the configuration"))
    for key in ("history_file", "audit_log", "metrics_textfile"):
        if isinstance(conf[key], str):
            conf[key] = conf[key].replace("{node}", conf["node"])
    try:
        conf["rule_modes"] = rule_modes.check_modes(conf["rule_modes"], "rule_modes")
        conf["rule_modes_groups"] = rule_modes.check_group_modes(conf["rule_modes_groups"], "rule_modes_groups")
        guard.check_guard(conf)
    except (rule_modes.ModeError, guard.GuardError) as exc:
        raise ConfigError("%s: %s" % (path or "configuration", exc))
    return conf


def find_gpus(root="/"):
    """{pci address: width or None} of the GPUs on the PCI bus (NVIDIA display/3D class, AMD
    display/accelerator class), read from /sys/bus/pci/devices; None when that directory cannot be
    read (the GPUs cannot be judged: not one of them is "gone")."""
    base = under(root, "/sys/bus/pci/devices")
    try:
        names = os.listdir(base)
    except OSError:
        return None
    out = {}
    for name in sorted(names):
        dev = os.path.join(base, name)
        vendor = (read_text(os.path.join(dev, "vendor"), limit=64) or "").strip().lower()
        if vendor not in GPU_VENDORS:
            continue
        cls = (read_text(os.path.join(dev, "class"), limit=64) or "").strip().lower()
        if not cls.startswith(GPU_VENDORS[vendor]):
            continue
        width = (read_text(os.path.join(dev, "current_link_width"), limit=64) or "").strip()
        out[name] = int(width) if width.isdigit() and 0 < int(width) <= 32 else None
    return out


def parse_textfile(text):
    """Prometheus text -> list of (name, labels dict, value float); bad lines are skipped."""
    out = []
    for line in (text or "").splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        labels = dict(_LABEL_RE.findall(m.group(2) or ""))
        out.append((m.group(1), labels, value))
    return out


def judge_ecc(conf, now=None):
    """(failing rule ids, notes) from the collector's textfile."""
    path = conf["textfile"]
    now = time.time() if now is None else now
    try:
        age = now - os.stat(path).st_mtime
    except OSError:
        return [], ["ECC: no collector textfile at %s: ECC state unknown (install roles/ecc_monitor)" % path]
    if age > conf["textfile_max_age_s"]:
        return [], ["ECC: %s is %d s old (limit %d s): the collector is not running, ECC state unknown"
                    % (path, age, conf["textfile_max_age_s"])]
    samples = parse_textfile(read_text(path, limit=TEXTFILE_LIMIT))
    rules, notes = set(), []
    # A fresh textfile can still say that nothing watches the memory (no EDAC controller: the
    # collector writes dlrack_edac_supported 0 and status unknown), or hold no EDAC sample at all:
    # unknown is never healthy (issue 30.8), so it is a note and memory.ecc_errors is not judged.
    edac = [(n, l, v) for n, l, v in samples if n in ("dlrack_edac_supported", "dlrack_edac_status")]
    if not edac:
        notes.append("ECC: %s has no dlrack_edac_* sample: ECC state unknown (is it the dlrack-ecc-collector's?)" % path)
    elif any(n == "dlrack_edac_supported" and v == 0 for n, l, v in edac) or any(
            n == "dlrack_edac_status" and l.get("status") == "unknown" and v == 1 for n, l, v in edac):
        notes.append("ECC: %s says no EDAC memory controller is registered: memory error state unknown, not judged "
                     "(load the platform's EDAC driver; roles/ecc_monitor names it)" % path)
    edac_ue = sum(v for n, l, v in samples if n == "dlrack_edac_uncorrected_errors_total")
    if edac_ue > 0:
        rules.add("memory.ecc_errors")
        notes.append("ECC: %d uncorrected memory error(s) counted by EDAC" % edac_ue)
    if any(n == "dlrack_edac_status" and l.get("status") == "error" and v == 1 for n, l, v in samples):
        rules.add("memory.ecc_errors")
        notes.append("ECC: the collector's assessment is error")
    gpu_ue = sum(v for n, l, v in samples if n == "dlrack_gpu_ecc_uncorrected_errors_total" and l.get("scope") == "volatile")
    if gpu_ue > 0:
        rules.add("gpu.ecc_errors")
        notes.append("ECC: %d uncorrected GPU memory error(s) since the driver loaded" % gpu_ue)
    if any(n == "dlrack_gpu_remapped_rows_failed" and v == 1 for n, l, v in samples):
        rules.add("gpu.ecc_errors")
        notes.append("ECC: a GPU's row remapping failed")
    return sorted(rules), notes


_OCTAL_RE = re.compile(r"\\([0-7]{3})")


def unescape_mount(field):
    """A mount point as the kernel writes it in mountinfo / mounts (space, tab, newline and
    backslash as ``\\040``, ``\\011``, ``\\012``, ``\\134``: fs/proc_namespace.c, seq_path) -> the path."""
    return _OCTAL_RE.sub(lambda m: chr(int(m.group(1), 8)), field)


def _norm_mount(path):
    path = os.path.normpath(path) if path else path
    return "/" + path.lstrip("/") if path else path


def mount_points(root):
    """The mount points of this mount namespace, unescaped; a bind mount is listed under its own
    mount point like any other (its root field is not '/'). None when neither file can be read, or
    the table is longer than TEXTFILE_LIMIT (cut short, a mount point in its tail would be "not
    mounted")."""
    text = read_text(under(root, "/proc/self/mountinfo"), limit=TEXTFILE_LIMIT + 1)
    index = 4
    if text is None:
        text, index = read_text(under(root, "/proc/mounts"), limit=TEXTFILE_LIMIT + 1), 1
    if text is None or len(text) > TEXTFILE_LIMIT:
        return None
    return set(_norm_mount(unescape_mount(f[index])) for f in (line.split(" ") for line in text.splitlines()) if len(f) > index)


def mounted(root, mount_point):
    """``mount_point`` (as the operator wrote it: spaces, trailing slashes; on the live system a
    symbolic link on the way is followed, as the kernel lists the resolved path) is a mount point.
    None when the mount table cannot be read (the check cannot judge)."""
    points = mount_points(root)
    if points is None:
        return None
    want = {_norm_mount(mount_point)}
    if root in ("/", "") and os.path.isabs(mount_point):
        want.add(_norm_mount(os.path.realpath(mount_point)))
    return bool(want & points)


def load_accepted(path):
    text = read_text(path, limit=1024 * 1024)
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        return None
    return doc


def judge(conf, now=None):
    """{'rules': [...], 'notes': [...], 'unknown': [rules not judged]} for this node now."""
    rules, notes, unknown = set(), [], set()
    accepted = load_accepted(conf["state_file"])
    if accepted is None:
        unknown.update(("gpu.present", "gpu.pcie_link"))
        notes.append("GPUs: no accepted state at %s (run dlrack-health-check --accept after a passing run): "
                     "GPU presence and link width not judged" % conf["state_file"])
    else:
        now_gpus = find_gpus(conf["root"])
        if now_gpus is None:
            unknown.update(("gpu.present", "gpu.pcie_link"))
            notes.append("GPUs: %s cannot be read: GPU presence and link width not judged"
                         % under(conf["root"], "/sys/bus/pci/devices"))
        for gpu in accepted["gpus"] if now_gpus is not None else ():
            if not isinstance(gpu, dict):
                continue
            bus = str(gpu.get("pci_bus_id", "")).lower()
            if bus not in now_gpus:
                rules.add("gpu.present")
                notes.append("GPU %s of the accepted state is not on the PCI bus" % ascii(bus))
                continue
            want, got = gpu.get("width"), now_gpus[bus]
            if isinstance(want, int) and got is not None and got < want:
                rules.add("gpu.pcie_link")
                notes.append("GPU %s: link width x%d, accepted x%d" % (bus, got, want))
    ecc_rules, ecc_notes = judge_ecc(conf, now)
    rules.update(ecc_rules)
    notes.extend(ecc_notes)
    if any("ECC state unknown" in n for n in ecc_notes):
        unknown.update(("memory.ecc_errors", "gpu.ecc_errors"))
    elif any("memory error state unknown" in n for n in ecc_notes) and "memory.ecc_errors" not in ecc_rules:
        unknown.add("memory.ecc_errors")
    if conf["hot_mount"]:
        is_mounted = mounted(conf["root"], conf["hot_mount"])
        if is_mounted is None:
            unknown.add("storage.hot_tier_mounted")
            notes.append("hot tier: the mount table cannot be read: not judged")
        elif not is_mounted:
            rules.add("storage.hot_tier_mounted")
            notes.append("hot tier %s is not mounted" % conf["hot_mount"])
    judge_gpu_faults(conf, accepted, now, rules, notes, unknown)   # issue 29 (gpu_faults/health.py)
    return {"rules": sorted(rules), "notes": notes, "unknown": sorted(unknown)}


class NoGpuError(Exception):
    """--accept saw no GPU and was not told the node has none."""


def accept(conf, no_gpu=False):
    """Record the GPUs on the bus as the accepted state. No GPU visible is refused (NoGpuError)
    unless ``no_gpu`` says the node has none: an empty list recorded silently would let every later
    run pass on a node whose GPUs fell off the bus."""
    gpus = find_gpus(conf["root"])
    if gpus is None:
        raise NoGpuError("%s cannot be read on %s, so nothing was accepted; run --accept where /sys is mounted"
                         % (under(conf["root"], "/sys/bus/pci/devices"), conf["node"]))
    if not gpus and not no_gpu:
        raise NoGpuError("no GPU is visible on the PCI bus of %s, so nothing was accepted; if the GPUs are "
                         "missing, fix that and accept again, and if this node has no GPU, run with --no-gpu "
                         "(the role: scheduler_health_check_no_gpu=true)" % conf["node"])
    doc = {"schema": 1, "accepted_at": int(time.time()),
           "gpus": [{"pci_bus_id": k, "width": v} for k, v in sorted(gpus.items())]}
    if not gpus:
        doc["no_gpu"] = True
    directory = os.path.dirname(conf["state_file"])
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    write_atomic(conf["state_file"], json.dumps(doc, sort_keys=True) + "\n")
    return doc


# --------------------------------------------------------------------------------------------
# The act: modes, flap damping, the fleet cap, validated return, the audit trail (issue 28)
# --------------------------------------------------------------------------------------------

def judge_safely(conf, now=None):
    """judge(), but a check that raises cannot judge: it never drains (every rule unknown)."""
    try:
        return judge(conf, now)
    except Exception as exc:  # noqa: BLE001 - any failure of a check is "cannot judge", never a drain
        return {"rules": [], "unknown": ["*"], "notes": ["the checks could not run (%s: %s): nothing judged, "
                                                         "nothing drained" % (type(exc).__name__, exc)]}


def link_gbps(root, bus):
    """The negotiated PCIe link of ``bus`` in decimal GB/s (current speed x width, less the line
    encoding: 8b/10b up to 5 GT/s, 128b/130b above), None when sysfs does not say."""
    dev = under(root, "/sys/bus/pci/devices/" + bus)
    speed = (read_text(os.path.join(dev, "current_link_speed"), limit=64) or "").strip()
    width = (read_text(os.path.join(dev, "current_link_width"), limit=64) or "").strip()
    m = re.match(r"^([0-9]+(?:\.[0-9]+)?) ?GT/s", speed)
    if not m or not width.isdigit() or int(width) < 1:
        return None
    gts = float(m.group(1))
    return gts * int(width) * (0.8 if gts <= 5.0 else 128.0 / 130.0) / 8.0


def _lib_dir():
    """The directory holding ansible_collections/ (where this code was installed)."""
    here = os.path.abspath(__file__)
    for dummy in range(7):
        here = os.path.dirname(here)
    return here


def copy_check(conf, accepted, runner=None):
    """(ok, note): a short host-to-GPU copy per GPU through the acceptance copy code
    (acceptance/gpu.py: libcuda, or HIP on AMD), in a child bounded by return_copy_timeout_s; each
    GPU's pinned H2D median at >= return_copy_min_share of its negotiated link. No runtime: skipped
    (ok) with its reason."""
    from ansible_collections.dlrack.node.plugins.module_utils.system.command import run
    if os.path.isdir(under(conf["root"], "/sys/class/kfd")):
        return True, "copy check skipped: an AMD node; the HIP copy code (acceptance/gpu_hip.py) is not installed with the health check"
    code = os.path.join(_lib_dir(), "ansible_collections/dlrack/node/plugins/module_utils/acceptance/gpu.py")
    if runner is None and not os.path.isfile(code):
        return True, "copy check skipped: the acceptance copy code is not installed here (%s)" % code
    argv = [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r); from ansible_collections.dlrack.node.plugins"
            ".module_utils.acceptance.gpu import main; sys.exit(main())" % _lib_dir(),
            "--bytes", str(int(conf["return_copy_bytes"])), "--iterations", "3", "--no-pageable", "--no-p2p"]
    res = (runner or (lambda a: run(a, timeout=conf["return_copy_timeout_s"], output_limit=1024 * 1024)))(argv)
    try:
        doc = json.loads(res[1])
    except (ValueError, TypeError):
        return False, "copy check: no result (%s)" % ((res[2] or "").strip()[-200:] or "rc %s" % res[0])
    if doc.get("status") == "skip":
        return True, "copy check skipped: %s" % doc.get("reason")
    if doc.get("status") != "ok":
        return False, "copy check failed: %s" % doc.get("reason")
    share, problems, seen = float(conf["return_copy_min_share"]), [], []
    for dev in doc.get("devices") or []:
        bus = str(dev.get("pci_bus_id") or "").lower()[-12:]
        got = (dev.get("h2d_pinned") or {}).get("gbps")
        want = link_gbps(conf["root"], bus)
        seen.append(bus)
        if dev.get("error") or got is None:
            problems.append("GPU %s: %s" % (bus, dev.get("error") or "no host-to-GPU figure"))
        elif want and got < share * want:
            problems.append("GPU %s: host-to-GPU %.1f GB/s, below %d %% of its link (%.1f GB/s)" % (bus, got, share * 100, want))
    missing = [g["pci_bus_id"] for g in accepted.get("gpus") or () if str(g.get("pci_bus_id"))[-12:] not in seen]
    if missing:
        problems.append("the copy check saw no GPU %s" % ", ".join(missing))
    return (not problems), ("copy check: " + ("; ".join(problems) if problems else "every GPU at >= %d %% of its link" % (share * 100)))


def validate_return(conf, now=None, copy_runner=None):
    """(ok, notes) of the node-local validation before a resume: where the accepted state has GPUs,
    every accepted GPU present at its accepted width, no uncorrected ECC in the textfile (whatever
    the rules' modes), and the copy check (return_copy)."""
    if not conf["return_validation"]:
        return True, ["return validation off (return_validation: false)"]
    accepted = load_accepted(conf["state_file"])
    if not accepted or not accepted["gpus"]:
        return True, ["return validation: no accepted GPU on this node, nothing to validate"]
    problems, notes = [], []
    now_gpus = find_gpus(conf["root"])
    if now_gpus is None:
        problems.append("the PCI devices (%s) cannot be read" % under(conf["root"], "/sys/bus/pci/devices"))
    for gpu in accepted["gpus"] if now_gpus is not None else ():
        bus = str(gpu.get("pci_bus_id", "")).lower() if isinstance(gpu, dict) else ""
        want, got = (gpu.get("width") if isinstance(gpu, dict) else None), now_gpus.get(bus)
        if bus not in now_gpus:
            problems.append("GPU %s is not on the PCI bus" % bus)
        elif isinstance(want, int) and (got is None or got < want):
            problems.append("GPU %s at x%s, accepted x%d" % (bus, got, want))
    ecc_rules, ecc_notes = judge_ecc(conf, now)
    if ecc_rules:
        problems.extend(ecc_notes)
    elif any("ECC state unknown" in n or "memory error state unknown" in n for n in ecc_notes):
        notes.append("return validation: " + ecc_notes[0])
    if not problems and conf["return_copy"]:
        ok, note = copy_check(conf, accepted, copy_runner)
        (notes if ok else problems).append(note)
    return not problems, (["return validation failed: " + p for p in problems] or ["return validated"]) + notes


def _modes(conf, rules):
    groups = sorted(conf["rule_modes_groups"])
    return rule_modes.split(rules, conf["rule_modes"], conf["rule_modes_groups"], groups)


def _bounded_runner(conf, deadline):
    """scontrol's runner: each call bounded by timeout_s and by what is left until ``deadline``."""
    from ansible_collections.dlrack.node.plugins.module_utils.system.command import run
    from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import OUTPUT_LIMIT
    return lambda argv: run(argv, timeout=max(1.0, min(conf["timeout_s"], deadline - time.monotonic())),
                            output_limit=OUTPUT_LIMIT, timeout_hint="timeout_s in the configuration")


def act(conf, verdict, scontrol=None, now=None, copy_runner=None, deadline=None):
    """Decide and act for this node. Returns {rc, line, events, enforced, shadowed, fleet}.
    ``deadline`` (time.monotonic()): when the run must have ended (default RUN_BUDGET_S from now)."""
    now = time.time() if now is None else now
    deadline = time.monotonic() + RUN_BUDGET_S if deadline is None else deadline
    sc = scontrol or Scontrol(path=conf["scontrol"], timeout=conf["timeout_s"], batch=1, runner=_bounded_runner(conf, deadline))
    node = conf["node"]
    enforced, shadowed = _modes(conf, verdict["rules"])
    history, note = guard.load_history(conf["history_file"])
    out = {"rc": RC_UNHEALTHY if enforced else RC_HEALTHY, "events": [], "enforced": enforced, "shadowed": shadowed,
           "fleet": None, "notes": [note] if note else []}
    if guard.new_boot(history, read_text(under(conf["root"], "/proc/sys/kernel/random/boot_id"), limit=64)):
        out["notes"].append("a new boot since the last run: the failing and passing runs are counted again")

    def event(kind, rules=(), reason=None, why=None, **more):
        guard.count(history, kind)
        rec = dict({"node": node, "event": kind, "rules": list(rules), "reason": reason, "why": why,
                    "evidence": verdict["notes"][:20]}, **more)
        out["events"].append(rec)
        problem = guard.audit(conf, rec, now)
        if problem:
            out["notes"].append(problem)

    if shadowed and guard.changed(history, "shadow", shadowed):
        event("would_drain", shadowed, why="shadow: the rule(s) report, they never drain")
    elif not shadowed:
        history["last"].pop("shadow", None)
    if not enforced:     # a refusal logged once per episode: the next failure is a new one
        history["last"].pop("cap", None)
        history["last"].pop("left_alone", None)
    current = sc.show([node]).get(node)
    mine = guard.is_mine(current)
    drained_for = (parse_reason(current["reason"]) or ((), ""))[0] if mine else ()
    unknown = set(verdict.get("unknown") or ())
    undecided = "*" in unknown or bool(set(drained_for) & unknown)
    guard.step(history, enforced, undecided, now, unknown)
    lines = []
    try:
        if enforced:
            lines.append(_drain(conf, sc, history, current, mine, enforced, now, out, event, deadline))
        else:
            lines.append(_resume(conf, sc, history, current, mine, undecided, now, out, event, copy_runner, deadline))
    finally:
        _metrics(conf, history, out, shadowed)
        problem = guard.save_history(conf["history_file"], history)
        if problem:
            out["notes"].append(problem)
    out["line"] = "; ".join(x for x in lines if x)
    return out


def _drain(conf, sc, history, current, mine, enforced, now, out, event, deadline):
    node = conf["node"]
    reason = format_reason(enforced, new_health_run_id(now))
    action, why = decide(current, "drain", reason)
    if action == "drain" and current["drained"] and not mine:
        return "%s: drained by a dlrack run (%s): left as it is" % (node, current["reason"])
    if action != "drain":
        if current and current["reason"] and not mine and not guard.is_ours(current["reason"]):
            if guard.changed(history, "left_alone", current["reason"]):
                event("left_alone", enforced, current["reason"], "ownership: the node carries a person's reason, never overwritten")
        return "%s: %s" % (node, why)
    if current["drained"]:          # ours already, other rules: the reason is updated (counted already)
        return _update(sc, node, "drain", reason, "drained for %s" % ",".join(enforced), event, enforced)
    ready, why = guard.ready_to_drain(history, conf, now)
    if not ready:
        return "%s: %s" % (node, why)
    if history["last"].pop("gave_back", None):   # out of step with the node it raced last time
        time.sleep(random.random() * guard.JITTER_S)
    fleet = guard.fleet_text(sc.show_all(parse=False), node, conf["partitions"])
    limit = guard.cap_limit(fleet["total"], conf["cap_max_nodes"], conf["cap_max_percent"])
    out["fleet"] = {"partitions": fleet["partitions"], "total": fleet["total"], "held": len(fleet["held"]), "limit": limit}
    others = [n for n in fleet["held"] if n["name"] != node]
    if len(others) + 1 > limit:
        out["rc"] = RC_CAP
        if guard.changed(history, "cap", enforced):
            event("refused_cap", enforced, reason, "cap: %d of %d nodes of %s held by dlrack, the cap is %d: not drained"
                  % (len(others), fleet["total"], ",".join(fleet["partitions"]) or "the cluster", limit), fleet=out["fleet"])
        return "%s: would drain (%s) but %d of %d nodes are held by dlrack, at the cap of %d: not drained" % (
            node, ",".join(enforced), len(others), fleet["total"], limit)
    history["last"].pop("cap", None)
    again = sc.show([node]).get(node)     # the count (and a wait after a give-back) took time: a person may have acted
    if not again or again["drained"] != current["drained"] or again["reason"] != current["reason"]:
        return "%s: would drain (%s), but its state changed while the fleet was counted (now %s): at the next run" % (
            node, ",".join(enforced), ascii(again and again["state"]))
    left = deadline - time.monotonic()
    if left < 3 * conf["timeout_s"]:    # the drain, the count after it and a give-back must fit
        return "%s: would drain (%s), but only %d s of this run are left, too little to drain and count again: at the next run" % (
            node, ",".join(enforced), max(left, 0))
    service = guard.record_drain(history, conf, now)
    if service:
        reason = format_reason(guard.service_rules(enforced), new_health_run_id(now))
    try:
        line = _update(sc, node, "drain", reason, "drained", event, enforced, "service_required" if service else "drain",
                       "streak: " + why)
    except SlurmError:
        history["drains"] = history["drains"][:-1]     # not drained: not counted towards service.required
        raise
    # two nodes deciding at once: count again; over the cap, the newest drains give way
    try:
        fleet = guard.fleet_text(sc.show_all(parse=False), node, conf["partitions"])
    except SlurmError as exc:       # not counted: the drain may be over the cap, so it is given back
        out["rc"] = RC_CAP
        now_node = sc.show([node]).get(node)
        if not (now_node and now_node["drained"] and now_node["reason"] == reason):
            return "%s: drained, the count after it failed (%s), and its reason is now %s: left as it is" % (
                node, exc, ascii(now_node and now_node["reason"]))
        history["drains"] = history["drains"][:-1]
        history["last"]["gave_back"] = True
        _update(sc, node, "resume", None, "given back", event, ())
        event("gave_back", enforced, reason, "cap: the count after this drain failed (%s): given back" % exc, fleet=out["fleet"])
        return "%s: drained, then given back: the count after it failed (%s)" % (node, exc)
    out["fleet"]["held_after"] = len(fleet["held"])
    if len(fleet["held"]) > limit and guard.give_back(fleet["held"], node, limit):
        out["rc"] = RC_CAP
        now_reason = [n["reason"] for n in fleet["held"] if n["name"] == node][0]
        if now_reason != reason:    # changed since this drain (a run's reason): not this drain to give back
            return "%s: drained, %d nodes held by dlrack after it (cap %d), but its reason is now %s: left as it is" % (
                node, len(fleet["held"]), limit, now_reason)
        history["drains"] = history["drains"][:-1]
        history["last"]["gave_back"] = True
        _update(sc, node, "resume", None, "given back", event, ())
        event("gave_back", enforced, reason, "cap: %d nodes held after this drain, the cap is %d: this drain, among the newest, given back"
              % (len(fleet["held"]), limit), fleet=out["fleet"])
        return "%s: drained, then given back: %d nodes held by dlrack after it, the cap is %d" % (node, len(fleet["held"]), limit)
    return line


def _resume(conf, sc, history, current, mine, undecided, now, out, event, copy_runner, deadline):
    node = conf["node"]
    if current is None or not current["drained"]:
        return None
    if not mine:
        if guard.is_ours(current["reason"]):
            return "%s: drained by a dlrack run (%s): that run lifts it" % (node, current["reason"])
        return "%s: drained by someone else (reason %s): left alone" % (node, ascii(current["reason"] or "none"))
    if skip_reason(current):        # down, powering, a reboot pending...: as the Ansible act, judged when it is back
        return "%s: %s" % (node, skip_reason(current))
    if needs_service(current["reason"]):
        return "%s: drained as service.required (%s): a person resumes it after service" % (node, current["reason"])
    if undecided:
        return "%s: the rules it was drained for cannot be judged now: stays drained" % node
    ready, why = guard.ready_to_resume(history, conf)
    if not ready:
        return "%s: %s" % (node, why)
    # the copy check and the resume must fit (its read-back takes what is left, at least a second)
    need = conf["timeout_s"] + (conf["return_copy_timeout_s"] if conf["return_validation"] and conf["return_copy"] else 0)
    if deadline - time.monotonic() < need:
        return "%s: passes, but too little of this run is left for the return validation and the resume: at the next run" % node
    ok, notes = validate_return(conf, now, copy_runner)
    out["notes"].extend(notes)
    if not ok:
        if guard.changed(history, "return", notes):
            event("return_blocked", (), current["reason"], "validation: " + "; ".join(notes))
        return "%s: passes, but %s: stays drained" % (node, notes[0])
    history["last"].pop("return", None)
    # the validation can take return_copy_timeout_s: a person may have drained the node meanwhile
    again = sc.show([node]).get(node)
    if not (again and again["drained"] and again["reason"] == current["reason"]):
        return "%s: passes, but its state changed during the return validation (now %s): left as it is" % (
            node, ascii(again["reason"] if again else None))
    return _update(sc, node, "resume", None, "resumed (%s)" % current["reason"], event, (), "resume",
                   "streak: %s, return validated" % why)


def _update(sc, node, action, reason, done, event, rules, kind=None, why=None):
    problems = sc.update([node], action, reason)
    after = sc.show([node]).get(node)
    ok = after is not None and (after["drained"] if action == "drain" else not after["drained"])
    if not ok:
        raise SlurmError("scontrol did not %s %s (now %s)%s" % (
            action, node, after and after["state"], (": " + "; ".join(problems)) if problems else ""))
    if kind:
        event(kind, rules, reason or (after["reason"] if action == "drain" else None),
              "service: drained too often within the window; only a person resumes it" if kind == "service_required" else why)
    elif action == "drain":
        event("drain", rules, reason, "reason updated: other rules fail now")
    return "%s: %s%s" % (node, done, (" (%s)" % reason) if reason and action == "drain" else "")


def _metrics(conf, history, out, shadowed):
    gauges = {"dlrack_health_check_fail_streak": history["fail_streak"],
              "dlrack_health_check_pass_streak": history["pass_streak"],
              "dlrack_health_check_would_drain": [({"rule": r}, 1) for r in shadowed] or [({"rule": ""}, 0)],
              "dlrack_health_check_refused_cap": 1 if out["rc"] == RC_CAP else 0}
    if out["fleet"]:
        gauges["dlrack_health_check_fleet_held"] = out["fleet"]["held"]
        gauges["dlrack_health_check_fleet_cap"] = out["fleet"]["limit"]
    problem = guard.write_metrics(conf, history, gauges)
    if problem:
        out["notes"].append(problem)


USAGE = """usage: dlrack-health-check [--config FILE] [--accept [--no-gpu]] [--dry-run] [--json] [--kernel-log FILE]
  Judges this node (GPUs present and link width against the accepted state, uncorrected ECC
  counts from the ECC collector's textfile, the hot tier mounted) and drains or resumes its own
  Slurm node: a rule in shadow mode only says "would drain"; a drain needs fail_runs failing runs
  (or a fault lasting fault_persist_s) and room under the fleet cap; a resume needs pass_runs
  passing runs and the return validation. --accept records the current GPUs as the accepted state
  (refused when none is visible, unless --no-gpu says the node has none). --dry-run judges only.
  Exit status: 0 healthy (or only shadow rules fail), 1 unhealthy, 2 bad configuration,
  3 scontrol failed, 4 a drain refused or given back over the fleet cap."""


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    if "--kernel-log" in args:   # issue 29: a saved kernel log replayed (every GPU fault event and the verdict)
        return replay_kernel_log(args, DEFAULT_CONFIG, load_config, ConfigError)
    config, flags = DEFAULT_CONFIG, set()
    while args:
        arg = args.pop(0)
        if arg == "--config" and args:
            config = args.pop(0)
        elif arg in ("--accept", "--dry-run", "--json", "--no-gpu"):
            flags.add(arg[2:])
        elif arg in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n")
            return 0
        else:
            sys.stderr.write("dlrack-health-check: bad argument %s\n%s\n" % (ascii(arg), USAGE))
            return RC_CONFIG
    try:
        conf = load_config(config)
    except ConfigError as exc:
        sys.stderr.write("dlrack-health-check: %s\n" % exc)
        return RC_CONFIG
    if "accept" in flags:
        try:
            doc = accept(conf, no_gpu="no-gpu" in flags)
        except NoGpuError as exc:
            sys.stderr.write("dlrack-health-check: %s\n" % exc)
            return RC_UNHEALTHY
        except OSError as exc:
            sys.stderr.write("dlrack-health-check: the accepted state %s was not written (%s); make its directory "
                             "writable by root and accept again\n" % (conf["state_file"], exc.strerror or exc))
            return RC_UNHEALTHY
        sys.stdout.write("dlrack-health-check: accepted %d GPU(s) in %s\n" % (len(doc["gpus"]), conf["state_file"]))
        return 0
    started, deadline = time.time(), time.monotonic() + RUN_BUDGET_S
    verdict = judge_safely(conf)
    enforced, shadowed = _modes(conf, verdict["rules"])
    rc, line = (RC_UNHEALTHY if enforced else RC_HEALTHY), None
    if conf["act"] and "dry-run" not in flags:
        try:
            done = act(conf, verdict, deadline=deadline)
            rc, line = done["rc"], done["line"]
            verdict["notes"].extend(done["notes"])
            verdict["events"] = [e["event"] for e in done["events"]]
            verdict["fleet"] = done["fleet"]
        except SlurmError as exc:
            line = "scontrol: %s" % exc
            rc = RC_SCONTROL
    verdict.update(action=line, enforced=enforced, shadowed=shadowed, rc=rc, duration_s=round(time.time() - started, 4))
    if "json" in flags:
        sys.stdout.write(json.dumps(verdict, sort_keys=True) + "\n")
    else:
        head = ("FAIL " + ",".join(enforced)) if enforced else "PASS"
        if shadowed:
            head += " (would drain, shadow mode: %s)" % ",".join(shadowed)
        if verdict.get("unknown"):      # a PASS that judged less than it should says so on its own line
            head += " (not judged: %s)" % ("every check" if "*" in verdict["unknown"] else ",".join(verdict["unknown"]))
        sys.stdout.write("dlrack-health-check: %s%s\n" % (head, ("; " + line) if line else ""))
        for note in verdict["notes"]:
            sys.stdout.write("  %s\n" % note)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
