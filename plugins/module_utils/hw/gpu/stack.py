# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU software and firmware stack of a node, per vendor (issue 33): what the fleet comparison
(plugin_utils/versions.py) needs to tell one node's stack from another's. Read-only and bounded.

NVIDIA: the kernel module's version (/sys/module/nvidia/version, else /proc/driver/nvidia/version),
``nvidia-smi -q -x`` (the gatherer's run is shared: gather.py memoises the command) for the CUDA
version the driver supports and, per GPU, VBIOS and InfoROM (image, OEM, ECC, power objects), the
CUDA toolkit (/usr/local/cuda/version.json, else version.txt), NCCL and DCGM (the version in the
library's file name), Fabric Manager (``nv-fabricmanager --version``, only where installed).
AMD: the amdgpu module's version (DKMS builds; the in-tree driver has none: the kernel is its
version), ROCm (/opt/rocm/.info/version), RCCL (library file name), VBIOS per GPU (sysfs
``vbios_version``).

Every value is a string of at most ``MAX_VALUE`` characters, or None when not installed or
unreadable (then a line in ``errors`` when something was there and could not be read).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import xml.etree.ElementTree as ET

from ansible_collections.dlrack.node.plugins.module_utils.hw.parsers import ParseError, na, normalize_pci_bus_id
from ansible_collections.dlrack.node.plugins.module_utils.system.command import failure as command_failure

MAX_VALUE = 128          # characters of one version string
MAX_GPUS = 128           # GPU entries read from one tool's output
# directory entries looked at per library directory (sorted by name: with a bound of a few thousand,
# a full /usr/lib/x86_64-linux-gnu cut off libnccl)
MAX_LIB_ENTRIES = 65536
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
            "/usr/local/cuda/targets/sbsa-linux/lib", "/opt/rocm/lib")
_VERSION_CHARS = re.compile(r"[^0-9A-Za-z._:+~()/,\[\] -]")


def clean(value):
    """A version string as the document holds it: stripped, N/A as None, odd characters replaced
    by '?', at most MAX_VALUE characters."""
    value = na(value)
    if value is None:
        return None
    value = _VERSION_CHARS.sub("?", value.splitlines()[0].strip() if value.strip() else "")
    return value[:MAX_VALUE] or None


# ------------------------------------------------------------------------------------- parsers

_NVRM = re.compile(r"Kernel Module(?: for [A-Za-z0-9_]+)?\s+([0-9]+(?:\.[0-9]+){1,3})\s")


def parse_proc_driver_version(text):
    """/proc/driver/nvidia/version -> the driver version ('580.159.04'), or None."""
    m = _NVRM.search(text or "")
    return m.group(1) if m else None


def _text(elem, path):
    node = elem.find(path) if elem is not None else None
    return clean(node.text) if node is not None and node.text is not None else None


def smi_xml_root(text):
    """The root element of ``nvidia-smi -q -x`` output (the stdlib parser; the output is bounded by
    the gatherer's runner). Raises ParseError for output that is not the tool's XML, and for a DTD
    that declares entities: the tool names its DTD by ``SYSTEM`` only, and internal entities are how
    XML blows up in memory where expat is older than 2.4 (no amplification limit)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.strip():
        raise ParseError("nvidia-smi -q -x: empty output")
    if "<!ENTITY" in text:
        raise ParseError("nvidia-smi -q -x: the output declares XML entities, which the tool never prints")
    try:
        root = ET.fromstring(text.strip().encode("utf-8"))
    except (ET.ParseError, ValueError, RecursionError) as exc:
        raise ParseError("nvidia-smi -q -x: not well-formed XML (%s)" % exc)
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: root element is <%s>, expected <nvidia_smi_log>" % root.tag)
    return root


def parse_smi_versions(text):
    """``nvidia-smi -q -x`` -> {driver, cuda_driver, gpus: [{pci_bus_id, vbios, inforom: {image,
    oem, ecc, power}}]}. Raises ParseError for output that is not the tool's XML."""
    root = smi_xml_root(text)
    gpus = []
    for g in root.findall("gpu")[:MAX_GPUS]:
        try:
            bus = normalize_pci_bus_id(_text(g, "pci/pci_bus_id") or g.get("id"))
        except ParseError:
            bus = None
        gpus.append({"pci_bus_id": bus, "vbios": _text(g, "vbios_version"),
                     "inforom": {"image": _text(g, "inforom_version/img_version"),
                                 "oem": _text(g, "inforom_version/oem_object"),
                                 "ecc": _text(g, "inforom_version/ecc_object"),
                                 "power": _text(g, "inforom_version/pwr_object")}})
    return {"driver": _text(root, "driver_version"), "cuda_driver": _text(root, "cuda_version"), "gpus": gpus}


_FM = re.compile(r"Fabric Manager version is\s*:\s*(\S+)")


def parse_fabricmanager_version(text):
    """``nv-fabricmanager --version`` -> '535.161.08', or None."""
    m = _FM.search(text or "")
    return clean(m.group(1)) if m else None


def parse_cuda_version(text, name):
    """The CUDA toolkit's version file: version.json (CUDA 11.1+: {"cuda": {"version": ...}}) or
    version.txt ("CUDA Version 10.2.89"); None when neither says."""
    if not text:
        return None
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        cuda = doc.get("cuda") if isinstance(doc, dict) else None
        return clean(cuda.get("version")) if isinstance(cuda, dict) and isinstance(cuda.get("version"), str) else None
    m = re.search(r"CUDA Version\s+([0-9][0-9.]*)", text)
    return m.group(1) if m else None


def library_version(names, stem):
    """The newest version in library file names such as 'libnccl.so.2.18.5' for ``stem``
    'libnccl.so.' ('2.18.5'), or None when no name carries one."""
    found = []
    pat = re.compile(r"^%s([0-9]+(?:\.[0-9]+){0,5})$" % re.escape(stem))
    for name in names:
        m = pat.match(name)
        if m:
            found.append(tuple(int(p) for p in m.group(1).split(".")))
    if not found:
        return None
    return ".".join(str(p) for p in max(found))


# ------------------------------------------------------------------------------------- readers

def _libraries(rd, stems):
    """{stem: version} from the library directories (listing at most MAX_LIB_ENTRIES names each; only
    the names that start with a stem are kept)."""
    names = []
    for d in LIB_DIRS:
        names.extend(n for n in rd.listdir(rd.path(d))[:MAX_LIB_ENTRIES] if n.startswith(tuple(stems)))
    return dict((stem, library_version(names, stem)) for stem in stems)


def _cuda_runtime(rd):
    for name in ("version.json", "version.txt"):
        ver = parse_cuda_version(rd.text(rd.path(os.path.join("/usr/local/cuda", name)), limit=65536), name)
        if ver:
            return ver
    return None


def nvidia_stack(rd, run, tools, find, errors):
    """The NVIDIA part of ``versions``; ``tools``: the vendor seam's {tool: path}; ``find(name)``:
    the path of another tool, or None."""
    out = {"gpu_driver": clean(rd.text(rd.path("/sys/module/nvidia/version"))), "cuda_driver": None,
           "cuda_runtime": _cuda_runtime(rd), "nccl": None, "dcgm": None, "fabric_manager": None, "gpus": []}
    if out["gpu_driver"] is None:
        out["gpu_driver"] = parse_proc_driver_version(rd.text(rd.path("/proc/driver/nvidia/version"), limit=65536))
    libs = _libraries(rd, ("libnccl.so.", "libdcgm.so."))
    out["nccl"], out["dcgm"] = libs["libnccl.so."], libs["libdcgm.so."]
    smi = tools.get("nvidia-smi")
    if smi:
        res = run([smi, "-q", "-x"])
        failed = command_failure(res, "nvidia-smi -q -x")
        if not failed:
            try:
                parsed = parse_smi_versions(res[1])
            except ParseError as exc:
                failed = str(exc)
            else:
                out["gpus"] = [{"pci_bus_id": g["pci_bus_id"], "vbios": g["vbios"], "inforom": g["inforom"],
                                "driver": parsed["driver"]} for g in parsed["gpus"]]
                out["cuda_driver"] = parsed["cuda_driver"]
                out["gpu_driver"] = out["gpu_driver"] or parsed["driver"]
        if failed:
            errors.append(failed)
    fm = find("nv-fabricmanager")
    if fm:
        res = run([fm, "--version"])
        failed = command_failure(res, "nv-fabricmanager --version") if res[0] is not None else None
        if failed:
            errors.append(failed)
        elif res[0] is not None:    # None: not started, the version commands' budget is spent (hw/versions.py)
            out["fabric_manager"] = parse_fabricmanager_version((res[1] or "") + "\n" + (res[2] or ""))
    return out


def amd_stack(rd, gpus, errors):
    """The AMD part of ``versions``; ``gpus``: the PCI bus ids of the node's AMD GPUs."""
    rocm = rd.text(rd.path("/opt/rocm/.info/version"), limit=4096)
    out = {"gpu_driver": clean(rd.text(rd.path("/sys/module/amdgpu/version"))), "rocm": clean(rocm),
           "rccl": _libraries(rd, ("librccl.so.",))["librccl.so."], "gpus": []}
    for bus in gpus[:MAX_GPUS]:
        vbios = clean(rd.text(rd.path("/sys/bus/pci/devices/%s/vbios_version" % bus)))
        out["gpus"].append({"pci_bus_id": bus, "vbios": vbios, "inforom": None, "driver": out["gpu_driver"]})
    return out


def gpu_stack(rd, run, tools, find, gpus, errors):
    """The GPU stack of a node: the vendor of its GPUs decides what is read. ``gpus``: the node's
    GPU entries from the vendor seam (None when not gathered: then the tools decide)."""
    vendors = set((g.get("vendor") or "nvidia") for g in gpus or [] if isinstance(g, dict))
    out = {}
    if "nvidia" in vendors or (gpus is None and tools.get("nvidia-smi")):
        out.update(nvidia_stack(rd, run, tools, find, errors))
    amd_bus = [g.get("pci_bus_id") for g in gpus or [] if isinstance(g, dict) and g.get("vendor") in ("amd", "hygon")
               and g.get("pci_bus_id")]
    if amd_bus or (gpus is None and os.path.exists(rd.path("/opt/rocm/.info/version"))):
        amd = amd_stack(rd, amd_bus, errors)
        nv_gpus = out.get("gpus") or []
        out.update(dict((k, v) for k, v in amd.items() if k not in out or out[k] is None))
        out["gpus"] = nv_gpus + amd["gpus"]
    return out
