# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler act's audit trail on the controller (issue 28.7; docs/scheduler.md "The audit trail").

One JSON line per decision - drain, resume, would-drain (shadow), refused (the cap, a person's
drain or taint, a host whose facts set a setting), skipped, failed - with the node, the inventory
host, the rules, the reason, the run id, the time and whether it was a check-mode run; and a
Prometheus textfile beside the log (``<log>.prom``) with a counter per action and outcome, kept
across runs. The log is appended (O_APPEND, 0640) and rotated to ``<log>.1`` past MAX_LOG_BYTES;
every line is bounded (MAX_LINE) and every string in it comes from the plan, which escaped it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re

from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import atomic_write

MAX_LOG_BYTES = 32 * 1024 * 1024
MAX_LINE = 4096
_COUNTER = "dlrack_act_decisions_total"
_SAMPLE_RE = re.compile(r'^%s\{action="([a-z_]+)",outcome="([a-z_]+)"\} ([0-9]+)$' % _COUNTER)


class AuditError(Exception):
    """One sentence naming the log and the fix."""


def _outcomes(results):
    """{(node, 'drain'|'resume'): (outcome, why)} from slurm_node results."""
    out = {}
    for res in results or ():
        if not isinstance(res, dict) or res.get("skipped") and "state" not in res:
            continue
        state = res.get("state")
        for name in res.get("drained") or ():
            out[(name, "drain")] = ("done", None)
        for name in res.get("resumed") or ():
            out[(name, "resume")] = ("done", None)
        for name in res.get("would") or ():
            out[(name, state)] = ("check_mode", "check mode: nothing changed")
        for item in res.get("left_alone") or ():
            out[(item.get("node"), state)] = ("refused", "ownership: reason %s is not ours" % ascii(item.get("reason"))[:200])
        for item in res.get("skipped_nodes") or ():
            out[(item.get("node"), state)] = ("skipped", str(item.get("why"))[:300])
        for item in res.get("failed") or ():
            out[(item.get("node"), state)] = ("failed", "scontrol did not %s it" % state)
        for name in res.get("unchanged") or ():
            out.setdefault((name, state), ("unchanged", None))
    return out


def records(plan, results, check, now=None):
    """The audit records of one act: the plan's decisions with what the scheduler did."""
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    done = _outcomes(results)
    base = {"ts": now, "side": "ansible", "run_id": plan.get("run_id"), "backend": plan.get("backend"), "check": bool(check)}
    out = []
    for rec in plan.get("audit") or ():
        item = dict(base, **rec)
        if rec.get("action") == "drain":
            item["outcome"], why = done.get((rec.get("node"), "drain"), ("planned", None))
            if why:
                item["why"] = why
        else:
            item.setdefault("outcome", "not_acted")
        out.append(item)
    hosts = plan.get("hosts") or {}
    for name in plan.get("resume") or ():
        outcome, why = done.get((name, "resume"), (None, None))
        if outcome in (None, "unchanged"):
            continue                      # passing and not held by us: nothing to record
        item = dict(base, action="resume", node=name, host=hosts.get(name), rules=[], outcome=outcome)
        if why:
            item["why"] = why
        out.append(item)
    k8s = plan.get("k8s") or {}
    for name in k8s.get("left_alone") or ():
        out.append(dict(base, action="refused", why="ownership: a taint with our key that is not ours", node=name,
                        host=hosts.get(name), rules=[], outcome="not_acted"))
    return out


def _line(rec):
    text = json.dumps(rec, sort_keys=True, ensure_ascii=True)
    if len(text) > MAX_LINE:
        rec = dict(rec, rules=list(rec.get("rules") or [])[:5], reason=str(rec.get("reason") or "")[:240], truncated=True)
        text = json.dumps(rec, sort_keys=True, ensure_ascii=True)[:MAX_LINE]
    return text + "\n"


def _counts(path):
    counts = {}
    try:
        with open(path) as f:
            for line in f.read(1024 * 1024).splitlines():
                m = _SAMPLE_RE.match(line.strip())
                if m:
                    counts[(m.group(1), m.group(2))] = int(m.group(3))
    except (OSError, IOError):
        pass
    return counts


def write(log, recs):
    """Append ``recs`` to ``log`` (rotating it past MAX_LOG_BYTES) and add them to the counters in
    ``log + '.prom'``. Returns (lines written, the textfile's path)."""
    log = os.path.abspath(log)
    directory = os.path.dirname(log)
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o750)
        if os.path.exists(log) and os.path.getsize(log) > MAX_LOG_BYTES:
            os.replace(log, log + ".1")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o640)
        with os.fdopen(fd, "a") as f:
            f.write("".join(_line(r) for r in recs))
        counts = _counts(log + ".prom")
        for rec in recs:
            key = (str(rec.get("action")), str(rec.get("outcome")))
            counts[key] = counts.get(key, 0) + 1
        text = ["# HELP %s Decisions of the dlrack.node scheduler act, by action and outcome (%s)." % (_COUNTER, log),
                "# TYPE %s counter" % _COUNTER]
        text += ['%s{action="%s",outcome="%s"} %d' % (_COUNTER, a, o, n) for (a, o), n in sorted(counts.items())
                 if re.match(r"^[a-z_]+$", a) and re.match(r"^[a-z_]+$", o)]
        atomic_write(log + ".prom", "\n".join(text) + "\n", mode=0o644)
    except (OSError, IOError) as exc:
        raise AuditError("cannot write the act's audit log %s (%s): set scheduler_audit_log to a writable path, or '' "
                         "for none" % (log, exc.strerror or exc))
    return len(recs), log + ".prom"
