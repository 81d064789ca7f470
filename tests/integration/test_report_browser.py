"""The HTML report judged in a real browser: the example fleet (inventories/example, read through
Ansible's own inventory and variable managers, as `make demo` reads it) rendered by headless
Chromium at 1366x768, 1920x1080 and a 390x844 phone. Screenshots are saved under the test's tmp
dir; a probe script measures the page in the DOM: every text of the topology drawings fits its box,
and every failing (host, rule) pair is listed in the failures list (grouped by rule and finding,
each host a link in its group), which starts in the first viewport (and on a desktop the failing
cells of the matrix need no sideways scrolling); the page never scrolls sideways, also on the
phone, where every table either fits or scrolls inside its own box.

Chromium comes from the Debian package (scripts/test-deps.sh installs it for `make test`); without
it the test is skipped and says so."""
import html
import json
import os
import shutil
import struct
import subprocess

import pytest

from ansible_collections.dlrack.node.plugins.plugin_utils.preflight import collect_host_inputs, run_preflight

from testpaths import ROOT  # noqa: E402  (tests/ is on sys.path: conftest)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
SIZES = [(1366, 768), (1920, 1080), (390, 844)]     # the last: a phone (issue 20.7)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                "(apt-get install chromium; scripts/test-deps.sh does it for make test)")

# Runs in the page after layout; writes its measurements as JSON into <pre id="probe">.
PROBE = r"""
<script>
(function () {
  var out = {texts: 0, overflow: [], failures: [], failuresTop: null, failCells: [], vw: innerWidth, vh: innerHeight,
             scrollX: document.documentElement.scrollWidth};
  document.querySelectorAll('svg.topology g.box').forEach(function (g) {
    var r = g.querySelector('rect').getBBox();
    g.querySelectorAll('text').forEach(function (t) {
      var b = t.getBBox();
      out.texts += 1;
      if (b.x < r.x - 0.5 || b.x + b.width > r.x + r.width + 0.5 || b.y < r.y - 0.5 || b.y + b.height > r.y + r.height + 0.5)
        out.overflow.push({text: t.textContent, text_box: [b.x, b.y, b.width, b.height], box: [r.x, r.y, r.width, r.height]});
    });
  });
  var list = document.getElementById('failures');
  out.failuresTop = list ? list.getBoundingClientRect().top : null;
  document.querySelectorAll('#failures tr.failure').forEach(function (tr) {
    var b = tr.getBoundingClientRect();
    tr.querySelectorAll('a[data-host]').forEach(function (a) {
      out.failures.push({host: a.dataset.host, rule: tr.dataset.rule, top: b.top, bottom: b.bottom});
    });
  });
  // Every table either fits the viewport or sits in a box that scrolls sideways and itself fits.
  out.tables = [];
  document.querySelectorAll('table').forEach(function (t) {
    var b = t.getBoundingClientRect(), box = t.parentElement, cs = getComputedStyle(box);
    out.tables.push({cls: t.className, right: b.right, boxScrolls: cs.overflowX === 'auto' || cs.overflowX === 'scroll',
                     boxRight: box.getBoundingClientRect().right});
  });
  var heads = document.querySelectorAll('table.matrix tr:first-child th');
  document.querySelectorAll('table.matrix td.c.fail').forEach(function (td) {
    var b = td.getBoundingClientRect();
    out.failCells.push({host: td.parentElement.dataset.host, rule: heads[td.cellIndex].dataset.rule, left: b.left, right: b.right});
  });
  out.hostLinks = 0; out.hiddenTargets = [];
  document.querySelectorAll('table.matrix a[href^="#host-"], #failures a[href^="#host-"]').forEach(function (a) {
    var t = document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)));
    out.hostLinks += 1;
    if (!t || !(t.checkVisibility ? t.checkVisibility({contentVisibilityAuto: true}) : t.getClientRects().length > 0))
      out.hiddenTargets.push(a.getAttribute('href'));
  });
  out.sections = document.querySelectorAll('section.host').length;
  var doc = window.parent.document;      // the page itself, or the phone frame's page (_at_width)
  var pre = doc.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
</script>
"""


def _example_inputs():
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[os.path.join(ROOT, "inventories", "example")])
    variables = VariableManager(loader=loader, inventory=inventory)
    return {h.name: collect_host_inputs(h.name, variables.get_vars(host=h, include_hostvars=False))
            for h in inventory.get_hosts()}


def _chromium(*args):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-dev-shm-usage", "--user-data-dir=" + args[0]] + list(args[1:])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    return proc.stdout.decode("utf-8", errors="replace")


MIN_WINDOW = 500   # headless Chromium lays a page out at least 500 px wide, whatever --window-size says


def _at_width(page, width, height):
    """The page to load for a viewport of ``width`` x ``height`` CSS px: itself, or below
    MIN_WINDOW the page inside an iframe of exactly that size (srcdoc: same origin, so the probe
    can write into the outer page), as a phone's browser lays it out."""
    if width >= MIN_WINDOW:
        return page
    return ('<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;width:%dpx;height:%dpx" srcdoc="%s">'
            '</iframe></body></html>' % (width, height, html.escape(page, quote=True)))


def _png_size(path):
    with open(path, "rb") as fh:
        head = fh.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def example_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("example-report")
    out = run_preflight(_example_inputs(), report_dir=str(d), fail_on="never")
    with open(out["report_paths"]["json"]) as fh:
        doc = json.load(fh)
    return d, out["report_paths"]["html"], doc


@pytest.mark.parametrize("width,height", SIZES)
def test_example_report_in_chromium(example_report, tmp_path, width, height):
    d, html_path, doc = example_report
    failing = {(h, f["rule"]) for h, v in doc["hosts"].items() for f in v["findings"] if f["severity"] == "error"}
    assert len({h for h, dummy in failing}) == 5                  # the example fleet fails on purpose
    profile = str(tmp_path / "profile")
    shot = str(tmp_path / ("report-%dx%d.png" % (width, height)))
    with open(html_path, encoding="utf-8") as fh:
        page = fh.read()
    shown = tmp_path / "shown.html"
    shown.write_text(_at_width(page, width, height), encoding="utf-8")
    _chromium(profile, "--window-size=%d,%d" % (width, height), "--virtual-time-budget=3000", "--screenshot=" + shot,
              "file://" + str(shown))
    assert _png_size(shot) == (width, height)

    probed = tmp_path / "probed.html"
    probed.write_text(_at_width(page.replace("</body>", PROBE + "</body>"), width, height), encoding="utf-8")
    dom = _chromium(profile, "--window-size=%d,%d" % (width, height), "--virtual-time-budget=3000", "--dump-dom",
                    "file://" + str(probed))
    m = dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0]
    res = json.loads(m.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))

    # Every text of every topology drawing fits its box.
    assert res["texts"] >= 60, res["texts"]
    assert res["overflow"] == [], res["overflow"]
    # Every failing (host, rule) pair is in the failures list, which starts in the first viewport.
    assert {(f["host"], f["rule"]) for f in res["failures"]} == failing
    assert res["failuresTop"] is not None and 0 <= res["failuresTop"] < height / 2
    # The matrix puts failing rules first: on a desktop no failing cell needs sideways scrolling
    # (on the phone the matrix scrolls in its own box, checked with the other tables below).
    assert {(c["host"], c["rule"]) for c in res["failCells"]} == failing
    if width >= 1024:
        assert max(c["right"] for c in res["failCells"]) <= width, res["failCells"]
    # Every table (failures, matrix, drift, each host's findings) fits or scrolls inside its own box.
    assert res["tables"] and {t["cls"] for t in res["tables"]} >= {"failures wide", "matrix", "findings wide"}
    for t in res["tables"]:
        assert t["right"] <= width + 0.5 or (t["boxScrolls"] and t["boxRight"] <= width + 0.5), t
    # Every host link (matrix, failures list) lands on a rendered element, also for the hosts that
    # share a section with identical ones (gpu-a01/gpu-a02 of rack_a): no target in a closed box.
    assert res["hostLinks"] >= len(doc["hosts"]) and res["hiddenTargets"] == [], res["hiddenTargets"]
    assert res["sections"] < len(doc["hosts"])
    # The page itself never scrolls sideways (only the tables and a wide drawing, inside their boxes).
    assert res["vw"] == width and res["scrollX"] <= width, (res["vw"], res["scrollX"])


HOSTILE_PROBE = r"""
<script>
(function () {
  var out = {scripts: document.scripts.length - 1, handlers: [], hosts: [], overflow: 0};
  document.querySelectorAll('*').forEach(function (el) {
    for (var i = 0; i < el.attributes.length; i++)
      if (/^on/i.test(el.attributes[i].name)) out.handlers.push(el.tagName + ' ' + el.attributes[i].name);
  });
  document.querySelectorAll('section.host').forEach(function (s) { out.hosts.push(s.id); });
  document.querySelectorAll('svg.topology g.box').forEach(function (g) {
    var r = g.querySelector('rect').getBBox();
    g.querySelectorAll('text').forEach(function (t) {
      var b = t.getBBox();
      if (b.x < r.x - 0.5 || b.x + b.width > r.x + r.width + 0.5) out.overflow += 1;
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def test_hostile_names_stay_text_in_chromium(tmp_path):
    """Host names and models written to break out of attributes, elements and the SVG: Chromium's
    own parser finds no injected script or event handler, and the drawings still fit."""
    import copy
    from hwdocs import GATHERED
    hostile_host = 'x" onmouseover="alert(1)'
    hw = copy.deepcopy(GATHERED)
    for g in hw["gpus"]:
        g["model"] = "<script>alert(1)</script>]]></text></svg><img src=x onerror=alert(2)>" + "W" * 80
    hw["cpu"]["numa_nodes"][0]["cpus"] = "0-31'\"><svg onload=alert(3)>"
    out = run_preflight({hostile_host: collect_host_inputs(hostile_host, {"dlrack_hw_gathered": hw})},
                        report_dir=str(tmp_path / "r"))
    with open(out["report_paths"]["html"], encoding="utf-8") as fh:
        page = fh.read()
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", HOSTILE_PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(str(tmp_path / "profile"), "--window-size=1366,768", "--virtual-time-budget=3000", "--dump-dom",
                    "file://" + str(probed))
    m = dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0]
    res = json.loads(m.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))
    assert res["scripts"] == 0 and res["handlers"] == []
    assert res["hosts"] == ["host-" + hostile_host]
    assert res["overflow"] == 0


ACCEPTANCE_PROBE = r"""
<script>
(function () {
  var out = {vw: innerWidth, scrollX: document.documentElement.scrollWidth, tables: [], reasons: []};
  document.querySelectorAll('table').forEach(function (t) {
    var b = t.getBoundingClientRect(), box = t.parentElement, cs = getComputedStyle(box);
    out.tables.push({right: b.right, boxScrolls: cs.overflowX === 'auto' || cs.overflowX === 'scroll',
                     boxRight: box.getBoundingClientRect().right});
  });
  document.querySelectorAll('.card').forEach(function (c) { out.tables.push({right: c.getBoundingClientRect().right, card: true}); });
  var doc = window.parent.document;
  var pre = doc.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
</script>
"""


@pytest.mark.parametrize("width,height", [(1366, 768), (390, 844)])
def test_acceptance_report_in_chromium(tmp_path, width, height):
    """acceptance.html of a measured H200 host (a long health line in 'expected'), an incomplete
    host and an unreachable one: the page never scrolls sideways and every table fits or scrolls
    in its own box; the cards wrap on a phone. (The page built by string concatenation had no
    scroll box and kept 'expected' on one line: at 1366 px the reason column ran off the page.)"""
    from ansible_collections.dlrack.node.plugins.module_utils.acceptance.health import health_from_xml
    from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance as acc
    from testpaths import DATA
    with open(os.path.join(DATA, "acceptance", "h200-vm-nvidia-smi-q-x-idle.xml"), encoding="utf-8") as fh:
        health = dict(health_from_xml(fh.read()), status="ok", reason=None)
    fig = {"gbps": 54.8, "best": 54.8, "worst": 54.8, "n": 10, "bytes": 1 << 30}
    dev = {"ordinal": 0, "pci_bus_id": "0000:00:06.0", "name": "NVIDIA H200", "numa_node": None, "h2d_pinned": fig,
           "d2h_pinned": fig, "h2d_pageable": fig, "d2h_pageable": fig, "link": dict(health["gpus"][0]["pcie"], source="nvidia-smi")}
    measured = {"check_mode": False, "gpu": {"status": "ok", "devices": [dev], "p2p": None}, "health": health,
                "storage": {"hot": {"path": "/mnt/hot", "status": "ok", "direct": True,
                                    "read": {"bytes_per_s": 9.0e9, "ioengine": "libaio", "jobs": 4},
                                    "write": {"bytes_per_s": 6.0e9, "ioengine": "libaio", "jobs": 4}},
                            "cold": {"path": "", "status": "skip", "reason": "no path set for this tier"}},
                "memory": {"status": "ok", "nodes": [{"node": 0, "status": "ok", "gbps": 180.0, "threads": 8}]},
                "gpu_count": 1}
    unmeasured = dict(measured, gpu={"status": "skip", "reason": "libcuda.so.1 cannot be loaded: no NVIDIA driver",
                                     "devices": []}, gpu_count=0, storage={
        "hot": {"path": "/mnt/hot", "status": "skip", "reason": "fio is not installed on this node"},
        "cold": {"path": "", "status": "skip", "reason": "no path set for this tier"}})
    doc = acc.evaluate({"gpu-01.rack7.example.com": {"raw": measured}, "gpu-02": {"raw": unmeasured},
                        "gpu-03": {}}, "error")
    assert [doc["hosts"][h]["status"] for h in sorted(doc["hosts"])] == ["pass", "incomplete", "error"]
    paths = acc.write_reports(str(tmp_path / "r"), doc)
    with open(paths["html"], encoding="utf-8") as fh:
        page = fh.read()
    probed = tmp_path / "probed.html"
    probed.write_text(_at_width(page.replace("</body>", ACCEPTANCE_PROBE + "</body>"), width, height), encoding="utf-8")
    dom = _chromium(str(tmp_path / "profile"), "--window-size=%d,%d" % (width, height), "--virtual-time-budget=3000",
                    "--dump-dom", "file://" + str(probed))
    m = dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0]
    res = json.loads(m.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))
    assert res["vw"] == width and res["scrollX"] <= width, (res["vw"], res["scrollX"])
    assert len([t for t in res["tables"] if not t.get("card")]) == 3
    for t in res["tables"]:
        assert t["right"] <= width + 0.5 or (t.get("boxScrolls") and t["boxRight"] <= width + 0.5), t


# Every report page (issue 30.9), measured in the page after layout: the page never scrolls
# sideways, every table fits or scrolls in its own box, and on acceptance.html every reason cell
# lies inside the viewport (read without scrolling sideways, also on a 390 px phone).
PAGE_PROBE = r"""
<script>
(function () {
  var out = {vw: innerWidth, scrollX: document.documentElement.scrollWidth, tables: [], reasons: [], text: 0};
  document.querySelectorAll('table').forEach(function (t) {
    var b = t.getBoundingClientRect(), box = t.parentElement, cs = getComputedStyle(box);
    out.tables.push({cls: t.className, right: b.right, boxScrolls: cs.overflowX === 'auto' || cs.overflowX === 'scroll',
                     boxRight: box.getBoundingClientRect().right});
  });
  document.querySelectorAll('td.why').forEach(function (td) {
    var b = td.getBoundingClientRect();
    out.reasons.push({left: b.left, right: b.right, width: b.width, text: td.textContent.slice(0, 60)});
  });
  out.text = document.body.innerText.length;
  var doc = window.parent.document;
  var pre = doc.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def every_report_page(tmp_path_factory):
    """{page: path} of every report page the collection writes, rendered by today's code from the
    golden copies' fixed inputs (tests/data/reports_golden: fleet.json, acceptance_doc.json): the
    pre-flight's report.html, drift.html, the merged slices' report.html, site.yml's site.html
    (provisioned, failed in a role with a long message, unreachable, not provisioned) and
    acceptance.html."""
    from ansible_collections.dlrack.node.plugins.plugin_utils import acceptance as acc
    from ansible_collections.dlrack.node.plugins.plugin_utils import report, report_merge
    from ansible_collections.dlrack.node.plugins.plugin_utils.rules import summarize
    from testpaths import DATA
    out = tmp_path_factory.mktemp("pages")
    with open(os.path.join(DATA, "reports_golden", "fleet.json"), encoding="utf-8") as fh:
        fleet = json.load(fh)
    with open(os.path.join(DATA, "reports_golden", "acceptance_doc.json"), encoding="utf-8") as fh:
        acceptance_doc = json.load(fh)
    results, drift = fleet["results"], fleet["drift"]
    pages = {"report": report.write_reports(str(out / "preflight"), results, fleet["summary"], meta={"fail_on": "error"})["html"]}
    checked = {h: results[h] for h in sorted(results) if h in drift or h.startswith("gpu-")}
    pages["drift"] = report.write_reports(str(out / "drift"), checked, summarize(checked), drift=drift,
                                          meta={"fail_on": "error"}, prefix="drift")["html"]
    hosts, slices = sorted(results), []
    for i, part in enumerate((hosts[0::2], hosts[1::2])):
        sub = {h: results[h] for h in part}
        slices.append(report.write_reports(str(out / ("slice%d" % i)), sub, summarize(sub), meta={"fail_on": "error"})["json"])
    pages["merge"] = report_merge.merge_report_files(slices, str(out / "merge"))["report_paths"]["html"]
    pages["acceptance"] = acc.write_reports(str(out / "acceptance"), acceptance_doc)["html"]
    # site.yml's site.html: each host's final state (plugin_utils/site_state.py) beside its findings
    from ansible_collections.dlrack.node.plugins.plugin_utils.site_state import site_notes
    from hwdocs import GATHERED, GOOD
    site_hosts = {"gpu-01": {"dlrack_hw": GOOD}, "gpu-02": {"dlrack_hw_gathered": GATHERED}, "gpu-03": {"dlrack_hw": GOOD},
                  "gpu-04": {"dlrack_hw": GOOD}}
    notes, dummy = site_notes(sorted(site_hosts), ["gpu-04"], {
        "gpu-01": None, "gpu-02": "failed in role storage_tiers at task 'Create the hot tier array': mdadm: "
                                  "/dev/nvme3n1 is busy - skipping " + "x" * 300,
        "gpu-03": "unreachable: Failed to connect to the host via ssh: ssh: connect to host 10.0.0.3 port 22: No route to host"})
    pages["site"] = run_preflight({h: collect_host_inputs(h, hv) for h, hv in site_hosts.items()}, report_dir=str(out / "site"),
                                  fail_on="never", prefix="site", notes=notes)["report_paths"]["html"]
    return pages


@pytest.mark.parametrize("width,height", [(390, 844), (1366, 768)])
@pytest.mark.parametrize("page", ["report", "drift", "merge", "site", "acceptance"])
def test_every_report_page_at_phone_and_desktop_width(every_report_page, tmp_path, page, width, height):
    """Issue 30.9: each report page at 390 and 1366 px (screenshot kept under the test's tmp dir):
    the page does not scroll sideways, every table fits or scrolls in its own box, and
    acceptance.html keeps its reason column in view: at 390 px the measurement table scrolled
    and the reasons lay right of the screen (left > 390 px), now each row is a block with its
    reason at the full width."""
    with open(every_report_page[page], encoding="utf-8") as fh:
        text = fh.read()
    profile = str(tmp_path / "profile")
    shot = str(tmp_path / ("%s-%dx%d.png" % (page, width, height)))
    shown = tmp_path / "shown.html"
    shown.write_text(_at_width(text, width, height), encoding="utf-8")
    _chromium(profile, "--window-size=%d,%d" % (max(width, MIN_WINDOW), height), "--virtual-time-budget=3000",
              "--screenshot=" + shot, "file://" + str(shown))
    assert _png_size(shot)[1] == height
    probed = tmp_path / "probed.html"
    probed.write_text(_at_width(text.replace("</body>", PAGE_PROBE + "</body>"), width, height), encoding="utf-8")
    dom = _chromium(profile, "--window-size=%d,%d" % (max(width, MIN_WINDOW), height), "--virtual-time-budget=3000",
                    "--dump-dom", "file://" + str(probed))
    m = dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0]
    res = json.loads(m.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))
    assert res["text"] > 500 and res["tables"], res
    assert res["vw"] == width and res["scrollX"] <= width, (res["vw"], res["scrollX"])
    for t in res["tables"]:
        assert t["right"] <= width + 0.5 or (t["boxScrolls"] and t["boxRight"] <= width + 0.5), t
    if page == "acceptance":
        assert len(res["reasons"]) >= 40
        hidden = [r for r in res["reasons"] if r["left"] < 0 or r["right"] > width + 0.5 or r["width"] < min(width, 1366) * 0.15]
        assert hidden == [], hidden[:3]
