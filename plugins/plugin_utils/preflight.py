# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Glue between inventory variables and the rule engine, shared by the action plugin, the filter
and the benchmarks: which document to judge for a host, and the fleet run with its reports."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.dlrack.node.plugins.plugin_utils import reports
from ansible_collections.dlrack.node.plugins.plugin_utils.become import ADVICE, explain, is_become_error
from ansible_collections.dlrack.node.plugins.plugin_utils.report import (
    ReportWriteError, drift_headline, finite_copy, summary_lines, write_reports)
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_fleet, summarize
from ansible_collections.dlrack.node.plugins.plugin_utils import verdict
from ansible_collections.dlrack.node.plugins.plugin_utils import versions as fleet_versions
from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, console_line, setting_error

HOST_VARS = ("dlrack_hw", "dlrack_hw_gathered", "dlrack_profile", "dlrack_thresholds", "dlrack_severity",
             "dlrack_workload", "dlrack_external_archive", "dlrack_gather", "__dlrack_gather_error",
             "dlrack_versions")
GATHER_RULE = "host.gathered"

# The settings of a run and the variables behind each, the most specific first (the role's option,
# then the playbook-wide variable). Where a value may come from (issue 18.2): extra vars, the play
# or role, and the inventory - group_vars/host_vars; a host's own fail_on changes that host's
# verdict only, and the run-wide ones must read the same for every host (else the run would
# depend on which host is first). Never from a fact a module returned (see untrusted_facts).
FAIL_ON_VARS = ("preflight_fail_on", "dlrack_fail_on")
RUN_WIDE_VARS = {"report_dir": ("preflight_report_dir", "dlrack_report_dir"),
                 "junit_warnings": ("preflight_junit_warnings", "dlrack_junit_warnings")}
SETTING_VARS = (FAIL_ON_VARS + RUN_WIDE_VARS["report_dir"] + RUN_WIDE_VARS["junit_warnings"]
                + ("preflight_gather", "preflight_use_fact_cache", "dlrack_use_fact_cache", "dlrack_report_prefix",
                   "dlrack_drift_file", "preflight_print_summary", "dlrack_hosts", "__dlrack_verdict_deferred"))
# What no fact may set: the host's own inputs (its declaration, profile, thresholds...) and every
# setting. dlrack_hw_gathered is the one fact that is data from the node (hw_facts' document).
PROTECTED_FACTS = frozenset(v for v in HOST_VARS + SETTING_VARS if v not in ("dlrack_hw_gathered", "__dlrack_gather_error"))


_EXACT = (str, int, float, bool, type(None))
# The text of a str subclass as a plain str. Not str(value): ansible-core 2.16-2.18's
# AnsibleUnsafeText.__str__ returns the unsafe object itself (so that string operations keep the
# marking), which made fastpath._plain_raw recurse until RecursionError on every gathered host.
_text = str.__str__


def _plain(value):
    """Turn Ansible's lazy/templated containers and its tagged values (2.19: str, int, float,
    dict and list subclasses that carry their origin) into plain Python data of the builtin types
    themselves, which hosts with the same inputs can share an evaluation by (marshal, the C JSON
    encoder and the reports take them as they are)."""
    kind = type(value)
    if kind in _EXACT:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


# Reading a host's variables raw (hostvars.raw_get) and templating only what holds a template is
# the fleet fast path's (plugin_utils/fastpath.py: HostView, host_view, _plain_raw); the names
# stay importable from here for the callers that used them (run_settings, tests).
_FASTPATH_NAMES = frozenset(("HostView", "host_view", "_plain_raw", "_plain_raw_key", "_Template", "_PLAIN_TYPES"))


def __getattr__(name):
    if name in _FASTPATH_NAMES:
        from ansible_collections.dlrack.node.plugins.plugin_utils import fastpath
        return getattr(fastpath, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _same(value):
    return value


def _var(hostvars, name):
    """One host variable, templated once; None when it is not set. HostVarsVars templates on every
    access (a whole dlrack_hw document each time) while `in` does not, so look before reading."""
    return hostvars[name] if name in hostvars else None


def read_host(host, hostvars, gather=False, use_fact_cache=False, plain=False):
    """One read of a host's variables: (evaluate_host() keyword arguments, whether the host must be
    gathered with hw_facts first - see needs_gather). ``plain``: the values are plain data already
    (a fastpath.HostView's, or the action's read_variables()), so they are not copied again."""
    _plain_ = _same if plain or getattr(hostvars, "plain_data", False) else _plain
    declared = _plain_(_var(hostvars, "dlrack_hw"))
    gathered = _plain_(_var(hostvars, "dlrack_hw_gathered"))
    if gathered is not None:
        hw = gathered
        decl = declared if isinstance(declared, dict) and declared.get("source", "declared") == "declared" else None
    else:
        hw, decl = declared, None
    inputs = {
        "hw": hw,
        "declared": decl,
        "profile": _var(hostvars, "dlrack_profile") or "training",
        "thresholds": _plain_(_var(hostvars, "dlrack_thresholds")) or None,
        "severity": _plain_(_var(hostvars, "dlrack_severity")) or None,
        "workload": _plain_(_var(hostvars, "dlrack_workload")) or None,
        "external_archive": _var(hostvars, "dlrack_external_archive") or None,
    }
    # set by this run's gather play; a dlrack_hw_gathered still there is an older one (fact cache)
    why = _var(hostvars, "__dlrack_gather_error")
    if why:
        inputs["extra_findings"] = [gather_error_finding(host, why)]
    return inputs, _needs_gather(hostvars, declared, gathered, gather, use_fact_cache)


def gather_error_finding(host, why):
    """The error finding of a host the pre-flight's gather play could not gather (unreachable,
    hw_facts failed or ran past the task timeout; playbooks/preflight.yml records the reason in
    the fact __dlrack_gather_error). The reason is the node's or Ansible's message: data, cut."""
    why = str(why)
    why = why if len(why) <= 500 else why[:500] + "..."
    remedy = ("make the host reachable and responsive (a wedged GPU driver: reset or reboot it), "
              "or raise dlrack_task_timeout / the hw_facts limits, then run the pre-flight again")
    if is_become_error(why):   # a login user without sudo: say what to set (plugin_utils/become.py)
        why, remedy = explain(why), ADVICE
    return {"rule": GATHER_RULE, "severity": "error", "observed": why,
            "required": "the host answers hw_facts within the task timeout",
            "message": "host %s was not checked: %s" % (host, why), "remedy": remedy}


def collect_host_inputs(host, hostvars):
    """Build evaluate_host() keyword arguments from one host's variables."""
    return read_host(host, hostvars)[0]


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _needs_gather(hostvars, declared, gathered, gather, use_fact_cache):
    if not (declared is None or gather or _truthy(_var(hostvars, "dlrack_gather"))):
        return False
    cache_ok = use_fact_cache or _truthy(_var(hostvars, "dlrack_use_fact_cache"))
    return not (cache_ok and gathered is not None)


def needs_gather(hostvars, gather=False, use_fact_cache=False):
    """Whether a host needs hw_facts: nothing declared, or dlrack_gather set (per host or for the run),
    unless the fact cache already holds dlrack_hw_gathered and the cache may be used. Only checks
    whether the documents are there (`in` does not template; HostVarsVars templates on every read)."""
    declared = hostvars["dlrack_hw"] if "dlrack_hw" in hostvars else None
    gathered = hostvars["dlrack_hw_gathered"] if "dlrack_hw_gathered" in hostvars else None
    return _needs_gather(hostvars, declared, gathered, gather, use_fact_cache)


def hosts_to_gather(hostvars_by_host, gather=False, use_fact_cache=False):
    """The hosts of (host, hostvars) pairs that need hw_facts (see needs_gather)."""
    return [host for host, hv in hostvars_by_host if needs_gather(hv, gather, use_fact_cache)]


_FAILING = verdict.FAILING   # the fail_on values (plugin_utils/verdict.py)


def failed_hosts(results, fail_on, host_fail_on=None):
    """The hosts that fail per ``fail_on``, or per a host's own value in ``host_fail_on``; a host
    that could not be checked (GATHER_RULE: not reachable, hw_facts failed or timed out) fails
    whatever ``fail_on`` says: the gate fails closed (plugin_utils/verdict.py, docs/verdicts.md)."""
    statuses = {h: r["status"] for h, r in results.items()}
    closed = [h for h, r in results.items() if r["status"] == "fail" and any(
        f.get("rule") == GATHER_RULE for f in r.get("findings") or ())]
    return verdict.failed_hosts("preflight", statuses, fail_on, host_fail_on, closed=closed)


class DriftFileError(Exception):
    pass


verdict_host = verdict.verdict_host    # kept here for the callers and tests that import it from preflight


def verdict_message(failed, fail_on, where, host_fail_on=None):
    """The one message of a failing fleet's verdict (the verdict play fails with it), naming every
    failing host; "" when none fails. ``where``: the HTML report, or the report directory.
    ``host_fail_on``: the hosts with their own dlrack_fail_on. Host names are console text."""
    own = "; %d host(s) with their own" % len(host_fail_on) if host_fail_on else ""
    return verdict.verdict_message("pre-flight", [(None, failed)], "dlrack_fail_on=%s%s" % (fail_on, own), where)


class SettingsError(ValueError):
    """A run-wide setting that the hosts' variables do not give one value."""


def _own(values, names, untrusted):
    """(variable, value) of the first of ``names`` set in a host's own variables ``values`` (not
    by a fact: ``untrusted`` lists the ones its facts set), or (None, None)."""
    for name in names:
        value = values.get(name)
        if value is not None and name not in untrusted:
            return name, value
    return None, None


def host_fail_on(variables, untrusted, hosts, fail_on):
    """({host: its own fail_on}, {host: note}) for the hosts whose own variables (inventory, extra
    vars) set preflight_fail_on or dlrack_fail_on: the first mapping holds those that differ from
    ``fail_on``, the second an inventory.schema error note (see host_notes) for a value that is not
    error, warning or never - that host is judged per ``fail_on`` and fails on the note."""
    own, bad = {}, {}
    for host in hosts:
        name, value = _own(variables[host], FAIL_ON_VARS, untrusted.get(host, ()))
        if name is None:
            continue
        if not isinstance(value, str) or value not in _FAILING:
            bad[host] = ("inventory.schema", "error",
                         "host %s: %s is %s, not one of error, warning, never" % (host, name, _short(value)),
                         "set %s of %s to error, warning or never" % (name, host))
        elif value != fail_on:
            own[host] = value
    return own, bad


def own_values(variables, untrusted, hosts, option):
    """({value: (variable, a host)} of the hosts' own values for the run-wide ``option``, the
    number of hosts without one). Values compare as text (they are read untemplated)."""
    seen, missing = {}, 0
    for host in hosts:
        name, own = _own(variables[host], RUN_WIDE_VARS[option], untrusted.get(host, ()))
        if name is None:
            missing += 1
        else:
            seen.setdefault(str(own), (name, host))
    return seen, missing


def run_wide_conflict(option, seen, missing, fallback):
    """None, or one sentence when the hosts' own values ``seen`` (see own_values) and - for the
    ``missing`` hosts without one - ``fallback`` (the play's value) are not one value: the run
    would then use an accident of inventory order."""
    values = dict(seen)
    if missing:
        values.setdefault(str(fallback), (None, "the other %d host(s)" % missing))
    if len(values) <= 1:
        return None
    shown = "; ".join("%s on %s" % (val, host) if name is None else "%s=%s on %s" % (name, val, host)
                      for val, (name, host) in sorted(values.items())[:3])
    return console("%s is a run-wide setting, but the hosts' variables give it different values (%s): "
                   "set it once for the run - extra vars, the play's vars or group_vars/all"
                   % (RUN_WIDE_VARS[option][-1], shown))


def untrusted_facts(fact_keys):
    """{host: sorted protected variables its facts set} from {host: iterable of fact names}."""
    out = {}
    for host, keys in fact_keys.items():
        bad = sorted(k for k in keys if k in PROTECTED_FACTS)
        if bad:
            out[host] = bad
    return out


def host_notes(host, values, untrusted=()):
    """Findings the rule engine cannot see, for one host: ``values`` its variables (what the
    action read), ``untrusted`` the protected variables its facts set. Each is (rule, severity,
    message, remedy)."""
    notes = []
    if untrusted:
        notes.append(("inventory.schema", "error",
                      "host %s: its facts set %s: values a module on the node returned, and a node cannot "
                      "set its own inputs or the run's settings; its verdict cannot be trusted"
                      % (host, ", ".join(untrusted)),
                      "clear the host's cached facts (ansible-playbook --flush-cache) and look at the node: "
                      "a module there answered with facts it does not return"))
    for name in ("dlrack_external_archive", "dlrack_profile"):
        why = setting_error(name, values.get(name))
        if why:
            notes.append(("inventory.schema", "error", "host %s: %s" % (host, why),
                          "write %s of %s as plain text" % (name, host)))
    declared, gathered = values.get("dlrack_hw"), values.get("dlrack_hw_gathered")
    if gathered is None and isinstance(declared, dict) and declared.get("source") == "gathered":
        notes.append(("inventory.matches_declared", "warning",
                      "host %s: dlrack_hw in the inventory says source: gathered, but nothing was measured "
                      "on this run: it is judged as the inventory states it, unverified" % host,
                      "gather the host (-e dlrack_gather=true), or write the document as a declaration "
                      "(source: declared; playbooks/declare.yml does)"))
    workload = values.get("dlrack_workload")
    hw_workload = declared.get("workload") if isinstance(declared, dict) else None
    if isinstance(workload, dict) and isinstance(hw_workload, dict) and workload != hw_workload:
        # the rules judge the judged document's workload, else dlrack_workload (rules._workload)
        judged_hw = gathered if isinstance(gathered, dict) else declared
        used = "dlrack_hw.workload" if judged_hw.get("workload") is not None else "dlrack_workload"
        notes.append(("gpu.vram_for_workload", "warning",
                      "host %s: dlrack_workload %s and dlrack_hw.workload %s differ: the rules judge %s"
                      % (host, _short(workload), _short(hw_workload), used),
                      "keep one of them, or make them the same"))
    return notes


def _short(value, limit=120):
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}


def apply_notes(results, notes):
    """Add the ``notes`` ({host: [(rule, severity, message, remedy)]}) to the hosts' results as
    findings, first, and raise the rule's and the host's status to match. A note of severity
    ``info`` carries a fifth item, the rule's outcome (``pass`` or ``skip``), and raises nothing
    (site_state.py). Returns whether any host changed (then the summary must be counted again)."""
    changed = False
    for host, items in notes.items():
        res = results.get(host)
        if res is None or not items:
            continue
        res["findings"] = [{"rule": item[0], "severity": item[1], "observed": None, "required": None,
                            "message": item[2], "remedy": item[3]} for item in items] + list(res["findings"])
        rules = dict(res.get("rules") or {})
        for item in items:
            rule, sev = item[0], item[1]
            if sev == "info":
                rules.setdefault(rule, item[4] if len(item) > 4 else "pass")
                continue
            status = "fail" if sev == "error" else "warn"
            if _RANK.get(rules.get(rule), 0) < _RANK[status]:
                rules[rule] = status
            if _RANK.get(res["status"], 0) < _RANK[status]:
                res["status"] = status
        res["rules"] = rules
        changed = True
    return changed


def load_drift(path, hosts):
    """Read the dlrack.node.drift callback's file; every host gets a record (empty = no drift)."""
    try:
        with open(path) as fh:
            records = json.load(fh)
    except (IOError, OSError, ValueError) as exc:
        raise DriftFileError("cannot read the drift records %s (%s): enable the callback with "
                             "ANSIBLE_CALLBACKS_ENABLED=dlrack.node.drift or callbacks_enabled in ansible.cfg"
                             % (path, exc))
    out = {}
    for host in hosts:
        rec = records.get(host) or {}
        out[host] = drift_record(rec.get("changes", []), rec.get("failures", []), bool(rec.get("unreachable")))
    return out


def drift_verdict(failed, drift, fail_on, where):
    """(the hosts that fail a drift run, the one message naming them): the hosts whose drift
    record is ``drifted`` or ``error`` - whatever fail_on says - and those whose findings fail
    per fail_on (``failed``: failed_hosts). See plugin_utils/verdict.py."""
    statuses = {h: d.get("status") if d.get("status") in verdict.STATES["drift"] else drift_record(
        d.get("changes"), d.get("failures"), d.get("unreachable"))["status"] for h, d in drift.items()}
    failing = sorted(set(verdict.failed_hosts("drift", statuses, fail_on)) | set(failed))
    groups = [("drifted", sorted(h for h, s in statuses.items() if s == "drifted" or (s == "error" and drift[h].get("changes")))),
              ("could not be checked (status error)", sorted(h for h, s in statuses.items() if s == "error")),
              ("pre-flight findings", list(failed))]
    return failing, verdict.verdict_message("drift", groups, "dlrack_fail_on=%s for the findings" % fail_on, where)


def drift_record(changes, failures, unreachable):
    """A host's drift record with its status: `error` when it could not be reached or a check
    failed (the failures name the role, task and message; the checks of its other roles still
    ran), else `drifted` when a task would change, else `clean`."""
    status = "error" if unreachable or failures else ("drifted" if changes else "clean")
    return {"status": status, "changes": changes, "failures": failures, "unreachable": unreachable}


_LONG_DIGITS = re.compile(r"\d{309}")


def _plainly_finite(value):
    """Fast check (the C JSON encoder) that ``value`` holds no NaN/Infinity and no integer beyond
    2^1024 (no run of more than 308 digits); anything doubtful goes to the exact walk."""
    try:
        text = json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return False
    return _LONG_DIGITS.search(text) is None


def guard_non_finite(results):
    """Replace every NaN/Infinity (and integer beyond 2^1024) in the reported parts of the results
    (findings, provenance) by None and give that host an error finding naming where it was, so that
    no report carries such a number and none is silently dropped. (The hardware document itself is
    not written to JSON; the HTML drawing shows such values as "?".) Returns the hosts that had any."""
    hit = []
    if _plainly_finite([[r.get("findings"), r.get("provenance")] for r in results.values()]):
        return hit   # the usual case: one pass of the C encoder over the whole fleet
    for host in sorted(results):
        res, found = results[host], []
        if _plainly_finite([res.get("findings"), res.get("provenance")]):
            continue
        for key in ("findings", "provenance"):
            if res.get(key) is not None:
                res[key] = finite_copy(res[key], key, found)
        if found:
            hit.append(host)
            res["findings"].insert(0, {
                "rule": "inventory.schema", "severity": "error", "observed": "NaN/Infinity", "required": "a finite number",
                "message": "host %s: non-finite or absurdly large number (NaN, Infinity, > 2^1024) in %s; reported as null"
                           % (host, ", ".join(found[:5]) + (" and %d more" % (len(found) - 5) if len(found) > 5 else "")),
                "remedy": "fix the inventory values of %s that produce NaN or Infinity" % host})
            res.setdefault("rules", {})["inventory.schema"] = "fail"
            res["status"] = "fail"
    return hit


def _finish_evaluation(results):
    """What run_preflight applies to each evaluation: guard_non_finite, then drop_ungathered_schema."""
    guard_non_finite(results)
    drop_ungathered_schema(results)


def drop_ungathered_schema(results):
    """A host that could not be gathered (finding host.gathered: unreachable, hw_facts failed) and
    declares nothing has no document: its one error is that it was not checked, not also an
    ``inventory.schema`` "dlrack_hw: expected a hardware description, got None" (issue 30.7). The
    schema findings about the missing document are taken out; any other stays."""
    for res in results.values():
        if res.get("hw") is not None or not any(f.get("rule") == GATHER_RULE for f in res["findings"]):
            continue
        kept = [f for f in res["findings"] if not (f.get("rule") == "inventory.schema" and f.get("observed") is None
                                                   and "expected a hardware description" in str(f.get("message")))]
        if len(kept) == len(res["findings"]):
            continue
        res["findings"] = kept
        if not any(f.get("rule") == "inventory.schema" for f in kept):
            res["rules"] = dict((r, o) for r, o in (res.get("rules") or {}).items() if r != "inventory.schema")


def run_preflight(inputs, report_dir=None, fail_on="error", drift=None, prefix="report", junit_warnings="skipped",
                  report_dir_var="dlrack_report_dir", host_fail_on=None, notes=None, run_group=None, pins=None):
    """Validate ``inputs`` ({host: evaluate_host kwargs}), build the console summary and, unless
    ``report_dir`` is None, write the reports there. A report directory that is empty or cannot
    be written does not raise: the result carries ``report_error`` (naming the path and
    ``report_dir_var``) next to the complete summary, so the caller can print both and fail.
    ``host_fail_on``: {host: its own fail_on} (see host_fail_on()); ``notes``: findings the rules
    cannot see, per host (see host_notes()); ``run_group``: the id of the run a slice belongs to
    (AWX's workflow job id), in the summary so that report_merge refuses slices of different runs.
    Every console line has its control characters
    escaped (plugin_utils/safe_text.py): a host name or node string cannot move the cursor or
    forge a line."""
    # The guard runs once per distinct evaluation (hosts with identical inputs share one).
    results, summary = evaluate_fleet(inputs, finish=_finish_evaluation)
    if notes and apply_notes(results, notes):
        summary = summarize(results)
    # the fleet's versions per hardware class (issue 33): needs every host's document at once;
    # ``pins``: {host: dlrack_versions}. No host with versions: nothing changes.
    version_pins = fleet_versions.declared_pins(inputs)
    version_pins.update(pins or {})
    matrix = fleet_versions.apply(results, version_pins)
    if matrix:
        summary = dict(summarize(results), versions=matrix)
    out = {
        "summary": summary,
        "host_status": {h: r["status"] for h, r in results.items()},
        "failed_hosts": failed_hosts(results, fail_on, host_fail_on),
        "lines": summary_lines(results, summary) + fleet_versions.console_lines(matrix),
        "drift_hosts": sorted(h for h, d in (drift or {}).items() if d.get("changes")),
        "error_hosts": sorted(h for h, d in (drift or {}).items() if d.get("unreachable") or d.get("failures")),
    }
    if drift is not None:
        out["lines"].append(drift_headline(drift))   # the same counts as drift.html's headline
        for host in sorted(drift):
            for c in drift[host].get("changes", []):
                out["lines"].append("DRIFT %s: [%s] %s" % (host, c.get("role") or "-", c.get("task")))
            for f in drift[host].get("failures", []):
                out["lines"].append("ERROR %s: %s[%s] %s: %s" % (
                    host, "unreachable " if drift[host].get("unreachable") else "", f.get("role") or "-",
                    f.get("task"), f.get("msg")))
        if not out["drift_hosts"] and not out["error_hosts"]:
            out["lines"].append("no drift on %d host(s)" % len(drift))
    meta = {"fail_on": fail_on}
    if host_fail_on:
        meta["fail_on_hosts"] = dict(host_fail_on)
    if run_group is not None:
        meta["run_group"] = str(run_group)
    if report_dir is not None:
        try:
            out["report_paths"] = write_reports(report_dir, results, summary, drift=drift, meta=meta,
                                                prefix=prefix, junit_warnings=junit_warnings, what=report_dir_var)
            out["lines"].append(reports.paths_line(out["report_paths"]))
        except ReportWriteError as exc:
            out["report_error"] = str(exc)
            out["lines"].append("reports NOT written: %s" % exc)
    out["lines"] = [console_line(line) for line in out["lines"]]
    out["text"] = "\n".join(out["lines"])
    return out
