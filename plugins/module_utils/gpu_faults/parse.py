# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel log lines -> GPU fault events.

Forms read (each seen in a real log, tests/data/real/xid/ and its SOURCES.md):

- NVIDIA ``NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.``, with and without
  ``pid=``/``name=``/channel, the GSP forms (``119, pid=..., Timeout after 6s of waiting for RPC
  response from GPU4 GSP!``), the NVLink5 forms (``149, NETIR_LINK_EVT  Fatal ...``), the recovery
  action line (``154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)``), a bus
  id without ``PCI:`` and a MIG suffix (``PCI:0000:3b:00 GPU-I:00 GPU-CI:00``);
- ``NVRM: GPU 0000:06:00.0: GPU has fallen off the bus.`` and the three-line form without an Xid
  (``NVRM: The NVIDIA GPU 0000:b3:00.0`` ... ``fallen off the bus and is not responding``), read as 79;
- ``NVRM: GPU at PCI:0000:00:06: GPU-475a...`` (maps a bus id to the GPU's UUID);
- NVSwitch ``nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, ...``;
- amdgpu: ``N uncorrectable hardware errors detected in umc block``, ``poison is consumed by client
  N, kick off gpu reset flow``, ``ring gfx_0.0.0 timeout``, ``GPU reset begin!``, ``GPU reset(N)
  failed``, ``Saved bad pages(N) reaches threshold value(M)``.

Everything in a line is untrusted: a line is cut at MAX_LINE characters before any pattern runs,
and the text kept on an event is escaped (control and non-ASCII characters as \\xNN) and cut to
TEXT_LIMIT characters.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import re
import time

MAX_LINE = 4096
TEXT_LIMIT = 240
_XID_RE = re.compile(r"NVRM: Xid \((?P<bus>[^)]{0,80})\): (?P<code>\d{1,5})\b,?\s?(?P<rest>.*)")
_SXID_RE = re.compile(r"nvidia-nvswitch(?P<sw>\d{0,4}): SXid \((?:PCI:)?(?P<bus>[0-9a-fA-F:.]{4,20})\): (?P<code>\d{1,6})\b,?\s?(?P<rest>.*)")
_GPU_AT_RE = re.compile(r"NVRM: GPU at PCI:(?P<bus>[0-9a-fA-F:.]{4,20}): (?P<uuid>GPU-[0-9a-fA-F-]{8,64})")
_FALLEN_RE = re.compile(r"NVRM: GPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): GPU has fallen off the bus")
_THE_GPU_RE = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$")
_FALLEN_TAIL = "fallen off the bus and is not responding"
_PID_RE = re.compile(r"pid='?(?P<pid><unknown>|\d{1,10})'?")
_NAME_RE = re.compile(r"name=(?P<name>[^,]{0,64})")
_RECOVERY_RE = re.compile(r"GPU recovery action changed from \S+ \(([^)]*)\) to \S+ \(([^)]*)\)")
_AMD_RE = re.compile(r"amdgpu (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): (?:amdgpu: )?(?:\{\d+\})?\s*(?P<msg>.*)")
_AMD_UE_RE = re.compile(r"(?:socket: \d+, die: \d+, )?(?P<n>\d+) (?:new )?uncorrectable hardware errors detected in (?P<block>\w+) block")
_AMD_POISON_RE = re.compile(r"poison is consumed by client (?P<client>\d+)", re.I)
_AMD_RING_RE = re.compile(r"ring (?P<ring>[\w.]{1,32}) timeout, signaled seq=\d+, emitted seq=\d+")
_AMD_RESET_RE = re.compile(r"GPU reset begin!")
_AMD_RESET_FAIL_RE = re.compile(r"GPU reset\(\d+\) failed|GPU Recovery Failed|Ring \S+ reset failed and GPU reset failed", re.I)
_AMD_BADPAGE_RE = re.compile(r"Saved bad pages\s*\(?(?P<n>\d+)\)? reaches threshold value\s*\(?(?P<max>\d+)")
# line prefixes that carry a time
_KMSG_RE = re.compile(r"^(?P<prio>\d{1,4}),(?P<seq>\d{1,20}),(?P<usec>\d{1,20}),[^;]{0,16};")
_MONO_RE = re.compile(r"\[\s*(?P<mono>\d{1,10}\.\d{1,9})\]")
_CTIME_RE = re.compile(r"^\[(?P<ctime>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")
_ISO_RE = re.compile(r"(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d)?")
_PREFILTER = ("NVRM", "SXid", "amdgpu")


def escape(text, limit=TEXT_LIMIT):
    """Printable ASCII kept, everything else as \\xNN / \\uNNNN; cut to ``limit`` characters (with ...)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = []
    size = 0
    for char in text:
        code = ord(char)
        if 32 <= code < 127 and char != "\\":
            piece = char
        elif char == "\\":
            piece = "\\\\"
        elif code < 256:
            piece = "\\x%02x" % code
        else:
            piece = "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code
        size += len(piece)
        if size > limit:
            out.append("...")
            break
        out.append(piece)
    return "".join(out)


def norm_bus(raw):
    """'PCI:0000:06:00' / '0000:06:00' / '0000:06:00.0' / '00:1E.0' -> '0000:06:00.0'; None if it is no bus id."""
    if not raw:
        return None
    token = raw.strip().split()[0] if raw.strip() else ""
    if token.upper().startswith("PCI:"):
        token = token[4:]
    parts = token.lower().split(":")
    try:
        if len(parts) == 3:
            dom, bus, devfn = parts
        elif len(parts) == 2:
            dom, (bus, devfn) = "0000", parts
        else:
            return None
        dev, dot, fn = devfn.partition(".")
        fn = fn if dot else "0"
        dom_i, bus_i, dev_i, fn_i = int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None
    if dom_i > 0xffffffff or bus_i > 0xff or dev_i > 0x1f or fn_i > 7:
        return None
    return "%04x:%02x:%02x.%x" % (dom_i, bus_i, dev_i, fn_i)


def line_time(line):
    """(wall epoch seconds or None, monotonic seconds or None, kmsg seq or None) from a line's prefix."""
    m = _KMSG_RE.match(line)
    if m:
        return None, int(m.group("usec")) / 1e6, int(m.group("seq"))
    wall = mono = None
    m = _CTIME_RE.match(line)
    if m:
        try:
            wall = float(calendar.timegm(time.strptime(m.group("ctime"), "%a %b %d %H:%M:%S %Y")))
        except ValueError:
            wall = None
    else:
        m = _ISO_RE.search(line[:64])
        if m:
            try:
                wall = float(calendar.timegm(time.strptime(m.group("iso"), "%Y-%m-%dT%H:%M:%S")))
                if m.group("frac"):
                    wall += float("0." + m.group("frac"))
                tz = m.group("tz")
                if tz and tz != "Z":
                    sign = 1 if tz[0] == "+" else -1
                    digits = tz[1:].replace(":", "")
                    wall -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
            except ValueError:
                wall = None
    m = _MONO_RE.search(line[:80])
    if m:
        mono = float(m.group("mono"))
    return wall, mono, None


class Parser:
    """Stateful over consecutive lines (the three-line 'fallen off the bus' form and the
    'GPU at PCI:... GPU-uuid' map). feed(line, meta) -> list of events."""

    def __init__(self):
        self.uuids = {}          # bus id -> GPU UUID, from the driver's own 'GPU at' lines
        self._pending_fallen = None
        self._pending_age = 0
        self.lines = 0
        self.cut = 0

    def feed(self, line, meta=None):
        self.lines += 1
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]
            self.cut += 1
        if self._pending_fallen is not None:
            self._pending_age += 1
            if self._pending_age > 4:
                self._pending_fallen = None
        if not any(p in line for p in _PREFILTER):
            return []
        events = []
        m = _XID_RE.search(line)
        if m:
            events.append(self._xid(m, line, meta))
        else:
            m = _SXID_RE.search(line)
            if m:
                events.append(self._event(line, meta, m, "nvidia", "sxid", norm_bus(m.group("bus")), int(m.group("code")),
                                          device="nvswitch%s" % m.group("sw")))
            elif "NVRM" in line:
                events.extend(self._nvrm_other(line, meta))
            elif "amdgpu" in line:
                events.extend(self._amd(line, meta))
        return [e for e in events if e]

    def _event(self, line, meta, match, vendor, kind, bus, code, **extra):
        wall, mono, seq = line_time(line)
        meta = meta or {}
        event = {"vendor": vendor, "kind": kind, "bus_id": bus, "code": code,
                 "ts": meta.get("ts", wall), "mono": meta.get("mono", mono), "seq": meta.get("seq", seq),
                 "boot_id": meta.get("boot_id"), "text": escape(line[match.start():] if match else line)}
        event.update(extra)
        if bus and bus in self.uuids:
            event["uuid"] = self.uuids[bus]
        return event

    def _xid(self, m, line, meta):
        raw_bus = m.group("bus")
        bus = norm_bus(raw_bus)
        rest = m.group("rest") or ""
        extra = {}
        pid = _PID_RE.search(rest[:80])
        if pid and pid.group("pid") != "<unknown>":
            extra["pid"] = int(pid.group("pid"))
        name = _NAME_RE.search(rest[:120])
        if name and name.group("name") not in ("<unknown>", ""):
            extra["process"] = escape(name.group("name"), 64)
        if "GPU-I:" in raw_bus:
            extra["mig"] = escape(" ".join(raw_bus.split()[1:]), 40)
        rec = _RECOVERY_RE.search(rest)
        if rec:
            extra["recovery"] = escape(rec.group(2), 40)
        return self._event(line, meta, m, "nvidia", "xid", bus, int(m.group("code")), **extra)

    def _nvrm_other(self, line, meta):
        m = _GPU_AT_RE.search(line)
        if m:
            bus = norm_bus(m.group("bus"))
            if bus:
                self.uuids[bus] = "GPU-" + m.group("uuid")[4:].lower()    # as nvidia-smi and NVML print it
            return []
        m = _FALLEN_RE.search(line)
        if m:
            return [self._event(line, meta, m, "nvidia", "fallen_off_bus", norm_bus(m.group("bus")), 79)]
        m = _THE_GPU_RE.search(line)
        if m:
            self._pending_fallen = (norm_bus(m.group("bus")), line, meta)
            self._pending_age = 0
            return []
        if _FALLEN_TAIL in line and self._pending_fallen is not None:
            bus, first, first_meta = self._pending_fallen
            self._pending_fallen = None
            return [self._event(first, first_meta, _THE_GPU_RE.search(first), "nvidia", "fallen_off_bus", bus, 79)]
        return []

    def _amd(self, line, meta):
        m = _AMD_RE.search(line)
        bus = norm_bus(m.group("bus")) if m else None
        msg = m.group("msg") if m else line
        checks = (
            (_AMD_UE_RE, "ras_uncorrectable", lambda x: {"count": int(x.group("n")), "block": escape(x.group("block"), 16)}),
            (_AMD_POISON_RE, "poison_consumed", lambda x: {"client": int(x.group("client"))}),
            (_AMD_BADPAGE_RE, "bad_page_threshold", lambda x: {"count": int(x.group("n")), "threshold": int(x.group("max"))}),
            (_AMD_RESET_FAIL_RE, "gpu_reset_failed", lambda x: {}),
            (_AMD_RING_RE, "ring_timeout", lambda x: {"ring": escape(x.group("ring"), 32)}),
            (_AMD_RESET_RE, "gpu_reset", lambda x: {}),
        )
        for regex, kind, extra in checks:
            hit = regex.search(msg)
            if hit:
                if kind == "ras_uncorrectable" and (int(hit.group("n")) == 0 or "no uncorrectable" in msg):
                    return []
                return [self._event(line, meta, m or hit, "amd", kind, bus, kind, **extra(hit))]
        return []


def parse_lines(lines, meta=None):
    parser = Parser()
    out = []
    for line in lines:
        out.extend(parser.feed(line, meta))
    return out, parser
