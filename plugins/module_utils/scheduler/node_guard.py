# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What bounds the node program's own drains (programs/health_check.py, issue 28.3/.5/.7).

- **flap damping** (``History``): drain after ``fail_runs`` consecutive failing runs, or once a
  fault has persisted ``fault_persist_s`` seconds; resume after ``pass_runs`` consecutive passes
  (defaults 2 and 2). A run that cannot judge the rules a drain was for is neither a pass nor a
  failure. Drained ``service_drains`` times within ``service_window_s`` (default 3 in 7 days), the
  node's drain names ``service.required``: no automatic path lifts it (scheduler/slurm.py).
  The history is a root-owned JSON file (mode 0600) kept between runs. A new boot (the kernel's
  boot_id) starts the streaks again - the runs while a node shuts down and comes up (the hot tier
  unmounted, the collector not yet run) are no streak with the runs before - and keeps the drain
  history, so the service breaker counts across reboots.
- **the fleet cap** (``fleet``, ``cap_limit``, ``give_back``): before draining itself the node counts,
  with ONE bounded ``scontrol show node -o``, the nodes of its partitions held by dlrack (an Ansible
  run's drains and the node programs', both grammars); beyond the cap (``cap_max_nodes`` and
  ``cap_max_percent`` of the partition's nodes, the smaller, never below one) it does not drain.
  Two nodes deciding at once: each re-counts after draining; when the count is over the cap, the
  drains are ordered by slurmctld's own time stamp of the reason (then run id, then name - every
  node computes the same order) and a node whose drain is not among the first ``limit`` gives its
  drain back - as does one stamped in the same second as the first drain beyond the cap (the
  stamp cannot order them, and the other may have kept its drain already); a node that gave its
  drain back waits a random moment (``JITTER_S``) before its next count, so two nodes that run in
  step do not tie again and again. Nothing latches: the cap re-arms as soon as the count falls, and passing nodes are
  resumed whatever the count.
- **the audit trail** (``audit``, ``write_metrics``): every drain, resume and refusal (cap,
  ownership, shadow, service) is one JSON line in the node's log (bounded: rotated to ``.1`` past
  ``audit_max_bytes``) and a Prometheus counter ``dlrack_health_check_events_total{event=...}`` in
  the node exporter's textfile directory.

Standard library only, Python 3.6+.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import read_text, write_atomic
from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import (
    SERVICE_RULE, is_health_run_id, is_ours, parse_reason, parse_show_node)

GUARD_DEFAULTS = {
    "fail_runs": 2,
    "fault_persist_s": 900,
    "pass_runs": 2,
    "service_drains": 3,
    "service_window_s": 7 * 86400,
    "cap_max_nodes": 5,
    "cap_max_percent": 10,
    "partitions": [],                # [] = this node's own partitions (its Partitions= in Slurm)
    "history_file": "/var/lib/dlrack/health-history.json",
    "audit_log": "/var/log/dlrack/health-check.jsonl",
    "audit_max_bytes": 1024 * 1024,
    "metrics_textfile": "/var/lib/node_exporter/textfile_collector/dlrack_health_check.prom",
}
EVENTS = ("drain", "resume", "refused_cap", "gave_back", "left_alone", "would_drain", "service_required",
          "held_streak", "return_blocked")
HISTORY_LIMIT = 256 * 1024
# After giving a drain back, at most this long a random wait before the next count (give_back).
JITTER_S = 2.0
# Each event's action and outcome in the audit line: the keys of the Ansible act's audit records
# (plugin_utils/act_audit.py: ts, side, action, outcome, why, node, rules, reason), so one query
# answers "what did dlrack do to node X" over both logs.
AUDIT_FIELDS = {"drain": ("drain", "done"), "service_required": ("drain", "done"), "resume": ("resume", "done"),
                "refused_cap": ("refused", "not_acted"), "gave_back": ("drain", "given_back"),
                "left_alone": ("refused", "not_acted"), "would_drain": ("would_drain", "not_acted"),
                "return_blocked": ("resume", "refused")}


class GuardError(Exception):
    """One sentence: which setting, what is wrong, what to write."""


def check_guard(conf):
    """The guard's settings in ``conf`` checked (GuardError names the key and the fix)."""
    for key in ("fail_runs", "pass_runs", "service_drains", "cap_max_nodes"):
        if not isinstance(conf[key], int) or isinstance(conf[key], bool) or conf[key] < 1:
            raise GuardError("%s is %s: use a whole number >= 1" % (key, ascii(conf[key])))
    for key in ("fault_persist_s", "service_window_s", "audit_max_bytes"):
        if not isinstance(conf[key], (int, float)) or isinstance(conf[key], bool) or conf[key] < 0:
            raise GuardError("%s is %s: use a number of seconds (bytes) >= 0" % (key, ascii(conf[key])))
    pct = conf["cap_max_percent"]
    if not isinstance(pct, (int, float)) or isinstance(pct, bool) or not 0 < pct <= 100:
        raise GuardError("cap_max_percent is %s: use a number above 0 and at most 100" % ascii(pct))
    parts = conf["partitions"]
    if not isinstance(parts, list) or not all(isinstance(p, str) and p for p in parts):
        raise GuardError("partitions is %s: use a list of Slurm partition names ([] = the node's own)" % ascii(parts)[:80])
    return conf


# --------------------------------------------------------------------------------------------
# Flap damping and the service breaker
# --------------------------------------------------------------------------------------------

def _fresh():
    return {"schema": 1, "fail_streak": 0, "pass_streak": 0, "fault_since": None, "drains": [],
            "counters": {}, "last": {}, "boot_id": None, "failing": []}


def load_history(path):
    """The node's history (a fresh one when missing or unreadable: the note says which)."""
    text = read_text(path, limit=HISTORY_LIMIT)
    if text is None:
        return _fresh(), None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("schema") != 1:
        return _fresh(), "history %s was unreadable: counting starts again" % path
    out = _fresh()
    for key, kind in (("fail_streak", int), ("pass_streak", int), ("drains", list), ("counters", dict), ("last", dict)):
        if isinstance(doc.get(key), kind):
            out[key] = doc[key]
    if isinstance(doc.get("fault_since"), (int, float)):
        out["fault_since"] = doc["fault_since"]
    if isinstance(doc.get("boot_id"), str):
        out["boot_id"] = doc["boot_id"][:64]
    if isinstance(doc.get("failing"), list):
        out["failing"] = [r for r in doc["failing"] if isinstance(r, str)][:64]
    out["drains"] = [t for t in out["drains"] if isinstance(t, (int, float))][-64:]
    return out, None


def save_history(path, doc):
    """Write the history (root only, atomically). A history that cannot be written (a full or
    read-only disk) is returned as a note, never raised: the streaks then do not grow, so the node
    neither drains nor resumes by them until it can be written."""
    try:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        write_atomic(path, json.dumps(doc, sort_keys=True) + "\n", mode=0o600)
    except OSError as exc:
        return "history %s not written (%s): the failing and passing runs are not counted" % (path, exc.strerror or exc)
    return None


def new_boot(history, boot_id):
    """True when ``boot_id`` (None: unknown) is not the boot of the last run: the streaks start
    again (the drain history stays)."""
    if not boot_id or history.get("boot_id") == boot_id:
        return False
    known = history.get("boot_id") is not None
    history["boot_id"] = boot_id
    if known:
        history.update(fail_streak=0, pass_streak=0, fault_since=None)
    return known


def step(history, failing, undecided, now, unknown=()):
    """One run's verdict into the streaks: ``failing`` (enforced rules that fail), ``undecided``
    True when the run could not judge what it needs to (neither a pass nor a failure). A run that
    cannot judge a rule of the failing streak (``unknown``: the collector's textfile went stale) is
    no pass either: it neither breaks the streak nor adds to it."""
    if failing:
        history["fail_streak"] += 1
        history["pass_streak"] = 0
        history["failing"] = sorted(set(failing))
        if history["fault_since"] is None:
            history["fault_since"] = now
    elif not undecided and not set(history.get("failing") or ()) & set(unknown):
        history["pass_streak"] += 1
        history["fail_streak"] = 0
        history["fault_since"] = None
        history["failing"] = []
    return history


def ready_to_drain(history, conf, now):
    """(ready, why): N consecutive failing runs, or the fault persisting T seconds."""
    if history["fail_streak"] >= conf["fail_runs"]:
        return True, "%d consecutive failing runs" % history["fail_streak"]
    since = history["fault_since"]
    if conf["fault_persist_s"] and since is not None and now - since >= conf["fault_persist_s"]:
        return True, "failing for %d s" % (now - since)
    return False, "failing run %d of %d before a drain" % (history["fail_streak"], conf["fail_runs"])


def ready_to_resume(history, conf):
    if history["pass_streak"] >= conf["pass_runs"]:
        return True, "%d consecutive passing runs" % history["pass_streak"]
    return False, "passing run %d of %d before a resume" % (history["pass_streak"], conf["pass_runs"])


def record_drain(history, conf, now):
    """Count this drain; True when it is the ``service_drains``-th within the window (service required)."""
    window = conf["service_window_s"]
    history["drains"] = [t for t in history["drains"] if now - t < window] + [now]
    return len(history["drains"]) >= conf["service_drains"]


# --------------------------------------------------------------------------------------------
# The fleet cap
# --------------------------------------------------------------------------------------------

def cap_limit(total, max_nodes, max_percent):
    """How many nodes of ``total`` dlrack may hold: the smaller of max_nodes and max_percent of
    total (rounded down), never below one (as the Ansible act's cap)."""
    return max(1, min(max_nodes, int(total * max_percent // 100)))


def fleet(nodes, node, partitions=None):
    """{partitions, total, held: [node dicts], limit=None} over ``nodes`` (scontrol show node -o,
    parsed): the nodes of ``partitions`` (default: ``node``'s own) and those held by dlrack - drained
    with a reason of ours, either grammar."""
    parts = list(partitions or (nodes.get(node) or {}).get("partitions") or [])
    if parts:
        members = [n for n in nodes.values() if set(n.get("partitions") or ()) & set(parts)]
    else:
        members = list(nodes.values())
    held = [n for n in members if n["drained"] and is_ours(n["reason"])]
    return {"partitions": parts, "total": len(members), "held": held}


_PARTITIONS_RE = re.compile(r" Partitions=(\S*)")


def fleet_text(text, node, partitions=None):
    """fleet() from the text of ``scontrol show node -o``: only the lines that can be held by us
    (a ``Reason=dlrack: `` in them) are parsed in full; of the others only the name and the
    partitions are read (a 10,000-node cluster is ~5 MB of text: parse_show_node on all of it
    would be most of the program's time)."""
    nodes = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("NodeName="):
            continue
        if " Reason=dlrack: " in line or line.startswith("NodeName=%s " % node):
            nodes.update(parse_show_node(line))
            continue
        name = line[len("NodeName="):].split(" ", 1)[0]
        m = _PARTITIONS_RE.search(line)
        parts = [p for p in (m.group(1) if m else "").split(",") if p and p != "(null)"]
        nodes[name] = {"name": name, "partitions": parts, "drained": False, "reason": None}
    return fleet(nodes, node, partitions)


def _order_key(node):
    parsed = parse_reason(node["reason"]) or ((), "")
    return (node.get("reason_at") or "", parsed[1].replace("health-", ""), node["name"])


def give_back(held, node, limit):
    """True when ``node``'s drain is beyond the first ``limit`` of ``held`` in the order every node
    computes alike (slurmctld's reason time, run id, name): the newest drains give way. slurmctld
    stamps a reason to the second, so within one second the order does not say which drain came
    first: a node of that second may already have counted, seen no one over, and kept its drain.
    A drain stamped in the same second as the first drain beyond the cap is therefore given back
    too, even when it sorts among the first ``limit`` (the cap holds; the node tries again at its
    next run)."""
    order = sorted(held, key=_order_key)
    pos = [i for i, n in enumerate(order) if n["name"] == node]
    if not pos or len(order) <= limit:
        return False
    if pos[0] >= limit:
        return True
    return (order[pos[0]].get("reason_at") or "") == (order[limit].get("reason_at") or "")


def is_mine(current):
    """Drained by the node program (a ``health-`` run id of ours)."""
    parsed = parse_reason(current["reason"]) if current and current["drained"] else None
    return parsed is not None and is_health_run_id(parsed[1])


def service_rules(rules):
    return sorted(set(rules) | {SERVICE_RULE})


# --------------------------------------------------------------------------------------------
# The audit trail
# --------------------------------------------------------------------------------------------

def audit(conf, record, now=None):
    """Append one JSON line to the node's audit log (rotated to .1 past audit_max_bytes). A log
    that cannot be written is returned as a note, never raised: the drain decision stands."""
    path = conf["audit_log"]
    if not path:
        return None
    action, outcome = AUDIT_FIELDS.get(record.get("event"), (record.get("event"), None))
    record = dict({"side": "node", "action": action, "outcome": outcome}, **record)
    record["ts"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now))
    line = json.dumps(record, sort_keys=True) + "\n"
    try:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, 0o750)
        try:
            if os.path.getsize(path) + len(line) > conf["audit_max_bytes"]:
                os.replace(path, path + ".1")
        except OSError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o640)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        return "audit log %s not written: %s" % (path, exc.strerror or exc)
    return None


def count(history, event):
    history["counters"][event] = int(history["counters"].get(event, 0)) + 1


def changed(history, kind, value):
    """True (and remembered) when ``kind``'s value differs from the last run's: a refusal repeated
    every HealthCheckInterval is logged and counted once, when it starts or changes."""
    if history["last"].get(kind) == value:
        return False
    history["last"][kind] = value
    return True


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def write_metrics(conf, history, gauges):
    """The node exporter textfile: the event counters and this run's gauges ({name: value} or
    {name: [(labels dict, value)]}). A textfile that cannot be written is returned as a note."""
    path = conf["metrics_textfile"]
    if not path:
        return None
    lines = ["# HELP dlrack_health_check_events_total dlrack-health-check's drains, resumes and refusals on this node.",
             "# TYPE dlrack_health_check_events_total counter"]
    for event in EVENTS:
        lines.append('dlrack_health_check_events_total{event="%s"} %d' % (event, int(history["counters"].get(event, 0))))
    for name in sorted(gauges):
        lines.append("# TYPE %s gauge" % name)
        value = gauges[name]
        for labels, num in (value if isinstance(value, list) else [({}, value)]):
            text = ",".join('%s="%s"' % (k, _label(v)) for k, v in sorted(labels.items()))
            lines.append("%s%s %s" % (name, "{%s}" % text if text else "", num))
    try:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            return "metrics textfile directory %s does not exist (roles/ecc_monitor or node_exporter makes it)" % directory
        write_atomic(path, "\n".join(lines) + "\n", mode=0o644)
    except OSError as exc:
        return "metrics textfile %s not written: %s" % (path, exc.strerror or exc)
    return None
