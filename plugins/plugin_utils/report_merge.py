# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleets run in slices (AWX/AAP job slicing, docs/awx.md): the per-slice verdict a pre-flight
publishes in the run's stats, and the merge of the slices' report.json files into the one set of
reports an unsliced run writes.

AWX hands a workflow's next node the artifacts of the slice jobs merged with a shallow
``dict.update`` in finish order (awx/main/models/workflow.py, WorkflowJob.get_effective_artifacts):
a key that every slice publishes (dlrack_preflight_failed_hosts) holds only the last slice's value.
Each slice therefore also publishes its verdict under a key of its own, derived from its host set
(slices are disjoint: awx/main/models/inventory.py get_sliced_hosts deals hosts[n-1::count]), so
the merged artifacts hold one entry per slice and the fleet verdict is their union. AWX passes no
slice number to the playbook (awx_meta_vars has none), hence the digest of the host names."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import failed_hosts
from ansible_collections.dlrack.node.plugins.plugin_utils.report import write_reports
from ansible_collections.dlrack.node.plugins.plugin_utils.reports import paths_line
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import SEVERITIES, summarize
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console

SLICE_PREFIX = "dlrack_preflight_slice_"
STATUSES = ("pass", "warn", "fail")
OUTCOMES = ("pass", "warn", "fail", "skip")          # per rule (rules.summarize counts these)
FAIL_ON = ("never", "error", "warning")              # dlrack_fail_on (preflight.failed_hosts)
# summary keys that are per input (counts, recomputed; the run's id and time): every other key
# (fail_on, and any version a report carries) must be the same in every input
_PER_INPUT = frozenset(("hosts", "pass", "warn", "fail", "rules", "status", "generated_at", "run_id", "fail_on_hosts"))
MAX_INPUT_BYTES = 1 << 30   # one report.json of a 10,000-host slice is a few tens of MB


class MergeError(ValueError):
    """One sentence naming the input and what is wrong with it."""


def slice_key(hosts):
    """``dlrack_preflight_slice_<16 hex>``: the digest of the slice's sorted host names. Disjoint
    slices get distinct keys; the same slice run again gets the same key (it replaces itself)."""
    digest = hashlib.sha256("\n".join(sorted(str(h) for h in hosts)).encode("utf-8", "surrogateescape"))
    return SLICE_PREFIX + digest.hexdigest()[:16]


def slice_artifact(hosts, host_status, failed, fail_on):
    """(key, value) of one slice's verdict for the run's stats. The value holds counts and the
    failing host names only (no findings: those are in the reports), so it stays bounded by the
    slice's host count: ~20 bytes a failing host."""
    counts = dict((s, 0) for s in STATUSES)
    for host in hosts:
        status = host_status.get(host)
        if status in counts:
            counts[status] += 1
    value = {"hosts": len(hosts), "failed_hosts": list(failed), "fail_on": fail_on}
    value.update(counts)
    return slice_key(hosts), value


def fleet_verdict(artifacts):
    """The fleet's verdict from merged artifacts (AWX's get_effective_artifacts, or one run's
    stats): {"slices", "hosts", "pass", "warn", "fail", "failed_hosts", "status"}."""
    out = {"slices": 0, "hosts": 0, "failed_hosts": []}
    out.update((s, 0) for s in STATUSES)
    failing = set()
    for key in sorted(artifacts or {}):
        value = artifacts[key]
        if not key.startswith(SLICE_PREFIX) or not isinstance(value, dict):
            continue
        out["slices"] += 1
        for name in ("hosts",) + STATUSES:
            if isinstance(value.get(name), int):
                out[name] += value[name]
        failing.update(h for h in value.get("failed_hosts") or () if isinstance(h, str))
    out["failed_hosts"] = sorted(failing)
    out["status"] = "fail" if failing else "pass"
    return out


def load_report(path):
    """The document of one report.json; MergeError naming the path when it is no such report: not a
    regular file (a FIFO, a device, a directory - opened without blocking, never read), larger than
    MAX_INPUT_BYTES, not JSON, or without hosts and summary."""
    shown = console(path)
    fd = None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MergeError("report merge input %s is not a regular file: give the path of a slice's report.json" % shown)
        if info.st_size > MAX_INPUT_BYTES:
            raise MergeError("report merge input %s is %d bytes, more than the %d a report.json can be: "
                             "give the report.json of each slice" % (shown, info.st_size, MAX_INPUT_BYTES))
        with os.fdopen(fd, "rb") as handle:
            fd = None
            data = handle.read(MAX_INPUT_BYTES + 1)
        if len(data) > MAX_INPUT_BYTES:
            raise MergeError("report merge input %s grew past %d bytes while read: give the report.json of each slice"
                             % (shown, MAX_INPUT_BYTES))
        doc = json.loads(data.decode("utf-8"))
    except MergeError:
        raise
    except (OSError, IOError) as exc:
        raise MergeError("report merge input %s cannot be read (%s): give the path of a slice's report.json"
                         % (shown, console(exc.strerror or exc)))
    except ValueError as exc:
        raise MergeError("report merge input %s is not JSON (%s): give the report.json a pre-flight wrote"
                         % (shown, console(exc)))
    finally:
        if fd is not None:
            os.close(fd)
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), dict) or not isinstance(doc.get("summary"), dict):
        raise MergeError("report merge input %s is no pre-flight report.json (no hosts and summary): give the "
                         "report.json a pre-flight wrote" % shown)
    return doc


_STATUS_OF = {"error": "fail", "warning": "warn"}
_RANK = {"pass": 0, "warn": 1, "fail": 2}


def _consistent(entry):
    """Whether a host's status is the one its findings give (rules._finish: fail with an error
    finding, warn with a warning and no error, else pass) and each finding's rule has an outcome:
    a status edited by hand no longer matches."""
    status = "pass"
    for f in entry["findings"]:
        found = _STATUS_OF.get(f["severity"], "pass")
        if _RANK[found] > _RANK[status]:
            status = found
    rules = entry.get("rules", {})
    return status == entry["status"] and (not rules or all(f["rule"] in rules for f in entry["findings"]))


def _well_formed(entry):
    """Whether a host's entry has the shapes the report writers read: a status, findings with a
    rule, a severity and a message, rule outcomes, a profile name and provenance pairs."""
    if not isinstance(entry, dict) or entry.get("status") not in STATUSES or not isinstance(entry.get("findings"), list):
        return False
    if not all(isinstance(f, dict) and isinstance(f.get("rule"), str) and f.get("severity") in SEVERITIES
               and isinstance(f.get("message"), str) for f in entry["findings"]):
        return False
    rules = entry.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(k, str) and v in OUTCOMES for k, v in rules.items()):
        return False
    prov = entry.get("provenance")
    return (entry.get("profile") is None or isinstance(entry["profile"], str)) and (
        not prov or isinstance(prov, dict) and all(isinstance(v, str) for v in prov.values()))


def _result(host, entry, path):
    if not _well_formed(entry):
        raise MergeError("report merge input %s: host %s has no status, findings and rules of a pre-flight "
                         "report: give the report.json as the pre-flight wrote it" % (console(path), console(host)))
    if not _consistent(entry):
        raise MergeError("report merge input %s: host %s has the status %s but findings that give another: the file "
                         "was edited, give the report.json as the pre-flight wrote it"
                         % (console(path), console(host), console(entry["status"])))
    res = {"status": entry["status"], "profile": entry.get("profile"), "findings": entry["findings"],
           "rules": entry.get("rules", {})}
    if "source" in entry:
        # report.json keeps the source of the hardware document, not the document itself
        res["hw"] = {"source": entry["source"]}
    if entry.get("provenance"):
        res["provenance"] = entry["provenance"]
    return res


def merge_reports(inputs):
    """Merge [(path, report.json document)] into what run_preflight had for the whole fleet:
    {"results", "summary", "drift", "meta"}. Refuses (MergeError, one sentence) inputs that
    overlap (a host in two of them), disagree on the run's settings (fail_on, a host's own
    fail_on, any version key of the summary), mix drift and pre-flight reports, or whose counts do
    not match their hosts (a cut or edited file)."""
    if not inputs:
        raise MergeError("dlrack_report_merge_inputs is empty: give the report.json of every slice")
    results, origin, drift, own_fail_on = {}, {}, None, {}
    settings = None
    shared = {}
    for path, doc in inputs:
        summary = doc["summary"]
        hosts = doc["hosts"]
        counts = dict((s, 0) for s in STATUSES)
        for entry in hosts.values():
            if isinstance(entry, dict) and entry.get("status") in counts:
                counts[entry["status"]] += 1
        if summary.get("hosts") != len(hosts) or any(summary.get(s) != counts[s] for s in STATUSES):
            said = "/".join(console(summary.get(k)) for k in ("hosts",) + STATUSES)
            held = "/".join(str(n) for n in [len(hosts)] + [counts[s] for s in STATUSES])
            raise MergeError("report merge input %s counts %s host(s) (all/pass/warn/fail) in its summary but holds "
                             "%s: the file is cut or edited, give the report.json as the pre-flight wrote it"
                             % (console(path), said, held))
        mine = dict((k, v) for k, v in summary.items() if k not in _PER_INPUT)
        if settings is None:
            settings, first = mine, path
        elif mine != settings:
            differ = sorted(k for k in set(mine) | set(settings) if mine.get(k) != settings.get(k))
            raise MergeError("report merge inputs %s and %s disagree on %s (%s vs %s): merge only the slices of "
                             "one run" % (console(first), console(path), ", ".join(console(k) for k in differ),
                                          console(settings.get(differ[0])), console(mine.get(differ[0]))))
        if ("drift" in doc) != (drift is not None) and origin:
            raise MergeError("report merge input %s is %s report and %s is not: merge only the slices of one run"
                             % (console(path), "a drift" if "drift" in doc else "no drift", console(first)))
        if "drift" in doc:
            drift = dict(drift or {})
            if not isinstance(doc["drift"], dict):
                raise MergeError("report merge input %s has a drift section that is no mapping: give the "
                                 "report.json as the pre-flight wrote it" % console(path))
            drift.update(doc["drift"])
        own = summary.get("fail_on_hosts") or {}
        if summary.get("fail_on", "error") not in FAIL_ON or not isinstance(own, dict) or any(
                v not in FAIL_ON for v in own.values()):
            raise MergeError("report merge input %s: its summary's fail_on / fail_on_hosts are not %s: give the "
                             "report.json as the pre-flight wrote it" % (console(path), "/".join(FAIL_ON)))
        foreign = sorted(h for h in own if h not in hosts)
        if foreign:
            raise MergeError("report merge input %s: its summary's fail_on_hosts names %s, which the slice does not hold: "
                             "a slice sets only its own hosts' fail_on; give the report.json as the pre-flight wrote it"
                             % (console(path), ", ".join(console(h) for h in foreign[:5])))
        own_fail_on.update(own)
        for host in sorted(hosts):
            if host in results:
                same = "the same result" if _public_equal(hosts[host], origin[host][1]) else "different results"
                raise MergeError("host %s is in report merge inputs %s and %s with %s: each host must come from "
                                 "exactly one slice" % (console(host), console(origin[host][0]), console(path), same))
            key = json.dumps(hosts[host], sort_keys=True)
            if key not in shared:
                # hosts with equal entries share one result, as in the run (the writers render it once)
                shared[key] = _result(host, hosts[host], path)
            results[host] = shared[key]
            origin[host] = (path, hosts[host])
    meta = {"fail_on": settings.get("fail_on", "error")}
    if own_fail_on:
        meta["fail_on_hosts"] = own_fail_on
    return {"results": results, "summary": summarize(results), "drift": drift, "meta": meta}


def _public_equal(a, b):
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def merge_report_files(paths, report_dir, prefix="report", junit_warnings="skipped", what="dlrack_report_dir"):
    """Read the slices' report.json files, merge them and write PREFIX.<format> into ``report_dir``
    with the reports package's writers (every registered format, as the pre-flight writes them).
    Returns {"hosts", "summary", "failed_hosts", "report_paths", "lines"}; MergeError for bad
    inputs, ReportWriteError for the directory."""
    merged = merge_reports([(p, load_report(p)) for p in paths])
    meta = merged["meta"]
    paths_out = write_reports(report_dir, merged["results"], merged["summary"], drift=merged["drift"], meta=meta,
                              prefix=prefix, junit_warnings=junit_warnings, what=what)
    failed = failed_hosts(merged["results"], meta["fail_on"], meta.get("fail_on_hosts"))
    s = merged["summary"]
    lines = ["dlrack.node report merge: %d input(s), %d host(s): %d pass, %d warn, %d fail"
             % (len(paths), s["hosts"], s["pass"], s["warn"], s["fail"]),
             paths_line(paths_out)]
    return {"hosts": s["hosts"], "summary": s, "failed_hosts": failed, "report_paths": paths_out,
            "fail_on": meta["fail_on"], "fail_on_hosts": meta.get("fail_on_hosts") or {},
            "lines": [console(line) for line in lines]}
