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

A textfile that is missing or older than ``textfile_max_age_s`` gives no ECC verdict (unknown is
not failing, and not healthy: the output says so). Then it drains its own node with the reason
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
import re
import socket
import sys
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_text, write_atomic
from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import (
    Scontrol, SlurmError, decide, format_reason, parse_reason)

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
}
RUN_PREFIX = "health-"
TEXTFILE_LIMIT = 4 * 1024 * 1024
GPU_VENDORS = {"0x10de": ("0x03",), "0x1002": ("0x0380", "0x0300", "0x1200")}
_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class ConfigError(Exception):
    pass


def load_config(path, overrides=None):
    conf = dict(DEFAULTS)
    if path and os.path.exists(path):
        text = read_text(path, limit=65536)
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
    if not conf["node"]:
        conf["node"] = socket.gethostname().split(".")[0]
    return conf


def _under(root, path):
    return os.path.join(root, path.lstrip("/"))


def find_gpus(root="/"):
    """{pci address: width or None} of the GPUs on the PCI bus (NVIDIA display/3D class, AMD
    display/accelerator class), read from /sys/bus/pci/devices."""
    base = _under(root, "/sys/bus/pci/devices")
    try:
        names = os.listdir(base)
    except OSError:
        return {}
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


def mounted(root, mount_point):
    text = read_text(_under(root, "/proc/self/mountinfo"), limit=TEXTFILE_LIMIT)
    if text is not None:
        return any(len(f) > 4 and f[4] == mount_point for f in (line.split() for line in text.splitlines()))
    text = read_text(_under(root, "/proc/mounts"), limit=TEXTFILE_LIMIT) or ""
    return any(len(f) > 1 and f[1] == mount_point for f in (line.split() for line in text.splitlines()))


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
    """{'rules': [...], 'notes': [...]} for this node now."""
    rules, notes = set(), []
    accepted = load_accepted(conf["state_file"])
    if accepted is None:
        notes.append("GPUs: no accepted state at %s (run dlrack-health-check --accept after a passing run): "
                     "GPU presence and link width not judged" % conf["state_file"])
    else:
        now_gpus = find_gpus(conf["root"])
        for gpu in accepted["gpus"]:
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
    if conf["hot_mount"] and not mounted(conf["root"], conf["hot_mount"]):
        rules.add("storage.hot_tier_mounted")
        notes.append("hot tier %s is not mounted" % conf["hot_mount"])
    return {"rules": sorted(rules), "notes": notes}


def accept(conf):
    gpus = find_gpus(conf["root"])
    doc = {"schema": 1, "accepted_at": int(time.time()),
           "gpus": [{"pci_bus_id": k, "width": v} for k, v in sorted(gpus.items())]}
    directory = os.path.dirname(conf["state_file"])
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    write_atomic(conf["state_file"], json.dumps(doc, sort_keys=True) + "\n")
    return doc


def act(conf, verdict, scontrol=None, now=None):
    """Drain or resume this node; returns one line saying what was done."""
    sc = scontrol or Scontrol(path=conf["scontrol"], timeout=conf["timeout_s"], batch=1)
    node = conf["node"]
    current = sc.show([node]).get(node)
    mine = current is not None and current["reason"] and (parse_reason(current["reason"]) or ((), ""))[1].startswith(RUN_PREFIX)
    if verdict["rules"]:
        reason = format_reason(verdict["rules"], RUN_PREFIX + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)))
        action, why = decide(current, "drain", reason)
        if action == "drain" and current["drained"] and not mine:
            return "%s: drained by a dlrack run (%s): left as it is" % (node, current["reason"])
    else:
        action, why = decide(current, "resume", None)
        if action == "resume" and not mine:
            return "%s: drained by a dlrack run (%s): that run lifts it" % (node, current["reason"])
        reason = None
    if action not in ("drain", "resume"):
        return "%s: %s" % (node, why)
    problems = sc.update([node], action, reason)
    after = sc.show([node]).get(node)
    done = after is not None and (after["drained"] if action == "drain" else not after["drained"])
    if not done:
        more = (": " + "; ".join(problems)) if problems else ""
        raise SlurmError("scontrol did not %s %s (now %s)%s" % (action, node, after and after["state"], more))
    return "%s: %s (%s)" % (node, "drained" if action == "drain" else "resumed", reason or why)


USAGE = """usage: dlrack-health-check [--config FILE] [--accept] [--dry-run] [--json]
  Judges this node (GPUs present and link width against the accepted state, uncorrected ECC
  counts from the ECC collector's textfile, the hot tier mounted) and drains or resumes its own
  Slurm node. --accept records the current GPUs as the accepted state. --dry-run judges only.
  Exit status: 0 healthy, 1 unhealthy, 2 bad configuration, 3 scontrol failed."""


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    config, flags = DEFAULT_CONFIG, set()
    while args:
        arg = args.pop(0)
        if arg == "--config" and args:
            config = args.pop(0)
        elif arg in ("--accept", "--dry-run", "--json"):
            flags.add(arg[2:])
        elif arg in ("-h", "--help"):
            sys.stdout.write(USAGE + "\n")
            return 0
        else:
            sys.stderr.write("dlrack-health-check: bad argument %s\n%s\n" % (ascii(arg), USAGE))
            return 2
    try:
        conf = load_config(config)
    except ConfigError as exc:
        sys.stderr.write("dlrack-health-check: %s\n" % exc)
        return 2
    if "accept" in flags:
        doc = accept(conf)
        sys.stdout.write("dlrack-health-check: accepted %d GPU(s) in %s\n" % (len(doc["gpus"]), conf["state_file"]))
        return 0
    started = time.time()
    verdict = judge(conf)
    line = None
    rc = 1 if verdict["rules"] else 0
    if conf["act"] and "dry-run" not in flags:
        try:
            line = act(conf, verdict)
        except SlurmError as exc:
            line = "scontrol: %s" % exc
            rc = 3
    verdict["action"] = line
    verdict["duration_s"] = round(time.time() - started, 4)
    if "json" in flags:
        sys.stdout.write(json.dumps(verdict, sort_keys=True) + "\n")
    else:
        head = ("FAIL " + ",".join(verdict["rules"])) if verdict["rules"] else "PASS"
        sys.stdout.write("dlrack-health-check: %s%s\n" % (head, ("; " + line) if line else ""))
        for note in verdict["notes"]:
            sys.stdout.write("  %s\n" % note)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
