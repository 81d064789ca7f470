# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's reports: a registry of writers and the one write path every report set takes.

A report set (ReportSet) is what one run reports - the pre-flight (report.*), the drift check
(drift.*), the merge of a sliced run (report.*), acceptance (acceptance.*) - given as the parts
that writers render: ``doc`` (the JSON document), ``junit`` (the JUnit suites as plain data:
``(suites, name, properties)`` for common.junit_xml) and ``page`` (the HTML template of
reports/templates and its context). The layouts build them: plugin_utils/report.py
(report_set: pre-flight, drift, merge) and plugin_utils/acceptance.py (report_set).

A writer is a function ``writer(report_set) -> content`` (bytes, or text that is written UTF-8);
WRITERS maps the format's name, which is also the file's extension, to it. A new format is one
writer and one register() line, e.g.::

    def csv_writer(report):
        return "host,status\\n" + "".join("%s,%s\\n" % (h, r["status"]) for h, r in sorted(report.doc["hosts"].items()))

    register("csv", csv_writer)

and every report set is then also written as PREFIX.csv, in the same atomic set as the others,
with its path in report_paths and in the console's ``reports:`` line (paths_line)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections

from ansible_collections.dlrack.node.plugins.plugin_utils.reports.common import (
    junit_xml, render, strict_json_document)
from ansible_collections.dlrack.node.plugins.plugin_utils.reports.files import ReportWriteError, write_file_set

WRITERS = collections.OrderedDict()   # format name (file extension) -> writer, in writing order


class ReportSet(object):
    """The parts of one run's reports that writers render. ``doc``, ``junit`` and ``page`` are given
    as functions and built once, when a writer first asks (a set written without HTML never builds
    its page). ``kind``: preflight, drift or acceptance. ``json_line_per``: the mappings of ``doc``
    whose entries (one per host) the JSON writer puts on a line each (common.strict_json_document)."""

    def __init__(self, kind, doc, junit, page, json_line_per=()):
        self.kind = kind
        self.json_line_per = tuple(json_line_per)
        self._make = {"doc": doc, "junit": junit, "page": page}
        self._built = {}

    def _part(self, name):
        if name not in self._built:
            self._built[name] = self._make[name]()
        return self._built[name]

    @property
    def doc(self):
        return self._part("doc")

    @property
    def junit(self):
        return self._part("junit")

    @property
    def page(self):
        return self._part("page")


def register(name, writer):
    """Make ``writer`` the writer of format ``name`` (the file extension: lowercase letters and
    digits); a name registered again gets the new writer in its old place."""
    if not isinstance(name, str) or not name.isalnum() or name != name.lower() or not callable(writer):
        raise ValueError("a report format needs a lowercase alphanumeric name and a callable writer, not %r, %r"
                         % (name, writer))
    WRITERS[name] = writer


def formats():
    """The registered format names, in writing order (the choices of any formats setting)."""
    return tuple(WRITERS)


def write_set(report_dir, report, prefix, only=None, what="dlrack_report_dir"):
    """Render ``report`` (a ReportSet) with the writers of the formats ``only`` names (default:
    every registered one) and write PREFIX.<format> into ``report_dir`` as one set (files.write_file_set:
    atomic, under the directory's lock); return {format: path}. ReportWriteError names an unknown
    format or the directory that cannot be written."""
    wanted = formats() if only is None else tuple(only)
    unknown = [f for f in wanted if f not in WRITERS]
    if unknown or not wanted:
        raise ReportWriteError("unknown report format(s) %s: choose from %s"
                               % (", ".join(repr(f) for f in unknown) or "(none given)", ", ".join(formats())))
    names = collections.OrderedDict((fmt, "%s.%s" % (prefix, fmt)) for fmt in wanted)
    paths = write_file_set(report_dir, collections.OrderedDict((names[f], WRITERS[f](report)) for f in wanted), what=what)
    return {fmt: paths[name] for fmt, name in names.items()}


def paths_line(paths):
    """The console line that names the files of a set: ``reports: A.html, A.json, A.xml``."""
    return "reports: " + ", ".join(paths[fmt] for fmt in sorted(paths))


# ------------------------------------------------------------------------------ the writers

def json_writer(report):
    """Strict JSON (no NaN, ASCII), one host per line in the mappings the set names."""
    return strict_json_document(report.doc, line_per=report.json_line_per)


def junit_writer(report):
    """JUnit XML that CI systems parse (common.junit_xml)."""
    suites, name, properties = report.junit
    return junit_xml(suites, name=name, properties=properties)


def html_writer(report):
    """One self-contained HTML page from the set's template (reports/templates)."""
    template, context = report.page
    return render(template, **context)


register("json", json_writer)
register("xml", junit_writer)
register("html", html_writer)
