# -*- coding: utf-8 -*-
"""A fresh ECC textfile that says the memory error state is unknown is not a silent PASS (issue 30.8).

The textfile is the real collector's (plugins/module_utils/ecc/metrics.py) for a node without an
EDAC memory controller: an empty /sys/devices/system tree, as on a VM or a desktop board without
ECC. It writes `dlrack_edac_supported 0` and `dlrack_edac_status{status="unknown"} 1`; before the
fix the health check judged it like a healthy node's file: no note, nothing unknown, PASS. The
node program's output then names the unknown state, memory.ecc_errors is not judged (so the check
never resumes a node for it), and the return validation says so."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics
from ansible_collections.dlrack.node.plugins.module_utils.programs import health_check as hc
from realhost import h200_vm


def _conf(tmp_path, root):
    conf = dict(hc.DEFAULTS, node="slurm01", root=root, state_file=str(tmp_path / "accepted.json"),
                textfile=str(tmp_path / "prom" / "dlrack_ecc.prom"), history_file=str(tmp_path / "{node}-history.json"),
                audit_log=str(tmp_path / "log" / "health-check.jsonl"), metrics_textfile=str(tmp_path / "{node}.prom"),
                return_copy=False, act=False)
    return hc.settle_config(conf)


def _no_edac_textfile(tmp_path):
    tree = tmp_path / "no-edac"
    (tree / "sys" / "devices" / "system").mkdir(parents=True)
    assert metrics.main(["--root", str(tree), "--nvidia-smi", "none", "--textfile-dir", str(tmp_path / "prom")]) == 0
    text = (tmp_path / "prom" / "dlrack_ecc.prom").read_text()
    assert "dlrack_edac_supported 0" in text and 'dlrack_edac_status{status="unknown"} 1' in text
    return text


def test_a_fresh_textfile_saying_unknown_is_a_note_and_not_judged(tmp_path):
    root, dummy = h200_vm(tmp_path / "h200")
    conf = _conf(tmp_path, root)
    hc.accept(conf)
    _no_edac_textfile(tmp_path)
    v = hc.judge(conf)
    assert v["rules"] == []
    assert v["unknown"] == ["memory.ecc_errors"]
    [note] = v["notes"]
    assert "no EDAC memory controller is registered: memory error state unknown, not judged" in note
    ok, notes = hc.validate_return(conf)
    assert ok and any("memory error state unknown" in n for n in notes), notes


def test_a_textfile_without_edac_samples_is_unknown(tmp_path):
    root, dummy = h200_vm(tmp_path / "h200")
    conf = _conf(tmp_path, root)
    hc.accept(conf)
    (tmp_path / "prom").mkdir()
    (tmp_path / "prom" / "dlrack_ecc.prom").write_text("# an exporter's file, not the collector's\nnode_load1 0.5\n")
    v = hc.judge(conf)
    assert v["rules"] == [] and set(v["unknown"]) == {"memory.ecc_errors", "gpu.ecc_errors"}
    assert "has no dlrack_edac_* sample: ECC state unknown" in v["notes"][0]


def test_the_program_prints_the_note_beside_its_pass(tmp_path, capsys):
    root, dummy = h200_vm(tmp_path / "h200")
    conf = _conf(tmp_path, root)
    hc.accept(conf)
    _no_edac_textfile(tmp_path)
    cfg = tmp_path / "health.json"
    cfg.write_text(json.dumps(dict((k, conf[k]) for k in ("root", "state_file", "textfile", "history_file", "audit_log",
                                                          "metrics_textfile")), sort_keys=True))
    capsys.readouterr()
    hc.main(["--config", str(cfg), "--dry-run"])
    out = capsys.readouterr().out
    assert out.startswith("dlrack-health-check: PASS")
    assert "memory error state unknown" in out
