# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm node state: read it (``scontrol show node -o``), decide drain/resume, do it (batched).

Used by the module ``dlrack.node.slurm_node`` (on the scheduler's admin host) and by the node's
own health program (``programs/health_check.py``). Standard library only, Python 3.6+.

The ownership rule (LBNL NHC's node-mark-offline/online helpers, helpers/node-mark-offline in
github.com/mej/nhc, applied to Slurm's state names):

- our reason is ``dlrack: <rule ids> <run id>`` (rule ids comma separated, each ``area.what``),
  and the run id is one no person types: an Ansible run's ``YYYYmmddTHHMMSSZ-<12 lower-case hex>``
  (plugin_utils/reports/common.py new_run_id) or the node program's ``health-`` and the same, the
  time a real UTC date and time. Only such a reason is ours; anything else - ``dlrack: rma
  pending``, ``dlrack: do-not-resume ticket-4711``, ``dlrack: gpu.x health-anything`` - is a
  person's (or another tool's), never resumed and never overwritten;
- a reason of ours naming ``service.required`` (the node program drained the node too often:
  programs/health_check.py) is lifted by a person only: no automatic resume;
- drain a node that is up (IDLE, ALLOCATED, MIXED, COMPLETING, RESERVED, MAINT...) and not
  drained; a node already drained by us is left alone when the rule ids are the same (a new run
  id alone changes nothing), its reason is updated when they differ;
- never touch a node drained (or downed) with a reason that is not ours: the reason is kept;
- resume only a drained node whose current reason is ours;
- skip nodes in states where a drain means nothing or cannot be judged: DOWN, UNKNOWN (never
  registered), FUTURE, powered down / powering up or down (CLOUD, POWERED_DOWN,
  POWERING_UP/DOWN), REBOOT_REQUESTED/ISSUED, PLANNED - NHC ignores the same (``down*``,
  ``boot*``, ``@``, ``#``, ``~``, ``plnd``) - and nodes that Slurm does not know.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import re
import time

from ansible_collections.dlrack.node.plugins.module_utils.scheduler.hostlist import compress
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure, run

OWNER = "dlrack:"
REASON_MAX = 240
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
RULE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}(?:\.[a-z0-9_-]{1,63}){0,4}$")
# Run ids of ours (the time must also be a real date and time: valid_run_id).
RUN_STAMP = "%Y%m%dT%H%M%SZ"
ANSIBLE_RUN_ID_RE = re.compile(r"^(2[0-9]{3}[01][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-6][0-9]Z)-[0-9a-f]{12}$")
HEALTH_RUN_PREFIX = "health-"
HEALTH_RUN_ID_RE = re.compile(r"^health-(2[0-9]{3}[01][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-6][0-9]Z)-[0-9a-f]{12}$")
RUN_ID_RE = re.compile(r"^(?:health-)?(2[0-9]{3}[01][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-6][0-9]Z)-[0-9a-f]{12}$")
# Drains with this rule id are lifted by a person only (neither the node program nor a run resumes them).
SERVICE_RULE = "service.required"
_FIELD_RE = re.compile(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=")
# " [root@2026-12-01T16:30:34]": who set the reason and when, appended by slurmctld
# The fields Slurm prints after Reason= when they are set, in its order (src/api/node_info.c,
# slurm_sprint_node_table): with -o each on the same line, so the reason ends where they begin.
_AFTER_REASON = ("Comment", "Extra", "InstanceId", "InstanceType", "ReservationName")
_AFTER_REASON_RE = re.compile(r"\s(?:%s)=" % "|".join(_AFTER_REASON))
_STAMP_THEN_TAIL_RE = re.compile(r"\s*\[([^\]@\s]*)@([^\]\s]*)\](?=\s*$|\s(?:%s)=)" % "|".join(_AFTER_REASON))

# Base states (node_state_string) where a drain means nothing or cannot be judged.
SKIP_BASE = ("DOWN", "UNKNOWN", "FUTURE", "ERROR")
# Flags under which the node is not really there (power saving, reboot in progress, planned).
SKIP_FLAGS = ("CLOUD", "POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "POWER_DOWN", "POWER_UP",
              "REBOOT_REQUESTED", "REBOOT_ISSUED", "PLANNED", "INVALID_REG")
DRAIN_FLAGS = ("DRAIN", "DRAINED", "DRAINING")

DEFAULT_TIMEOUT_S = 30
OUTPUT_LIMIT = 8 * 1024 * 1024


class SlurmError(Exception):
    """A sentence for the user: what failed, and what to do."""


# --------------------------------------------------------------------------------------------
# The reason grammar
# --------------------------------------------------------------------------------------------

def _stamp_ok(stamp):
    try:
        datetime.datetime.strptime(stamp, RUN_STAMP)
    except ValueError:
        return False
    return True


def valid_run_id(run_id, kind=None):
    """True for a run id of ours: ``kind`` 'ansible' (``YYYYmmddTHHMMSSZ-<12 hex>``), 'health'
    (``health-`` and the same) or None (either); the time must be a real UTC date and time."""
    regex = {"ansible": ANSIBLE_RUN_ID_RE, "health": HEALTH_RUN_ID_RE, None: RUN_ID_RE}[kind]
    m = regex.match(run_id) if isinstance(run_id, str) else None
    return bool(m) and _stamp_ok(m.group(1))


def is_health_run_id(run_id):
    """The node program's own run id (``health-...``), strictly."""
    return valid_run_id(run_id, "health")


def time_now():
    return time.time()


def new_health_run_id(now=None, token=None):
    """A fresh run id of the node program: ``health-YYYYmmddTHHMMSSZ-<12 hex>``."""
    stamp = time.strftime(RUN_STAMP, time.gmtime(int(now if now is not None else time_now())))
    token = token if token is not None else os.urandom(6).hex()
    return "%s%s-%s" % (HEALTH_RUN_PREFIX, stamp, token)


def format_reason(rules, run_id):
    """``dlrack: <rule ids> <run id>``; rule ids sorted, unique, comma separated."""
    ids = sorted(set(rules or ()))
    bad = [r for r in ids if not RULE_RE.match(r)]
    if not ids or bad:
        raise SlurmError("a drain reason needs rule ids of lower-case letters, digits, '.', '_' and '-'; got %s"
                         % (ascii(bad) if bad else "none"))
    if not valid_run_id(run_id):
        raise SlurmError("run id %s: a run id of ours is YYYYmmddTHHMMSSZ-<12 lower-case hex digits> (an Ansible run) "
                         "or health- and the same (the node program), with a real UTC date and time" % ascii(run_id))
    reason = "%s %s %s" % (OWNER, ",".join(ids), run_id)
    if len(reason) > REASON_MAX:
        raise SlurmError("drain reason is %d characters, more than %d: name fewer rules" % (len(reason), REASON_MAX))
    return reason


def parse_reason(reason):
    """(rule ids tuple, run id) for a reason in our grammar (Slurm's ``[user@time]`` stamp
    already removed), None for anything else - including a reason that only starts with
    ``dlrack:`` but does not follow the grammar (someone wrote it by hand: it is theirs)."""
    if not reason or not reason.startswith(OWNER + " "):
        return None
    parts = reason[len(OWNER) + 1:].split(" ")
    if len(parts) != 2:
        return None
    rules = tuple(parts[0].split(","))
    if not all(RULE_RE.match(r) for r in rules) or not valid_run_id(parts[1]):
        return None
    return rules, parts[1]


def is_ours(reason):
    return parse_reason(reason) is not None


def needs_service(reason):
    """Ours and naming service.required: only a person lifts it."""
    parsed = parse_reason(reason)
    return parsed is not None and SERVICE_RULE in parsed[0]


def check_reason(reason):
    """The reason a caller gave, checked: our grammar, no more than REASON_MAX characters."""
    if not isinstance(reason, str) or parse_reason(reason) is None or len(reason) > REASON_MAX:
        raise SlurmError("reason %s does not follow the grammar 'dlrack: <rule ids> <run id>' (e.g. "
                         "'dlrack: gpu.pcie_link,memory.ecc_errors 20261201T163000Z-0a1b2c3d4e5f'); only such "
                         "reasons can be told apart from a person's" % ascii(reason)[:300])
    return reason


# --------------------------------------------------------------------------------------------
# Host lists
# --------------------------------------------------------------------------------------------

def check_names(names):
    bad = [n for n in names if not isinstance(n, str) or not NAME_RE.match(n)]
    if bad:
        raise SlurmError("Slurm node name(s) %s: a name is letters, digits, '.', '_' and '-' (no hostlist "
                         "expressions, commas or spaces); list each node" % ", ".join(ascii(b) for b in bad[:5]))
    return list(names)


def compress_hostlist(names):
    """Slurm hostlist expression for ``names`` (checked by check_names): gpu01,gpu02,gpu03,gpu07 ->
    gpu[01-03,07]; the one implementation is scheduler/hostlist.py."""
    return compress(names)


def chunks(names, size):
    names = list(names)
    for i in range(0, len(names), size):
        yield names[i:i + size]


# --------------------------------------------------------------------------------------------
# scontrol show node -o
# --------------------------------------------------------------------------------------------

def split_state(state):
    """'IDLE+DRAIN+NOT_RESPONDING' -> ('IDLE', ('DRAIN', 'NOT_RESPONDING')); Slurm >= 23 also
    prints 'DRAINED' / 'DRAINING'-like flags; the base is the first word."""
    words = [w for w in (state or "").upper().split("+") if w]
    if not words:
        return "UNKNOWN", ()
    base = words[0].rstrip("*~#!%$@^-")
    return base, tuple(w.rstrip("*~#!%$@^-") for w in words[1:])


def _fields(text, into, keys=None):
    """``Key=value`` fields of ``text`` into ``into``: a value runs until the next ``Key=`` word
    (of ``keys`` when given: a free-text value may hold other ``x=`` words)."""
    marks = [(m.group(1), m.start(1), m.end()) for m in _FIELD_RE.finditer(text) if keys is None or m.group(1) in keys]
    for i, (key, dummy, vstart) in enumerate(marks):
        vend = marks[i + 1][1] if i + 1 < len(marks) else len(text)
        into[key] = text[vstart:vend].strip()
    return into


def parse_node_line(line):
    """One line of ``scontrol show node -o`` -> dict of its fields. Values may hold spaces (OS=,
    Reason=): a field runs until the next ``Key=`` word. ``Reason=`` (a reason may contain '=')
    runs to its ``[user@time]`` stamp (to ``reason_by`` / ``reason_at``) - the last stamp that ends
    the line or is followed by one of the fields Slurm prints after the reason (Comment=, Extra=,
    InstanceId=, InstanceType=, ReservationName=), so a reason that only imitates a stamp stays
    whole and is never read as ours."""
    fields = {}
    reason_at = line.find(" Reason=")
    if line.startswith("Reason="):
        reason_at = 0
    _fields(line if reason_at < 0 else line[:reason_at], fields)
    if reason_at >= 0:
        reason = line[reason_at:].strip()[len("Reason="):]
        # the reason runs up to slurmctld's [user@time] stamp when one is followed by the end or
        # by a field Slurm prints after it (the last such stamp), else up to that field
        stamps = list(_STAMP_THEN_TAIL_RE.finditer(reason))
        tail = ""
        if stamps:
            stamp = stamps[-1]
            fields["reason_by"], fields["reason_at"] = stamp.group(1), stamp.group(2)
            reason, tail = reason[:stamp.start()], reason[stamp.end():]
        else:
            after = _AFTER_REASON_RE.search(reason)
            if after:
                reason, tail = reason[:after.start()], reason[after.start():]
        _fields(tail, fields, keys=_AFTER_REASON)
        fields["Reason"] = reason.strip()
    return fields


def parse_show_node(text):
    """``scontrol show node -o`` output -> {name: node}, node = {name, state, base, flags,
    drained, reason, reason_by, reason_at}. Lines that are not node records are left out."""
    nodes = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("NodeName="):
            continue
        f = parse_node_line(line)
        name = f.get("NodeName", "")
        base, flags = split_state(f.get("State"))
        reason = f.get("Reason")
        if reason in ("", "none", "(null)"):
            reason = None
        nodes[name] = {"name": name, "state": f.get("State", ""), "base": base, "flags": list(flags),
                       "drained": any(x in DRAIN_FLAGS for x in flags) or base in DRAIN_FLAGS,
                       "reason": reason, "reason_by": f.get("reason_by"), "reason_at": f.get("reason_at"),
                       "partitions": [p for p in (f.get("Partitions") or "").split(",") if p and p != "(null)"]}
    return nodes


def not_found(text):
    """Names from 'Node X not found' lines (scontrol prints one per unknown name)."""
    out = []
    for line in (text or "").splitlines():
        m = re.match(r"^Node (\S+) not found", line.strip())
        if m:
            out.append(m.group(1))
    return out


# --------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------

def skip_reason(node):
    """Why a drain or resume means nothing for this node now (None: it can be acted on)."""
    if node is None:
        return "not known to Slurm (scontrol show node does not list it)"
    if node["base"] in SKIP_BASE:
        return "state %s: nothing to drain or resume on a node that is %s; it is judged again when it is up" % (
            node["state"], node["base"].lower())
    hit = [f for f in node["flags"] if f in SKIP_FLAGS]
    if hit:
        return "state %s: the node is %s; it is judged again when it is back" % (node["state"], hit[0].lower())
    return None


def decide(node, state, reason):
    """One node's action: ('drain'|'resume'|'none'|'skip', message). ``reason`` is ours (drain);
    for resume it is unused."""
    why = skip_reason(node)
    if why:
        # a node of ours that went down stays drained by us: nothing to do now either way
        return "skip", why
    current = node["reason"]
    ours = is_ours(current)
    if state == "drain":
        if node["drained"] or current:
            if not ours:
                if node["drained"]:
                    return "none", "drained by someone else (reason %s): left alone" % ascii(current or "none")
                # a reason without a drain flag (a note): it is not ours to overwrite
                return "none", "carries a reason that is not ours (%s): left alone" % ascii(current)
            if node["drained"] and needs_service(current):
                return "none", "drained by dlrack as %s: kept until a person resumes it" % SERVICE_RULE
            if node["drained"] and parse_reason(current)[0] == parse_reason(reason)[0]:
                return "none", "already drained by dlrack for the same rules"
            if node["drained"]:
                return "drain", "drained by dlrack for %s; reason updated" % ",".join(parse_reason(current)[0])
        return "drain", "drain"
    # resume
    if not node["drained"]:
        return "none", "not drained"
    if not ours:
        return "none", "drained by someone else (reason %s): left alone" % ascii(current or "none")
    if needs_service(current):
        return "none", "drained by dlrack as %s (%s): only a person resumes it, after service" % (SERVICE_RULE, current)
    return "resume", "drained by dlrack (%s): resume" % current


def describe(node):
    if node is None:
        return "(unknown to Slurm)"
    return "%s%s" % (node["state"], (" reason=%s" % node["reason"]) if node["reason"] else "")


# --------------------------------------------------------------------------------------------
# scontrol
# --------------------------------------------------------------------------------------------

class Scontrol(object):
    """scontrol, every call bounded in time and output (system/command.py)."""

    def __init__(self, path="scontrol", timeout=DEFAULT_TIMEOUT_S, runner=None, batch=200):
        self.path = path
        self.timeout = timeout
        self.runner = runner or (lambda argv: run(argv, timeout=timeout, output_limit=OUTPUT_LIMIT,
                                                  timeout_hint="option timeout"))
        self.batch = batch
        self.calls = []

    def _run(self, argv):
        self.calls.append(list(argv))
        return self.runner(argv)

    def show(self, names):
        """{name: node} for the names Slurm knows (one call per ``batch`` names); unknown names
        are absent. Raises SlurmError when scontrol gives no usable answer."""
        nodes = {}
        for part in chunks(names, self.batch):
            res = self._run([self.path, "show", "node", "-o", compress_hostlist(part)])
            rc, out, err = res[0], res[1], res[2]
            got = parse_show_node(out)
            missing = not_found(err) + not_found(out)
            # rc 1 with 'Node X not found' lines for some names is an answer; anything else is not
            if rc != 0 and not missing:
                raise SlurmError("%s; is slurmctld reachable from this host (scontrol ping)?"
                                 % failure(res, "scontrol show node"))
            nodes.update(got)
        return nodes

    def show_all(self, parse=True):
        """{name: node} of every node Slurm knows (``parse=False``: the text): ONE ``scontrol show
        node -o`` call (bounded in time and output like every call). Raises SlurmError when scontrol
        gives no usable answer."""
        res = self._run([self.path, "show", "node", "-o"])
        if res[0] != 0:
            raise SlurmError("%s; is slurmctld reachable from this host (scontrol ping)?" % failure(res, "scontrol show node"))
        return parse_show_node(res[1]) if parse else res[1]

    def update(self, names, state, reason=None):
        """One ``scontrol update`` per ``batch`` names; returns the failure sentences (scontrol
        may apply a batch partly and still fail: the caller reads the nodes back)."""
        problems = []
        for part in chunks(names, self.batch):
            argv = [self.path, "update", "NodeName=" + compress_hostlist(part), "State=" + state.upper()]
            if reason is not None:
                argv.append("Reason=" + reason)
            res = self._run(argv)
            why = failure(res, "scontrol update State=%s" % state.upper())
            if why:
                problems.append(why)
        return problems


def apply(scontrol, names, state, reason=None, check_mode=False):
    """Decide and act for every node; read back what was changed. Returns a result dict:
    changed, drained/resumed (names), unchanged, skipped_nodes [{node, state, why}] (not
    'skipped': Ansible reads that key as "the task was skipped"), left_alone
    [{node, state, reason}], failed [{node, ...}], messages, before/after (for diff)."""
    names = check_names(names)
    if state == "drain":
        reason = check_reason(reason)
    before = scontrol.show(names)
    plan = {}
    for name in names:
        plan[name] = decide(before.get(name), state, reason)
    act = [n for n in names if plan[n][0] in ("drain", "resume")]
    result = {"changed": bool(act), "state": state, "reason": reason if state == "drain" else None,
              "drained": [], "resumed": [], "would": [], "unchanged": [], "skipped_nodes": [], "left_alone": [],
              "failed": [], "messages": [],
              "before": dict((n, describe(before.get(n))) for n in names)}
    for name in names:
        action, why = plan[name]
        node = before.get(name)
        if action == "skip":
            result["skipped_nodes"].append({"node": name, "state": node["state"] if node else None, "why": why})
            result["messages"].append("%s: skipped, %s" % (name, why))
        elif action == "none":
            result["unchanged"].append(name)
            if node and node["reason"] and not is_ours(node["reason"]):
                result["left_alone"].append({"node": name, "state": node["state"], "reason": node["reason"]})
                result["messages"].append("%s: %s" % (name, why))
    if check_mode:
        result["would"] = act
        if act:
            result["messages"].append("check mode: would %s %s" % (state, compress_hostlist(act)))
        result["after"] = dict(result["before"])
        for name in act:
            result["after"][name] = ("%s+DRAIN reason=%s" % (before[name]["base"], reason) if state == "drain"
                                     else before[name]["base"])
        return result
    problems = scontrol.update(act, state, reason) if act else []
    after = scontrol.show(names) if act else before
    result["after"] = dict((n, describe(after.get(n))) for n in names)
    for name in act:
        node = after.get(name)
        ok = node is not None and (
            (state == "drain" and node["drained"] and node["reason"] == reason)
            or (state == "resume" and not node["drained"]))
        if ok:
            result["drained" if state == "drain" else "resumed"].append(name)
        else:
            result["failed"].append({"node": name, "state": node["state"] if node else None,
                                     "reason": node["reason"] if node else None})
    result["changed"] = bool(result["drained"] or result["resumed"])
    if result["failed"]:
        result["messages"].append("scontrol did not %s %s (now: %s)%s" % (
            state, compress_hostlist(f["node"] for f in result["failed"]),
            "; ".join("%s %s" % (f["node"], describe(after.get(f["node"]))) for f in result["failed"][:5]),
            (": " + "; ".join(problems)) if problems else ""))
    return result
