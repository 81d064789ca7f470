# -*- coding: utf-8 -*-
# Copyright: dlrack.node contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One call that reads the kernel log from where it stopped, judges it with the saved state and
saves the state again (``check``), and the replay command line (``main``):

    dlrack-gpu-faults --kernel-log FILE [--state FILE] [--gpus HW_FACTS_JSON] [--dry-run] [--json]

prints every parsed event (vendor, kind, bus id, code, class, action) and the verdict; with
``--dry-run`` (the default for a replay) no state is written. Exit status: 0 nothing calls for a
drain, 1 a GPU fault calls for one, 2 bad arguments or configuration.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys
import time

from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults import readers
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.catalog import Catalog, CatalogError
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.judge import DEFAULTS as JUDGE_DEFAULTS, Judge
from ansible_collections.dlrack.node.plugins.module_utils.gpu_faults.parse import escape
from ansible_collections.dlrack.node.plugins.module_utils.hw.hostfs import write_atomic

DEFAULTS = {
    "enabled": True,
    "source": "auto",            # auto (journal, then /dev/kmsg) | journal | kmsg | file | off
    "kernel_log": None,          # a saved log (source file)
    "kmsg": "/dev/kmsg",
    "journalctl": "journalctl",
    "journal_file": None,        # read this journal file instead of the system journal (tests, support cases)
    "state_file": "/var/lib/dlrack/gpu-faults.json",
    "overrides": {},
    "max_bytes": readers.MAX_BYTES,
    "timeout_s": 5,
}
DEFAULTS.update(JUDGE_DEFAULTS)
STATE_LIMIT = 4 * 1024 * 1024


class ConfigError(Exception):
    pass


def settings(raw):
    """The gpu_faults config mapping with defaults; a bad key raises ConfigError (one sentence)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("gpu_faults must be a mapping (keys: %s)" % ", ".join(sorted(DEFAULTS)))
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ConfigError("gpu_faults: unknown key(s) %s; expected %s" % (", ".join(ascii(k) for k in unknown), ", ".join(sorted(DEFAULTS))))
    conf = dict(DEFAULTS)
    conf.update(raw)
    if conf["source"] not in ("auto", "journal", "kmsg", "file", "off"):
        raise ConfigError("gpu_faults.source must be auto, journal, kmsg, file or off (got %s)" % ascii(conf["source"]))
    for key in ("burst_s", "workload_window_s", "escalate_after_reboots", "max_bytes", "timeout_s"):
        if isinstance(conf[key], bool) or not isinstance(conf[key], (int, float)) or conf[key] < 0:
            raise ConfigError("gpu_faults.%s must be a number >= 0" % key)
    if not isinstance(conf["workload_fraction"], (int, float)) or not 0 < conf["workload_fraction"] <= 1:
        raise ConfigError("gpu_faults.workload_fraction must be in (0, 1]")
    try:
        Catalog(conf["overrides"])
    except CatalogError as exc:
        raise ConfigError(str(exc))
    return conf


def read_state_text(path, limit=STATE_LIMIT):
    """A state file's text, or None: never through a symbolic link (O_NOFOLLOW), only a regular file
    (a FIFO put there does not block the check), at most ``limit`` bytes (None when larger)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except (OSError, IOError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, limit + 1)
    except (OSError, IOError):
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def load_state(path):
    text = read_state_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def save_state(path, state):
    """Atomically (hostfs.write_atomic: a private temporary file beside it, fsync, rename over ``path``,
    which replaces a link there rather than writing through it)."""
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    write_atomic(path, json.dumps(state, sort_keys=True) + "\n")


def read_events(conf, state, current_boot, btime):
    """(events, position, notes, source used) from the configured source, after the saved position."""
    pos = (state or {}).get("position") or {}
    source = conf["source"]
    if conf.get("kernel_log"):
        source = "file"
    if source == "file":
        path = conf["kernel_log"]
        same = pos.get("source") == "file" and pos.get("path") == path
        events, new, notes = readers.read_file(path, offset=pos.get("offset", 0) if same else 0,
                                               max_bytes=conf["max_bytes"], timeout_s=conf["timeout_s"],
                                               meta={"boot_id": current_boot} if current_boot else None)
        new.update({"source": "file", "path": path})
        return events, new, notes, "file"
    notes = []
    if source in ("auto", "journal"):
        events, new, jnotes = readers.read_journal(cursor=pos.get("cursor") if pos.get("source") == "journal" else None,
                                                   journal_file=conf["journal_file"],
                                                   journalctl=conf["journalctl"], max_bytes=conf["max_bytes"],
                                                   timeout_s=conf["timeout_s"])
        usable = new.get("cursor") is not None or not jnotes
        if usable or source == "journal":
            new["source"] = "journal"
            return events, new, jnotes, "journal"
        notes.extend(jnotes)
    events, new, knotes = readers.read_kmsg(conf["kmsg"], last_seq=pos.get("seq"), last_boot=pos.get("boot_id"),
                                            current_boot=current_boot, max_bytes=conf["max_bytes"],
                                            timeout_s=conf["timeout_s"], btime=btime, offset=pos.get("offset"))
    new["source"] = "kmsg"
    return events, new, notes + knotes, "kmsg"


def check(raw_conf, accepted_at=None, gpus=None, now=None, dry_run=False, boot=None, btime=None):
    """Read, judge, save. Returns {"rules", "notes", "gpus", "events", ...}; never raises on bad node data."""
    conf = settings(raw_conf)
    if not conf["enabled"] or conf["source"] == "off":
        return {"rules": [], "notes": ["GPU faults: not judged (gpu_faults.source off)"], "gpus": {}, "events": []}
    boot = boot or readers.boot_id()
    btime = btime if btime is not None else readers.boot_time()
    state = load_state(conf["state_file"])
    events, position, notes, source = read_events(conf, state, boot, btime)
    judge = Judge(overrides=conf["overrides"], **{k: conf[k] for k in JUDGE_DEFAULTS})
    verdict, new_state = judge.judge(events, state=state, now=now if now is not None else (None if source == "file" else time.time()),
                                     boot=boot, accepted_at=accepted_at, gpus=gpus)
    new_state["position"] = position
    verdict["since_boot"] = since_boot(new_state, boot, judge.catalog)
    if not dry_run and conf["state_file"] != os.devnull:
        try:
            save_state(conf["state_file"], new_state)
        except (OSError, IOError) as exc:
            notes.append("GPU faults: state %s not written (%s): the next run reads the same events again"
                         % (escape(conf["state_file"], 200), exc.strerror or exc))
    verdict["notes"] = ["GPU faults: %s" % n for n in notes] + ["GPU faults: %s" % n for n in verdict["notes"]]
    verdict["source"] = source
    return verdict


def since_boot(state, boot, catalog):
    """{bus: {class: events this boot}} from the state (bounded: the state keeps at most 64 GPUs)."""
    out = {}
    for bus, codes in (state.get("gpus") or {}).items():
        for key, cstate in codes.items():
            count = (cstate.get("since_boot") or {}).get(boot or "unknown", 0)
            if count:
                family, code = key.split(":", 1)
                cls = catalog.lookup(family, code)["class"]
                out.setdefault(bus, {})
                out[bus][cls] = out[bus].get(cls, 0) + count
    return out


def event_line(event):
    return "%-6s %-14s %-13s %-6s %-13s %-14s x%d %s" % (
        event.get("vendor"), event.get("kind"), event.get("bus_id") or "-", event.get("code"), event.get("class"),
        event.get("action"), event.get("repeats", 1), "workload" if event.get("scope") == "workload" else "")


USAGE = """usage: dlrack-gpu-faults --kernel-log FILE [--state FILE] [--gpus HW_FACTS_JSON] [--config JSON] [--write-state] [--json]
  Replays a saved kernel log (dmesg, journalctl or /dev/kmsg form): prints every GPU fault event
  (vendor, kind, bus id, code, class, action) and the verdict. State is not written unless --write-state."""


def _gpus_from(path):
    with open(path) as handle:
        doc = json.load(handle)
    if isinstance(doc, dict) and "dlrack_hw" in doc:
        doc = doc["dlrack_hw"]
    if isinstance(doc, dict) and isinstance(doc.get("gpus"), list):
        return doc["gpus"]
    raise ValueError("no gpus list")


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    raw = {"source": "file"}
    flags = set()
    gpus = None
    try:
        while args:
            arg = args.pop(0)
            if arg in ("--kernel-log", "--state", "--gpus", "--config") and args:
                value = args.pop(0)
                if arg == "--kernel-log":
                    raw["kernel_log"] = value
                elif arg == "--state":
                    raw["state_file"] = value
                elif arg == "--gpus":
                    gpus = _gpus_from(value)
                else:
                    extra = json.loads(value)
                    if not isinstance(extra, dict):
                        raise ConfigError("--config takes a JSON mapping of gpu_faults settings, e.g. '{\"burst_s\": 30}'")
                    raw.update(extra)
            elif arg in ("--dry-run", "--json", "--write-state"):
                flags.add(arg[2:])
            elif arg in ("-h", "--help"):
                sys.stdout.write(USAGE + "\n")
                return 0
            else:
                raise ConfigError("bad argument %s" % ascii(arg))
        if not raw.get("kernel_log"):
            raise ConfigError("--kernel-log FILE is required")
        if "state_file" not in raw:
            raw["state_file"] = os.devnull
        settings(raw)                                   # a bad setting is named first
        try:
            open(raw["kernel_log"], "rb").close()      # a replay of a log it cannot read is no PASS
        except (OSError, IOError) as exc:
            raise ConfigError("--kernel-log %s cannot be read (%s)" % (escape(raw["kernel_log"], 200), exc.strerror or exc))
        verdict = check(raw, gpus=gpus, dry_run="write-state" not in flags)
    except (ConfigError, ValueError, OSError, IOError) as exc:
        sys.stderr.write("dlrack-gpu-faults: %s\n%s\n" % (escape(str(exc), 400), USAGE))
        return 2
    if "json" in flags:
        sys.stdout.write(json.dumps(verdict, sort_keys=True) + "\n")
    else:
        for event in verdict["events"]:
            sys.stdout.write(event_line(event) + "\n")
        head = ("FAIL " + ",".join(verdict["rules"])) if verdict["rules"] else "PASS"
        sys.stdout.write("dlrack-gpu-faults: %s\n" % head)
        for note in verdict["notes"]:
            sys.stdout.write("  %s\n" % note)
    return 1 if verdict["rules"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
