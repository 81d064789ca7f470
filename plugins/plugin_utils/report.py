# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports from rule-engine results: JSON (for pipelines), JUnit XML (for CI systems),
one self-contained HTML page (for people) and a plain-text summary (for the terminal).

Input everywhere: ``results`` = {host: evaluate_host() result} and ``summary`` = summarize().
``drift`` (optional) = {host: {"changes": [{"role", "task", "action", "diff"}], ...}} adds the
drift section used by the drift playbook.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import tempfile
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.dlrack.node.plugins.module_utils.cpulist import parse_cpulist
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import RULE_IDS, RULES


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _public(result):
    """The per-host JSON contract: status + findings (+ what we evaluated)."""
    out = {"status": result["status"], "profile": result.get("profile"),
           "findings": [{k: f.get(k) for k in ("rule", "severity", "observed", "required", "message", "remedy")}
                        for f in result["findings"]],
           "rules": result.get("rules", {})}
    if result.get("hw") is not None:
        out["source"] = result["hw"].get("source")
    if result.get("provenance"):
        out["provenance"] = result["provenance"]
    return out


def build_json(results, summary, drift=None, meta=None):
    doc = {"hosts": {h: _public(r) for h, r in sorted(results.items())},
           "summary": dict(summary, generated_at=_now(), **(meta or {}))}
    if drift is not None:
        doc["drift"] = drift
    return doc


def build_junit(results, summary, drift=None):
    """One testsuite per host, one testcase per rule evaluated; errors are failures,
    warnings are reported in system-out (JUnit has no warning state), skips are skipped."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    total = sum(len(r.get("rules", {})) for r in results.values())
    failures = sum(1 for r in results.values() for o in r.get("rules", {}).values() if o == "fail")
    lines.append('<testsuites name="dlrack.node preflight" tests="%d" failures="%d">' % (total, failures))
    for host in sorted(results):
        res = results[host]
        rules = res.get("rules", {})
        hf = sum(1 for o in rules.values() if o == "fail")
        hs = sum(1 for o in rules.values() if o == "skip")
        lines.append('  <testsuite name=%s tests="%d" failures="%d" skipped="%d">'
                     % (quoteattr(host), len(rules), hf, hs))
        for rule in [r for r in RULE_IDS if r in rules] + sorted(set(rules) - set(RULE_IDS)):
            outcome = rules[rule]
            fs = [f for f in res["findings"] if f["rule"] == rule]
            lines.append('    <testcase classname=%s name=%s>' % (quoteattr("preflight." + host), quoteattr(rule)))
            if outcome == "fail":
                errs = [f for f in fs if f["severity"] == "error"]
                msg = "; ".join(f["message"] for f in errs)
                body = "\n".join("observed: %s\nrequired: %s\nremedy: %s" % (f["observed"], f["required"], f["remedy"])
                                 for f in errs)
                lines.append('      <failure message=%s type="error">%s</failure>' % (quoteattr(msg), escape(body)))
            elif outcome == "skip":
                lines.append('      <skipped message=%s/>' % quoteattr("; ".join(f["message"] for f in fs)))
            text = "\n".join("[%s] %s" % (f["severity"], f["message"]) for f in fs)
            if text:
                lines.append('      <system-out>%s</system-out>' % escape(text))
            lines.append('    </testcase>')
        for change in (drift or {}).get(host, {}).get("changes", []):
            name = "drift: %s" % change.get("task")
            lines.append('    <testcase classname=%s name=%s>' % (quoteattr("drift." + host), quoteattr(name)))
            lines.append('      <failure message=%s type="drift">%s</failure>'
                         % (quoteattr("would change: %s" % change.get("task")), escape(json.dumps(change, default=str))))
            lines.append('    </testcase>')
        for failure in (drift or {}).get(host, {}).get("failures", []):
            # A check that could not run (unreachable host, failed task): a JUnit error, not a failure.
            name = "drift check: %s" % failure.get("task")
            lines.append('    <testcase classname=%s name=%s>' % (quoteattr("drift." + host), quoteattr(name)))
            lines.append('      <error message=%s type="%s">%s</error>'
                         % (quoteattr("%s: %s" % (failure.get("task"), failure.get("msg"))),
                            "unreachable" if (drift or {}).get(host, {}).get("unreachable") else "check_failed",
                            escape(json.dumps(failure, default=str))))
            lines.append('    </testcase>')
        lines.append('  </testsuite>')
    lines.append('</testsuites>')
    return "\n".join(lines) + "\n"


def summary_lines(results, summary):
    """Readable per-host summary for the terminal."""
    out = ["dlrack.node preflight: %d host(s): %d pass, %d warn, %d fail"
           % (summary["hosts"], summary["pass"], summary["warn"], summary["fail"])]
    for host in sorted(results):
        res = results[host]
        bad = [f for f in res["findings"] if f["severity"] in ("error", "warning")]
        out.append("%-5s %s" % (res["status"].upper(), host))
        for f in bad:
            out.append("      %-7s %-26s %s" % (f["severity"], f["rule"], f["message"]))
    return out


# ----------------------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#b8c0cc}main{padding:20px 28px;max-width:1400px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:18px}
.card{background:#fff;border-radius:8px;padding:12px 18px;min-width:110px;box-shadow:0 1px 2px #0002}
.card b{display:block;font-size:26px}.pass{color:#1a7f37}.warn{color:#9a6700}.fail{color:#cf222e}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.badge.pass{background:#1a7f37}.badge.warn{background:#bf8700}.badge.fail{background:#cf222e}.badge.skip{background:#8c959f}
.scroll{overflow-x:auto}td.h{white-space:nowrap}
table{border-collapse:collapse;background:#fff;width:100%;box-shadow:0 1px 2px #0002;border-radius:8px;overflow:hidden}
th,td{padding:6px 10px;border-bottom:1px solid #e6e8eb;text-align:left;vertical-align:top}
th{background:#eef0f3;font-weight:600;font-size:12px}
td.c{text-align:center}.cell{display:inline-block;width:18px;height:18px;border-radius:4px}
.cell.pass{background:#2da44e}.cell.warn{background:#d4a72c}.cell.fail{background:#cf222e}.cell.skip{background:#d0d7de}
section.host{background:#fff;border-radius:8px;margin:18px 0;padding:14px 18px;box-shadow:0 1px 2px #0002}
section.host h2{margin:0 0 8px;font-size:17px}.muted{color:#57606a}
.findings td{font-size:13px}.sev-error{color:#cf222e;font-weight:600}.sev-warning{color:#9a6700;font-weight:600}
.sev-info{color:#57606a}details summary{cursor:pointer;color:#0969da}
svg text{font-family:system-ui,sans-serif}
"""


def _group_disks(disks):
    """Identical disks (kind, model, size, not system) collapse into one line with a count."""
    groups = []
    for d in disks:
        key = (d.get("kind"), d.get("model"), d.get("size_bytes"), bool((d.get("in_use") or {}).get("system")))
        if groups and groups[-1][0] == key and not key[3]:
            groups[-1][1] += 1
        else:
            groups.append([key, 1, d])
    return [(count, d) for _, count, d in groups]


def _svg_topology(hw):
    """Sockets / NUMA nodes with the GPUs and disks on each, GPU link width, as inline SVG."""
    if not hw:
        return '<p class="muted">no hardware description</p>'
    cpu = hw.get("cpu") or {}
    nodes = [n for n in (cpu.get("numa_nodes") or [])]
    gpus = hw.get("gpus") or []
    disks = hw.get("disks") or []
    if not nodes:
        # Declared without NUMA detail: one box per socket, GPUs spread evenly (shown as such).
        sockets = cpu.get("sockets") or 1
        nodes = [{"id": i, "cpus": None, "memory_mb": None, "_declared": True} for i in range(sockets)]
    node_ids = [n["id"] for n in nodes]
    placed = {nid: [] for nid in node_ids}
    unplaced = []
    for i, g in enumerate(gpus):
        nid = g.get("numa_node")
        if nid in placed:
            placed[nid].append(g)
        elif nodes and nodes[0].get("_declared"):
            placed[node_ids[i * len(node_ids) // max(len(gpus), 1)]].append(g)
        elif len(node_ids) == 1:
            placed[node_ids[0]].append(g)
        else:
            unplaced.append(g)
    dplaced = {nid: [] for nid in node_ids}
    dunplaced = []
    for d in disks:
        nid = d.get("numa_node")
        (dplaced[nid] if nid in dplaced else dunplaced).append(d)
    if len(node_ids) == 1:
        dplaced[node_ids[0]].extend(dunplaced)
        dunplaced = []
    col_w, gap = 300, 16
    rows = max([len(placed[n]) + len(_group_disks(dplaced[n])) for n in node_ids]
               + [len(unplaced) + len(_group_disks(dunplaced)), 1])
    height = 70 + rows * 30 + 20
    cols = len(node_ids) + (1 if unplaced or dunplaced else 0)
    width = cols * (col_w + gap) + gap
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">'
             % (width, height, width, height)]

    def column(x, title, subtitle, items_gpu, items_disk, fill):
        parts.append('<rect x="%d" y="8" width="%d" height="%d" rx="8" fill="%s" stroke="#8c959f"/>'
                     % (x, col_w, height - 16, fill))
        parts.append('<text x="%d" y="30" font-size="14" font-weight="600">%s</text>' % (x + 12, escape(title)))
        parts.append('<text x="%d" y="48" font-size="11" fill="#57606a">%s</text>' % (x + 12, escape(subtitle)))
        y = 60
        for g in items_gpu:
            p = g.get("pcie") or {}
            w, wm = p.get("width"), p.get("width_max")
            bad = w is not None and wm is not None and w < wm
            link = "x%s/x%s" % (w, wm) if w is not None else ("declared" if hw.get("source") == "declared" else "link n/a")
            mem = "%d GB" % round(g["memory_mb"] / 1024.0) if g.get("memory_mb") else ""
            parts.append('<rect x="%d" y="%d" width="%d" height="24" rx="4" fill="%s" stroke="%s"/>'
                         % (x + 10, y, col_w - 20, "#ffebe9" if bad else "#dafbe1", "#cf222e" if bad else "#2da44e"))
            label = "GPU%s %s %s" % (g.get("index"), (g.get("model") or "").replace("NVIDIA ", "")
                                     or "%s (model unknown)" % (g.get("pci_bus_id") or "?"), mem)
            parts.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 16, y + 16, escape(label[:38])))
            parts.append('<text x="%d" y="%d" font-size="11" text-anchor="end" fill="%s">%s</text>'
                         % (x + col_w - 16, y + 16, "#cf222e" if bad else "#1a7f37", escape(link)))
            y += 30
        for count, d in _group_disks(items_disk):
            size = "%.1f TB" % (d["size_bytes"] / 1e12) if d.get("size_bytes") else ""
            kind = d.get("kind") or "?"
            fillc = {"nvme": "#ddf4ff", "ssd": "#fbefff", "hdd": "#fff8c5"}.get(kind, "#f6f8fa")
            parts.append('<rect x="%d" y="%d" width="%d" height="24" rx="4" fill="%s" stroke="#8c959f"/>'
                         % (x + 10, y, col_w - 20, fillc))
            name = d.get("model") if count > 1 else (d.get("name") or d.get("model") or "")
            label = "%s%s %s %s" % ("%d x " % count if count > 1 else "", kind.upper(), name or "", size)
            if (d.get("in_use") or {}).get("system"):
                label += " (system)"
            parts.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 16, y + 16, escape(label[:46])))
            y += 30

    x = gap
    for n in nodes:
        if n.get("_declared"):
            title = "Socket %d" % n["id"]
            sub = "%s, declared" % (cpu.get("model") or "CPU").replace("(R)", "").replace("(TM)", "")
        else:
            ncpus = len(parse_cpulist(n.get("cpus") or ""))
            mem = "%d GB" % round(n["memory_mb"] / 1024.0) if n.get("memory_mb") else "no memory"
            title = "NUMA node %d" % n["id"]
            sub = "%d CPUs %s, %s" % (ncpus, ("(" + n["cpus"] + ")") if ncpus and len(n["cpus"]) < 24 else "", mem)
            if not ncpus:
                sub = "CPU-less node, %s" % mem
        column(x, title, sub, placed[n["id"]], dplaced[n["id"]], "#f6f8fa")
        x += col_w + gap
    if unplaced or dunplaced:
        title = "Storage" if not unplaced else "No NUMA affinity"
        sub = "declared disks" if hw.get("source") == "declared" and not unplaced else "numa_node -1 / unknown"
        column(x, title, sub, unplaced, dunplaced, "#fff8f0")
    parts.append("</svg>")
    return "".join(parts)


def _fmt(value):
    if value is None:
        return '<span class="muted">-</span>'
    return escape(str(value))


def build_html(results, summary, drift=None, title="dlrack.node pre-flight report"):
    rules_seen = [r for r in RULE_IDS if any(r in res.get("rules", {}) for res in results.values())]
    desc = dict(RULES)
    h = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
         "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">",
         "<title>%s</title><style>%s</style></head><body>" % (escape(title), _CSS),
         "<header><h1>%s</h1><p>%d hosts &middot; generated %s</p></header><main>"
         % (escape(title), summary["hosts"], escape(_now()))]
    h.append('<div class="cards">')
    for key in ("pass", "warn", "fail"):
        h.append('<div class="card"><b class="%s">%d</b>%s</div>' % (key, summary[key], key))
    if drift is not None:
        nd = sum(1 for d in drift.values() if d.get("changes"))
        h.append('<div class="card"><b class="%s">%d</b>drifted</div>' % ("fail" if nd else "pass", nd))
        ne = sum(1 for d in drift.values() if d.get("unreachable") or d.get("failures"))
        h.append('<div class="card"><b class="%s">%d</b>not checked (error)</div>' % ("fail" if ne else "pass", ne))
    h.append("</div>")
    # Fleet matrix: hosts x rules.
    h.append('<h2>Fleet</h2><div class="scroll"><table><tr><th>host</th><th>status</th>')
    for r in rules_seen:
        h.append('<th title=%s>%s</th>' % (quoteattr(desc.get(r, r)), escape(r.replace(".", ".\u200b"))))
    h.append("</tr>")
    for host in sorted(results):
        res = results[host]
        h.append('<tr><td class="h"><a href="#host-%s">%s</a></td><td><span class="badge %s">%s</span></td>'
                 % (escape(host), escape(host), res["status"], res["status"]))
        for r in rules_seen:
            o = res.get("rules", {}).get(r)
            msgs = "; ".join(f["message"] for f in res["findings"] if f["rule"] == r)
            h.append('<td class="c">%s</td>' % ('<span class="cell %s" title=%s></span>' % (o, quoteattr(msgs)) if o else ""))
        h.append("</tr>")
    h.append("</table></div>")
    if drift is not None:
        h.append("<h2>Drift</h2><table><tr><th>host</th><th>role</th><th>task that would change</th><th>diff</th></tr>")
        any_drift = False
        for host in sorted(drift):
            for c in drift[host].get("changes", []):
                any_drift = True
                h.append("<tr><td>%s</td><td>%s</td><td>%s</td><td><pre>%s</pre></td></tr>"
                         % (escape(host), _fmt(c.get("role")), _fmt(c.get("task")),
                            escape(str(c.get("diff") or ""))[:2000]))
        for host in sorted(drift):
            for f in drift[host].get("failures", []):
                any_drift = True
                h.append('<tr><td>%s</td><td>%s</td><td><span class="badge fail">error</span> %s</td><td><pre>%s</pre></td></tr>'
                         % (escape(host), _fmt(f.get("role")), _fmt(f.get("task")),
                            escape(("unreachable: " if drift[host].get("unreachable") else "") + str(f.get("msg") or ""))[:2000]))
        if not any_drift:
            h.append('<tr><td colspan="4" class="pass">no drift: every managed setting is as the roles leave it</td></tr>')
        h.append("</table>")
    # Per host.
    for host in sorted(results):
        res = results[host]
        hw = res.get("hw") or {}
        cpu = hw.get("cpu") or {}
        mem = hw.get("memory") or {}
        gpus = hw.get("gpus") or []
        h.append('<section class="host" id="host-%s"><h2>%s <span class="badge %s">%s</span></h2>'
                 % (escape(host), escape(host), res["status"], res["status"]))
        h.append('<p class="muted">%s &middot; profile %s &middot; %s x %s, %s cores &middot; %s RAM (%s ECC) &middot; %d GPU(s)%s</p>'
                 % (escape(hw.get("source") or "?"), escape(str(res.get("profile"))), _fmt(cpu.get("sockets")),
                    _fmt(cpu.get("model")), _fmt(cpu.get("cores")),
                    "%d GB" % round(mem["total_mb"] / 1024.0) if mem.get("total_mb") else "?", _fmt(mem.get("ecc")),
                    len(gpus), (" " + escape(gpus[0].get("model") or "")) if gpus else ""))
        h.append(_svg_topology(hw))
        h.append('<table class="findings"><tr><th>severity</th><th>rule</th><th>observed</th><th>required</th>'
                 '<th>message</th><th>remedy</th></tr>')
        for f in res["findings"]:
            h.append('<tr><td class="sev-%s">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                     % (f["severity"], f["severity"], escape(f["rule"]), _fmt(f["observed"]), _fmt(f["required"]),
                        escape(f["message"]), _fmt(f.get("remedy"))))
        h.append("</table>")
        if res.get("provenance"):
            h.append('<p class="muted">figures from the catalogue: %s</p>'
                     % escape(", ".join("%s (%s)" % kv for kv in sorted(res["provenance"].items()))))
        h.append("</section>")
    h.append("</main></body></html>")
    return "\n".join(h)


def _atomic_write(path, text):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_reports(report_dir, results, summary, drift=None, meta=None, prefix="report"):
    """Write report.json, report.xml and report.html into report_dir; return their paths."""
    os.makedirs(report_dir, exist_ok=True)
    paths = {}
    doc = build_json(results, summary, drift, meta)
    for ext, text in (("json", json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n"),
                      ("xml", build_junit(results, summary, drift)),
                      ("html", build_html(results, summary, drift))):
        path = os.path.join(report_dir, "%s.%s" % (prefix, ext))
        _atomic_write(path, text)
        paths[ext] = path
    return paths
