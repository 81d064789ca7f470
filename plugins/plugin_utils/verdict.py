# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One verdict vocabulary for the pre-flight, acceptance and drift, and the one answer to "which
hosts fail under fail_on" (docs/verdicts.md).

Every part keeps the host states its reports have always shown; each state maps to one shared
level - ``pass`` < ``warning`` < ``error`` - or to none (``skip``: deliberately not judged), and
says whether it fails *closed* (whatever fail_on says: a host the run could not check) and
whether the scheduler may act on it (``judged``). ``fail_on`` names the lowest level that fails:
``error`` (errors fail), ``warning`` (warnings and errors fail), ``never`` (only closed states
fail). A state a part does not know fails closed.

The fail-once pattern: the controller task that judges the fleet computes the failing hosts, the
one host the verdict runs on (``verdict_host``) and the one message naming every failing host
(``verdict_message``); a last play over that host fails once with it. The message holds host
names (inventory, escaped for the console) and fixed words only: no node text.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import HOST_LIST_MAX_CHARS, console, host_list

LEVELS = ("pass", "warning", "error")
FAIL_ON = ("error", "warning", "never")
DEFAULT_FAIL_ON = "error"
# fail_on -> the levels that fail
FAILING = {"error": ("error",), "warning": ("error", "warning"), "never": ()}


class State(tuple):
    """(level, closed, judged) of one part's host state."""
    __slots__ = ()

    def __new__(cls, level, closed=False, judged=True):
        return tuple.__new__(cls, (level, closed, judged))

    level = property(lambda self: self[0])
    closed = property(lambda self: self[1])
    judged = property(lambda self: self[2])


# part -> {state as its reports show it: State}. docs/verdicts.md shows this table.
STATES = {
    # report.json / site.json hosts[h].status; a host that could not be gathered (rule
    # host.gathered) is `fail` and fails closed: see preflight.failed_hosts
    "preflight": {"pass": State("pass"), "warn": State("warning"), "fail": State("error")},
    # acceptance.json hosts[h].status: incomplete (something that should have been measured was
    # not) fails like an error - a gate never passes what it did not measure - but acceptance did
    # not judge the hardware, so the scheduler neither drains nor resumes it; skip: not measured
    # on purpose (failed this run's pre-flight)
    "acceptance": {"pass": State("pass"), "warning": State("warning"), "error": State("error"),
                   "incomplete": State("error", judged=False), "skip": State(None, judged=False)},
    # drift.json drift[h].status: drifted (a task would change) and error (unreachable or a
    # check failed; the HTML says "not checked") fail whatever fail_on says, which governs the
    # drift run's findings only (those are pre-flight states)
    "drift": {"clean": State("pass"), "drifted": State("error", closed=True),
              "error": State("error", closed=True)},
}
_UNKNOWN = State("error", closed=True)


def state(part, status):
    """The State of ``part``'s host status ``status``; an unknown one fails closed."""
    return STATES[part].get(status, _UNKNOWN) if isinstance(status, str) else _UNKNOWN


def fails(part, status, fail_on=DEFAULT_FAIL_ON):
    """Whether a host with this status fails the run under ``fail_on``."""
    st = state(part, status)
    return st.closed or st.level in FAILING[fail_on]


def failed_hosts(part, statuses, fail_on=DEFAULT_FAIL_ON, host_fail_on=None, closed=()):
    """The sorted hosts of {host: status} that fail under ``fail_on`` (or a host's own value in
    ``host_fail_on``); hosts in ``closed`` fail whatever fail_on says."""
    own = host_fail_on or {}
    return sorted(h for h, s in statuses.items() if h in closed or fails(part, s, own.get(h, fail_on)))


_PATTERN_SAFE = re.compile(r"\A[\w.@-]+\Z")


def verdict_host(failed, play_hosts=None, avoid=()):
    """[the first failing host still in the play] or []: the verdict play runs there and fails
    once. ``play_hosts`` (ansible_play_hosts) leaves out hosts that became unreachable while
    gathering; None when unknown (every failing host qualifies). Hosts in ``avoid`` (whose facts
    tried to set protected variables, such as __dlrack_verdict_deferred: the verdict play's
    condition reads that host's variables) are passed over."""
    in_play = set(play_hosts) if isinstance(play_hosts, (list, tuple, set)) else None
    hosts = [h for h in failed if in_play is None or h in in_play]
    # The play's `hosts:` is a host pattern: a name with a space, comma, colon, line feed or a
    # pattern character would match nothing (or other hosts) and the verdict would never fail.
    # Such a name is passed over; when no failing host qualifies, the verdict fails on localhost.
    fit = [h for h in hosts if isinstance(h, str) and _PATTERN_SAFE.match(h) and h not in avoid]
    if hosts and not fit:
        return ["localhost"]
    return fit[:1]


def verdict_message(what, groups, setting, where):
    """The one message of a failing fleet's verdict, naming every failing host; "" when none
    fails. ``what``: the run ("pre-flight", "acceptance", "drift"); ``groups``: [(label or None,
    [hosts])] - the hosts by why they fail (a host may be in more than one; it is counted once);
    ``setting``: the fail_on text, e.g. "dlrack_fail_on=error"; ``where``: the HTML report or the
    report directory. Host names are console text (control characters escaped), and bounded: the
    groups' names take about HOST_LIST_MAX_CHARS together (safe_text.host_list: every name, else
    the hostlist form, else the first hosts and the count of the rest), so a 10,000-host job's
    verdict is one readable line, not 66 kB."""
    seen, parts, budget = set(), [], HOST_LIST_MAX_CHARS
    for label, hosts in groups:
        seen.update(hosts)
        if hosts:
            names = host_list(hosts, max_chars=max(budget, 0))
            budget -= len(names)
            parts.append(("%s: " % label if label else "") + names)
    if not seen:
        return ""
    return console("%s failed for %d host(s) (%s): %s; see %s" % (
        what, len(seen), setting, "; ".join(parts), where or "the reports"))
