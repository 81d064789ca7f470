"""Node state after ecc_monitor, checked the way a person would by hand on the node (pytest-testinfra
over `podman exec`, no Ansible): dpkg, systemctl, the unit files, the installed collector, the
textfile directory. verify.yml runs this first:

    python -m pytest -p no:cacheprovider --hosts=podman://CONTAINER molecule/ecc_monitor/tests/test_node.py

The node is read in ONE `podman exec` (~0.7 s here; one per testinfra property was ~30 of them);
the tests parse its sections (read_sections: molecule/conftest.py). The Ansible-side checks
(idempotence, check mode in prepare.yml) and the collector's output parsed with prometheus_client
stay in verify.yml. Values are the role's defaults (roles/ecc_monitor/defaults).
"""
import pytest

TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
COLLECTOR = "/usr/local/bin/dlrack-ecc-collector"
UNIT_DIR = "/etc/systemd/system"
TIMER = UNIT_DIR + "/dlrack-ecc-collector.timer"
SERVICE = UNIT_DIR + "/dlrack-ecc-collector.service"
METRICS = "/usr/local/lib/dlrack/python/ansible_collections/dlrack/node/plugins/module_utils/ecc/metrics.py"
PROM = TEXTFILE_DIR + "/dlrack_ecc.prom"
# path -> (type, owner, group, mode) as `stat -c '%F %U %G %a'` prints them
INSTALLED = {
    TIMER: ("regular file", "root", "root", "644"),
    SERVICE: ("regular file", "root", "root", "644"),
    COLLECTOR: ("regular file", "root", "root", "755"),
    METRICS: ("regular file", "root", "root", "644"),
    TEXTFILE_DIR: ("directory", "root", "root", "755"),
}


@pytest.fixture(scope="module")
def node(host, read_sections):
    return read_sections(host, [
        ("packages", "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' rasdaemon edac-utils"),
        ("rasdaemon", "systemctl is-enabled rasdaemon"),
        ("timer", "systemctl is-enabled dlrack-ecc-collector.timer; systemctl is-active dlrack-ecc-collector.timer"),
        ("timers", "systemctl list-timers --all --no-legend dlrack-ecc-collector.timer"),
        ("service", "systemctl show dlrack-ecc-collector.service -p Result -p ExecMainStatus -p Type"),
        ("stat", "stat -c '%%n|%%F|%%U|%%G|%%a' %s" % " ".join(sorted(INSTALLED))),
        ("timer_file", "cat " + TIMER),
        ("service_file", "cat " + SERVICE),
        # the collector is told how the node is virtualized, as systemd sees it ("podman" here)
        ("virt", "systemd-detect-virt"),
        ("textfile_dir", "ls -A " + TEXTFILE_DIR),
        ("prom", "cat " + PROM),
        ("modules_load", "ls -A /etc/modules-load.d/"),
    ])


@pytest.mark.parametrize("name", ["rasdaemon", "edac-utils"])
def test_package_installed(node, name):
    # "ii": desired install, status installed
    assert [name, "ii"] in [line.split()[:2] for line in node[0]["packages"]], node


def test_rasdaemon_enabled(node):
    assert node[0]["rasdaemon"] == ["enabled"], node[1]


def test_collector_timer_enabled_and_active(node):
    assert node[0]["timer"] == ["enabled", "active"], node[1]
    assert any("dlrack-ecc-collector.service" in line for line in node[0]["timers"]), node[0]["timers"]


def test_installed_files_owner_and_mode(node, stat_lines):
    got = stat_lines(node[0]["stat"])
    assert got == INSTALLED, node[1]


def test_unit_files(node):
    timer = node[0]["timer_file"]
    assert "OnUnitActiveSec=1min" in timer and "WantedBy=timers.target" in timer
    virt = "".join(node[0]["virt"]).strip()
    execstart = "ExecStart=%s --textfile-dir %s --name dlrack_ecc.prom --budget-24h 9" % (COLLECTOR, TEXTFILE_DIR)
    if virt not in ("", "none"):
        execstart += " --virtualization " + virt
    service = node[0]["service_file"]
    assert execstart in service, service
    assert "ReadWritePaths=" + TEXTFILE_DIR in service


def test_the_collector_service_ran_and_succeeded(node):
    props = dict(line.split("=", 1) for line in node[0]["service"])
    assert props == {"Result": "success", "ExecMainStatus": "0", "Type": "oneshot"}


def test_textfile_directory_holds_only_the_finished_file(node):
    assert node[0]["textfile_dir"] == ["dlrack_ecc.prom"]          # written to a temp file and renamed
    assert "dlrack_edac_supported 0" in node[0]["prom"], node[0]["prom"]


def test_no_edac_module_forced_on_the_container(node):
    # No EDAC driver applies in a container: nothing may be written to load one at boot.
    assert not [name for name in node[0]["modules_load"] if "edac" in name.lower()], node[0]["modules_load"]
