# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each host's final state in site.yml's fleet report (site.json, site.xml, site.html; issue 30.1).

The pre-flight's verdict is not the end of a site run: a host that passed it can still fail a
provisioning task or become unreachable. site.yml records why a host was not provisioned in its
``__dlrack_site_error`` (the role and task that failed and its message, or "unreachable: ...");
the hosts that failed the pre-flight were never provisioned. Each host gets one finding of the
run's own rule ``site.provisioned``:

- provisioned: information, the rule holds (``pass``);
- not provisioned because it failed the pre-flight: information, the rule was not checked
  (``skip``; the host is ``fail`` already, by its pre-flight findings);
- failed in a role, or unreachable: an error finding naming the role, the task and the message,
  so the host is ``fail`` in every format, never ``pass``.

The findings go through the pre-flight's notes (preflight.apply_notes), so the three files, the
console summary and the fleet counts carry them like any finding.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.dlrack.node.plugins.plugin_utils.become import explain

RULE = "site.provisioned"
MESSAGE_MAX = 600   # characters of a failed task's message (node text) in a finding

PROVISIONED = "provisioned"
NOT_PROVISIONED = "not provisioned"
FAILED = "failed"
UNREACHABLE = "unreachable"


def _cut(text, limit=MESSAGE_MAX):
    return text if len(text) <= limit else u"%s\u2026 (%d more characters)" % (text[:limit], len(text) - limit)


def host_state(host, preflight_failed, error):
    """(state, finding) of one host: ``preflight_failed`` whether it failed the pre-flight,
    ``error`` its __dlrack_site_error (None when it was provisioned). The finding is a note
    (rule, severity, message, remedy[, outcome])."""
    if preflight_failed:
        return NOT_PROVISIONED, (RULE, "info", "host %s: not provisioned: it failed the pre-flight, so no task ran on it" % host,
                                 "fix its pre-flight findings, then run site.yml again", "skip")
    if error is None or error == "":
        return PROVISIONED, (RULE, "info", "host %s: provisioned" % host, "", "pass")
    text = explain(_cut(error if isinstance(error, str) else str(error)))
    state = UNREACHABLE if text.startswith("unreachable") else FAILED
    remedy = ("make the host reachable (ssh, its address, ansible_user), then run site.yml again" if state == UNREACHABLE
              else "read the failed task's message, fix the host or its variables, then run site.yml again "
                   "(the roles are idempotent)")
    return state, (RULE, "error", "host %s: not provisioned: %s" % (host, text), remedy)


def site_notes(hosts, preflight_failed, errors):
    """({host: [note]}, {state: count}) for the fleet report: ``preflight_failed`` the hosts that
    failed the pre-flight, ``errors`` {host: its __dlrack_site_error or None}."""
    failed = set(preflight_failed or ())
    notes, counts = {}, {PROVISIONED: 0, NOT_PROVISIONED: 0, FAILED: 0, UNREACHABLE: 0}
    for host in hosts:
        state, note = host_state(host, host in failed, (errors or {}).get(host))
        counts[state] += 1
        notes[host] = [note]
    return notes, counts
