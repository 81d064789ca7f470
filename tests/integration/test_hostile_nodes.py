"""Compromised nodes and hostile inventories (issue 18.1, 18.2, 18.6 for declare.yml, 18.8,
18.9b/c): real ansible-playbook runs of declare.yml and preflight.yml.

A compromised node controls its whole module result, so the node is simulated by a stand-in
``ansible_python_interpreter``: a script that answers any module with crafted JSON (a real
hw_facts document, tests/hwdocs.py GATHERED, with hostile strings and extra facts). Ansible runs
it exactly as it runs a node's Python (connection local), so everything on the controller's side
is the real thing. Each run has its own fact cache (ANSIBLE_CACHE_PLUGIN_CONNECTION) so that no
test sees another's facts, and the repository's ansible.cfg (jsonfile fact cache on)."""
import copy
import json
import os
import subprocess

import pytest

from hostile import VENV_BIN, Node, inventory, node_vars, playbook
from hwdocs import GATHERED, GOOD
from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)

PWNED_TEMPLATE = "{{ lookup('pipe', 'touch %s') }}"


def hostile_doc(marker):
    doc = copy.deepcopy(GATHERED)
    doc["cpu"]["model"] = PWNED_TEMPLATE % marker
    doc["disks"][1]["serial"] = "S{{ 6 * 7 }}X"
    doc["errors"] = []
    return doc


def test_declared_node_strings_are_never_templated(tmp_path):
    """18.1: declare.yml writes what the node returned; the pre-flight that reads the declaration
    back (and templates the host's variables) never runs the node's template: the file its
    lookup would create never exists, and the report shows the string as text."""
    marker = tmp_path / "PWNED"
    node = Node(tmp_path)
    node.answer(hostile_doc(marker))
    inv = inventory(tmp_path, {"evil": node_vars(node)})
    run = playbook(tmp_path, "declare.yml", inv / "hosts.yml", "dlrack_declare_identity=true")
    assert run.returncode == 0, run.stdout
    reports = tmp_path / "reports"
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    assert not marker.exists(), run.stdout
    text = (inv / "host_vars" / "evil" / "dlrack_hw.yml").read_text()
    assert "\ndlrack_hw: !unsafe\n" in text and "S{{ 6 * 7 }}X" in text     # the serial's real value
    assert run.returncode == 2, run.stdout                     # the host fails (its CPU model is no model)
    host = json.loads((reports / "report.json").read_text())["hosts"]["evil"]
    messages = " ".join(f["message"] for f in host["findings"])
    assert "got \"{{ lookup('pipe', 'touch " in messages         # the text itself, not what it would render
    html = (reports / "report.html").read_text()
    assert "{{ lookup(&#x27;pipe&#x27;" in html or "{{ lookup(&#39;pipe&#39;" in html
    # the gathered host too (dlrack_gather: the node answers again, the fact is compared)
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports, "dlrack_gather=true")
    assert not marker.exists(), run.stdout
    assert run.returncode == 2, run.stdout


def test_a_nodes_facts_cannot_change_the_run(tmp_path):
    """18.2: hw_facts keeps only dlrack_hw_gathered of what a node returns: a first host whose
    answer sets preflight_fail_on: never, the report directory and a passing dlrack_hw neither
    opens the gate nor moves the reports, also on the next run (the fact cache)."""
    moved = tmp_path / "moved"
    evil, bad = Node(tmp_path, "evil"), Node(tmp_path, "bad")
    fake_pass = {"schema": 1, "source": "declared", "cpu": {"model": "AMD EPYC 9654 96-Core Processor"}}
    evil.answer(copy.deepcopy(GATHERED), preflight_fail_on="never", dlrack_fail_on="never",
                preflight_report_dir=str(moved), dlrack_report_dir=str(moved), dlrack_hw=fake_pass,
                dlrack_profile="workstation", preflight_junit_warnings="passed")
    broken = copy.deepcopy(GATHERED)
    broken["gpus"][0]["pcie"]["width"] = 4                     # gpu.pcie_link: an error
    bad.answer(broken)
    inv = inventory(tmp_path, {"a-evil": node_vars(evil), "b-bad": node_vars(bad)})
    reports = tmp_path / "reports"
    for dummy in range(2):                                         # the second run reads the fact cache
        run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
        assert run.returncode == 2, run.stdout
        assert "pre-flight failed for" in run.stdout and "b-bad" in run.stdout
        assert not moved.exists()
        doc = json.loads((reports / "report.json").read_text())
        assert doc["hosts"]["b-bad"]["status"] == "fail"
    assert "left out what the node returned besides dlrack_hw_gathered" in run.stdout
    cached = (tmp_path / "facts").iterdir()
    for path in cached:
        text = path.read_text()
        assert "preflight_fail_on" not in text and "dlrack_report_dir" not in text and "workstation" not in text


@pytest.mark.parametrize("bad_host", ["../../escaped", "rack/../../escaped", "x" * 300])
def test_declare_refuses_host_names_that_leave_host_vars(tmp_path, bad_host):
    """18.6 (declare.yml): a host name that is not one directory name is refused with one sentence
    before the host is contacted; nothing is written for it, the other hosts are declared."""
    marker = tmp_path / "PWNED"
    node = Node(tmp_path)
    node.answer(hostile_doc(marker))
    inv = inventory(tmp_path, {bad_host: node_vars(node), "good": node_vars(node)}, name="a/b/inventory")
    if "/" in bad_host:
        # with the jsonfile fact cache (one file per host name) the inventory check, declare.yml's first
        # task, stops the run on such a name before any host is contacted, naming it and the fix
        run = playbook(tmp_path, "declare.yml", inv / "hosts.yml", cache="jsonfile")
        assert run.returncode == 2 and "host name %s holds a path separator" % bad_host in run.stdout, run.stdout
        assert not list(tmp_path.rglob("dlrack_hw.yml")) and not list(tmp_path.rglob("escaped"))
    # declare.yml's own refusal (the jsonfile fact cache cannot even look up a 300-character host)
    run = playbook(tmp_path, "declare.yml", inv / "hosts.yml", cache="memory")
    assert run.returncode == 2, run.stdout
    assert "declare.yml refuses host '" in run.stdout and "nothing was written" in run.stdout
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("dlrack_hw.yml"))
    assert written == ["a/b/inventory/host_vars/good/dlrack_hw.yml"]
    assert not list(tmp_path.rglob("escaped"))
    assert "Traceback" not in run.stdout and not marker.exists()


def declared_fleet(tmp_path, first_vars=None, other_vars=None):
    """Three declared hosts (no connection): a-first passes or fails as ``first_vars`` says,
    b-bad fails (an error finding: 256 GiB of RAM for 8 x 141 GB of GPU memory), c-good passes."""
    good = copy.deepcopy(GOOD)
    bad = copy.deepcopy(GOOD)
    bad["memory"]["total_mb"] = 262144                          # memory.exceeds_vram: an error
    hosts = {"a-first": dict({"dlrack_hw": bad}, **(first_vars or {})),
             "b-bad": dict({"dlrack_hw": bad}, **(other_vars or {})),
             "c-good": {"dlrack_hw": good}}
    return inventory(tmp_path, hosts)


def test_a_hosts_own_fail_on_changes_only_its_own_verdict(tmp_path):
    """18.2: the first host of the inventory sets dlrack_fail_on: never for itself: it passes the
    gate, and the fleet still fails for b-bad (today its value decided for every host)."""
    reports = tmp_path / "reports"
    inv = declared_fleet(tmp_path, first_vars={"dlrack_fail_on": "never"})
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    assert run.returncode == 2, run.stdout
    assert "pre-flight failed for 1 host(s)" in run.stdout and ": b-bad;" in run.stdout
    doc = json.loads((reports / "report.json").read_text())
    assert doc["summary"]["fail_on"] == "error" and doc["summary"]["fail_on_hosts"] == {"a-first": "never"}
    assert doc["hosts"]["a-first"]["status"] == "fail"            # its findings are reported all the same
    # the other way round: the run says never, one host insists on error for itself
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "preflight_fail_on=never")
    assert run.returncode == 0, run.stdout
    inv2 = declared_fleet(tmp_path / "two", other_vars={"preflight_fail_on": "error"}) if (tmp_path / "two").mkdir() is None else None
    run = playbook(tmp_path, "preflight.yml", inv2 / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "dlrack_fail_on=never")
    assert run.returncode == 2 and "pre-flight failed for 1 host(s)" in run.stdout and ": b-bad;" in run.stdout, run.stdout


def test_run_wide_settings_never_depend_on_inventory_order(tmp_path):
    """18.2: hosts whose own variables give the report directory different values: the run says
    so, naming the variable, instead of writing where the first host says."""
    first = tmp_path / "first-says"
    inv = declared_fleet(tmp_path, first_vars={"dlrack_report_dir": str(first)})
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml")
    assert run.returncode != 0, run.stdout
    assert "dlrack_report_dir is a run-wide setting, but the hosts' variables give it different values" in run.stdout
    assert not first.exists() and not (tmp_path / "reports").exists()
    # the same value for every host (group_vars/all, extra vars) is one setting
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "all.yml").write_text("dlrack_report_dir: %s\n" % first)
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml")
    assert run.returncode == 2 and (first / "report.json").exists(), run.stdout


def adhoc_setup(tmp_path, inv):
    """`ansible -m setup` on every host with the run's fact cache: what a node answers to setup
    (in site.yml's provisioning play, or any other playbook) lands in the cache."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"))
    return subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", str(inv), "all", "-m", "setup"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path),
                          timeout=300, check=False, universal_newlines=True)


def test_cached_facts_from_another_module_cannot_set_inputs_or_settings(tmp_path):
    """18.2: a node answered setup (not hw_facts, which keeps only its document) with facts that
    would open the gate (preflight_fail_on: never), move the reports and replace its declaration
    with a passing one; they sit in the fact cache. The next pre-flight of the declared fleet -
    that host first - fails that host with an error naming the facts, keeps the verdict of the
    others, and writes the reports where the operator said."""
    moved = tmp_path / "moved"
    evil = Node(tmp_path, "evil")
    fake = copy.deepcopy(GOOD)
    evil.answer(copy.deepcopy(GATHERED), preflight_fail_on="never", dlrack_fail_on="never",
                dlrack_report_dir=str(moved), dlrack_hw=fake, __dlrack_verdict_deferred=True)
    inv = declared_fleet(tmp_path, first_vars=node_vars(evil))
    assert adhoc_setup(tmp_path, inv / "hosts.yml").returncode != 3
    reports = tmp_path / "reports"
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    assert run.returncode == 2, run.stdout
    assert not moved.exists()
    doc = json.loads((reports / "report.json").read_text())
    first = doc["hosts"]["a-first"]
    assert first["status"] == "fail" and doc["hosts"]["b-bad"]["status"] == "fail"
    (taint,) = [f for f in first["findings"] if "its facts set" in f["message"]]
    assert taint["severity"] == "error" and "preflight_fail_on" in taint["message"] and "dlrack_hw" in taint["message"]
    assert "pre-flight failed for 2 host(s)" in run.stdout


def gathered_pair(tmp_path, first_fail_on):
    """preflight.yml on two gathered hosts: a-first passes and sets its own dlrack_fail_on,
    b-bad's GPU link is x4 (gpu.pcie_link: an error). (the run, the report directory)"""
    a, b = Node(tmp_path, "a"), Node(tmp_path, "b")
    a.answer(copy.deepcopy(GATHERED))
    broken = copy.deepcopy(GATHERED)
    broken["gpus"][0]["pcie"]["width"] = 4
    b.answer(broken)
    inv = inventory(tmp_path, {"a-first": node_vars(a, dlrack_fail_on=first_fail_on), "b-bad": node_vars(b)})
    reports = tmp_path / "reports"
    return playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports), reports


def test_a_gathered_first_host_with_its_own_fail_on(tmp_path):
    """18.2 through the role (the gather play, then the role's validation): the first host is
    gathered and says dlrack_fail_on: never for itself; the failing second host still fails."""
    run, reports = gathered_pair(tmp_path, "never")
    assert run.returncode == 2, run.stdout
    assert "pre-flight failed for 1 host(s)" in run.stdout and ": b-bad;" in run.stdout


def test_a_gathered_first_hosts_bad_own_fail_on_is_its_own_error(tmp_path):
    """18.2 through the gather play: the first host is gathered and its own dlrack_fail_on is no
    level. That is its error finding; the second host is still judged (the role's argument-spec
    check of the validation play, run once on the first host, used to stop the whole run there)."""
    run, reports = gathered_pair(tmp_path, "sometimes")
    assert run.returncode == 2, run.stdout
    hosts = json.loads((reports / "report.json").read_text())["hosts"]
    assert [f["message"] for f in hosts["a-first"]["findings"]
            if f["rule"] == "inventory.schema" and f["severity"] == "error"] == [
        'host a-first: dlrack_fail_on is "sometimes", not one of error, warning, never']
    assert "gpu.pcie_link" in [f["rule"] for f in hosts["b-bad"]["findings"] if f["severity"] == "error"]
    assert "pre-flight failed for 2 host(s)" in run.stdout, run.stdout


def test_the_console_shows_control_characters_escaped(tmp_path):
    """18.8: a host name with ESC/OSC 52/BEL and a line feed, and a gathered GPU model with a
    terminal sequence, reach the console only as escapes: no raw control character in the
    summary lines, and no forged `PASS` line."""
    node = Node(tmp_path)
    doc = copy.deepcopy(GATHERED)
    doc["gpus"][0]["model"] = "\x1b]52;c;cm0gLXJmIH4=\x07NVIDIA H100\rPASS  x"
    node.answer(doc)
    declared = {"schema": 1, "source": "declared", "gpus": {"model": "NVIDIA RTX 6000 Ada Generation", "count": 4}}
    host = "gpu\x1bc\x07\x9b2J\nPASS  forged"   # (a "[" would be an Ansible host range)
    inv = inventory(tmp_path, {host: node_vars(node, dlrack_hw=declared, dlrack_gather=True,
                                               dlrack_external_archive="nfs://x\x1b[2J")})
    reports = tmp_path / "reports"
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    assert run.returncode == 2, run.stdout
    start = run.stdout.index("dlrack.node preflight:")
    summary = run.stdout[start:run.stdout.index("reports:", start)]
    assert "\x1b" not in summary and "\x07" not in summary and "\r" not in summary
    lines = summary.splitlines()
    assert not [line for line in lines if line.startswith("PASS")], summary
    assert any(line.startswith("FAIL  gpu\\x1bc\\x07\\x9b2J\\nPASS  forged") for line in lines), summary
    assert "\\x1b]52;c;cm0glxjmih4=\\x07nvidia h100\\rpass  x" in summary   # matches_declared names it (lower case)
    assert "dlrack_external_archive holds a control character (nfs://x\\x1b[2J)" in summary
    # and the verdict fails although the host's name is no host pattern (it fails on localhost)
    assert "pre-flight failed for 1 host(s)" in run.stdout
    # Ansible's own lines (task headers, the recap) print the name raw: inventory_check names it first
    # (whitespace folded: ansible-core 2.16 wraps a warning at 80 columns)
    assert "[WARNING]: 1 host name(s) hold control characters: gpu\\x1bc\\x07\\x9b2J\\nPASS forged. " in " ".join(
        run.stdout.split())


def test_a_failing_hosts_facts_cannot_skip_the_verdict(tmp_path):
    """18.2: the only failing host's node answered setup with __dlrack_verdict_deferred: true (what
    site.yml sets to give the verdict after provisioning): the verdict play, whose condition reads
    its host's variables, runs elsewhere and the run still fails."""
    evil = Node(tmp_path, "evil")
    evil.answer(copy.deepcopy(GATHERED), __dlrack_verdict_deferred=True)
    bad = copy.deepcopy(GOOD)
    bad["memory"]["total_mb"] = 262144
    inv = inventory(tmp_path, {"evil": node_vars(evil, dlrack_hw=bad), "fine": {"dlrack_hw": GOOD}})
    assert adhoc_setup(tmp_path, inv / "hosts.yml").returncode != 3
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % (tmp_path / "reports"))
    assert run.returncode == 2, run.stdout
    assert "pre-flight failed for 1 host(s)" in run.stdout


def test_a_bad_own_fail_on_is_that_hosts_error_wherever_it_stands(tmp_path):
    """18.2: a host's own dlrack_fail_on that is no level is that host's error finding, first in
    the inventory or not (the first host's used to stop the whole run); a bad run-wide one (extra
    vars) still stops the run naming the variable."""
    reports = tmp_path / "reports"
    inv = declared_fleet(tmp_path, first_vars={"dlrack_fail_on": "sometimes"})
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    assert run.returncode == 2, run.stdout
    first = json.loads((reports / "report.json").read_text())["hosts"]["a-first"]
    assert [f["message"] for f in first["findings"] if f["rule"] == "inventory.schema" and f["severity"] == "error"] == [
        'host a-first: dlrack_fail_on is "sometimes", not one of error, warning, never']
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "dlrack_fail_on=sometimes")
    assert run.returncode == 2 and "bad run-wide setting, nothing was validated" in run.stdout, run.stdout
    assert "fail_on (variable dlrack_fail_on)" in " ".join(run.stdout.split())   # (2.16 wraps the message)


def test_the_first_hosts_own_dlrack_gather_gathers_that_host_only(tmp_path):
    """18.2: dlrack_gather: true in the first host's own variables gathers that host, not every
    declared host of the fleet (the others here would fail to answer: their interpreter is gone)."""
    node = Node(tmp_path)
    node.answer(copy.deepcopy(GATHERED))
    gone = {"ansible_connection": "local", "ansible_python_interpreter": str(tmp_path / "no-such-python")}
    inv = declared_fleet(tmp_path, first_vars=node_vars(node, dlrack_gather=True), other_vars=gone)
    reports = tmp_path / "reports"
    run = playbook(tmp_path, "preflight.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports)
    doc = json.loads((reports / "report.json").read_text())
    rules = {h: sorted(set(f["rule"] for f in r["findings"])) for h, r in doc["hosts"].items()}
    assert "inventory.matches_declared" in rules["a-first"], run.stdout        # gathered and compared
    assert "host.gathered" not in rules["b-bad"] and "host.gathered" not in rules["c-good"], run.stdout
    assert doc["hosts"]["c-good"]["status"] == "pass"


def failing_node(tmp_path, name, **facts):
    """A stand-in node whose every module fails (the acceptance role records it: an error), or
    with ``facts``, succeeds with them and no figures (what a compromised node may answer to
    packages_missing and acceptance_measure)."""
    node = Node(tmp_path, name)
    answer = {"failed": True, "msg": "the measurement failed on %s" % name}
    if facts:   # (Ansible keeps the facts of a module that succeeded only)
        answer = {"changed": False, "install": [], "acceptance": {}, "ansible_facts": facts}
    node.answer_path.write_text(json.dumps(answer))
    return node


def acceptance_fleet(tmp_path, first_vars=None, first_facts=None):
    """a-first and b-bad: stand-in nodes whose measurements fail (each host an error)."""
    a = failing_node(tmp_path, "a", **(first_facts or {}))
    b = failing_node(tmp_path, "b")
    return inventory(tmp_path, {"a-first": node_vars(a, **(first_vars or {})), "b-bad": node_vars(b)})


def test_acceptance_a_hosts_own_fail_on_changes_only_its_own_verdict(tmp_path):
    """18.2 for acceptance: the first host's own dlrack_fail_on: never passes that host's gate
    only; b-bad still fails the run (the role's run_once report task read the first host's value
    for the whole fleet: exit 0)."""
    reports = tmp_path / "reports"
    inv = acceptance_fleet(tmp_path, first_vars={"dlrack_fail_on": "never"})
    run = playbook(tmp_path, "acceptance.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "acceptance_become=false")
    assert run.returncode == 2, run.stdout
    doc = json.loads((reports / "acceptance.json").read_text())
    assert doc["summary"]["fail_on"] == "error" and doc["summary"]["fail_on_hosts"] == {"a-first": "never"}
    assert doc["summary"]["failed_hosts"] == ["b-bad"]
    assert doc["hosts"]["a-first"]["status"] == doc["hosts"]["b-bad"]["status"] == "error"
    # one failing task naming every failing host (issue 19.5: it was one per host)
    assert "acceptance failed for 1 host(s) (acceptance_fail_on=error; 1 host(s) with their own): error: b-bad; see " \
        in " ".join(run.stdout.split()), run.stdout
    assert "a-first;" not in run.stdout and "acceptance error for" not in run.stdout, run.stdout
    # the other way round: the run says never, the first host insists on error for itself
    run = playbook(tmp_path, "acceptance.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "acceptance_become=false", "acceptance_fail_on=never")
    assert run.returncode == 0, run.stdout
    inv2 = acceptance_fleet(tmp_path / "two", first_vars={"acceptance_fail_on": "error"}) if (tmp_path / "two").mkdir() is None else None
    run = playbook(tmp_path, "acceptance.yml", inv2 / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "acceptance_become=false", "dlrack_fail_on=never")
    assert run.returncode == 2, run.stdout
    assert json.loads((reports / "acceptance.json").read_text())["summary"]["failed_hosts"] == ["a-first"]


def test_acceptance_report_dir_never_depends_on_inventory_order(tmp_path):
    """18.2 for acceptance: the first host's own dlrack_report_dir stops the run naming the
    variable (it moved every host's reports there); the same value for every host is one setting."""
    first = tmp_path / "first-says"
    inv = acceptance_fleet(tmp_path, first_vars={"dlrack_report_dir": str(first)})
    run = playbook(tmp_path, "acceptance.yml", inv / "hosts.yml", "acceptance_become=false")
    assert run.returncode != 0, run.stdout
    assert "dlrack_report_dir is a run-wide setting, but the hosts' variables give it different values" in run.stdout
    assert not first.exists() and not (tmp_path / "reports").exists()
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "all.yml").write_text("dlrack_report_dir: %s\n" % first)
    run = playbook(tmp_path, "acceptance.yml", inv / "hosts.yml", "acceptance_become=false")
    assert run.returncode == 2 and (first / "acceptance.json").exists(), run.stdout


def test_acceptance_a_nodes_facts_cannot_change_the_run(tmp_path):
    """18.2 for acceptance: the first host's node answers with facts that would open the gate and
    move the reports (every module result's ansible_facts become the host's variables). The
    collection's node modules keep no facts of a node's answer (issue 28.1, plugin_utils/node_result.py):
    they never reach the run - a warning names them, b-bad still fails, the reports stay where the
    operator said. (Facts from a module that is not ours make the host a host.settings error:
    test_act_trust.py and run_settings.)"""
    moved, reports = tmp_path / "moved", tmp_path / "reports"
    inv = acceptance_fleet(tmp_path, first_facts={"acceptance_fail_on": "never", "dlrack_fail_on": "never",
                                                  "dlrack_report_dir": str(moved), "acceptance_report_dir": str(moved)})
    run = playbook(tmp_path, "acceptance.yml", inv / "hosts.yml", "dlrack_report_dir=%s" % reports,
                   "acceptance_become=false")
    assert run.returncode == 2, run.stdout
    assert not moved.exists()
    doc = json.loads((reports / "acceptance.json").read_text())
    assert doc["summary"]["failed_hosts"] == ["a-first", "b-bad"] and "fail_on_hosts" not in doc["summary"]
    said = " ".join(run.stdout.split())            # ansible-core 2.16 wraps a warning's lines
    assert "left out what the node returned that Ansible would turn into variables, stats, hosts or groups" in said
    assert "acceptance_fail_on, acceptance_report_dir" in said
    for path in (tmp_path / "facts").iterdir():
        assert "acceptance_fail_on" not in path.read_text() and str(moved) not in path.read_text()
