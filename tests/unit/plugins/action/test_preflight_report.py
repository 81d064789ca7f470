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
