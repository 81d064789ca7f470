# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fault catalog (catalog_embedded.py, its one copy: every Xid and SXid code NVIDIA publishes, the
amdgpu events, each with class and action, the catalog's version and its sources) and the operator's
overrides (count, window, action per code, in one variable)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.catalog_embedded import CATALOG_META, CATALOG_ROWS

ACTIONS = ("none", "check_workload", "reset_gpu", "reboot", "service")
CLASSES = ("application", "driver", "memory", "nvlink", "thermal_power", "bus", "unknown")
FAMILIES = ("xid", "sxid", "amd", "nvidia_other")
# How many events of a code on one GPU, within how many seconds, before its action is called for.
# A check_workload code (an application fault) repeating on one GPU is read as hardware: 5 in an hour.
DEFAULT_THRESHOLDS = {
    "none": (0, 0),
    "check_workload": (5, 3600),
    "reset_gpu": (1, 86400),
    "reboot": (1, 86400),
    "service": (1, 86400),
}
_CACHE = {}


class CatalogError(Exception):
    pass


def action_rank(action):
    return ACTIONS.index(action) if action in ACTIONS else 0


def load_catalog(path=None):
    """The catalog document: catalog_embedded.py's, or a JSON file of the same shape at ``path``."""
    key = path or ""
    if key not in _CACHE:
        if path:
            with open(path) as handle:
                doc = json.load(handle)
        else:
            doc = dict(CATALOG_META)
            doc.update(json.loads(CATALOG_ROWS))
        if doc.get("schema") != 1:
            raise CatalogError("%s: unknown catalog schema %r" % (path or "catalog_embedded.py", doc.get("schema")))
        _CACHE[key] = doc
    return _CACHE[key]


class Catalog:
    """lookup(family, code) -> entry dict with mnemonic, class, action, count, window_s, source."""

    def __init__(self, overrides=None, path=None):
        self.doc = load_catalog(path)
        self.version = self.doc["version"]
        self.overrides = parse_overrides(overrides or {})

    def lookup(self, family, code):
        key = str(code)
        row = (self.doc.get(family) or {}).get(key)
        if row is None:
            entry = {"mnemonic": None, "class": "unknown", "action": "reset_gpu" if family in ("xid", "sxid") else "none",
                     "known": False, "source": None}
        else:
            entry = {"mnemonic": row[0], "class": row[1], "action": row[2], "known": True, "source": row[3]}
        count, window = DEFAULT_THRESHOLDS[entry["action"]]
        entry["count"], entry["window_s"] = count, window
        over = self.overrides.get((family, key))
        if over:
            if "action" in over:
                entry["action"] = over["action"]
                entry["count"], entry["window_s"] = DEFAULT_THRESHOLDS[over["action"]]
            entry.update({k: v for k, v in over.items() if k in ("count", "window_s", "class")})
            entry["overridden"] = True
        return entry

    def codes(self, family):
        return sorted(self.doc.get(family) or {}, key=lambda c: (len(c), c))


def parse_overrides(raw):
    """{"xid:31": {"count": 3, "window_s": 600, "action": "reset_gpu"}, ...} -> {(family, code): {...}}.
    A bad entry raises CatalogError with one sentence naming the key, the field and the fix."""
    if not isinstance(raw, dict):
        raise CatalogError("gpu_faults.overrides must be a mapping like {\"xid:31\": {\"count\": 3, \"window_s\": 600}}")
    out = {}
    for key, value in raw.items():
        fam, sep, code = str(key).partition(":")
        if not sep or fam not in FAMILIES or not code:
            raise CatalogError("gpu_faults.overrides key %s: expected FAMILY:CODE with FAMILY one of %s (e.g. xid:31)"
                               % (ascii(key), ", ".join(FAMILIES)))
        if fam in ("xid", "sxid") and not code.isdigit():
            raise CatalogError("gpu_faults.overrides key %s: an Xid/SXid code is a number" % ascii(key))
        if not isinstance(value, dict):
            raise CatalogError("gpu_faults.overrides[%s] must be a mapping of count, window_s, action, class" % ascii(key))
        item = {}
        for field, val in value.items():
            if field in ("count", "window_s"):
                if isinstance(val, bool) or not isinstance(val, int) or val < 0 or val > 10 ** 9:
                    raise CatalogError("gpu_faults.overrides[%s].%s must be a whole number >= 0" % (ascii(key), field))
                item[field] = val
            elif field == "action":
                if val not in ACTIONS:
                    raise CatalogError("gpu_faults.overrides[%s].action must be one of %s" % (ascii(key), ", ".join(ACTIONS)))
                item[field] = val
            elif field == "class":
                if val not in CLASSES:
                    raise CatalogError("gpu_faults.overrides[%s].class must be one of %s" % (ascii(key), ", ".join(CLASSES)))
                item[field] = val
            else:
                raise CatalogError("gpu_faults.overrides[%s]: unknown field %s; expected count, window_s, action, class"
                                   % (ascii(key), ascii(field)))
        out[(fam, str(int(code)) if code.isdigit() else code)] = item
    return out
