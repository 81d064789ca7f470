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
drained or resumed and the plan says so in one sentence naming the counts.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re

from ansible_collections.dlrack.node.plugins.module_utils.scheduler.slurm import (
    NAME_RE, RULE_RE, RUN_ID_RE, SlurmError, format_reason)
from ansible_collections.dlrack.node.plugins.plugin_utils import verdict

MAX_REPORT_BYTES = 256 * 1024 * 1024
K8S_PREFIX = "dlrack.node/"
K8S_TAINT_KEY = K8S_PREFIX + "unhealthy"
K8S_REASON = K8S_PREFIX + "reason"
K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class PlanError(Exception):
    """One sentence: what is wrong and what to do."""


def _load(path):
    try:
        size = os.path.getsize(path)
        if size > MAX_REPORT_BYTES:
            raise PlanError("report %s is %d bytes, more than %d: not a report of this collection" % (path, size, MAX_REPORT_BYTES))
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, IOError) as exc:
        raise PlanError("cannot read the report %s (%s): scheduler_reports must name this run's reports"
                        % (path, exc.strerror or exc))
    except ValueError as exc:
        raise PlanError("report %s is not JSON (%s)" % (path, exc))
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts", {}), dict):
        raise PlanError("report %s has no 'hosts' mapping: not a dlrack.node report" % path)
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
        if run_id is None and isinstance(summary.get("run_id"), str) and RUN_ID_RE.match(summary["run_id"]):
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


def plan(report_paths, hosts=None, backend="slurm", node_names=None, short_names=True, max_nodes=5,
         max_percent=10, run_id=None, k8s_nodes=None):
    """The plan: {judged, failing: {node: rules}, passing: [nodes], drain: [{reason, rules, nodes}],
    resume: [nodes], run_id, limit, over_cap (sentence or None), problems (a sentence per host left
    out for its node name), lines}. ``hosts`` (optional)
    restricts the judged hosts to those of the play."""
    if backend not in ("slurm", "kubernetes"):
        raise PlanError("backend %s: use slurm or kubernetes" % ascii(backend))
    if not isinstance(max_nodes, int) or max_nodes < 1 or not isinstance(max_percent, (int, float)) or not 0 < max_percent <= 100:
        raise PlanError("the cap needs max_nodes >= 1 and 0 < max_percent <= 100 (got %r, %r)" % (max_nodes, max_percent))
    docs = [_load(p) for p in report_paths]
    if not docs:
        raise PlanError("no reports to act on: scheduler_reports is empty")
    found, report_run_id = verdicts(docs)
    if hosts is not None:
        wanted = set(hosts)
        found = dict((h, v) for h, v in found.items() if h in wanted)
    run_id = run_id or report_run_id or new_run_id()
    if not RUN_ID_RE.match(run_id):
        raise PlanError("run id %s: letters, digits, '.', '_', ':' and '-' only" % ascii(run_id))
    # A host without a usable scheduler node name (an invalid name, or two hosts on one node) is
    # left out of the plan with a sentence in ``problems``; the other hosts are still acted on and
    # the role fails afterwards naming it (a bad mapping never keeps the rest of the fleet in service).
    problems = []
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
    failing = dict((n, r) for n, (h, r) in by_node.items() if r)
    passing = sorted(n for n, (h, r) in by_node.items() if not r)
    limit = cap(len(by_node), max_nodes, max_percent)
    out = {"judged": len(by_node), "failing": failing, "passing": passing, "run_id": run_id, "limit": limit,
           "hosts": dict((n, h) for n, (h, r) in by_node.items()), "drain": [], "resume": [], "over_cap": None,
           "problems": problems, "lines": list(problems)}
    if len(failing) > limit:
        out["over_cap"] = (
            "%d of %d judged nodes fail, more than the cap of %d (scheduler_max_drain_nodes %d, "
            "scheduler_max_drain_percent %s %%): nothing was drained or resumed - a wrong rule or a bad rollout "
            "must not empty the cluster; check the reports, fix the cause or raise the cap for this run. Failing: %s"
            % (len(failing), len(by_node), limit, max_nodes, max_percent,
               ", ".join(sorted(failing)[:20]) + (" and %d more" % (len(failing) - 20) if len(failing) > 20 else "")))
        out["lines"].append(out["over_cap"])
        return out
    groups = {}
    for name in sorted(failing):
        key = tuple(failing[name])
        groups.setdefault(key, []).append(name)
    for rules, nodes in sorted(groups.items(), key=lambda kv: kv[1][0]):
        out["drain"].append({"rules": list(rules), "reason": reason_for(rules, run_id), "nodes": nodes})
        out["lines"].append("take out %s: %s" % (", ".join(nodes), ", ".join(rules)))
    out["resume"] = passing
    if passing:
        out["lines"].append("put back if taken out by dlrack: %s" % ", ".join(passing))
    if backend == "kubernetes":
        out["k8s"] = k8s_changes(out, k8s_nodes or [])
        out["lines"].extend(out["k8s"]["messages"])
    return out


def k8s_label(rule):
    """The label of one failing verdict: dlrack.node/<rule id> (the name part at most 63
    characters, starting and ending with a letter or digit)."""
    name = rule[:63].rstrip("-_.") or "verdict"
    return K8S_PREFIX + name


def _ours(mapping):
    return sorted(k for k in (mapping or {}) if isinstance(k, str) and k.startswith(K8S_PREFIX))


def k8s_changes(out, nodes):
    """What the kubernetes backend does, from the plan and the Nodes as the API returns them
    (k8s_info resources): taint (key dlrack.node/unhealthy, effect NoSchedule) and label the
    failing nodes - one label per failing verdict, labels of verdicts that no longer fail removed,
    the reason in the annotation dlrack.node/reason - and, for the passing nodes that carry our
    taint or labels, remove exactly those. Other taints, labels and a person's cordon
    (spec.unschedulable) are never touched. Nodes the API does not have are skipped."""
    by_name = {}
    for item in nodes or ():
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
            by_name[str(item["metadata"].get("name"))] = item
    res = {"taint": [], "untaint": [], "patch": [], "messages": [], "skipped": []}
    taint = {"key": K8S_TAINT_KEY, "effect": "NoSchedule", "value": "dlrack"}
    for group in out["drain"]:
        for name in group["nodes"]:
            node = by_name.get(name)
            if node is None:
                res["skipped"].append(name)
                res["messages"].append("%s: skipped, the API server has no such Node" % name)
                continue
            meta = node["metadata"]
            want = dict((k8s_label(r), "fail") for r in group["rules"])
            labels = dict((k, None) for k in _ours(meta.get("labels")) if k not in want)
            labels.update(dict((k, v) for k, v in want.items() if (meta.get("labels") or {}).get(k) != v))
            annotations = {}
            if (meta.get("annotations") or {}).get(K8S_REASON) != group["reason"]:
                annotations[K8S_REASON] = group["reason"]
            res["taint"].append(name)
            if labels or annotations:
                res["patch"].append(_k8s_patch(name, labels, annotations))
    for name in out["resume"]:
        node = by_name.get(name)
        if node is None:
            res["skipped"].append(name)
            res["messages"].append("%s: skipped, the API server has no such Node" % name)
            continue
        meta = node["metadata"]
        taints = ((node.get("spec") or {}).get("taints")) or []
        if any(isinstance(t, dict) and t.get("key") == K8S_TAINT_KEY for t in taints):
            res["untaint"].append(name)
        labels = dict((k, None) for k in _ours(meta.get("labels")))
        annotations = dict((k, None) for k in _ours(meta.get("annotations")))
        if labels or annotations:
            res["patch"].append(_k8s_patch(name, labels, annotations))
    res["taint_spec"] = taint
    return res


def _k8s_patch(name, labels, annotations):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"name": name, "definition": {"apiVersion": "v1", "kind": "Node", "metadata": meta}}
