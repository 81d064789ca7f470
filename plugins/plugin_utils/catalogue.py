# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU and GPU catalogue: model name -> figures the rules need.

The figures live as data in ``data/cpus.yml`` and ``data/gpus.yml`` next to this file, each entry
with the public source of its figures. This module only loads and matches; see docs/catalogue.md.

Public API:

- ``lookup_cpu(name)`` / ``lookup_gpu(name)``: a copy of the catalogue entry (plus ``ambiguous``
  and ``candidates``), an *ambiguity result* when a short name fits several entries, or ``None``
  when the model is unknown (the rule engine reports "cannot verify").
- ``normalize_cpu_name(name)`` / ``normalize_gpu_name(name)``: the normalized form used for
  matching.
- ``cpu_lanes(spec, sockets)``: usable CPU PCIe lanes for a socket count, with a note.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

_CACHE = {}

# Fields that may differ between the candidates of an ambiguous match; numeric ones get a range.
_MERGE_SKIP = ("model", "aliases", "source", "note", "memory_mb_note")


def _load(kind):
    if kind not in _CACHE:
        if yaml is None:  # pragma: no cover
            raise RuntimeError("PyYAML is required to read the dlrack.node hardware catalogue")
        path = os.path.join(DATA_DIR, "%s.yml" % kind)
        with open(path, "r") as handle:
            # libyaml's loader when PyYAML has it: the catalogue loads ~7x faster (0.05 s vs 0.3 s).
            doc = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        entries = doc.get(kind) or []
        if kind == "cpus":
            index = _build_cpu_index(entries)
        else:
            index = _build_gpu_index(entries)
        _CACHE[kind] = (entries, index)
    return _CACHE[kind]


def catalogue_entries(kind):
    """All entries of ``cpus`` or ``gpus`` (deep copies), for reports and tests."""
    return copy.deepcopy(_load(kind)[0])


def _result(entry):
    out = copy.deepcopy(entry)
    out["ambiguous"] = False
    out["candidates"] = [entry["model"]]
    return out


def _merge(entries):
    """Ambiguity result: figures shared by every candidate are kept, the others become None.

    Numeric figures that differ are listed under ``ranges`` as [min, max] so a caller can choose a
    conservative bound on purpose; nothing is guessed.
    """
    keys = []
    for entry in entries:
        for key in entry:
            if key not in keys:
                keys.append(key)
    out = {"model": None}
    ranges = {}
    for key in keys:
        if key in _MERGE_SKIP:
            continue
        values = [entry.get(key) for entry in entries]
        first = values[0]
        if all(v == first for v in values[1:]):
            out[key] = copy.deepcopy(first)
            continue
        out[key] = None
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) == len(values):
            ranges[key] = [min(nums), max(nums)]
    out["source"] = None
    out["ambiguous"] = True
    out["candidates"] = [entry["model"] for entry in entries]
    out["ranges"] = ranges
    return out


# --------------------------------------------------------------------------------------------
# CPUs
# --------------------------------------------------------------------------------------------

_CPU_DROP = [
    r"\(r\)", r"\(tm\)", u"\u00ae", u"\u2122",
    r"@\s*[\d.]+\s*[gm]hz",             # "@ 2.50GHz"
    r"\b\d+(st|nd|rd|th)\s+gen\b",       # "13th Gen"
    r"\b\d+-cores?\b",                   # "32-Core", "24-Cores"
    r"\b(processor|cpu|intel|amd)\b",
    r"\bw/\s.*$",                        # "w/ Radeon Graphics"
    r"\bwith\s+radeon.*$",
]
_BRANDS = ("xeon", "epyc", "ryzen", "threadripper", "core", "opteron", "atom", "ultra", "pro",
           "platinum", "gold", "silver", "bronze")


def normalize_cpu_name(name):
    """Lower-case, vendor noise removed: 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz' -> 'xeon gold 6248'."""
    if name is None:
        return ""
    text = str(name).strip().lower()
    for pattern in _CPU_DROP:
        text = re.sub(pattern, " ", text)
    text = text.replace(",", " ")
    # "Core i9 13900K" -> "core i9-13900k"; "i5-460M" / "i5 460m" / "i5 M 460" -> "i5-m460"
    text = re.sub(r"\b(i[3579])\s+(\d{3,5}[a-z]*)\b", r"\1-\2", text)
    text = re.sub(r"\b(i[3579])[\s-]+m\s*(\d{3})\b", r"\1-m\2", text)
    text = re.sub(r"\b(i[3579])-(\d{3})m\b", r"\1-m\2", text)
    # "Xeon W 2295" -> "w-2295", "E5 2620 v4" -> "e5-2620 v4"
    text = re.sub(r"\b(w|e|e3|e5|e7)\s+(\d{4}[a-z]*)\b", r"\1-\2", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text


def _cpu_key(normalized):
    """Identity of a CPU name: the tokens carrying a digit (SKU, version), minus lone digits.

    Lone single digits are tier numbers ("Ryzen 9", "Core Ultra 7") or the '0' that marks a
    first-generation Xeon E5 ('E5-2620 0'); they never identify a SKU on their own.
    """
    tokens = []
    for tok in normalized.split():
        if re.search(r"\d", tok) and not re.match(r"^\d$", tok):
            tokens.append(tok)
    return frozenset(tokens)


# Index slot of the digitless names, matched only as a whole normalized string: a name without a
# SKU number ('Neoverse-V2', 'Intel(R) Xeon(R) Processor') never matches by its words.
_EXACT = "exact"


def _build_cpu_index(entries):
    """{digit-token key: [entries]} plus, under ``_EXACT``, {whole normalized name: [entries]} for
    the model names and aliases that carry no digit at all ('NVIDIA Grace')."""
    index = {_EXACT: {}}
    for entry in entries:
        for name in [entry["model"]] + list(entry.get("aliases") or []):
            norm = normalize_cpu_name(name)
            if not norm:
                continue
            key = _cpu_key(norm)
            bucket = index.setdefault(key, []) if key else index[_EXACT].setdefault(norm, [])
            if entry not in bucket:
                bucket.append(entry)
    return index


def _cpu_brand_ok(query_norm, entry):
    """Brand words in the query ('xeon', 'epyc', 'gold'...) must appear in the entry's model name."""
    model_tokens = set(normalize_cpu_name(entry["model"]).split())
    for alias in entry.get("aliases") or []:
        model_tokens.update(normalize_cpu_name(alias).split())
    for word in query_norm.split():
        if word in _BRANDS and word not in model_tokens:
            return False
    return True


def lookup_cpu(name):
    """Catalogue entry for a CPU name from /proc/cpuinfo, lscpu, dmidecode or an inventory.

    A name whose tokens carry no digit ('NVIDIA Grace', 'Grace CPU Superchip') matches only a
    catalogued model or alias equal to it after normalization; any other digitless name (a family
    or core name such as 'Neoverse-V2', a hypervisor's 'Intel Xeon Processor') returns None.

    Returns a dict (a copy of the entry plus ``ambiguous: False`` and ``candidates``), an
    ambiguity result (``ambiguous: True``, differing figures None, see ``_merge``), or None.
    """
    norm = normalize_cpu_name(name)
    if not norm:
        return None
    key = _cpu_key(norm)
    _entries, index = _load("cpus")
    if key:
        found = [e for e in index.get(key, []) if _cpu_brand_ok(norm, e)]
    else:
        # No digit-carrying token: only an exact (whole, normalized) model or alias name counts.
        found = list(index[_EXACT].get(norm, []))
    if not found:
        return None
    if len(found) == 1:
        return _result(found[0])
    return _merge(found)


def cpu_lanes(spec, sockets):
    """Usable CPU PCIe lanes for ``sockets`` sockets of the CPU ``spec`` -> (lanes or None, note).

    - unknown CPU, unknown socket count or a CPU without on-die PCIe: (None, why).
    - AMD EPYC in 2 sockets: the conservative ``pcie_lanes_2s.min`` (128; 160 only with 3 xGMI
      links, which the platform decides) unless the inventory declares the figure.
    - otherwise ``pcie_lanes`` x sockets.
    """
    if not spec:
        return None, "CPU model not in the catalogue: cannot verify PCIe lanes"
    if spec.get("ambiguous"):
        return None, "CPU name matches several models (%s): cannot verify PCIe lanes" % ", ".join(spec.get("candidates") or [])
    model = spec.get("model")
    if sockets is None:
        return None, "socket count unknown for %s: cannot verify PCIe lanes" % model
    try:
        sockets = int(sockets)
    except (TypeError, ValueError):
        return None, "socket count %r is not a number" % (sockets,)
    if sockets < 1:
        return None, "socket count %d is not valid" % sockets
    per_socket = spec.get("pcie_lanes")
    if per_socket is None:
        return None, "%s has no catalogued CPU PCIe lanes (%s): cannot verify" % (model, spec.get("note") or "figure unknown")
    notes = []
    max_sockets = spec.get("max_sockets")
    if max_sockets and sockets > max_sockets:
        notes.append("%d sockets exceeds the %d this model supports" % (sockets, max_sockets))
    two = spec.get("pcie_lanes_2s")
    if sockets == 2 and two:
        lanes = int(two["min"])
        if two.get("max") and two["max"] != two["min"]:
            notes.append("2-socket %s: %d to %d lanes depending on xGMI links (4 links: %d, 3 links: %d); "
                         "using the conservative %d - declare cpu.pcie_lanes to use another figure"
                         % (model, two["min"], two["max"], two["min"], two["max"], lanes))
        else:
            notes.append("2-socket %s: %d lanes in total (the rest of each socket's lanes link the sockets)" % (model, lanes))
        return lanes, "; ".join(notes)
    lanes = int(per_socket) * sockets
    notes.insert(0, "%d x %d lanes per socket (%s)" % (sockets, per_socket, model))
    return lanes, "; ".join(notes)


# --------------------------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------------------------

_GPU_NOISE = frozenset(("nvidia", "geforce", "tesla", "generation", "edition", "gpu", "graphics", "card"))
# A query carrying one of these is a different product (laptop part, vGPU profile) than any
# catalogued card unless an alias says so: no "contains" matching then.
_GPU_STOP = frozenset(("laptop", "mobile", "notebook", "grid", "vgpu"))


def normalize_gpu_name(name):
    """Lower-case tokens without vendor noise: 'Tesla V100-SXM2-32GB' -> 'v100 sxm 32gb'.

    SXM generations fold to 'sxm' ('sxm2', 'sxm4', 'sxm5'); '80 GB' becomes '80gb'; 'max-q'
    becomes 'max q'. A trailing '...' (nvidia-smi's truncated table column) is kept as '...'.
    """
    if name is None:
        return ""
    text = str(name).strip().lower()
    truncated = text.endswith("...") or text.endswith(u"\u2026")
    text = text.rstrip(u".\u2026 ")
    text = text.replace("(tm)", " ").replace("(r)", " ")
    text = re.sub(r"[-_/,()]", " ", text)
    text = re.sub(r"\b(\d+)\s+gb\b", r"\1gb", text)
    text = re.sub(r"\bsxm\d\b", "sxm", text)
    tokens = [t for t in text.split() if t not in _GPU_NOISE]
    if truncated and tokens:
        tokens.append("...")
    return " ".join(tokens)


def _gpu_tokens(name):
    return frozenset(t for t in normalize_gpu_name(name).split() if t != "...")


def _build_gpu_index(entries):
    aliases = []
    for entry in entries:
        for name in [entry["model"]] + list(entry.get("aliases") or []):
            tokens = _gpu_tokens(name)
            if tokens:
                aliases.append((tokens, entry))
    return aliases


def _unique(entries):
    out = []
    for entry in entries:
        if not any(entry is seen for seen in out):
            out.append(entry)
    return out


def lookup_gpu(name):
    """Catalogue entry for a GPU name from nvidia-smi, lspci or an inventory.

    Matching on token sets, in order:
      1. exact: the name's tokens equal an alias's tokens;
      2. short name: the name's tokens are contained in aliases (several entries -> ambiguity
         result, e.g. 'H100' or 'RTX 6000'); a truncated name ('RTX 6000 Ada Gene...') uses its
         complete tokens and the last token as a prefix;
      3. longer name: the largest alias contained in the name ('NVIDIA H100 80GB HBM3 MIG 1g.10gb'),
         unless the name says laptop/mobile/GRID (a different product).
    Returns a dict, an ambiguity result (``ambiguous: True``) or None.
    """
    query = _gpu_query(name)
    if query is None:
        return None
    tokens, prefix, truncated = query
    aliases = _load("gpus")[1]
    found = [] if truncated else _unique([e for t, e in aliases if t == tokens])
    found = found or _gpu_partial(aliases, tokens, prefix)
    if not found and not tokens & _GPU_STOP:
        found = _gpu_contained(aliases, tokens)
    if not found:
        return None
    return _result(found[0]) if len(found) == 1 else _merge(found)


def _gpu_query(name):
    """(complete tokens, prefix of a cut last word or None, truncated?) of a GPU name; None if empty."""
    norm = normalize_gpu_name(name)
    if not norm:
        return None
    raw = norm.split()
    truncated = raw[-1] == "..."
    if truncated:
        raw = raw[:-1]
    prefix = raw[-1] if truncated and raw else None
    tokens = frozenset(raw[:-1] if truncated else raw)
    if prefix is not None and any(word.startswith(prefix) for word in _GPU_NOISE):
        prefix = None  # 'RTX 6000 Ada Gene...': the cut word was noise ('generation')
    if not tokens and not prefix:
        return None
    return tokens, prefix, truncated


def _gpu_partial(aliases, tokens, prefix):
    """Entries whose aliases contain the name's tokens (and its cut last word as a prefix)."""
    def _fits(alias_tokens):
        if not tokens <= alias_tokens:
            return False
        if prefix is None:
            return True
        return any(t.startswith(prefix) for t in alias_tokens - tokens) or prefix in tokens

    return _unique([e for t, e in aliases if tokens and _fits(t)] if tokens else
                   [e for t, e in aliases if any(x.startswith(prefix) for x in t)])


def _gpu_contained(aliases, tokens):
    """Entries of the largest alias contained in the name; none for a lone weak one-token match."""
    best, best_size = [], 0
    for alias_tokens, entry in aliases:
        if alias_tokens <= tokens:
            if len(alias_tokens) > best_size:
                best, best_size = [entry], len(alias_tokens)
            elif len(alias_tokens) == best_size:
                best.append(entry)
    # A one-token alias ('p4', 't4') inside a long unknown name is too weak to trust.
    if best_size < 2 and len(tokens) > 2:
        return []
    return _unique(best)
