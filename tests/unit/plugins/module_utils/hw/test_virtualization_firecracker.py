"""hw_facts calls a Firecracker microVM by its name, not `docker` (issue 30.8).

The root is laid out as on the Firecracker microVM this project's tests run in (captured
2026-12-04, guest kernel 6.18.44-fc-v1272, see tests/data/real/SOURCES.md "virt/"): its real FADT
(/sys/firmware/acpi/tables/FACP, OEM ID FIRECK, hypervisor vendor FIRECKVM), the /.dockerenv its
root filesystem image carries, no /sys/class/dmi (Firecracker has no SMBIOS) and the cpuinfo
hypervisor flag. systemd-detect-virt answers `docker` there, and so did hw_facts."""
import os
import shutil

from ansible_collections.dlrack.node.plugins.module_utils.hw import gather
from testpaths import DATA

FACP = os.path.join(DATA, "real", "virt", "firecracker", "FACP")


def _microvm(tmp_path, facp=FACP, dockerenv=True):
    root = tmp_path / "root"
    tables = root / "sys" / "firmware" / "acpi" / "tables"
    tables.mkdir(parents=True)
    if facp:
        shutil.copy(facp, str(tables / "FACP"))
    if dockerenv:
        (root / ".dockerenv").write_text("")
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "hostname").write_text("sandbox\n")
    return str(root)


def test_the_captured_fadt_is_firecrackers():
    with open(FACP, "rb") as fh:
        table = fh.read()
    assert len(table) == 276 and table[:4] == b"FACP" and table[10:16] == b"FIRECK" and table[16:24] == b"FCVMFADT"
    assert table[268:276] == b"FIRECKVM"


def test_a_firecracker_vm_with_a_docker_image_root_is_firecracker(tmp_path):
    root = _microvm(tmp_path)
    assert gather._virtualization(root, {"hypervisor": True}) == "firecracker"
    host, dummy = gather._gather_host(root, {"hypervisor": True})
    assert host["virtualization"] == "firecracker"


def test_without_the_tables_the_markers_decide_as_before(tmp_path):
    """A container (Docker masks /sys/firmware) is still the container; a KVM guest without
    readable tables is still vm-other; the hypervisor identity alone (another OEM) also names it."""
    assert gather._virtualization(_microvm(tmp_path / "a", facp=None), {"hypervisor": True}) == "docker"
    assert gather._virtualization(_microvm(tmp_path / "b", facp=None, dockerenv=False), {"hypervisor": True}) == "vm-other"
    with open(FACP, "rb") as fh:
        table = bytearray(fh.read())
    table[10:16] = b"OTHER "
    other = tmp_path / "other-facp"
    other.write_bytes(bytes(table))
    assert gather._virtualization(_microvm(tmp_path / "c", facp=str(other)), {"hypervisor": True}) == "firecracker"
    table[268:276] = b"\0" * 8
    other.write_bytes(bytes(table))
    assert gather._virtualization(_microvm(tmp_path / "d", facp=str(other), dockerenv=False), {"hypervisor": True}) == "vm-other"
