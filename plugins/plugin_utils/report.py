# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports from rule-engine results - the layout of the pre-flight's and the drift check's
reports: the JSON document (for pipelines), the JUnit suites (for CI systems), the HTML page (for
people) and a plain-text summary (for the terminal). The registered writers of the reports package
(plugin_utils/reports/) render them and write the set (report_set, write_reports).

Input everywhere: ``results`` = {host: evaluate_host() result} and ``summary`` = summarize().
``drift`` (optional) = {host: {"changes": [{"role", "task", "action", "diff"}], ...}} adds the
drift section used by the drift playbook.

The building blocks every report of the collection is made of (strict JSON, XML-safe text, the
JUnit writer, the Jinja2 environment, the atomic write of a set) live in plugin_utils/reports/
(common.py, files.py); they are importable from here as well, as before.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import difflib
import functools
import json
import marshal
import re
from xml.sax.saxutils import escape

from markupsafe import Markup  # Jinja2's own dependency: on every Ansible controller

from ansible_collections.dlrack.node.plugins.module_utils.hw.cpulist import CpuListError, parse_cpulist
from ansible_collections.dlrack.node.plugins.plugin_utils import fastpath, reports
from ansible_collections.dlrack.node.plugins.plugin_utils.hostlist import compress as compress_hostlist
# The building blocks are importable from here too (callers and tests do): re-exported, hence unused here.
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.common import (  # noqa: F401 pylint: disable=unused-import
    SKIP_NOT_CHECKED, SKIP_WARNING, TEMPLATES, _suite_xml, finite_copy, jinja_env, junit_case, junit_classname,
    junit_xml, new_run_id, now_iso, render, strict_json_document, strict_json_dumps, xml_safe)
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import (  # noqa: F401 pylint: disable=unused-import
    LOCK_NAME, ReportWriteError, atomic_write, prepare_dir, write_file_set)
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import RULE_IDS, RULES, mentions
from ansible_collections.dlrack.node.plugins.plugin_utils import versions as fleet_versions
from ansible_collections.dlrack.node.plugins.plugin_utils import platform

JUNIT_WARNINGS = ("skipped", "failed", "passed")


# ---------------------------------------------------------------------------------- JSON, JUnit

def share_key(result):
    """A key that is equal for two hosts' results only when their report content is equal: the
    identity (id) of the finding mappings, normalised document and provenance that hosts with the
    same inputs share (rules.evaluate_fleet), with status, profile and rule outcomes. Valid while
    the results are alive (the builders hold them); equal content in distinct objects only costs
    a second rendering, never a wrong one."""
    return (result.get("status"), result.get("profile"), tuple(map(id, result.get("findings") or ())),
            id(result.get("hw")), id(result.get("provenance")), tuple((result.get("rules") or {}).items()))


def _fragment_key(result, host, share):
    """The key a report builder files ``host``'s fragment under: share_key(result) when ``share``
    (fastpath.shares_reports(): the fleet fast path), else the host itself - every host's fragment
    built on its own (the reference path)."""
    return share_key(result) if share else ("host", host)


def _public_finding(f):
    """One finding as report.json holds it; a shadow finding keeps its ``shadow`` mark (what it
    would be), which the scheduler act reads (plugin_utils/scheduler.py)."""
    out = {k: f.get(k) for k in ("rule", "severity", "observed", "required", "message", "remedy")}
    if f.get("shadow"):
        out["shadow"] = f["shadow"]
    return out


def _public(result):
    """The per-host JSON contract: status + findings (+ what we evaluated)."""
    out = {"status": result["status"], "profile": result.get("profile"),
           "findings": [_public_finding(f) for f in result["findings"]],
           "rules": result.get("rules", {})}
    if result.get("hw") is not None:
        out["source"] = result["hw"].get("source")
    if result.get("provenance"):
        out["provenance"] = result["provenance"]
    return out


def build_json(results, summary, drift=None, meta=None, run_id=None):
    """The report.json document; ``summary.run_id`` ties it to the XML and HTML of the same run."""
    entries = {}
    hosts = {}
    share = fastpath.shares_reports()
    for host, res in sorted(results.items()):
        key = _fragment_key(res, host, share)
        if key not in entries:
            entries[key] = _public(res)
        hosts[host] = entries[key]   # hosts that share an evaluation share this (read-only) entry
    doc = {"hosts": hosts,
           "summary": dict(summary, generated_at=now_iso(), run_id=run_id or new_run_id(), **(meta or {}))}
    if drift is not None:
        doc["drift"] = drift
    return doc


def _detail(f):
    return "observed: %s\nrequired: %s\nremedy: %s" % (f.get("observed"), f.get("required"), f.get("remedy"))


def _ordered_rules(rules):
    return [r for r in RULE_IDS if r in rules] + sorted(set(rules) - set(RULE_IDS))


def _host_cases(host, res, warnings):
    """JUnit cases of one host: one failure per error finding (four schema errors = four failures),
    warnings per ``warnings`` (skipped / failed / passed, one case each), otherwise one case per rule."""
    cases = []
    classname = junit_classname(host, "preflight")
    for rule in _ordered_rules(res.get("rules", {})):
        fs = [f for f in res["findings"] if f["rule"] == rule]
        errors = [f for f in fs if f["severity"] == "error"]
        warns = [f for f in fs if f["severity"] == "warning" and not f.get("skipped")] if warnings != "passed" else []
        problems = errors + warns
        others = "\n".join("[%s] %s" % (f["severity"], f["message"]) for f in fs if f not in problems) or None
        if not problems:
            outcome = res["rules"][rule]
            if outcome == "skip":
                why = "; ".join(f["message"] for f in fs)
                why = why if why.startswith("not checked") else ("not checked: " + why if why else "not checked")
                cases.append(junit_case(classname, rule, "skipped", why, SKIP_NOT_CHECKED, system_out=others))
            else:
                cases.append(junit_case(classname, rule, "passed", system_out=others))
            continue
        for i, f in enumerate(problems):
            name = rule if len(problems) == 1 else "%s #%d" % (rule, i + 1)
            if f["severity"] == "error":
                cases.append(junit_case(classname, name, "failure", f["message"], "error", _detail(f), others))
            elif warnings == "failed":
                cases.append(junit_case(classname, name, "failure", "warning: " + f["message"], "warning", _detail(f), others))
            else:
                cases.append(junit_case(classname, name, "skipped", "warning: " + f["message"], SKIP_WARNING,
                                        system_out=_detail(f)))
            others = None  # informational lines once per rule
    return cases


# Stands for the host's name in a <testsuite> written once for the hosts that share an evaluation:
# private-use characters, which xml_safe() and the escaping leave as they are.
_HOST_MARK = u"\ue000dlrack-host\ue001"
_ATTR_ENTITIES = {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}   # what quoteattr() adds to escape()


def _shared_suite(shared, host, res, warnings, properties):
    """The <testsuite> of ``host`` as {"xml": (lines, counts)}, written once per share_key() with
    _HOST_MARK for the name and then given this host's name; None where that cannot give exactly
    what writing it for the host gives: a name that quoteattr() would put in single quotes (it
    holds a double quote) or content that holds the mark itself."""
    if not isinstance(host, str) or '"' in host:
        return None
    key = share_key(res)
    if key not in shared:
        shared[key] = None if mentions(res.get("findings"), _HOST_MARK) else _suite_xml(
            {"name": _HOST_MARK, "cases": _host_cases(_HOST_MARK, res, warnings)}, properties)
    if shared[key] is None:
        return None
    lines, counts = shared[key]
    name = escape(xml_safe(host), _ATTR_ENTITIES)
    return {"xml": ([line.replace(_HOST_MARK, name) if _HOST_MARK in line else line for line in lines], counts)}


def build_junit(results, summary, drift=None, warnings="skipped", run_id=None):
    """report.xml as text: junit_suites() rendered (what reports.junit_writer writes)."""
    suites, name, properties = junit_suites(results, summary, drift, warnings, run_id)
    return junit_xml(suites, name=name, properties=properties)


def junit_suites(results, summary, drift=None, warnings="skipped", run_id=None):
    """(suites, name, properties) of report.xml for common.junit_xml. One testsuite per host. Each error finding is its own failing testcase; warnings are
    ``warnings``: "skipped" (default: a skipped case whose message starts with "warning:"),
    "failed" (a failure of type warning) or "passed" (a passing case). Rules that hold are one
    passing case each; rules not checked are skipped. Drift changes are one failure each."""
    if warnings not in JUNIT_WARNINGS:
        raise ValueError("dlrack_junit_warnings must be one of %s, not %r" % (", ".join(JUNIT_WARNINGS), warnings))
    suites = []
    properties = {"run_id": run_id} if run_id else None
    shared = {}
    # A suite is written once for the hosts that share an evaluation; a host alone the plain way
    # (and every host so on the reference path: fastpath.shares_reports()).
    share = fastpath.shares_reports()
    counts = collections.Counter(share_key(r) for r in results.values()) if share else None
    for host in sorted(results):
        suite = None
        if share and host not in (drift or {}) and counts[share_key(results[host])] > 1:
            suite = _shared_suite(shared, host, results[host], warnings, properties)
        if suite is not None:
            suites.append(suite)
            continue
        cases = _host_cases(host, results[host], warnings)
        if (drift or {}).get(host, {}).get("unreachable"):
            # Rules that hold for the declaration of a host that could not be reached were not
            # checked on the host: never a passing case (its failures stay failures).
            cases = [dict(c, result="skipped", type=SKIP_NOT_CHECKED,
                          message="not checked: the host could not be reached (the rule holds for its declaration)")
                     if c["result"] == "passed" else c for c in cases]
        for change in (drift or {}).get(host, {}).get("changes", []):
            text = unified_diff(change.get("diff"))
            detail = "role: %s\naction: %s" % (change.get("role") or "-", change.get("action") or "-")
            detail += ("\n" + str(change["msg"]) if change.get("msg") else "") + ("\n" + text if text else "")
            cases.append(junit_case(junit_classname(host, "drift"), "drift: %s" % change.get("task"), "failure",
                                    "would change: %s" % change.get("task"), "drift", detail))
        host_drift = (drift or {}).get(host, {})
        for failure in host_drift.get("failures", []):
            # A check that could not run (unreachable host, failed task): a JUnit error, not a failure.
            cases.append(junit_case(junit_classname(host, "drift"), "drift check: %s" % failure.get("task"), "error",
                                    "%s: %s" % (failure.get("task"), failure.get("msg")),
                                    "unreachable" if host_drift.get("unreachable") else "check_failed",
                                    strict_json_dumps(failure, indent=None)))
        suites.append({"name": host, "cases": cases})
    if summary.get("versions"):   # the fleet's version matrix per hardware class (plugin_utils/versions.py)
        suites.append(fleet_versions.junit_suite(summary["versions"]))
    if not suites:
        suites.append({"name": "dlrack.node preflight (no hosts)", "cases": []})
    return suites, "dlrack.node preflight", properties


CONSOLE_MAX_LINES = 2000    # a fleet's console summary (an AWX job's stdout) stays this long at most


def _host_lines(host, res):
    bad = [f for f in res["findings"] if f["severity"] in ("error", "warning")]
    return ["%-5s %s" % (res["status"].upper(), host)] + [
        "      %-7s %-26s %s" % (f["severity"], f["rule"], f["message"]) for f in bad]


def summary_lines(results, summary, max_lines=CONSOLE_MAX_LINES):
    """Readable per-host summary for the terminal: every host in name order while it fits in
    ``max_lines``; past that, failing hosts first, then warnings, then passing hosts, until the
    budget is spent, and one closing line that counts what was left out (the reports hold all)."""
    out = ["dlrack.node preflight: %d host(s): %d pass, %d warn, %d fail"
           % (summary["hosts"], summary["pass"], summary["warn"], summary["fail"])]
    blocks = [(host, _host_lines(host, results[host])) for host in sorted(results)]
    if sum(len(b) for dummy, b in blocks) + 1 <= max_lines:
        for dummy, block in blocks:
            out.extend(block)
        return out
    rank = {"fail": 0, "warn": 1}
    left = {}
    for host, block in sorted(blocks, key=lambda hb: rank.get(results[hb[0]]["status"], 2)):
        if len(out) + len(block) < max_lines:
            out.extend(block)
        else:
            status = results[host]["status"]
            left[status] = left.get(status, 0) + 1
    out.append("... %d more host(s) not listed here (%s): the console shows %d lines at most; every host "
               "and finding is in the reports" % (sum(left.values()), ", ".join(
                   "%d %s" % (left[s], s) for s in ("fail", "warn", "pass") if left.get(s)), max_lines))
    return out


# ------------------------------------------------------------------------------ topology drawing

MAX_COLUMNS = 8          # sockets / NUMA nodes drawn; more are summarised as "+N more"
MAX_ROWS = 12            # GPU and disk lines per column; more are summarised as "+N more"
COL_MIN, COL_MAX, GAP = 230, 420, 16
ROW_H, ROW_STEP, TOP = 24, 30, 62

# Advance widths in em of DejaVu Sans / Verdana, the widest common sans-serif faces: an estimate
# from them is an upper bound for narrower faces (Liberation, Helvetica, Segoe UI, Roboto).
_NARROW = set("il.,:;'|!()[]{}ftrjI /")
_WIDE = set("mwMW@%")


@functools.lru_cache(maxsize=8192)
def text_width(text, size, bold=False):
    """Upper estimate of the rendered width in px of ``text`` at font ``size`` (px)."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.40
        elif ch in _WIDE:
            em += 1.0
        elif ch.isupper() or ch.isdigit():
            em += 0.74
        else:
            em += 0.64
    return em * size * (1.1 if bold else 1.0)


def fit_text(text, max_px, size, bold=False):
    """``text`` cut with an ellipsis so that text_width() fits ``max_px``."""
    text = xml_safe(text)
    if text_width(text, size, bold) <= max_px:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix that fits with the ellipsis
        mid = (lo + hi + 1) // 2
        if text_width(text[:mid] + u"\u2026", size, bold) <= max_px:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + u"\u2026"


def _int_or_none(value, lo=0, hi=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        return None
    return value


def _show(value):
    """A scalar for display; "?" for None and for integers too long to print (Python >= 3.11 refuses
    str() beyond 4300 digits)."""
    if value is None or (isinstance(value, int) and value.bit_length() > 1024):
        return "?"
    return value


def _gb(mb, unit="GB"):
    try:
        return "%d %s" % (round(float(mb) / 1024.0), unit) if mb else ""
    except (TypeError, ValueError, OverflowError):
        return "?"


def _tb(size_bytes):
    try:
        return "%.1f TB" % (float(size_bytes) / 1e12) if size_bytes else ""
    except (TypeError, ValueError, OverflowError):
        return "?"


def _cpu_count(cpus):
    """CPUs in a cpulist, without expanding absurd ranges (None when it cannot be told cheaply)."""
    if not isinstance(cpus, str) or any(len(n) > 5 or int(n) > 65535 for n in re.findall(r"\d+", cpus)):
        return None
    try:
        return len(parse_cpulist(cpus))
    except CpuListError:
        return None


def _topology_nodes(hw):
    """Step 1: the columns to draw - NUMA nodes, or the declared sockets - capped at MAX_COLUMNS."""
    cpu = hw.get("cpu") if isinstance(hw.get("cpu"), dict) else {}
    nodes = [n for n in (cpu.get("numa_nodes") or []) if isinstance(n, dict)]
    if nodes:
        declared, total = False, len(nodes)
    else:
        # Declared without NUMA detail: one box per socket, GPUs spread evenly (shown as such).
        total = _int_or_none(cpu.get("sockets"), 1, 2 ** 63) or 1
        declared = True
        nodes = [{"id": i} for i in range(min(total, MAX_COLUMNS))]
    return [dict(n, _declared=declared) for n in nodes[:MAX_COLUMNS]], total - min(total, MAX_COLUMNS)


def _place_devices(nodes, gpus, disks):
    """Step 2: which GPUs and disks go in which column (by numa_node; spread for declared sockets)."""
    ids = [n.get("id") for n in nodes]
    placed = {nid: ([], []) for nid in ids}
    loose = ([], [])
    declared = bool(nodes and nodes[0]["_declared"])
    for i, g in enumerate(gpus):
        nid = g.get("numa_node")
        if nid in placed and not declared:
            placed[nid][0].append(g)
        elif declared or len(ids) == 1:
            placed[ids[i * len(ids) // max(len(gpus), 1)]][0].append(g)
        else:
            loose[0].append(g)
    for d in disks:
        nid = d.get("numa_node")
        if nid in placed and not declared:
            placed[nid][1].append(d)
        elif len(ids) == 1:
            placed[ids[0]][1].append(d)
        else:
            loose[1].append(d)
    return placed, loose


def _group_disks(disks):
    """Identical disks (kind, model, size, not system) collapse into one line with a count."""
    groups = []
    for d in disks:
        key = (d.get("kind"), d.get("model"), d.get("size_bytes"), bool((d.get("in_use") or {}).get("system")))
        if groups and groups[-1][0] == key and not key[3]:
            groups[-1][1] += 1
        else:
            groups.append([key, 1, d])
    return [(count, d) for dummy, count, d in groups]


def _gpu_item(g, source):
    p = g.get("pcie") if isinstance(g.get("pcie"), dict) else {}
    w, wm = p.get("width"), p.get("width_max")
    bad = isinstance(w, int) and isinstance(wm, int) and w < wm
    right = "x%s/x%s" % (_show(w), _show(wm)) if w is not None else ("declared" if source == "declared" else "link n/a")
    model = str(g.get("model") or "").replace("NVIDIA ", "") or "%s (model unknown)" % (g.get("pci_bus_id") or "?")
    label = " ".join(s for s in ("GPU%s" % _show(g.get("index")), model, _gb(g.get("memory_mb"))) if s)
    return {"kind": "gpu", "label": label, "right": right, "bad": bad,
            "fill": "#ffebe9" if bad else "#dafbe1", "stroke": "#cf222e" if bad else "#2da44e"}


def _disk_item(count, d):
    kind = str(d.get("kind") or "?")
    name = d.get("model") if count > 1 else (d.get("name") or d.get("model") or "")
    label = " ".join(s for s in ("%d x" % count if count > 1 else "", kind.upper(), str(name or ""), _tb(d.get("size_bytes"))) if s)
    if (d.get("in_use") or {}).get("system"):
        label += " (system)"
    fill = {"nvme": "#ddf4ff", "ssd": "#fbefff", "hdd": "#fff8c5"}.get(kind, "#f6f8fa")
    return {"kind": "disk", "label": label, "right": "", "bad": False, "fill": fill, "stroke": "#8c959f"}


def _column_items(gpus, disks, source):
    """Step 3: the lines of one column, capped at MAX_ROWS with a "+N more" line."""
    items = [_gpu_item(g, source) for g in gpus if isinstance(g, dict)]
    items += [_disk_item(c, d) for c, d in _group_disks([d for d in disks if isinstance(d, dict)])]
    if len(items) > MAX_ROWS:
        more = len(items) - (MAX_ROWS - 1)
        items = items[:MAX_ROWS - 1] + [{"kind": "more", "label": "+%d more GPU/disk lines" % more, "right": "",
                                         "bad": False, "fill": "#ffffff", "stroke": "#8c959f"}]
    return items


def _node_titles(n, cpu):
    if n["_declared"]:
        model = str(cpu.get("model") or "CPU").replace("(R)", "").replace("(TM)", "")
        return "Socket %s" % _show(n.get("id")), "%s, declared" % model
    ncpus = _cpu_count(n.get("cpus"))
    mem = _gb(n.get("memory_mb")) or "no memory"
    if not ncpus:
        return "NUMA node %s" % _show(n.get("id")), ("CPU-less node, %s" % mem if ncpus == 0 else "CPUs ?, %s" % mem)
    cpus = str(n.get("cpus"))
    return "NUMA node %s" % _show(n.get("id")), "%d CPUs%s, %s" % (ncpus, " (%s)" % cpus if len(cpus) < 24 else "", mem)


def _layout(columns):
    """Step 4: sizes from text-width estimates; every text is cut to its box (full text kept
    for the <title> tooltip). Returns the drawing as data for topology.svg.j2."""
    x, height = GAP, TOP + max([len(c["items"]) for c in columns] + [1]) * ROW_STEP + 16
    out = []
    for c in columns:
        want = max([text_width(c["title"], 14, True), text_width(c["subtitle"], 11)]
                   + [text_width(i["label"], 12) + (text_width(i["right"], 11) + 12 if i["right"] else 0) + 12
                      for i in c["items"]]) + 24 + 20
        w = int(min(max(want, COL_MIN), COL_MAX))
        col = {"x": x, "w": w, "h": height - 16, "fill": c["fill"], "title": c["title"], "subtitle": c["subtitle"],
               "title_fit": fit_text(c["title"], w - 24, 14, True), "subtitle_fit": fit_text(c["subtitle"], w - 24, 11),
               "items": []}
        y = TOP
        for it in c["items"]:
            right = fit_text(it["right"], 80, 11) if it["right"] else ""
            avail = (w - 20) - 12 - (text_width(right, 11) + 10 if right else 0)
            col["items"].append(dict(it, x=x + 10, y=y, w=w - 20, label_fit=fit_text(it["label"], avail, 12), right_fit=right))
            y += ROW_STEP
        out.append(col)
        x += w + GAP
    return {"width": x, "height": height, "columns": out}


def topology(hw):
    """The topology drawing of one host as data (None without a hardware description): one column
    per NUMA node (or declared socket) with its GPUs (link width) and disks. Bounded whatever the
    declared numbers: at most MAX_COLUMNS columns of at most MAX_ROWS lines, the rest summarised."""
    if not isinstance(hw, dict) or not hw:
        return None
    cpu = hw.get("cpu") if isinstance(hw.get("cpu"), dict) else {}
    gpus = [g for g in (hw.get("gpus") or []) if isinstance(g, dict)]
    disks = [d for d in (hw.get("disks") or []) if isinstance(d, dict)]
    nodes, more_nodes = _topology_nodes(hw)
    placed, loose = _place_devices(nodes, gpus, disks)
    source = hw.get("source")
    columns = []
    fabric = platform.picture_items(hw)     # issue 32: PCIe switches and RDMA NICs per NUMA node
    for n in nodes:
        title, sub = _node_titles(n, cpu)
        columns.append({"title": title, "subtitle": sub, "fill": "#f6f8fa",
                        "items": _column_items(placed[n.get("id")][0], placed[n.get("id")][1], source)
                        + fabric.get(n.get("id"), [])})
    if more_nodes:
        what = "sockets" if nodes and nodes[0]["_declared"] else "NUMA nodes"
        columns.append({"title": "+%d more %s" % (more_nodes, what), "subtitle": "not drawn", "fill": "#ffffff", "items": []})
    # switches and NICs of no drawn NUMA node (unknown, or one the CPU section does not list) go with the loose GPUs
    drawn = set(n.get("id") for n in nodes)
    stray = [it for node, items in sorted(fabric.items(), key=lambda kv: str(kv[0]))
             if node not in drawn and (node is None or not more_nodes) for it in items][:platform.PICTURE_ROWS]
    if loose[0] or loose[1] or stray:
        title = "Storage" if not loose[0] and not stray else "No NUMA affinity"
        sub = "declared disks" if source == "declared" and not loose[0] and not stray else "numa_node -1 / unknown"
        columns.append({"title": title, "subtitle": sub, "fill": "#fff8f0",
                        "items": _column_items(loose[0], loose[1], source) + stray})
    return _layout(columns)


# ----------------------------------------------------------------------------------------- HTML

FAILURES_OPEN = 40       # finding groups listed open at the top; the rest in a <details> right below
MATRIX_HOSTS = 200       # up to this many hosts the fleet matrix has a row per host; beyond, a row per outcome pattern
SECTIONS_OPEN = 25       # host sections drawn open; the bodies of the rest wait in a closed <details>
NAMES_INLINE = 12        # a group's hosts are links in the row up to this many; beyond, behind "all N hosts"
SYMBOLS = {"fail": u"\u2717", "warn": "!", "pass": u"\u2713", "skip": u"\u2013"}
LEGEND = (("fail", "error: the rule fails"), ("warn", "warning"), ("pass", "holds"), ("skip", "not checked"))


def _breakable(rule):
    return rule.replace(".", u".\u200b").replace("_", u"_\u200b")


_FINDING_KEYS = ("rule", "severity", "observed", "required", "message", "remedy")


def _finding(f):
    return {k: f.get(k) for k in _FINDING_KEYS}


def _cells(res, rules):
    """The matrix row of one host: per rule (in column order) None or (outcome, symbol, tooltip)."""
    msgs = {}
    for f in res["findings"]:
        msgs.setdefault(f["rule"], []).append(f.get("message") or "")
    outcomes = res.get("rules", {})
    return [(outcomes[r], SYMBOLS.get(outcomes[r], "?"), "%s: %s" % (r, "; ".join(msgs.get(r, []))))
            if r in outcomes else None for r in rules]


def _without_name(text, name):
    """``text`` with ``name`` (a host's name) as a word of its own replaced by NUL: the key that
    groups a finding whose message names its host with the same finding on other hosts. Names
    of digits alone are left in (a host "1" and "RAM 1 GiB" are not the same thing)."""
    if not isinstance(text, str) or not name or name not in text or name.isdigit():
        return text
    return re.sub(r"(?<![\w.-])%s(?![\w-])" % re.escape(name), "\0", text)


def _host_view(host, res, rules=(), fragments=None, share=None):
    """What the page shows of one host: its matrix cells and its section (facts line, drawing,
    findings table). Sections are built once per distinct content (``sig``): the hosts of a rack
    of identical nodes with the same findings share one section, which lists their names. Hosts
    that share an evaluation (share_key) share all of it, computed for the first of them, where
    ``share`` (default fastpath.shares_reports())."""
    cache = fragments if fragments is not None else {}
    view = {"name": host, "status": res["status"], "symbol": SYMBOLS.get(res["status"], "")}
    name = host if isinstance(host, str) else str(host)
    key = ("view", _fragment_key(res, host, fastpath.shares_reports() if share is None else share))
    entry = cache.get(key)
    if entry is None:
        blob = _findings_blob(res)
        named = _names_itself(res, name, blob)
        entry = cache[key] = (_view_parts(res, rules, cache, name, named), named, blob)
    elif entry[1] or _names_itself(res, name, entry[2]):
        # The shared parts were made for another host, and a finding names one of the two (a host
        # "a" and "a VM" in a message): the matrix key and the section depend on the name, so this
        # host's are its own - what building its view alone gives (test_fastpath.py found it).
        entry = (_view_parts(res, rules, cache, name, True), True, None)
    view.update(entry[0])
    return view


def _findings_blob(res):
    """The findings as marshal writes them (every string as its UTF-8 bytes: what rules.mentions
    searches), made once per shared view; None where marshal cannot write them."""
    try:
        return marshal.dumps(res["findings"], 2)
    except (ValueError, TypeError):
        return None


def _names_itself(res, name, blob=None):
    """Whether a finding of ``res`` holds ``name`` (rules.mentions; ``blob``: _findings_blob(res)
    for a search in C without writing the findings again); usually no finding names its host."""
    if not name:
        return False
    if blob is None:
        return mentions(res["findings"], name)
    return name.encode("utf-8", "surrogatepass") in blob


def _view_parts(res, rules, cache, name, named):
    cells = tuple(_cells(res, rules))
    parts = {"cells_html": _fragment(cache, "cells.html.j2", key=cells, cells=cells)}
    # The matrix groups a big fleet's rows by this key: the cells with the host's own name left out.
    parts["cells_key"] = tuple(c and (c[0], c[1], _without_name(c[2], name)) for c in cells) if named else cells
    hw = res.get("hw") if isinstance(res.get("hw"), dict) else {}
    rows = tuple((f.get("severity"), f.get("rule"), "-" if f.get("observed") is None else _show(f["observed"]),
                  "-" if f.get("required") is None else _show(f["required"]), f.get("message"), f.get("remedy"))
                 for f in res["findings"])
    section = _section(hw, res, rows, cache)
    # Hosts whose sections would read the same share one, whatever else differs in their documents
    # (host names, serials): the rendered pieces are cached objects, so the key hashes cheaply.
    # Findings whose messages only differ by naming their own host read the same: one section (it
    # shows the first host's messages and says that each host's name its own).
    norm = tuple(tuple(_without_name(c, name) for c in r) for r in rows) if named else rows
    parts["names_itself"] = norm != rows
    parts["sig"] = (res["status"], section["facts"], section["provenance"], section["svg"],
                    norm if parts["names_itself"] else section["findings_table"])
    parts.update(section)
    return parts


def _section(hw, res, rows, cache):
    cpu = hw.get("cpu") if isinstance(hw.get("cpu"), dict) else {}
    mem = hw.get("memory") if isinstance(hw.get("memory"), dict) else {}
    gpus = [g for g in (hw.get("gpus") or []) if isinstance(g, dict)]
    facts = [hw.get("source") or "?", "profile %s" % res.get("profile"),
             "%s x %s, %s cores" % (_show(cpu.get("sockets")), cpu.get("model") or "?", _show(cpu.get("cores"))),
             "%s RAM (%s ECC)" % (_gb(mem.get("total_mb")) or "?", mem.get("ecc") or "?"),
             _gpu_fact(hw, gpus, res)]
    topo = topology(hw) if hw else None
    prov = ", ".join("%s (%s)" % kv for kv in sorted((res.get("provenance") or {}).items()))
    return {"facts": u" \u00b7 ".join(str(x) for x in facts), "provenance": prov,
            "svg": _fragment(cache, "topology.svg.j2", topo=topo),
            "findings_table": _fragment(cache, "findings.html.j2", key=rows, rows=rows)}


def _gpu_fact(hw, gpus, res):
    """The GPU count of a host's facts line. A merged report (report_merge: report.json keeps the
    findings, not the hardware document) or a declaration whose GPUs are unknown has no GPU list: the count
    is the gpu.present finding's, else unknown - never "0 GPU(s)" beside "8 GPU(s) found"."""
    if isinstance(hw.get("gpus"), list):
        return "%d GPU(s)%s" % (len(gpus), (" " + str(gpus[0].get("model") or "")) if gpus else "")
    seen = [f.get("observed") for f in res.get("findings") or () if isinstance(f, dict) and f.get("rule") == "gpu.present"
            and isinstance(f.get("observed"), int) and not isinstance(f.get("observed"), bool)]
    return "%d GPU(s)" % seen[0] if seen else "GPUs unknown"


def _fragment(cache, template, key=None, **context):
    """Render a template once per distinct context (or ``key``, when the caller has a cheaper
    identity than the context's JSON): identical hosts share one rendering."""
    key = (template, json.dumps(context, sort_keys=True, default=repr) if key is None else key)
    if key not in cache:
        cache[key] = Markup(render(template, **context))
    return cache[key]


def _sections(views):
    """Host sections in host order, one per distinct content: [{"view": first host's view,
    "same": [names of the other hosts with that content]}]."""
    out, by_sig = [], {}
    for v in views:
        if v["sig"] in by_sig:
            by_sig[v["sig"]]["same"].append(v["name"])
        else:
            by_sig[v["sig"]] = {"view": v, "same": []}
            out.append(by_sig[v["sig"]])
    for sec in out:
        sec["hostlist"] = compress_hostlist(sec["same"]) if len(sec["same"]) > NAMES_INLINE else ""
    return out


def _cut(text, limit):
    return text if len(text) <= limit else u"%s\u2026 (%d more characters)" % (text[:limit], len(text) - limit)


DIFF_MAX_LINES = 80     # lines of one change's unified diff in drift.html/drift.xml; drift.json keeps the whole diff
DIFF_MAX_LINE = 240     # characters of one diff line
# A header that is a temporary file of Ansible's (the rendered template's source, a module's
# scratch copy), not a path of the node an operator knows: the diff names the destination instead.
_TEMP_HEADER = re.compile(r"(^|/)(\.ansible/tmp/|ansible-tmp-|ansible-local-|ansible-moduletmp-)|^/tmp/tmp[\w-]{6,}")


def _diff_lines(value):
    """One side of a diff as lines: text as it is, a mapping (the file module's state) as
    ``key: value`` lines, nothing as no line."""
    if value is None:
        return []
    if isinstance(value, dict):
        return ["%s: %s" % (k, value[k] if isinstance(value[k], str) else json.dumps(value[k], sort_keys=True, default=str))
                for k in sorted(value, key=str)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return str(value).splitlines()


def _diff_header(header, other, side):
    header = None if header is None else str(header)
    if header and not _TEMP_HEADER.search(header):
        return header
    other = None if other is None else str(other)
    return other if other and not _TEMP_HEADER.search(other) else side


def unified_diff(diff, max_lines=DIFF_MAX_LINES, max_line=DIFF_MAX_LINE):
    """A would-be change's ``diff`` (what a module returned in check mode with --diff: a mapping
    or a list of them, with before/after and their headers, or apt's ``prepared`` text) as the
    unified diff an operator reads (difflib, 3 lines of context), as text: no temporary paths
    (a header under Ansible's tmp names the other side's path), each line cut at ``max_line``
    characters and the whole at ``max_lines`` lines with a closing line saying how many were
    left out. Escaping is the writer's: Jinja's autoescape in HTML, xml_safe in XML. "" when the
    module returned no diff."""
    parts = diff if isinstance(diff, (list, tuple)) else [diff]
    out = []
    for part in parts:
        if not part:
            continue
        if not isinstance(part, dict):
            out.extend(str(part).splitlines())
            continue
        if part.get("prepared"):
            out.extend(str(part["prepared"]).splitlines())
        if part.get("before") is None and part.get("after") is None:
            continue
        before, after = _diff_lines(part.get("before")), _diff_lines(part.get("after"))
        if before == after:
            continue
        out.extend(difflib.unified_diff(
            before, after, _diff_header(part.get("before_header"), part.get("after_header"), "before"),
            _diff_header(part.get("after_header"), part.get("before_header"), "after"), n=3, lineterm=""))
    if len(out) > max_lines:
        out = out[:max_lines] + [u"\u2026 %d more line(s) of this diff: drift.json has it whole" % (len(out) - max_lines)]
    return "\n".join(xml_safe(_cut(line, max_line)) for line in out)


def drift_counts(drift):
    """What a drift run found, counted once for the console, drift.html and the verdict alike:
    {"changes": would-be changes, "drifted": hosts with at least one (also when another of
    their checks failed), "unchecked": hosts unreachable or with a failed check, "failures":
    failed checks}."""
    drift = drift or {}
    return {"changes": sum(len(d.get("changes") or ()) for d in drift.values()),
            "drifted": sum(1 for d in drift.values() if d.get("changes")),
            "unchecked": sum(1 for d in drift.values() if d.get("unreachable") or d.get("failures")),
            "failures": sum(len(d.get("failures") or ()) for d in drift.values())}


def drift_headline(drift):
    """The one line that heads the drift run's console lines, with drift_counts()'s figures."""
    c = drift_counts(drift)
    return "dlrack.node drift: %d would-be change(s) on %d host(s) drifted, %d host(s) not checked (%d failed check(s)), of %d host(s)" % (
        c["changes"], c["drifted"], c["unchecked"], c["failures"], len(drift or {}))


def _group_findings(hosts, results, order):
    """The error and the warning findings, each grouped by (rule, message, remedy) with the host's
    own name taken out of the comparison (a message that names its host still groups with the same
    finding on other hosts): {"error"|"warning": [{"rule", "message", "remedy", "hosts", "hostlist",
    "varies", "rule_label"}]}, most hosts first. ``message``/``remedy`` are the first host's;
    ``varies`` says the others name themselves. One pass over the findings."""
    groups = {"error": {}, "warning": {}}
    for h in hosts:
        name = h if isinstance(h, str) else str(h)
        for f in results[h]["findings"]:
            by = groups.get(f["severity"])
            if by is None:
                continue
            msg, remedy = f.get("message") or "", f.get("remedy") or ""
            key = (f["rule"], _without_name(msg, name), _without_name(remedy, name))
            g = by.get(key)
            if g is None:
                g = by[key] = {"rule": f["rule"], "message": msg, "remedy": remedy, "hosts": [],
                               "varies": key[1] != msg or key[2] != remedy}
            if not g["hosts"] or g["hosts"][-1] != h:   # one finding per host and group
                g["hosts"].append(h)
    out = {}
    for severity, by in groups.items():
        out[severity] = sorted(by.values(), key=lambda g: (-len(g["hosts"]), order.get(g["rule"], len(order)),
                                                           g["rule"], g["message"]))
        for g in out[severity]:
            g["hostlist"] = compress_hostlist(g["hosts"])
            g["rule_label"] = _breakable(str(g["rule"]))   # a narrow screen breaks it after a dot or underscore
    return out


def _drift_views(views, drift):
    """A drift run's host status: a host that could not be checked (unreachable, or a check that
    failed) is `unchecked` and a host where a task would change `drifted`, whatever its hardware
    validation says; an unreachable host's matrix row shows why instead of outcomes (they come
    from its declaration, not from the host). Returns the views and the counts for the cards."""
    out, counts = [], drift_counts(drift)
    for v in views:
        d = drift.get(v["name"]) or {}
        state = "unchecked" if d.get("unreachable") or d.get("failures") else ("drifted" if d.get("changes") else None)
        if state is None:
            out.append(v)
            continue
        # a host where a task would change and another check failed is both: counted in both cards
        label = "drifted" if state == "drifted" else ("not checked, drifted" if d.get("changes") else "not checked")
        v = dict(v, status=state, label=label, symbol=SYMBOLS["fail"] if state == "drifted" else SYMBOLS["skip"])
        if d.get("unreachable"):
            msg = "; ".join(str(f.get("msg") or "") for f in d.get("failures") or []) or "unreachable"
            v["unchecked"] = _cut("unreachable: " + msg, 300)
        # ssh names the host it could not reach: the same outage on many hosts is one matrix row
        # and one section (which says that each host's message names that host), not one per host.
        v["unchecked_key"] = _without_name(v.get("unchecked"), v["name"] if isinstance(v["name"], str) else str(v["name"]))
        if v["unchecked_key"] != v.get("unchecked"):
            v["names_itself"] = True
        v["sig"] = (state, v["unchecked_key"]) + tuple(v["sig"][1:])
        out.append(v)
    return out, counts


def _matrix_rows(views):
    """The fleet matrix: a row per host up to MATRIX_HOSTS hosts; beyond, one row per pattern of
    status and rule outcomes (the cells, tooltips included, of the first host with it), naming
    its hosts in hostlist form, so 10,000 hosts of a few builds are a few rows, not 10,000."""
    if len(views) <= MATRIX_HOSTS:
        return [{"view": v, "hosts": None} for v in views]
    rows, by_key = [], {}
    for v in views:
        key = (v["status"], v["cells_key"], v.get("unchecked_key", v.get("unchecked")))
        if key not in by_key:
            by_key[key] = {"view": v, "hosts": []}
            rows.append(by_key[key])
        by_key[key]["hosts"].append(v["name"])
    for r in rows:
        r["hostlist"] = compress_hostlist(r["hosts"])
    return rows


def build_html(results, summary, drift=None, title=None, run_id=None):
    """report.html as text: html_page() rendered (what reports.html_writer writes)."""
    template, context = html_page(results, summary, drift, title, run_id)
    return render(template, **context)


def html_page(results, summary, drift=None, title=None, run_id=None):
    """(template, context) of the HTML page (report.html.j2): the headline and the failures grouped by rule and finding
    (a count and the hosts in Slurm hostlist form, every host a link behind it), the fleet matrix
    (host column pinned, failing rules first, a symbol in every cell and a legend; one row per
    outcome pattern beyond MATRIX_HOSTS hosts), drift, then one section per distinct host content
    with its topology drawing and findings (hosts with the same hardware, verdict and findings
    share one section that names them all, so a rack of identical nodes is one drawing, not
    hundreds; beyond SECTIONS_OPEN sections the bodies wait in closed <details>). With ``drift``
    the page is the drift report: titled so, a host that could not be checked is `not checked`
    and one that would change `drifted`, never `pass`, and the headline counts both."""
    counts = summary.get("rules") or {}
    seen = list(_ordered_rules({r: 1 for res in results.values() for r in res.get("rules", {})}))
    order = {r: i for i, r in enumerate(seen)}
    seen.sort(key=lambda r: (-(counts.get(r) or {}).get("fail", 0), -(counts.get(r) or {}).get("warn", 0), order[r]))
    desc = dict(RULES)
    hosts = sorted(results)
    fragments = {}
    share = fastpath.shares_reports()
    views = [dict(_host_view(h, results[h], seen, fragments, share), label=results[h]["status"], unchecked=None) for h in hosts]
    drift_counts = None
    if drift is not None:
        views, drift_counts = _drift_views(views, drift)
    if title is None:
        title = "dlrack.node drift report" if drift is not None else "dlrack.node pre-flight report"
    order = {r: i for i, r in enumerate(RULE_IDS)}
    grouped = _group_findings(hosts, results, order)
    failures, warnings = grouped["error"], grouped["warning"]
    shown = collections.Counter(v["status"] for v in views)
    if drift is None:
        cards = [(k, summary[k], k) for k in ("fail", "warn", "pass")]
    else:
        cards = [("fail" if drift_counts["changes"] else "pass", drift_counts["changes"], "would-be change(s)"),
                 ("fail" if drift_counts["drifted"] else "pass", drift_counts["drifted"], "drifted"),
                 ("fail" if drift_counts["unchecked"] else "pass", drift_counts["unchecked"], "not checked (error)")]
        cards += [(k, shown[k], k if k != "pass" else "pass (checked, no drift)") for k in ("fail", "warn", "pass")]
    # per host, then per role in the order the roles ran: one group row each, then its changes as unified diffs
    drift_rows = []
    for h in sorted(drift or {}):
        by_role = collections.OrderedDict()
        for c in drift[h].get("changes", []):
            by_role.setdefault(c.get("role") or "-", []).append(
                (c, unified_diff(c.get("diff")), xml_safe(_cut(str(c.get("msg") or ""), 500))))
        drift_rows.extend((h, role, changes) for role, changes in by_role.items())
    error_rows = [(h, f, _cut(("unreachable: " if drift[h].get("unreachable") else "") + str(f.get("msg") or ""), 2000))
                  for h in sorted(drift or {}) for f in drift[h].get("failures", [])]
    return "report.html.j2", dict(title=title, summary=summary, run_id=run_id or "", generated=now_iso(),
                                  rules=[{"id": r, "label": _breakable(r), "desc": desc.get(r, r), "fail": (counts.get(r) or {}).get("fail", 0),
                                          "warn": (counts.get(r) or {}).get("warn", 0)} for r in seen],
                                  rows=_matrix_rows(views), sections=_sections(views), failures=failures, cards=cards,
                                  finding_count=sum(1 for h in hosts for f in results[h]["findings"] if f["severity"] == "error"),
                                  warning_count=sum(1 for h in hosts for f in results[h]["findings"] if f["severity"] == "warning"),
                                  open_rows=FAILURES_OPEN, warnings=warnings, warning_hosts=len({h for g in warnings for h in g["hosts"]}), drift=drift,
                                  drift_counts=drift_counts, drift_rows=drift_rows, error_rows=error_rows, sections_open=SECTIONS_OPEN,
                                  names_inline=NAMES_INLINE, symbols=SYMBOLS, legend=LEGEND)


def report_set(results, summary, drift=None, meta=None, junit_warnings="skipped", run_id=None):
    """The pre-flight's report set (reports.ReportSet; with ``drift``, the drift check's): report.json's
    document, the JUnit suites and the HTML page, all three carrying the same run id."""
    run_id = run_id or new_run_id()
    return reports.ReportSet(
        "drift" if drift is not None else "preflight",
        doc=lambda: build_json(results, summary, drift, meta, run_id=run_id),
        junit=lambda: junit_suites(results, summary, drift, warnings=junit_warnings, run_id=run_id),
        page=lambda: html_page(results, summary, drift, run_id=run_id), json_line_per=("hosts", "drift"))


def write_reports(report_dir, results, summary, drift=None, meta=None, prefix="report", junit_warnings="skipped",
                  what="dlrack_report_dir", only=None):
    """Write PREFIX.<format> for every registered format (reports.WRITERS: json, xml, html; ``only``:
    some of them) into report_dir as one set (reports.write_set), all carrying the same run id;
    return {format: path}. ReportWriteError when the directory is empty, not a directory or not
    writable."""
    return reports.write_set(report_dir, report_set(results, summary, drift, meta, junit_warnings), prefix, only=only,
                             what=what)
