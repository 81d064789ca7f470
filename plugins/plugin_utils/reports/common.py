# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text every report writer of the collection is made of: strict JSON, XML-safe text, a
JUnit writer from plain data, and the Jinja2 environment with the report templates
(reports/templates). Used by the registered writers (reports/__init__.py) and the report layouts
(plugin_utils/report.py: pre-flight and drift; plugin_utils/acceptance.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import functools
import json
import math
import os
import re
import uuid
from xml.sax.saxutils import escape, quoteattr

from markupsafe import Markup  # Jinja2's own dependency: on every Ansible controller

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def now_iso():
    """The current UTC time, ISO 8601 to the second."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def new_run_id():
    """A fresh id for one run; every file of the run carries it, so a reader can tell that
    report.json, report.xml and report.html come from the same run."""
    return "%s-%s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"), uuid.uuid4().hex[:12])


def finite_copy(value, path="", found=None):
    """Copy of ``value`` (dicts, lists, scalars) in which every non-finite float (NaN, +-Infinity)
    and every integer beyond any float's range (more than 1024 bits: Python cannot even print one
    of 4300 digits) is None. ``found`` (a list), when given, receives the dotted path of each."""
    if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
        if math.isfinite(value) if isinstance(value, float) else value.bit_length() <= 1024:
            return value
        if found is not None:
            found.append(path or "(value)")
        return None
    if isinstance(value, dict):
        return {k: finite_copy(v, "%s.%s" % (path, k) if path else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_copy(v, "%s[%d]" % (path, i), found) for i, v in enumerate(value)]
    return value


_LONG_DIGITS = re.compile(r"\d{309}")


def _default(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def strict_json_dumps(doc, indent=2, sort_keys=False):
    """JSON text that every parser accepts: non-finite floats and absurd integers become null (never ``NaN``),
    objects JSON cannot express are written with str(), output is ASCII (lone surrogates are
    escaped, never written raw). Raises nothing for odd values; allow_nan=False guards the rest."""
    try:  # the C encoder first; the exact walk only when a number needs replacing
        text = json.dumps(doc, indent=indent, sort_keys=sort_keys, allow_nan=False, ensure_ascii=True, default=_default)
        if _LONG_DIGITS.search(text) is None:
            return text + "\n"
    except ValueError:
        pass
    return json.dumps(finite_copy(doc), indent=indent, sort_keys=sort_keys, allow_nan=False,
                      ensure_ascii=True, default=_default) + "\n"


def _json_key(key):
    return json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=True)


def _entry_text(texts, value):
    # keyed by the object itself (id), which the document keeps alive while it is written
    text = texts.get(id(value))
    if text is None:
        text = texts[id(value)] = strict_json_dumps(value, indent=None)[:-1]
    return text


def strict_json_document(doc, line_per=("hosts", "drift")):
    """strict_json_dumps() of a report document laid out for fleets: each entry of the mappings
    named in ``line_per`` (one per host) on a line of its own, written by the C encoder, the
    rest indented. The same JSON value as strict_json_dumps(doc) (test_report checks it); a
    fleet's report.json is written several times faster than fully indented, and every host is
    one line for grep (``jq . report.json`` indents it all)."""
    parts = []
    texts = {}   # build_json gives hosts that share an evaluation one entry object: encode it once
    for key, value in doc.items():
        if key in line_per and isinstance(value, dict):
            body = ",\n".join("  %s: %s" % (_json_key(k), _entry_text(texts, v)) for k, v in value.items())
            parts.append("%s: {\n%s\n}" % (_json_key(key), body) if body else "%s: {}" % _json_key(key))
        else:
            parts.append("%s: %s" % (_json_key(key), strict_json_dumps(value)[:-1].replace("\n", "\n  ")))
    return "{\n  " + ",\n  ".join(parts) + "\n}\n"


# Characters XML 1.0 cannot carry at all (C0 controls except TAB/LF/CR, lone surrogates, U+FFFE/F).
_XML_BAD = re.compile(u"[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(value):
    """``value`` as text that XML 1.0 (and HTML) can carry: every character XML forbids (control
    characters, lone surrogates) is written as a visible ``\\xNN``/``\\uNNNN`` escape instead.
    None becomes "". Escaping of ``<``, ``&`` and quotes is still the caller's (or Jinja's) job."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if _XML_BAD.search(text) is None:
        return text
    return _XML_BAD.sub(lambda m: "\\x%02x" % ord(m.group()) if ord(m.group()) < 0x100 else "\\u%04x" % ord(m.group()),
                        text)


def junit_classname(host, check):
    """The JUnit classname of one host's cases: ``HOST.CHECK`` (e.g. ``gpu-01.rack7.example.com.preflight``).
    CI tools split a classname at its last dot into package and class (Jenkins' junit plugin:
    CaseResult.getPackageName/getSimpleName), so the host, dots and all, is the package and the
    check (preflight, drift, acceptance) the class: ``preflight.HOST`` made a host
    ``gpu-01.rack7.example.com`` the class ``com``."""
    return "%s.%s" % (host, check)


# The <skipped> types: a CI UI (and junitparser's Skipped.type) tells a warning from a rule that
# could not be checked without reading the message.
SKIP_WARNING, SKIP_NOT_CHECKED = "warning", "not-checked"


def junit_case(classname, name, result="passed", message=None, kind=None, text=None, system_out=None):
    """One JUnit testcase as plain data for junit_xml(); ``result`` is passed, failure, error or
    skipped; ``kind`` is the type of a failure, error or skipped element."""
    if result not in ("passed", "failure", "error", "skipped"):
        raise ValueError("junit_case: result must be passed, failure, error or skipped, not %r" % (result,))
    return {"classname": classname, "name": name, "result": result, "message": message, "type": kind,
            "text": text, "system_out": system_out}


def _suite_xml(suite, properties=None):
    """(lines, counts) of one <testsuite> for junit_xml()."""
    cases = suite.get("cases") or []
    counts = {"tests": len(cases), "failures": 0, "errors": 0, "skipped": 0}
    for c in cases:
        if c["result"] in _COUNT_KEY:
            counts[_COUNT_KEY[c["result"]]] += 1
    body = ['  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="%d">'
            % (_qa(suite.get("name")), counts["tests"], counts["failures"], counts["errors"], counts["skipped"])]
    props = dict(properties or {}, **(suite.get("properties") or {}))
    if props:
        body.append("    <properties>")
        body.extend('      <property name=%s value=%s/>' % (_qa(k), _qa(v)) for k, v in sorted(props.items()))
        body.append("    </properties>")
    for c in cases:
        body.append('    <testcase classname=%s name=%s>' % (_qa(c.get("classname")), _qa(c.get("name"))))
        if c["result"] in ("failure", "error"):
            body.append('      <%s message=%s type=%s>%s</%s>' % (c["result"], _qa(c.get("message")), _qa(c.get("type") or c["result"]),
                                                                  _xe(c.get("text")), c["result"]))
        elif c["result"] == "skipped":
            body.append('      <skipped message=%s%s/>' % (_qa(c.get("message")), " type=%s" % _qa(c["type"]) if c.get("type") else ""))
        if c.get("system_out"):
            body.append('      <system-out>%s</system-out>' % _xe(c["system_out"]))
        body.append('    </testcase>')
    body.append('  </testsuite>')
    return body, counts


_COUNT_KEY = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def junit_xml(suites, name="dlrack.node", properties=None):
    """A JUnit XML document from plain data.

    ``suites``: iterable of ``{"name": str, "cases": [junit_case(...), ...], "properties": {...}}``
    (or ``{"xml": (lines, counts)}``, a suite already written by _suite_xml()).
    ``properties`` (e.g. ``{"run_id": ...}``) are added to every suite's <properties> (where the
    JUnit schema allows them). Counts (tests, failures, errors, skipped) are computed from the
    cases. Every string is made XML-safe, so the document is well formed whatever the input."""
    body, totals = [], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in suites:
        lines, counts = suite["xml"] if "xml" in suite else _suite_xml(suite, properties)
        for k in totals:
            totals[k] += counts[k]
        body.extend(lines)
    # <testsuites> carries no skipped count: the Jenkins xUnit schema (junit-10.xsd) refuses it there;
    # each <testsuite> has its own.
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<testsuites name=%s tests="%d" failures="%d" errors="%d">'
            % (_qa(name), totals["tests"], totals["failures"], totals["errors"])]
    return "\n".join(head + body + ["</testsuites>"]) + "\n"


@functools.lru_cache(maxsize=8192)
def _qa_text(text):
    return quoteattr(xml_safe(text))


def _qa(value):
    # A fleet repeats the same rule names and messages thousands of times: escape each once.
    return _qa_text(value) if isinstance(value, str) else quoteattr(xml_safe(value))


@functools.lru_cache(maxsize=8192)
def _xe_text(text):
    return escape(xml_safe(text))


def _xe(value):
    return _xe_text(value) if isinstance(value, str) else escape(xml_safe(value))


def _finalize(value):
    """Jinja finalize: None prints as nothing, text is made XML/HTML-safe before autoescaping
    (markup that templates produce themselves, e.g. included drawings, passes unchanged)."""
    kind = type(value)
    if kind is int or kind is Markup:
        return value
    if kind is str:
        return value if _XML_BAD.search(value) is None else xml_safe(value)
    if value is None:
        return ""
    return xml_safe(value)


_ENV = {}


def jinja_env(directory=TEMPLATES):
    """The Jinja2 environment for report templates: templates loaded from ``directory`` (by default
    the collection's plugins/plugin_utils/reports/templates), autoescape on for every template, undefined
    names are errors, None prints as nothing and forbidden characters are escaped (xml_safe)."""
    if directory not in _ENV:
        import jinja2
        _ENV[directory] = jinja2.Environment(
            loader=jinja2.FileSystemLoader(directory), autoescape=True, undefined=jinja2.StrictUndefined,
            finalize=_finalize, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return _ENV[directory]


def render(template, **context):
    """Render one report template of the collection with ``context``."""
    return jinja_env().get_template(template).render(**context)
