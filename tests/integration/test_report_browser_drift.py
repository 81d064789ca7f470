"""drift.html with real would-be changes (issue 30.2) in headless Chromium at a 390 px phone and at
1366 px: the page never scrolls sideways, and every unified diff fits or scrolls inside its own
box (a diff line is never wider than the screen); screenshots under the test's tmp dir. The
layout probe and the Chromium helpers are test_report_browser.py's."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_report_browser as rb  # noqa: E402

pytestmark = rb.pytestmark

DIFF_PROBE = r"""
<script>
(function () {
  var out = {vw: innerWidth, scrollX: document.documentElement.scrollWidth, diffs: []};
  document.querySelectorAll('pre.diff').forEach(function (p) {
    var b = p.getBoundingClientRect(), cs = getComputedStyle(p);
    out.diffs.push({right: b.right, scrolls: cs.overflowX === 'auto' || cs.overflowX === 'scroll',
                    inner: p.scrollWidth, width: p.clientWidth, box: p.closest('.scroll').getBoundingClientRect().right});
  });
  var doc = window.parent.document;   // the page is shown in a frame of the given width (rb._at_width)
  var pre = doc.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  doc.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def drift_page(tmp_path_factory):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit", "plugins", "plugin_utils"))
    import test_report_drift as td
    out = tmp_path_factory.mktemp("drift")
    dummy, html, dummy_xml = td._run(out, td._drift())
    return html


@pytest.mark.parametrize("width,height", [(390, 844), (1366, 768)])
def test_drift_diffs_fit_the_screen(drift_page, tmp_path, width, height):
    profile = str(tmp_path / "profile")
    shot = str(tmp_path / ("drift-%dx%d.png" % (width, height)))
    shown = tmp_path / "shown.html"
    shown.write_text(rb._at_width(drift_page, width, height), encoding="utf-8")
    rb._chromium(profile, "--window-size=%d,%d" % (max(width, rb.MIN_WINDOW), height), "--virtual-time-budget=3000",
                 "--screenshot=" + shot, "file://" + str(shown))
    assert rb._png_size(shot)[1] == height
    probed = tmp_path / "probed.html"
    probed.write_text(rb._at_width(drift_page.replace("</body>", rb.PAGE_PROBE + "</body>"), width, height), encoding="utf-8")
    dom = rb._chromium(profile, "--window-size=%d,%d" % (max(width, rb.MIN_WINDOW), height), "--virtual-time-budget=3000",
                       "--dump-dom", "file://" + str(probed))
    res = json.loads(dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0].replace("&lt;", "<").replace("&gt;", ">")
                     .replace("&quot;", '"').replace("&amp;", "&"))
    assert res["vw"] == width and res["scrollX"] <= width, (res["vw"], res["scrollX"])
    for t in res["tables"]:
        assert t["right"] <= width + 0.5 or (t["boxScrolls"] and t["boxRight"] <= width + 0.5), t
    # each diff: inside the screen, or scrolling in its own box
    probed.write_text(rb._at_width(drift_page.replace("</body>", DIFF_PROBE + "</body>"), width, height), encoding="utf-8")
    dom = rb._chromium(profile, "--window-size=%d,%d" % (max(width, rb.MIN_WINDOW), height), "--virtual-time-budget=3000",
                       "--dump-dom", "file://" + str(probed))
    res = json.loads(dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0].replace("&lt;", "<").replace("&gt;", ">")
                     .replace("&quot;", '"').replace("&amp;", "&"))
    assert len(res["diffs"]) >= 12, res
    for d in res["diffs"]:
        assert d["box"] <= width + 0.5 and (d["inner"] <= d["width"] + 1 or d["scrolls"]), d
