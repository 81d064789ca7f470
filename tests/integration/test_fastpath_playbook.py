"""playbooks/preflight.yml end to end with the fleet fast path (default) and with the plain
reference path (DLRACK_FAST_PATH=false, plugin_utils/fastpath.py) on one hostile inventory: the
same exit code, console summary, verdict message and recap, and the same report files byte for
byte (run id and time normalised). The node is the stand-in of test_hostile_nodes.py (a script
that answers any module with crafted JSON), so everything on the controller's side is real:
gathering, the fact cache, hostvars, the action's settings. The rule-engine level and the
action's reading on many more fleets: tests/unit/plugins/plugin_utils/test_fastpath.py."""
import copy
import os
import re
import shutil
import subprocess
import sys

import yaml

from hwdocs import GATHERED, GOOD
from testpaths import ROOT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # the stand-in node of test_hostile_nodes.py
from test_hostile_nodes import VENV_BIN, Node, hostile_doc, node_vars, playbook  # noqa: E402

RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
BAD = copy.deepcopy(GOOD)
BAD["memory"]["total_mb"] = 262144                     # memory.exceeds_vram: an error
ADA_DECLARED = {"schema": 1, "source": "declared", "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4}}


def hostile_inventory(tmp_path):
    """Stand-in nodes that are gathered (Jinja in what they send, facts that try to set the run's
    settings and the host's inputs, terminal escapes) and declared hosts: a rack sharing one
    declaration, distinct ones, undefined variables and templates inside declarations, huge values,
    NaN and infinity, unicode and hostile host names, own and bad fail_on values."""
    marker = tmp_path / "PWNED"
    evil = Node(tmp_path, "evil")
    evil.answer(hostile_doc(marker), preflight_fail_on="never", dlrack_fail_on="never",
                dlrack_report_dir=str(tmp_path / "moved"), dlrack_hw=GOOD, dlrack_profile="workstation")
    cached = Node(tmp_path, "cached")        # answers setup with facts that would open the gate
    cached.answer(copy.deepcopy(GATHERED), preflight_fail_on="never", dlrack_fail_on="never",
                  dlrack_report_dir=str(tmp_path / "moved"), dlrack_hw=GOOD, __dlrack_verdict_deferred=True)
    escape = Node(tmp_path, "escape")
    doc = copy.deepcopy(GATHERED)
    doc["gpus"][0]["model"] = "\x1b]52;c;cm0gLXJmIH4=\x07NVIDIA H100\rPASS  x"
    escape.answer(doc)
    huge = copy.deepcopy(GOOD)
    huge["cpu"]["model"] = "Z" * 100000
    hosts = {
        "evil-gathered": node_vars(evil),
        "cached-evil": node_vars(cached, dlrack_hw=BAD),
        "gpu\x1bc\x07\x9b2J\nPASS  forged": node_vars(escape, dlrack_gather=True, dlrack_external_archive="nfs://x\x1b[2J",
                                                      dlrack_hw=ADA_DECLARED),
        u"узел-ü-\u2603": {"dlrack_hw": GOOD},
        'x" onmouseover="alert(1)': {"dlrack_hw": BAD},
        "undefined-decl": {"dlrack_hw": dict(GOOD, cpu={"model": "{{ rack_cpu_model }}", "sockets": 2})},
        "undefined-th": {"dlrack_hw": GOOD, "dlrack_thresholds": "{{ rack_thresholds }}"},
        "templated-ok": {"dlrack_hw": GOOD, "dlrack_thresholds": {"min_gpus": "{{ 4 + 4 }}"}},
        "huge": {"dlrack_hw": huge},
        "nan": {"dlrack_hw": dict(GOOD, memory={"total_mb": float("nan"), "ecc": "multi-bit"}),
                "dlrack_workload": {"kind": "full_finetune", "model_params_b": float("inf")}},
        "own-fail-on": {"dlrack_hw": BAD, "dlrack_fail_on": "never"},
        "z-bad-fail-on": {"dlrack_hw": GOOD, "dlrack_fail_on": "sometimes"},   # (not first: the role checks its spec there)
    }
    hosts.update(("distinct-%02d" % i, {"dlrack_hw": dict(GOOD, host={"hostname": "d%02d.example" % i})}) for i in range(8))
    rack = dict(("rack-%02d" % i, None) for i in range(24))
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts, "children": {"rack": {"hosts": rack}}}},
                                                  allow_unicode=True))
    (inv / "group_vars" / "rack.yml").write_text(yaml.safe_dump({"dlrack_hw": BAD, "dlrack_severity": {"memory.exceeds_vram": "warning"}}))
    return inv / "hosts.yml", marker


def cache_setup_facts(tmp_path, inv, host):
    """`ansible -m setup` on ``host`` into tmp_path/facts (the run's jsonfile fact cache)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="jsonfile",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", str(inv), host, "-m", "setup"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path),
                          timeout=300, check=False, universal_newlines=True)
    assert proc.returncode == 0, proc.stdout
    assert os.listdir(str(tmp_path / "facts")), proc.stdout


def console(stdout):
    """What the run printed that the pre-flight decides: its summary (from 'dlrack.node
    preflight:' to the reports line), the verdict message and the recap."""
    start = stdout.index("dlrack.node preflight:")
    summary = stdout[start:stdout.index("reports:", start)]
    verdict = [line for line in stdout.splitlines() if "pre-flight failed for" in line]
    recap = stdout[stdout.rindex("\nPLAY RECAP"):]
    return summary, verdict, recap


def normalized(path):
    with open(str(path), "rb") as fh:
        text = fh.read().decode("utf-8", "surrogateescape")
    return TIME.sub("TIME", RUN_ID.sub("RUN-ID", text))


def test_preflight_is_the_same_with_and_without_the_fast_path(tmp_path, monkeypatch):
    inv, marker = hostile_inventory(tmp_path)
    cache_setup_facts(tmp_path, inv, "cached-evil")
    reports = tmp_path / "reports"
    got = {}
    for mode in ("fast", "reference"):
        if mode == "fast":
            monkeypatch.delenv("DLRACK_FAST_PATH", raising=False)
        else:
            monkeypatch.setenv("DLRACK_FAST_PATH", "false")
        run_dir = tmp_path / mode
        shutil.copytree(str(tmp_path / "facts"), str(run_dir / "facts"))   # each run the same cache to start with
        run = playbook(run_dir, "preflight.yml", inv, "dlrack_report_dir=%s" % reports)
        assert reports.is_dir(), run.stdout[-5000:]
        files = dict((name, normalized(reports / name)) for name in sorted(os.listdir(str(reports))) if not name.startswith("."))
        got[mode] = (run.returncode, console(run.stdout), files)
        shutil.move(str(reports), str(tmp_path / ("reports-" + mode)))
        assert not marker.exists() and not (tmp_path / "moved").exists(), run.stdout
    fast, reference = got["fast"], got["reference"]
    assert fast[0] == reference[0] == 2, fast
    assert set(fast[2]) == set(reference[2]) and {"report.json", "report.xml", "report.html"} <= set(fast[2])
    for name in fast[2]:
        assert fast[2][name] == reference[2][name], "%s differs between the fast and the reference path" % name
    assert fast[1][0] == reference[1][0], "the console summary differs"
    assert fast[1][1] == reference[1][1] and len(fast[1][1]) >= 1, "the verdict message differs"
    assert fast[1][2] == reference[1][2], "the recap differs"
    # what the fleet is: the hostile hosts fail, the rack only warns, the evil node cannot open the gate
    assert "FAIL  evil-gathered" in fast[1][0] and "FAIL  cached-evil" in fast[1][0], fast[1][0]
    assert "rack-00" not in fast[1][1][0] and "own-fail-on" not in fast[1][1][0]
