"""Node state after ecc_monitor, checked the way a person would by hand on the node (pytest-testinfra
over `podman exec`, no Ansible): dpkg, systemctl, the unit files, the installed collector, the
textfile directory. verify.yml runs this first:

    python -m pytest -p no:cacheprovider --hosts=podman://CONTAINER molecule/ecc_monitor/tests/test_node.py

The Ansible-side checks (idempotence, check mode in prepare.yml) and the collector's output parsed
with prometheus_client stay in verify.yml. Values are the role's defaults (roles/ecc_monitor/defaults).
"""
import pytest

TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
COLLECTOR = "/usr/local/bin/dlrack-ecc-collector"
UNIT_DIR = "/etc/systemd/system"


@pytest.mark.parametrize("name", ["rasdaemon", "edac-utils"])
def test_package_installed(host, name):
    assert host.package(name).is_installed


def test_rasdaemon_enabled(host):
    assert host.service("rasdaemon").is_enabled


def test_collector_timer_enabled_and_active(host):
    assert host.run("systemctl is-enabled dlrack-ecc-collector.timer").stdout.strip() == "enabled"
    assert host.run("systemctl is-active dlrack-ecc-collector.timer").stdout.strip() == "active"
    listed = host.check_output("systemctl list-timers --all --no-legend dlrack-ecc-collector.timer")
    assert "dlrack-ecc-collector.service" in listed


def test_unit_files(host):
    timer = host.file(UNIT_DIR + "/dlrack-ecc-collector.timer")
    service = host.file(UNIT_DIR + "/dlrack-ecc-collector.service")
    for unit in (timer, service):
        assert unit.is_file and unit.user == "root" and unit.group == "root" and unit.mode == 0o644
    lines = timer.content_string.splitlines()
    assert "OnUnitActiveSec=1min" in lines and "WantedBy=timers.target" in lines
    # The collector is told how the node is virtualized, as systemd sees it ("podman" here).
    virt = host.run("systemd-detect-virt").stdout.strip()
    execstart = "ExecStart=%s --textfile-dir %s --name dlrack_ecc.prom --budget-24h 9" % (COLLECTOR, TEXTFILE_DIR)
    if virt not in ("", "none"):
        execstart += " --virtualization " + virt
    assert execstart in service.content_string.splitlines()
    assert "ReadWritePaths=" + TEXTFILE_DIR in service.content_string.splitlines()


def test_the_collector_service_ran_and_succeeded(host):
    props = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show dlrack-ecc-collector.service -p Result -p ExecMainStatus -p Type").splitlines())
    assert props == {"Result": "success", "ExecMainStatus": "0", "Type": "oneshot"}


def test_collector_installed(host):
    exe = host.file(COLLECTOR)
    assert exe.is_file and exe.user == "root" and exe.mode == 0o755
    lib = host.file("/usr/local/lib/dlrack/python/ansible_collections/dlrack/node/plugins/module_utils/ecc/metrics.py")
    assert lib.is_file and lib.mode == 0o644


def test_textfile_directory_holds_only_the_finished_file(host):
    directory = host.file(TEXTFILE_DIR)
    assert directory.is_directory and directory.mode == 0o755
    assert directory.listdir() == ["dlrack_ecc.prom"]          # written to a temp file and renamed
    prom = host.file(TEXTFILE_DIR + "/dlrack_ecc.prom")
    assert prom.size > 0 and "dlrack_edac_supported 0" in prom.content_string.splitlines()


def test_no_edac_module_forced_on_the_container(host):
    # No EDAC driver applies in a container: nothing may be written to load one at boot.
    assert host.run("ls /etc/modules-load.d/ | grep -i edac").rc == 1
