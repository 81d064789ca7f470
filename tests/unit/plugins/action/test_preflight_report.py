"""preflight_report's settings handling: bad run-wide settings are one clear error naming the variable;
a host variable Ansible cannot template is that host's finding, not the run's failure."""
import pytest
from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable

from ansible_collections.dlrack.node.plugins.action.preflight_report import _validated_args, host_variables
from ansible_collections.dlrack.node.plugins.plugin_utils.hwschema import Unresolved
from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, hosts_to_gather
from ansible_collections.dlrack.node.plugins.plugin_utils.rules import evaluate_fleet

from hwdocs import GOOD  # noqa: E402


class _HostVars(object):
    """Like Ansible 2.19's hostvars: reading a variable that uses an undefined one raises."""

    def __init__(self, hosts):
        self.hosts = hosts

    def get(self, host):
        return _Vars(self.hosts[host]) if host in self.hosts else None


class _Vars(object):
    def __init__(self, values):
        self.values = values

    def get(self, key):
        value = self.values.get(key)
        if isinstance(value, str) and value.startswith("{{"):
            raise AnsibleUndefinedVariable("'%s' is undefined" % value.strip("{} "))
        return value


def test_undefined_host_variables_become_that_hosts_findings():
    hv = _HostVars({"a": {"dlrack_hw": GOOD, "dlrack_thresholds": "{{ nope_th }}"},
                    "b": {"dlrack_hw": "{{ nope_hw }}"}, "c": {"dlrack_hw": GOOD}})
    variables = {h: host_variables(hv, h) for h in ("a", "b", "c", "gone")}
    assert isinstance(variables["a"]["dlrack_thresholds"], Unresolved)
    assert variables["gone"]["dlrack_hw"] is None
    assert hosts_to_gather(sorted(variables.items())) == ["gone"]
    results, summary = evaluate_fleet({h: collect_host_inputs(h, v) for h, v in variables.items()})
    assert [results[h]["status"] for h in ("a", "b", "c")] == ["fail", "fail", "pass"]
    msgs = [f["message"] for f in results["a"]["findings"] if f["severity"] == "error"]
    assert msgs == ["host a: dlrack_thresholds: expected a mapping of threshold name to number, got a value "
                    "Ansible could not template ('nope_th' is undefined)"]
    msgs = [f["message"] for f in results["b"]["findings"] if f["severity"] == "error"]
    assert msgs == ["host b: dlrack_hw: expected a mapping (dlrack_hw: {schema: 1, source: declared, cpu: ...}), "
                    "got a value Ansible could not template ('nope_hw' is undefined)"]


def _args(**kw):
    return dict({"hosts": ["a"], "report_dir": "/tmp/r"}, **kw)


@pytest.mark.parametrize("args,names", [
    (_args(fail_on="sometimes"), "fail_on (variable dlrack_fail_on)"),
    (_args(report_dir=""), "dlrack_report_dir is empty: set it to the directory"),
    (_args(report_dir="  "), "report_dir (variable dlrack_report_dir)"),
    (_args(gather="maybe"), "gather (variable dlrack_gather)"),
    (_args(junit_warnings="loud"), "junit_warnings (variable dlrack_junit_warnings)"),
])
def test_bad_run_wide_settings_are_one_clear_error(args, names):
    with pytest.raises(AnsibleActionFail) as exc:
        _validated_args(args)
    assert "bad run-wide setting, nothing was validated" in str(exc.value) and names in str(exc.value)


def test_good_run_wide_settings():
    assert _validated_args(_args(fail_on="never"))["fail_on"] == "never"
    assert _validated_args({"hosts": ["a"], "select_only": True})["report_dir"] is None


def test_reading_variables_with_the_empty_facts_shortcut_gives_the_same_values(tmp_path):
    """A real inventory and VariableManager: hosts without facts and one with cached facts
    (dlrack_hw_gathered and keys clean_facts must remove) read the same with and without the
    shortcut, and ansible-core's clean_facts is back in place afterwards."""
    import json
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars import manager
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager
    from ansible_collections.dlrack.node.plugins.plugin_utils import fastpath

    inv_file = tmp_path / "inv.json"
    inv_file.write_text(json.dumps({"all": {"vars": {"dlrack_thresholds": {"min_gpus": 1}}, "children": {"rack": {
        "vars": {"dlrack_hw": GOOD}, "hosts": {"a": {}, "b": {"dlrack_profile": "inference"}, "c": {}}}}}}))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inv_file)])
    vm = VariableManager(loader=loader, inventory=inventory)
    vm.set_host_facts("c", {"dlrack_hw_gathered": dict(GOOD, source="gathered"), "ansible_ssh_pass": "x",
                            "ansible_python_interpreter": "/bin/false", "ansible_local": {"k": 1}})
    hv = HostVars(inventory=inventory, variable_manager=vm, loader=loader)
    original = manager.clean_facts
    hosts = ("a", "b", "c")
    plain = dict((h, hv.raw_get(h)) for h in hosts)
    calls = []
    with fastpath._empty_facts_shortcut():
        assert manager.clean_facts is not original
        shortcut = manager.clean_facts
        manager.clean_facts = lambda facts: calls.append(dict(facts)) or shortcut(facts)
        fast = dict((h, hv.raw_get(h)) for h in hosts)
        manager.clean_facts = shortcut
    assert manager.clean_facts is original
    assert json.dumps(fast, sort_keys=True, default=repr) == json.dumps(plain, sort_keys=True, default=repr)
    assert fast["c"]["dlrack_hw_gathered"]["source"] == "gathered" and fast["c"]["ansible_local"] == {"k": 1}
    assert fast["b"]["dlrack_profile"] == "inference" and fast["a"]["dlrack_thresholds"] == {"min_gpus": 1}
    assert "ansible_ssh_pass" not in fast["c"] and "ansible_python_interpreter" not in fast["c"]
    assert len(calls) == 3 and calls[2]   # every host still asks; the one with facts got them cleaned


def test_host_inputs_are_builtin_types_that_hosts_can_share_an_evaluation_by(tmp_path, monkeypatch):
    """Ansible 2.19 hands over tagged str/int/dict/list subclasses: the inputs read from a real
    inventory are the builtin types themselves, so identical hosts share one evaluation (on the fast
    path, whatever DLRACK_FAST_PATH says where the tests run)."""
    monkeypatch.delenv("DLRACK_FAST_PATH", raising=False)
    import json
    import marshal
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager
    from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import read_host
    from ansible_collections.dlrack.node.plugins.plugin_utils.rules import _inputs_key

    inv_file = tmp_path / "inv.json"
    inv_file.write_text(json.dumps({"all": {"hosts": {"a": {"dlrack_hw": GOOD, "dlrack_thresholds": {"min_gpus": 1}},
                                                      "b": {"dlrack_hw": GOOD, "dlrack_thresholds": {"min_gpus": 1}}}}}))
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inv_file)])
    hv = HostVars(inventory=inventory, variable_manager=VariableManager(loader=loader, inventory=inventory), loader=loader)
    assert hv.raw_get("a")["dlrack_hw"]["cpu"]["sockets"].__class__.__name__ != "int"   # tagged by Ansible

    def kinds(value, out):
        out.add(type(value))
        for v in (value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()):
            kinds(v, out)
        return out

    inputs = dict((h, read_host(h, dict(hv.raw_get(h)))[0]) for h in ("a", "b"))
    assert kinds(inputs["a"], set()) <= {dict, list, str, int, float, bool, type(None)}
    assert _inputs_key(inputs["a"]) is not None and _inputs_key(inputs["a"]) == _inputs_key(inputs["b"])
    assert marshal.loads(_inputs_key(inputs["a"]))
    results, dummy = evaluate_fleet(inputs)
    assert results["a"]["findings"][0] is results["b"]["findings"][0]
