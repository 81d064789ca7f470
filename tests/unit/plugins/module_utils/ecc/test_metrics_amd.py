"""AMD RAS counters in the ECC textfile (issue 21.6), from amdgpu sysfs trees built from the
kernel's documented formats (tests/data/amd/README.md); NVIDIA output is left as it was."""
import os
import re

import gputrees
import pytest
from testpaths import DATA, sysfs_tree

from ansible_collections.dlrack.node.plugins.module_utils.ecc import metrics


@pytest.fixture(scope="module")
def amd_tree(tmp_path_factory):
    return gputrees.build("amd/build_trees.py", tmp_path_factory)


def samples(text, family):
    return [line for line in text.splitlines() if line.startswith(family + "{")]


def test_mi300x_ras_counters_per_block_with_vendor_label(amd_tree):
    text = metrics.collect(root=amd_tree("mi300x-8gpu"), now=0)
    assert len(samples(text, "dlrack_gpu_ecc_enabled")) == 8
    line = 'dlrack_gpu_ecc_corrected_errors_total{gpu="3",uuid="GPU-6f1f0a2b3c4d5e03",vendor="amd",scope="volatile",block="umc"} 5'
    assert line in text.splitlines()
    assert ('dlrack_gpu_ecc_deferred_errors_total{gpu="3",uuid="GPU-6f1f0a2b3c4d5e03",vendor="amd",scope="volatile",'
            'block="umc"} 0') in text.splitlines()
    # gfx/sdma print no "de": no deferred sample for them (unknown is not zero)
    assert not [s for s in samples(text, "dlrack_gpu_ecc_deferred_errors_total") if 'block="gfx"' in s]
    assert 'dlrack_gpu_retired_pages{gpu="3",uuid="GPU-6f1f0a2b3c4d5e03",vendor="amd",cause="bad_page"} 1' in text
    assert all('vendor="amd"' in s for s in samples(text, "dlrack_gpu_ecc_supported"))
    assert text.count("# TYPE dlrack_gpu_ecc_corrected_errors_total counter") == 1


def test_mi210_without_ras_is_unsupported_not_zero(amd_tree):
    text = metrics.collect(root=amd_tree("mi210-2gpu-pcie"), now=0)
    assert samples(text, "dlrack_gpu_ecc_supported") == [
        'dlrack_gpu_ecc_supported{gpu="0",uuid="",vendor="amd"} 0',
        'dlrack_gpu_ecc_supported{gpu="1",uuid="",vendor="amd"} 0']
    assert not samples(text, "dlrack_gpu_ecc_corrected_errors_total") and "dlrack_gpu_ecc_enabled" not in text


def test_nvidia_tree_gets_no_amd_samples():
    text = metrics.collect(root=sysfs_tree("esc8000a-e12"), now=0)
    assert 'vendor=' not in text and not re.search(r"^dlrack_gpu_", text, re.M)


def _gpu_labels(text, vendor):
    out = set()
    for line in samples(text, "dlrack_gpu_ecc_supported"):
        if ('vendor="%s"' % vendor in line) if vendor else ("vendor=" not in line):
            out.add(re.search(r'gpu="([^"]*)"', line).group(1))
    return out


def test_mixed_node_gpu_label_is_unique_and_the_hw_facts_index(amd_tree):
    """A node with 2 NVIDIA GPUs (nvidia-smi numbers them 0, 1) and 2 MI210: the AMD series are
    gpu 2 and 3, the index hw_facts gives them, whether nvidia-smi answers or not."""
    from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu import gather_gpus
    from ansible_collections.dlrack.node.plugins.module_utils.hw.gpu.pci import SysReader
    root = amd_tree("mixed-2nvidia-2mi210")
    xml = os.path.join(DATA, "real", "nvidia-smi-q-xml", "telegraf-dual_a5000-v13.xml")
    with_smi = metrics.collect(root=root, nvidia_smi_xml=xml, now=0)
    assert _gpu_labels(with_smi, None) == {"0", "1"}
    assert _gpu_labels(with_smi, "amd") == {"2", "3"}
    without_smi = metrics.collect(root=root, now=0)          # no nvidia-smi: the AMD series stay put
    assert _gpu_labels(without_smi, "amd") == {"2", "3"}
    assert ('dlrack_gpu_ecc_corrected_errors_total{gpu="3",uuid="GPU-0000000000002101",vendor="amd",scope="volatile",'
            'block="umc"} 2') in without_smi.splitlines()
    facts = gather_gpus(SysReader(root), None, {}, [])
    assert [(g["vendor"] if "vendor" in g else "nvidia", g["index"]) for g in facts] == [
        ("nvidia", 0), ("nvidia", 1), ("amd", 2), ("amd", 3)]


def test_amd_ras_collector_up_and_read_problems_named(amd_tree, tmp_path, capsys, monkeypatch):
    import shutil
    text = metrics.collect(root=amd_tree("mi300x-8gpu"), now=0)
    assert 'dlrack_gpu_ras_collector_up{vendor="amd"} 1' in text.splitlines()
    assert capsys.readouterr().err == ""
    # one GPU's UMC counter file cannot be read (a directory where the file should be): not up,
    # its series is absent (unknown, never 0) and stderr names the file
    root = str(tmp_path / "tree")
    shutil.copytree(amd_tree("mi300x-8gpu"), root, symlinks=True)
    bad = os.path.join(root, "sys/devices/pci0000:00/0000:75:00.0/ras/umc_err_count")
    os.remove(bad)
    os.mkdir(bad)
    text = metrics.collect(root=root, now=0)
    assert 'dlrack_gpu_ras_collector_up{vendor="amd"} 0' in text.splitlines()
    assert not [s for s in samples(text, "dlrack_gpu_ecc_corrected_errors_total") if 'gpu="3"' in s and 'block="umc"' in s]
    err = capsys.readouterr().err
    assert "dlrack-ecc-collector:" in err and "0000:75:00.0/ras/umc_err_count" in err
    # the whole AMD read fails: not up, the host EDAC metrics are still written

    def boom(*args, **kwargs):
        raise ValueError("odd tree")
    monkeypatch.setattr(metrics, "gather_gpus", boom)
    text = metrics.collect(root=amd_tree("mi300x-8gpu"), now=0)
    assert 'dlrack_gpu_ras_collector_up{vendor="amd"} 0' in text.splitlines() and "dlrack_edac_supported" in text
    assert "unexpected ValueError: odd tree" in capsys.readouterr().err


def test_nvidia_only_node_has_no_ras_collector_gauge():
    text = metrics.collect(root=sysfs_tree("esc8000a-e12"), now=0)
    assert "dlrack_gpu_ras_collector_up" not in text
