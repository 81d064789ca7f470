"""The merged report's host facts agree with its findings (issue 30.8): report.json keeps each
host's findings but not its hardware document, so the merged report.html showed `0 GPU(s)` on the
line above "8 GPU(s) found". The GPU count now comes from the gpu.present finding; a host with no
GPU list and no such finding says `GPUs unknown`, never a count it does not have."""
import re

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight
from ansible_collections.dlrack.node.plugins.plugin_utils.report_merge import merge_report_files

from hwdocs import GATHERED, GOOD


def _facts_and_found(page):
    """{host: (the GPU part of its facts line, its gpu.present message)} of a report page."""
    out = {}
    for section in page.split('<section class="host')[1:]:
        host = re.search(r'id="host-([^"]+)"', section).group(1)
        facts = re.search(r'<p class="muted">([^<]*)</p>', section).group(1)
        found = re.search(r"(\d+) GPU\(s\) found", section)
        out[host] = (facts.split(" \u00b7 ")[-1], found.group(1) if found else None)
    return out


def test_merged_report_counts_the_gpus_its_findings_found(tmp_path):
    hosts = {"gpu-01": {"dlrack_hw": GOOD}, "gpu-02": {"dlrack_hw_gathered": GATHERED}}
    paths = []
    for i, (host, hv) in enumerate(sorted(hosts.items())):
        out = run_preflight({host: collect_host_inputs(host, hv)}, report_dir=str(tmp_path / ("slice%d" % i)), fail_on="never")
        paths.append(out["report_paths"]["json"])
    whole = run_preflight({h: collect_host_inputs(h, hv) for h, hv in hosts.items()}, report_dir=str(tmp_path / "whole"),
                          fail_on="never")
    merged = merge_report_files(paths, str(tmp_path / "merged"))
    with open(whole["report_paths"]["html"], encoding="utf-8") as fh:
        whole_facts = _facts_and_found(fh.read())
    with open(merged["report_paths"]["html"], encoding="utf-8") as fh:
        page = fh.read()
    merged_facts = _facts_and_found(page)
    assert not re.search(r"\b0 GPU\(s\)", page)
    assert set(merged_facts) == set(hosts)
    for host, (fact, found) in merged_facts.items():
        assert found and int(found) > 0
        assert fact == "%s GPU(s)" % found, (host, fact, found)          # the line agrees with the finding
        assert whole_facts[host][0].startswith(fact)                      # and with the unsliced run's count
