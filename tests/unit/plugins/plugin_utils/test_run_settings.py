"""run_settings.settle() (issue 18.2) on plain mappings of host variables: a host's own fail_on
is that host's, a bad one is its error, different report directories stop the run, and facts
that set a setting are named (the real runs: tests/integration/test_hostile_nodes.py)."""
import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.run_settings import SettingsError, settle

FAIL_ON = ("acceptance_fail_on", "dlrack_fail_on")
REPORT_DIR = ("acceptance_report_dir", "dlrack_report_dir")


class _Cache(object):
    def __init__(self, facts):
        self._fact_cache = facts


class HostVars(dict):
    """{host: its variables}, with the fact cache Ansible's HostVars reaches through its manager."""

    def __init__(self, hosts, facts=None):
        super(HostVars, self).__init__(hosts)
        self._variable_manager = _Cache(facts or {})


def _settle(hostvars, **args):
    args = dict({"hosts": sorted(hostvars), "fail_on": "error", "report_dir": "reports"}, **args)
    return settle(None, None, {"hostvars": hostvars, "inventory_hostname": sorted(hostvars)[0]}, args,
                  FAIL_ON, REPORT_DIR, protected=("dlrack_hw",), prefix="acceptance_"), args


def test_an_own_fail_on_is_that_hosts_only():
    out, args = _settle(HostVars({"a": {}, "b": {"dlrack_fail_on": "never"}, "c": {"acceptance_fail_on": "error"}}))
    assert args["fail_on"] == out.fail_on == "error"
    assert out.host_fail_on == {"b": "never"} and out.host_errors == {}


def test_an_own_fail_on_that_is_no_level_is_that_hosts_error():
    out, dummy = _settle(HostVars({"a": {}, "b": {"dlrack_fail_on": "sometimes"}}))
    assert out.host_fail_on == {}
    assert out.host_errors == {"b": ['host b: dlrack_fail_on is "sometimes", not one of error, warning, never; '
                                     "set it to one of them (it is judged per the run's error)"]}


def test_a_run_wide_fail_on_that_is_no_level_stops_the_run():
    with pytest.raises(SettingsError, match="dlrack_fail_on is \"sometimes\", not one of error, warning, never"):
        _settle(HostVars({"a": {}}), fail_on="sometimes")


def test_different_report_directories_stop_the_run_naming_the_variable():
    with pytest.raises(SettingsError) as err:
        _settle(HostVars({"a": {"dlrack_report_dir": "/x"}, "b": {"acceptance_report_dir": "/y"}}), report_dir="/x")
    assert str(err.value).startswith("dlrack_report_dir is a run-wide setting, but the hosts' variables give it "
                                     "different values (dlrack_report_dir=/x on a; acceptance_report_dir=/y on b)")
    out, args = _settle(HostVars({"a": {"dlrack_report_dir": "/x"}, "b": {"dlrack_report_dir": "/x"}}), report_dir="/x")
    assert out.report_dir == args["report_dir"] == "/x"


def test_a_control_character_in_the_report_directory_stops_the_run():
    with pytest.raises(SettingsError, match="dlrack_report_dir holds a control character"):
        _settle(HostVars({"a": {}}), report_dir="/r\x1b[2J")


def test_facts_that_set_a_setting_are_the_hosts_error_and_decide_nothing():
    hostvars = HostVars({"a": {}, "b": {"dlrack_fail_on": "never"}},
                        facts={"b": {"dlrack_fail_on": "never", "acceptance_link_fraction": 0, "ansible_system": "Linux"}})
    out, dummy = _settle(hostvars)
    assert out.host_fail_on == {}                 # the fact is not b's own value
    [why] = out.host_errors["b"]
    assert why.startswith("host b: its facts set acceptance_link_fraction, dlrack_fail_on: values a module on the node returned")
