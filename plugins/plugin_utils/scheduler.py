# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the scheduler act: from this run's reports to what the scheduler is told.

Input: the JSON reports a run wrote (pre-flight ``report.json``/``site.json``, ``drift.json``,
``acceptance.json``). A host is *judged* when a report has a verdict for it; it *fails* when

- the pre-flight (or the drift run's findings) has error findings (status ``fail``): the error
  rule ids (this includes ``memory.ecc_errors``, the uncorrected ECC counters);
- the drift record is ``drifted`` (``drift.drifted``) or ``error`` (``drift.error``: could not be
  checked);
- acceptance gave ``error``: ``acceptance.<measurement>`` for each failing measurement
  (``skip`` and ``incomplete`` hosts were not judged by acceptance: neither drained nor resumed).

Warnings never drain. A judged host that does not fail *passes*: it is resumed/untainted when
(and only when) the scheduler says it was taken out by us.

The blast-radius cap: when more nodes fail than the cap allows (``max_nodes``, and
``max_percent`` of the judged nodes, whichever is smaller, never below one node), nothing is
drained and the plan says so in one sentence naming the counts; the passing nodes are still put
back (a breaker that blocks healthy nodes from returning empties the cluster slowly), and the next
run whose failing count is within the cap drains again (nothing to reset by hand).

What the plan trusts (issue 28; docs/trust.md):

- only this run's reports: regular files under a size bound, written after this run started
  (``not_before``), one sentence naming any other file;
- only this run's hosts (``hosts``: the play's hosts, from Ansible, never from a report): a host a
  report lists outside them is neither judged nor counted for the cap;
- never a host whose facts set a setting (``untrusted``: the action names them): its verdict
  cannot be trusted, so it is neither taken out nor put back, and it is named;
- only rules whose mode is ``enforce`` act (module_utils/scheduler/modes.py); a failing ``shadow``
  rule is a "would take out" line and an audit record; ``off`` rules are ignored.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re
import stat

from ansible_collections.dlrack.node.plugins.module_utils.scheduler import modes as rule_modes
from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import (
    NAME_RE, RULE_RE, SlurmError, format_reason, valid_run_id)
from ansible_collections.dlrack.node.plugins.plugin_utils import verdict

MAX_REPORT_BYTES = 64 * 1024 * 1024
K8S_PREFIX = "dlrack.node/"
K8S_TAINT_KEY = K8S_PREFIX + "unhealthy"
K8S_REASON = K8S_PREFIX + "reason"
# Our taint carries the run id as its value and the same run id in this annotation: a taint with
# our key and any other value, or without the annotation, is a person's (never removed).
K8S_TAINT_RUN = K8S_PREFIX + "taint-run-id"


def ansible_run_id(run_id):
    """A run id of an Ansible run of ours: what plugin_utils/reports/common.py new_run_id() writes - a
    real UTC time stamp and 12 random hex digits, a format nobody types by hand (slurm.valid_run_id)."""
    return valid_run_id(run_id, "ansible")


# The slack between this run's start and a report's generated_at (clock granularity).
NOT_BEFORE_SLACK_S = 2
K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class PlanError(Exception):
    """One sentence: what is wrong and what to do."""


def _parse_time(text):
    try:
        stamp = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp()


def _load(path, not_before=None):
    """One report: a regular file (never a FIFO, a device or a link to one) of at most
    MAX_REPORT_BYTES, read without blocking; with ``not_before`` (epoch seconds) its
    ``summary.generated_at`` must not be older than this run."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, IOError) as exc:
        raise PlanError("cannot read the report %s (%s): scheduler_reports must name this run's reports"
                        % (path, exc.strerror or exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PlanError("report %s is not a regular file: the act reads only report files this run wrote" % path)
        if info.st_size > MAX_REPORT_BYTES:
            raise PlanError("report %s is %d bytes, more than %d: not a report of this collection" % (path, info.st_size, MAX_REPORT_BYTES))
        with os.fdopen(fd, "rb") as f:
            fd = None
            data = f.read(MAX_REPORT_BYTES + 1)
        if len(data) > MAX_REPORT_BYTES:
            raise PlanError("report %s grew past %d bytes while read: not a report of this collection" % (path, MAX_REPORT_BYTES))
        doc = json.loads(data.decode("utf-8"))
    except (OSError, IOError) as exc:
        raise PlanError("cannot read the report %s (%s): scheduler_reports must name this run's reports"
                        % (path, exc.strerror or exc))
    except ValueError as exc:
        raise PlanError("report %s is not JSON (%s)" % (path, exc))
    finally:
        if fd is not None:
            os.close(fd)
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts", {}), dict):
        raise PlanError("report %s has no 'hosts' mapping: not a dlrack.node report" % path)
    if not_before is not None:
        summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
        written = _parse_time(summary.get("generated_at"))
        if written is None:
            raise PlanError("report %s has no summary.generated_at: the act cannot tell it is this run's; run the "
                            "playbook that writes it again" % path)
        if written + NOT_BEFORE_SLACK_S < not_before:
            raise PlanError("report %s was written at %s, before this run started (%s): the act judges only this "
                            "run's reports - an old report must not drain nodes this run never checked"
                            % (path, ascii(summary.get("generated_at"))[1:-1][:40],
                               datetime.datetime.fromtimestamp(int(not_before), datetime.timezone.utc).isoformat()))
    return doc


def _rule(name):
    name = str(name)
    return name if RULE_RE.match(name) else "invalid-rule-id"


def verdicts(docs):
    """{host: [failing rule ids]} for every judged host (an empty list: it passes), and the
    run id of the first report that has one."""
    out = {}
    run_id = None
    for doc in docs:
        summary = doc.get("summary") or {}
        if run_id is None and ansible_run_id(summary.get("run_id")):
            run_id = summary["run_id"]
        for host, res in sorted((doc.get("hosts") or {}).items()):
            if not isinstance(res, dict):
                continue
            status = res.get("status")
            part = "acceptance" if "measurements" in res else "preflight"
            if part == "acceptance" and status in verdict.STATES["acceptance"] and not verdict.state(part, status).judged:
                # not measured (skip), or not all of it (incomplete: fio missing, a tier not
                # mounted, no GPU driver): acceptance did not judge the host, so it is neither
                # drained nor resumed for it (plugin_utils/verdict.py)
                continue
            fails = out.setdefault(host, [])
            if part == "acceptance":           # acceptance.json
                if status == "error":
                    bad = [m.get("name") for m in res.get("measurements") or () if isinstance(m, dict) and m.get("verdict") == "error"]
                    fails.extend("acceptance." + _rule(n) if n else "acceptance" for n in bad or ["host"])
                continue
            if status == "fail":               # pre-flight findings
                ids = [f.get("rule") for f in res.get("findings") or ()
                       if isinstance(f, dict) and f.get("severity") == "error"]
                fails.extend(_rule(i) for i in ids or ["preflight"])
            # a rule in shadow mode (rules.rule(shadow=True)) failed: what it would be; its mode
            # in the act decides (shadow by default: a "would take out" line, never a drain)
            fails.extend(_rule(f.get("rule")) for f in res.get("findings") or ()
                         if isinstance(f, dict) and f.get("shadow") == "error" and f.get("severity") != "error")
        for host, rec in sorted((doc.get("drift") or {}).items()):
            if not isinstance(rec, dict):
                continue
            fails = out.setdefault(host, [])
            if rec.get("status") == "drifted":
                fails.append("drift.drifted")
            elif rec.get("status") == "error":
                fails.append("drift.error")
    return dict((h, sorted(set(v))) for h, v in out.items()), run_id


def node_name(host, mapping, short, backend):
    name = (mapping or {}).get(host)
    if name is None:
        name = host.split(".")[0] if short else host
    name = str(name)
    if not (K8S_NAME_RE.match(name) if backend == "kubernetes" else NAME_RE.match(name)):
        raise PlanError("host %s: scheduler node name %s is not a valid %s node name; set it in "
                        "scheduler_node_names" % (host, ascii(name), backend))
    return name


def cap(judged, max_nodes, max_percent):
    """How many nodes one run may take out: the smaller of max_nodes and max_percent of the
    judged nodes (rounded down), never below one."""
    by_share = int(judged * max_percent // 100)
    return max(1, min(max_nodes, by_share))


def reason_for(rules, run_id):
    """Our reason for these rules; rules that do not fit in REASON_MAX are summed up as 'etc'."""
    rules = sorted(set(rules))
    while True:
        try:
            return format_reason(rules, run_id)
        except SlurmError:
            if len(rules) <= 1:
                raise
            rules = rules[:-2] + ["etc"]


def new_run_id():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(6).hex()


def _names(items, more_than=20):
    items = sorted(items)
    return ", ".join(items[:more_than]) + (" and %d more" % (len(items) - more_than) if len(items) > more_than else "")


def plan(report_paths, hosts=None, backend="slurm", node_names=None, short_names=True, max_nodes=5,
         max_percent=10, run_id=None, k8s_nodes=None, modes=None, group_modes=None, host_groups=None,
         untrusted=None, not_before=None):
    """The plan: {judged, failing: {node: rules}, shadowed: {node: rules}, passing: [nodes],
    drain: [{reason, rules, nodes}], would_drain: [{rules, nodes}], resume: [nodes], run_id, limit,
    over_cap (sentence or None), problems (a sentence per host left out), outside (hosts of the
    reports not in this run), audit (one record per decision), lines}.

    ``hosts``: this run's hosts (the play's; None only in unit tests: every host of the reports);
    ``modes``/``group_modes``/``host_groups`` ({host: its inventory groups}): rule modes;
    ``untrusted``: {host: sentence} for hosts whose facts set a setting (left out, named);
    ``not_before``: this run's start (epoch seconds): an older report is refused."""
    if backend not in ("slurm", "kubernetes"):
        raise PlanError("backend %s: use slurm or kubernetes" % ascii(backend))
    if not isinstance(max_nodes, int) or max_nodes < 1 or not isinstance(max_percent, (int, float)) or not 0 < max_percent <= 100:
        raise PlanError("the cap needs max_nodes >= 1 and 0 < max_percent <= 100 (got %r, %r)" % (max_nodes, max_percent))
    try:
        modes = rule_modes.check_modes(modes, "scheduler_rule_modes")
        group_modes = rule_modes.check_group_modes(group_modes, "scheduler_rule_modes_groups")
    except rule_modes.ModeError as exc:
        raise PlanError(str(exc))
    docs = [_load(p, not_before) for p in report_paths]
    if not docs:
        raise PlanError("no reports of this run to act on (scheduler_reports is empty): the act judges the reports the same "
                        "run wrote - run site.yml, drift.yml or acceptance.yml with -e dlrack_scheduler=%s rather than "
                        "playbooks/scheduler.yml alone" % backend)
    found, report_run_id = verdicts(docs)
    outside = []
    if hosts is not None:
        wanted = set(hosts)
        outside = sorted(h for h in found if h not in wanted)
        found = dict((h, v) for h, v in found.items() if h in wanted)
    run_id = run_id or report_run_id or new_run_id()
    if not ansible_run_id(run_id):
        raise PlanError("run id %s: a run id of ours is YYYYmmddTHHMMSSZ- and 12 lower-case hex digits (what the "
                        "reports' summary.run_id holds); leave scheduler_run_id empty" % ascii(run_id))
    problems, lines, audit = [], [], []
    if outside:
        lines.append("%d host(s) in the reports are not hosts of this run, neither judged nor counted: %s"
                     % (len(outside), _names(outside, 10)))
    for host in sorted(untrusted or {}):
        if host in found:
            del found[host]
            problems.append(untrusted[host])
            audit.append({"action": "refused", "why": "trust", "host": host, "rules": []})
    # A host without a usable scheduler node name (an invalid name, or two hosts on one node) is
    # left out of the plan with a sentence in ``problems``; the other hosts are still acted on and
    # the role fails afterwards naming it (a bad mapping never keeps the rest of the fleet in service).
    hosts_of = {}
    for host in sorted(found):
        try:
            name = node_name(host, node_names, short_names, backend)
        except PlanError as exc:
            problems.append(str(exc))
            continue
        hosts_of.setdefault(name, []).append(host)
    by_node = {}
    for name, mapped in sorted(hosts_of.items()):
        if len(mapped) > 1:
            problems.append("hosts %s both map to the scheduler node %s: neither is drained or resumed; give each "
                            "its own name in scheduler_node_names" % (" and ".join(mapped), name))
            continue
        by_node[name] = (mapped[0], found[mapped[0]])
    failing, shadowed = {}, {}
    for name, (host, rules) in by_node.items():
        enforced, shadow = rule_modes.split(rules, modes, group_modes, (host_groups or {}).get(host, ()))
        if enforced:
            failing[name] = enforced
        if shadow:
            shadowed[name] = shadow
    passing = sorted(n for n in by_node if n not in failing)
    limit = cap(len(by_node), max_nodes, max_percent)
    out = {"backend": backend, "judged": len(by_node), "failing": failing, "shadowed": shadowed, "passing": passing, "run_id": run_id,
           "limit": limit, "hosts": dict((n, h) for n, (h, r) in by_node.items()), "drain": [], "would_drain": [],
           "resume": [], "over_cap": None, "problems": problems, "outside": outside, "audit": audit,
           "lines": list(problems) + lines}
    groups = {}
    for name in sorted(shadowed):
        groups.setdefault(tuple(shadowed[name]), []).append(name)
    for rules, nodes in sorted(groups.items(), key=lambda kv: kv[1][0]):
        out["would_drain"].append({"rules": list(rules), "nodes": nodes})
        out["lines"].append("would take out %s (shadow mode, nothing done): %s" % (", ".join(nodes), ", ".join(rules)))
        audit.extend({"action": "would_drain", "why": "shadow", "node": n, "host": out["hosts"][n], "rules": list(rules)}
                     for n in nodes)
    if len(failing) > limit:
        out["over_cap"] = (
            "%d of %d judged nodes fail, more than the cap of %d (scheduler_max_drain_nodes %d, "
            "scheduler_max_drain_percent %s %%): nothing was drained - a wrong rule or a bad rollout must not "
            "empty the cluster; the passing nodes were still put back; check the reports, fix the cause or raise "
            "the cap for this run. Failing: %s"
            % (len(failing), len(by_node), limit, max_nodes, max_percent, _names(failing)))
        out["lines"].append(out["over_cap"])
        audit.extend({"action": "refused", "why": "cap", "node": n, "host": out["hosts"][n], "rules": failing[n]}
                     for n in sorted(failing))
    else:
        groups = {}
        for name in sorted(failing):
            groups.setdefault(tuple(failing[name]), []).append(name)
        for rules, nodes in sorted(groups.items(), key=lambda kv: kv[1][0]):
            group = {"rules": list(rules), "reason": reason_for(rules, run_id), "nodes": nodes}
            out["drain"].append(group)
            out["lines"].append("take out %s: %s" % (", ".join(nodes), ", ".join(rules)))
            audit.extend({"action": "drain", "node": n, "host": out["hosts"][n], "rules": list(rules),
                          "reason": group["reason"]} for n in nodes)
    out["resume"] = passing
    if passing:
        out["lines"].append("put back if taken out by dlrack: %s" % _names(passing, 50))
    if backend == "kubernetes":
        out["k8s"] = k8s_changes(out, k8s_nodes or [])
        out["lines"].extend(out["k8s"]["messages"])
    for rec in audit:
        rec["run_id"] = run_id
        rec["backend"] = backend
    return out


def k8s_label(rule):
    """The label of one failing verdict: dlrack.node/<rule id> (the name part at most 63
    characters, starting and ending with a letter or digit)."""
    name = rule[:63].rstrip("-_.") or "verdict"
    return K8S_PREFIX + name


def _ours(mapping):
    return sorted(k for k in (mapping or {}) if isinstance(k, str) and k.startswith(K8S_PREFIX))


def k8s_taint_ours(taint, annotations):
    """Whether a taint with our key is ours: its value is a run id of ours and the Node carries the
    same run id in the annotation dlrack.node/taint-run-id. A person who puts our key on a Node by
    hand (any other value, or no annotation) keeps it: it is never removed or overwritten."""
    value = taint.get("value")
    return ansible_run_id(value) and (annotations or {}).get(K8S_TAINT_RUN) == value


def k8s_changes(out, nodes):
    """What the kubernetes backend does, from the plan and the Nodes as the API returns them
    (k8s_info resources).

    Failing nodes: patched first (one label per failing verdict, labels of verdicts that no longer
    fail removed, the reason in dlrack.node/reason, the run id in dlrack.node/taint-run-id), then
    tainted NoSchedule with key dlrack.node/unhealthy and the run id as value (``taint``:
    [{name, spec}]) - a Node already carrying our taint keeps it. Passing nodes that carry our
    taint: untainted, then our labels and annotations removed. A taint with our key that is not
    ours (k8s_taint_ours) is a person's: that Node is neither tainted nor untainted, and our
    labels stay. Other taints, labels and a person's cordon (spec.unschedulable) are never
    touched. Nodes the API does not have are skipped."""
    by_name = {}
    for item in nodes or ():
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
            by_name[str(item["metadata"].get("name"))] = item
    res = {"taint": [], "untaint": [], "patch": [], "patch_after": [], "messages": [], "skipped": [], "left_alone": []}

    def ours_taint(node):
        """(our key present, ours) for a Node."""
        taints = [t for t in ((node.get("spec") or {}).get("taints") or []) if isinstance(t, dict) and t.get("key") == K8S_TAINT_KEY]
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return bool(taints), bool(taints) and all(k8s_taint_ours(t, annotations) for t in taints)

    def lookup(name):
        node = by_name.get(name)
        if node is None:
            res["skipped"].append(name)
            res["messages"].append("%s: skipped, the API server has no such Node" % name)
        return node

    for group in out["drain"]:
        for name in group["nodes"]:
            node = lookup(name)
            if node is None:
                continue
            present, ours = ours_taint(node)
            if present and not ours:
                res["left_alone"].append(name)
                res["messages"].append("%s: carries a taint %s that is not ours (another value, or no %s annotation): "
                                       "left alone, not tainted again" % (name, K8S_TAINT_KEY, K8S_TAINT_RUN))
                continue
            meta = node["metadata"]
            want = dict((k8s_label(r), "fail") for r in group["rules"])
            labels = dict((k, None) for k in _ours(meta.get("labels")) if k not in want)
            labels.update(dict((k, v) for k, v in want.items() if (meta.get("labels") or {}).get(k) != v))
            annotations = {}
            if (meta.get("annotations") or {}).get(K8S_REASON) != group["reason"]:
                annotations[K8S_REASON] = group["reason"]
            if not present:
                annotations[K8S_TAINT_RUN] = out["run_id"]
                res["taint"].append({"name": name, "spec": {"key": K8S_TAINT_KEY, "effect": "NoSchedule",
                                                            "value": out["run_id"]}})
            if labels or annotations:
                res["patch"].append(_k8s_patch(name, labels, annotations))
    for name in out["resume"]:
        node = lookup(name)
        if node is None:
            continue
        present, ours = ours_taint(node)
        if present and not ours:
            res["left_alone"].append(name)
            res["messages"].append("%s: carries a taint %s that is not ours: left alone" % (name, K8S_TAINT_KEY))
            continue
        meta = node["metadata"]
        if present:
            res["untaint"].append(name)
        labels = dict((k, None) for k in _ours(meta.get("labels")))
        annotations = dict((k, None) for k in _ours(meta.get("annotations")))
        if labels or annotations:
            res["patch_after"].append(_k8s_patch(name, labels, annotations))
    res["taint_key"] = {"key": K8S_TAINT_KEY, "effect": "NoSchedule"}
    return res


def _k8s_patch(name, labels, annotations):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"name": name, "definition": {"apiVersion": "v1", "kind": "Node", "metadata": meta}}
