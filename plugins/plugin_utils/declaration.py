# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A declaration (``dlrack_hw`` with ``source: declared``) from a gathered document.

The acceptance workflow: gather a golden node, save what it is as the declaration, check every
delivered node against it (``playbooks/declare.yml`` writes one host_vars file per host).

What a declaration keeps is what the hardware *is*; what it leaves out is what the hardware is
*doing* or which unit it is:

- left out, volatile: ``uptime_s``, ``errors``, the current PCIe link speed (``pcie.gen``,
  ``pcie.speed``: GPUs drop to 2.5 GT/s when idle), error counters (``memory.edac.corrected`` /
  ``uncorrected``, ``gpus[].ecc_errors``, ``retired_pages``, ``remapped_rows``), disk state
  (``in_use.mounted`` / ``holders`` / ``partitions`` / ``signatures``, ``probe``) and the
  running kernel (``host.kernel``);
- left out unless ``identity=True``, per unit: GPU ``uuid`` and ``serial``, disk ``serial``,
  ``wwid``, ``wwn``, ``by_id``, ``by_id_all``, ``host.hostname``. A golden node's declaration is
  then valid for every node of the same build; with ``identity=True`` it pins this very unit.
- kept: CPU identity and topology, NUMA layout, memory size and ECC type, DIMMs, EDAC driver and
  controller count, GPU model, memory, bus id, NUMA placement, link width and maxima, ECC / MIG
  mode, NVLink links, disks' kind, transport, size, model and whether they hold the system
  (``in_use.system``), host product and virtualization.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.dlrack.node.plugins.plugin_utils.safe_text import console, has_control

VOLATILE_TOP = ("uptime_s", "errors")
VOLATILE_PCIE = ("gen", "speed")
VOLATILE_GPU = ("ecc_errors", "retired_pages", "remapped_rows", "ras")   # ras: AMD RAS counters (issue 21)
VOLATILE_EDAC = ("corrected", "uncorrected", "mcs")
VOLATILE_DISK = ("probe",)
VOLATILE_HOST = ("kernel",)
IDENTITY_GPU = ("uuid", "serial")
IDENTITY_DISK = ("serial", "wwid", "wwn", "by_id", "by_id_all")
IDENTITY_HOST = ("hostname",)


class DeclarationError(ValueError):
    """The input is not a gathered dlrack_hw document."""


def _drop(mapping, keys):
    for key in keys:
        mapping.pop(key, None)


def declaration_from_gathered(gathered, identity=False):
    """The declaration for a host from its gathered ``dlrack_hw`` (see the module docstring).

    Sections that were not gathered (None) stay None: unknown, never guessed. Raises
    DeclarationError for anything that is not a gathered document.
    """
    if not isinstance(gathered, dict):
        raise DeclarationError("expected the gathered dlrack_hw document (a mapping), got %s"
                               % type(gathered).__name__)
    if gathered.get("source") != "gathered":
        raise DeclarationError("expected a document with source: gathered (from hw_facts), got source: %r"
                               % (gathered.get("source"),))
    try:  # a deep copy in plain Python types (Ansible hands over its own str/dict subclasses)
        doc = json.loads(json.dumps(gathered))
    except (TypeError, ValueError) as exc:
        raise DeclarationError("the gathered document is not plain data: %s" % exc)
    doc["source"] = "declared"
    _drop(doc, VOLATILE_TOP)
    memory = doc.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("edac"), dict):
        _drop(memory["edac"], VOLATILE_EDAC)
    for gpu in doc.get("gpus") or []:
        _drop(gpu, VOLATILE_GPU + (() if identity else IDENTITY_GPU))
        if isinstance(gpu.get("pcie"), dict):
            _drop(gpu["pcie"], VOLATILE_PCIE)
    for disk in doc.get("disks") or []:
        _drop(disk, VOLATILE_DISK + (() if identity else IDENTITY_DISK))
        if isinstance(disk.get("in_use"), dict):
            disk["in_use"] = {"system": disk["in_use"].get("system")}
    if isinstance(doc.get("host"), dict):
        _drop(doc["host"], VOLATILE_HOST + (() if identity else IDENTITY_HOST))
    return doc


UNSAFE_TAG = "!unsafe"


class _Unsafe(dict):
    """A mapping of the declaration, written with the tag ``!unsafe`` (see _dumper)."""


class _UnsafeList(list):
    """A sequence of the declaration, written with the tag ``!unsafe`` (see _dumper)."""


def _tagged(value):
    """``value`` with every mapping and sequence in it (at every depth) to be written tagged."""
    if isinstance(value, dict):
        return _Unsafe((k, _tagged(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return _UnsafeList(_tagged(v) for v in value)
    return value


def _dumper():
    """PyYAML's SafeDumper, writing an _Unsafe mapping as ``!unsafe``: Ansible reads everything
    inside such a mapping (keys and strings at every depth) as data that is never templated, so a
    gathered string such as a CPU model ``{{ lookup('pipe', ...) }}`` stays that text - and a disk
    serial keeps its real value, which refusing or rewriting such strings would not. The tag is
    on the mapping, not on each string: ansible-core 2.19 resolves a scalar tagged ``!unsafe`` as
    if it were plain (``!unsafe '0000:01:00.0'`` would read as a number), while the strings inside
    the mapping keep the quotes that make them strings.

    Every mapping and sequence inside carries the tag too (_tagged), not only the top one:
    ansible-core 2.16 (to 2.18) builds a tagged mapping without its nested mappings and sequences
    (its constructor copies them while they are still empty: ``cpu: {}``, ``gpus: []``), so a
    declaration tagged once read back empty there. Tagged at each level, each is built whole
    before its parent, on every release."""
    import yaml  # controller side only

    class Dumper(yaml.SafeDumper):
        pass

    def represent_unsafe(dumper, value):
        return dumper.represent_mapping(UNSAFE_TAG, value)

    def represent_unsafe_list(dumper, value):
        return dumper.represent_sequence(UNSAFE_TAG, value)

    Dumper.add_representer(_Unsafe, represent_unsafe)
    Dumper.add_representer(_UnsafeList, represent_unsafe_list)
    return Dumper


def declaration_yaml(gathered, host, identity=False):
    """The text of ``host_vars/<host>/dlrack_hw.yml``: a comment saying where it came from, then
    ``dlrack_hw: !unsafe`` with the declaration (node data, never a template: see _dumper)."""
    import yaml  # controller side only

    doc = declaration_from_gathered(gathered, identity=identity)
    header = ("# dlrack_hw of %s, written by playbooks/declare.yml from its gathered hardware facts.\n"
              "# Volatile values (uptime, link speed, error counters, disk state)%s are left out;\n"
              "# see plugins/plugin_utils/declaration.py. Edit freely: this is now the declaration.\n"
              "# !unsafe: these values came from the node; Ansible never templates them (keep the tag).\n"
              % (_comment(host), "" if identity else " and per-unit ids (serials, UUIDs, WWNs)"))
    body = yaml.dump({"dlrack_hw": _tagged(doc)}, Dumper=_dumper(), default_flow_style=False, sort_keys=False,
                     allow_unicode=True, width=100)
    return "---\n" + header + body


def declare_dir(path, cwd=None):
    """The folder declare.yml writes the declarations in, as an absolute path: ``~`` expanded and a
    relative path taken from ``cwd`` - the folder the command runs in (os.getcwd() of
    ansible-playbook), as the report directory is - never from the playbook's folder, which is the
    installed collection that a reinstall deletes (issue 30.3)."""
    if path is None or not str(path).strip():
        raise DeclarationError("dlrack_declare_dir is empty: set it to the folder the declarations go in "
                               "(e.g. -e dlrack_declare_dir=inventory/host_vars), or leave it unset for the "
                               "host_vars folder next to the inventory")
    text = os.path.expanduser(str(path))
    if not os.path.isabs(text):
        text = os.path.join(os.getcwd() if cwd is None else cwd, text)
    return os.path.normpath(text)


# The longest file name Linux file systems take (NAME_MAX, in bytes).
NAME_MAX = 255


def host_error(host):
    """One sentence when the inventory host name ``host`` cannot name its declaration directory
    (``<host_vars>/<host>/``) - empty, ``.`` or ``..``, a path separator, NUL or another control
    character (safe_text's set: also a bidirectional override that would show the directory under
    another name), longer than NAME_MAX bytes - else "" (declare.yml writes nothing for such a host)."""
    name = host if isinstance(host, str) else str(host)
    why = None
    if name in ("", ".", ".."):
        why = "is empty, '.' or '..'"
    elif "/" in name or "\\" in name:
        why = "holds a path separator ('/' or '\\')"
    elif has_control(name):
        why = "holds NUL or another control character"
    elif len(name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        why = "is %d bytes long, more than a file name can be (%d)" % (len(name.encode("utf-8", "surrogateescape")), NAME_MAX)
    if why is None:
        return ""
    shown = _comment(name if len(name) <= 80 else name[:60] + "...")
    return ("declare.yml refuses host '%s': the name %s, so it cannot name the directory host_vars/<host>/ "
            "that its declaration goes in; rename the host in the inventory (nothing was written)" % (shown, why))


def _comment(text):
    """``text`` fit for one YAML comment line: no line break or other control character."""
    return console(text)
