# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-flight's fleet fast path, in one place, beside the plain reference path it must equal.

PRIVATE to the collection: no playbook, role or other collection may import it; its names change
with any release. What it holds is every part of the pre-flight that depends on ansible-core
internals or on CPython's garbage collector, and the pure-Python sharing that is there for speed
only:

- ``controller_loaded()``: gc.freeze() of ansible-playbook's heap when the action is loaded
  (controller_freeze; DLRACK_GC_FREEZE=false turns that one piece off);
- ``worker_start()``: gc.freeze() of what the task's forked worker inherited;
- ``read_hosts()``: every host's variables read raw (``hostvars.raw_get``), templated only where a
  value holds a template (HostView, _plain_raw), with ansible-core's ``clean_facts`` answered
  directly for an empty fact set (_empty_facts_shortcut);
- ``shares_evaluations()`` / ``shares_reports()``: hosts with identical inputs share one
  evaluation (rules.evaluate_fleet, marshal keys) and one report fragment (report.share_key, id()
  keys).

The reference path beside it uses no ansible-core internals and no gc tricks: every variable is
read as ``hostvars[host][name]`` (Ansible templates it) and made plain (preflight._plain), every
host is evaluated on its own and every report fragment built on its own. Both give the same
verdicts, findings and report bytes (tests/unit/plugins/plugin_utils/test_fastpath.py,
tests/integration/test_fastpath_playbook.py); the figures the fast path buys are in
benchmarks/RESULTS.md ("Fast path vs reference path").

The switch: DLRACK_FAST_PATH in the environment (default on; false, 0, no or off: the reference
path), read by enabled() only. Where an internal a piece needs is missing (another ansible-core:
no ``raw_get``, no ``ansible.vars.manager.clean_facts``, no ``gc.freeze``), that piece falls back to
the reference path on its own."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import gc
import os

ENV = "DLRACK_FAST_PATH"
_OFF = ("0", "false", "no", "off")


def _off(value):
    return str(value).strip().lower() in _OFF


def enabled(environ=None):
    """Whether the fast path is on: DLRACK_FAST_PATH unset or anything but false/0/no/off. The one
    place the switch is read (cheap: the callers ask once per fleet step)."""
    return not _off((os.environ if environ is None else environ).get(ENV, "true"))


# ------------------------------------------------------------------------------------ the heap

def controller_freeze(environ=None, cli_args=None):
    """Move every object the Ansible controller holds when the preflight_report action is first
    loaded (the whole inventory: ~180,000 tracked containers for 2,000 declared hosts) into
    Python's permanent generation, so that the cyclic garbage collector stops walking it again and
    again.

    ansible-playbook loads an action plugin's class in its main process before it forks the
    worker for the task, so this runs there, once per run (the action calls it when it is
    imported). Measured on 2,000 declared hosts (benchmarks/RESULTS.md): a full collection of
    that heap takes 0.17-0.29 s, and a pre-flight run met two or three of them (while the play was
    processed, in the forked worker, and when the interpreter exits). It is the pattern Python
    documents for processes that fork without exec: no collection in the parent or in its
    children touches the frozen objects again. What it costs: a reference cycle that is already
    garbage at this moment is freed when the process ends instead of earlier; objects are still
    freed by reference counting, and what is created afterwards is collected as usual.

    Only under an Ansible command line (its options parsed: ``ansible.context.CLIARGS``), not
    when a test or another program imports the plugin; DLRACK_GC_FREEZE=false (or
    DLRACK_FAST_PATH=false) in the environment turns it off (with DLRACK_GC_FREEZE=false alone the
    action's worker still freezes what it inherited: that process ends with the task). Returns
    whether it froze."""
    environ = os.environ if environ is None else environ
    if not enabled(environ) or _off(environ.get("DLRACK_GC_FREEZE", "true")) or not hasattr(gc, "freeze"):
        return False
    if cli_args is None:
        try:
            from ansible import context
            cli_args = context.CLIARGS
        except ImportError:
            cli_args = None
    if not cli_args:
        return False
    gc.freeze()
    return True


def controller_loaded():
    """Called once when the action plugin's module is imported (before its heavy imports: loading
    them allocates enough to start a full collection of everything ansible-playbook holds, 0.18 s
    for 2,000 hosts). Returns whether the controller's heap was frozen."""
    return controller_freeze()


def worker_start():
    """Called first in the action's run(). The task runs in a worker process forked for it from
    ansible-playbook, which holds the whole inventory (~180,000 tracked containers for 2,000
    hosts): Python's cyclic garbage collector would walk all of them again and again while the
    fleet is evaluated; freezing what the fork inherited leaves it only this task's own objects
    (2,000 hosts: evaluation 0.30 -> 0.11 s CPU). The worker ends with the task. Returns whether
    it froze."""
    if not enabled() or not hasattr(gc, "freeze"):
        return False
    gc.freeze()
    return True


# ---------------------------------------------------------------------------- reading variables

_EXACT = (str, int, float, bool, type(None))
_PLAIN_TYPES = (int, float, bool, type(None))
# The text of a str subclass as a plain str. Not str(value): ansible-core 2.16-2.18's
# AnsibleUnsafeText.__str__ returns the unsafe object itself (so that string operations keep the
# marking), which made _plain_raw recurse until RecursionError on every gathered host.
_text = str.__str__


class _Template(Exception):
    """A raw variable value that only Ansible's templating can give its value (see _plain_raw)."""


def _plain_raw(value):
    """preflight._plain(value) of a raw (not yet templated) variable value, or _Template when the
    value may hold a template - a string with a Jinja expression (keys too) - or anything other
    than plain data (a vaulted value...): that one must go through Ansible's templating. One walk
    does both (a heavy declaration is a few hundred values, a fleet thousands of hosts)."""
    kind = type(value)
    if kind is str:
        if "{" in value and ("{{" in value or "{%" in value or "{#" in value):
            raise _Template()
        return value
    if kind in _EXACT:
        return value
    if isinstance(value, dict):
        return dict((_plain_raw_key(k), _plain_raw(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain_raw(v) for v in value]
    if isinstance(value, str):
        return _plain_raw(_text(value))
    if isinstance(value, bool):     # a tagged scalar (ansible-core 2.19): the builtin value, as _plain
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise _Template()


def _plain_raw_key(key):
    if isinstance(key, str):
        return _plain_raw(_text(key))
    if isinstance(key, _PLAIN_TYPES):
        return str(key)
    raise _Template()


def _plain(value):
    """preflight._plain (imported on first use: preflight imports the rule engine, which imports this)."""
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import _plain as plain
    return plain(value)


class HostView(object):
    """One host's variables for the rules as plain data (see preflight._plain), read from the raw
    variables (hostvars.raw_get) and templated - in that host's context - only where a value holds
    a template. Templating a whole dlrack_hw document through HostVarsVars costs about as much as
    building the host's variables (~0.3 ms per host), for documents that almost never contain a
    template."""

    plain_data = True   # what it gives is plain already (preflight.read_host does not copy it again)

    def __init__(self, hostvars, host):
        self._hostvars = hostvars
        self._host = host
        raw = hostvars.raw_get(host)
        self._raw = raw if isinstance(raw, dict) else {}   # an unknown host: nothing declared

    def __contains__(self, name):
        return name in self._raw

    def __getitem__(self, name):
        try:
            return _plain_raw(self._raw[name])
        except _Template:
            return _plain(self._hostvars[self._host][name])

    def get(self, name, default=None):
        return self[name] if name in self._raw else default

    def raw(self, name):
        """The untemplated value of a variable, plain data where it is (None when not set)."""
        value = self._raw.get(name)
        try:
            return _plain_raw(value)
        except _Template:
            return _text(value) if isinstance(value, str) else repr(value)


def host_view(hostvars, host):
    """A HostView over Ansible's hostvars, or the plain mapping itself (tests, benchmarks)."""
    if hasattr(hostvars, "raw_get"):
        return HostView(hostvars, host)
    return hostvars.get(host) or {}


@contextlib.contextmanager
def _empty_facts_shortcut():
    """While the action reads every host's variables: ansible-core's VariableManager.get_vars()
    calls clean_facts() on each host's fact cache entry, also on an empty one, and clean_facts
    lists every connection plugin on disk each time (half the cost of building a host's variables:
    ~0.2 ms of ~0.4 ms per host, measured in benchmarks/RESULTS.md). clean_facts({}) is {}, so
    for an empty fact set that answer is given directly; any other fact set goes to the original.
    The same values either way (tests/unit/plugins/action/test_preflight_report.py); only this
    worker process sees it, and only until the read is done. Without that function (another
    ansible-core) nothing is changed."""
    try:
        from ansible.vars import manager
        original = manager.clean_facts
    except (ImportError, AttributeError):
        yield
        return

    def clean_facts(facts):
        return original(facts) if facts else {}

    manager.clean_facts = clean_facts
    try:
        yield
    finally:
        manager.clean_facts = original


def read_hosts(hostvars, hosts, names, raw_names=()):
    """{host: {name: value}} of ``names`` for every host of ``hosts``, as plain data; None where a
    variable is not set. A variable that Ansible cannot template (an undefined variable inside it)
    becomes an hwschema.Unresolved marker, which the rule engine reports on that host alone
    instead of failing the whole run. ``raw_names``: variables that are compared between hosts,
    never used as they are: the fast path reads them untemplated (their text where they hold a
    template), the reference path as Ansible templates them.

    Fast path (Ansible's HostVars, DLRACK_FAST_PATH on): raw_get and HostView, under the empty
    facts shortcut. Reference path (switched off, or hostvars without raw_get): each variable read
    as hostvars[host][name]."""
    if enabled() and hasattr(hostvars, "raw_get"):
        with _empty_facts_shortcut():
            return dict((host, _read_fast(hostvars, host, names, raw_names)) for host in hosts)
    return dict((host, _read_reference(hostvars, host, names)) for host in hosts)


def _errors():
    from ansible.errors import AnsibleError
    from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Unresolved
    return AnsibleError, Unresolved


def _read_fast(hostvars, host, names, raw_names):
    error, unresolved = _errors()
    try:
        view = HostView(hostvars, host)
    except error as exc:
        return dict((name, unresolved(exc)) for name in names)
    out = {}
    for name in names:
        try:
            out[name] = view.raw(name) if name in raw_names else view.get(name)
        except error as exc:
            out[name] = unresolved(exc)
    return out


def _read_reference(hostvars, host, names):
    """One host's variables through the public mapping interface only: ``hostvars[host]`` (None
    or nothing for a host the inventory does not know), then ``view[name]`` for each one set."""
    error, unresolved = _errors()
    try:
        if hasattr(type(hostvars), "__contains__") and host not in hostvars:
            view = {}
        else:
            view = hostvars.get(host) or {}
    except error as exc:
        return dict((name, unresolved(exc)) for name in names)
    out = {}
    for name in names:
        try:
            out[name] = _plain(view.get(name))
        except error as exc:
            out[name] = unresolved(exc)
    return out


# ------------------------------------------------------------------------------------- sharing

def shares_evaluations():
    """Whether rules.evaluate_fleet lets hosts with identical inputs (rules._inputs_key: marshal's
    bytes) share one evaluation under a stand-in host name; off: every host evaluated on its own."""
    return enabled()


def shares_reports():
    """Whether the report builders let hosts that share an evaluation share one report fragment
    (report.share_key: the id() of the shared finding mappings); off: each host's built on its own."""
    return enabled()
