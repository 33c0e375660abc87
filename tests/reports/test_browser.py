"""The HTML report in a real browser (headless Debian chromium): no hostile script runs, no console error,
the page's own script runs, and the charts are drawn in the screenshot.

Each page is checked twice: as shipped (with its Content-Security-Policy) and with the policy removed, so the
escaping alone is shown to stop every payload, not just the policy.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from cudatrace.reports.document import Report, build_report
from cudatrace.reports.html import render_html
from tests import samples
from tests.reports.test_renderers import _Tags
from tests.samples import RELEASE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="needs the chromium browser (apt-get install chromium)"),
]
CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')


def _chromium(tmp: Path, page: Path, *extra: str) -> tuple[str, str]:
    """Run headless chromium on a local file; return (stdout, the console lines of stderr)."""
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *extra,
        page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, "\n".join(console)


def _html_attrs(dom: str) -> dict[str, str]:
    m = re.search(r"<html([^>]*)>", dom)
    assert m, "no <html> element in the dumped DOM"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


@pytest.fixture(scope="module")
def hostile() -> Report:
    return build_report([samples.hostile_scan()], [samples.hostile_trace()], RELEASE)


@pytest.mark.parametrize("policy", ["with_csp", "without_csp"])
def test_hostile_names_run_no_script(tmp_path: Path, hostile: Report, policy: str) -> None:
    page = render_html(hostile)
    if policy == "without_csp":
        page, n = CSP_META.subn("", page)
        assert n == 1
    path = tmp_path / "hostile.html"
    path.write_text(page, encoding="utf-8")
    dom, console = _chromium(tmp_path, path, "--dump-dom")
    attrs = _html_attrs(dom)
    # the page's own script ran and parsed the embedded document (one marker per entry point)
    assert attrs.get("data-cudatrace-ready") == str(len(hostile.entries))
    # no payload ran: each would have set data-pwned on <html>
    assert "data-pwned" not in attrs
    assert console == "", f"console output in the browser:\n{console}"
    tags = _Tags()
    tags.feed(dom)
    names = [t for t, _ in tags.tags]
    assert "img" not in names and names.count("script") == 2
    assert not [t for t, a in tags.tags for k, _ in a if k.startswith("on")]
    assert "&lt;script&gt;document.documentElement.setAttribute" in dom


def _png_pixels(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """A small PNG decoder (8-bit RGB/RGBA, not interlaced): width, height, channels, one bytes object per row."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, bytearray()
    width = height = channels = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif f == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def test_charts_render_in_the_screenshot(tmp_path: Path) -> None:
    doc = build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE)
    path = tmp_path / "mixed.html"
    path.write_text(render_html(doc), encoding="utf-8")
    dom, console = _chromium(tmp_path, path, "--dump-dom")
    assert console == ""
    # coverage (driver 3 segments, cublas 2, curand 1), calls (4 bars), evidence (driver 2, cublas 2, curand 1)
    assert len(re.findall(r'<rect class="bar', dom)) == 6 + 4 + 5
    png = tmp_path / "shot.png"
    _chromium(tmp_path, path, f"--screenshot={png}", "--window-size=1280,1400")
    width, height, channels, rows = _png_pixels(png.read_bytes())
    assert (width, height) == (1280, 1400)
    colours: Counter[bytes] = Counter()
    for row in rows:
        colours.update(row[i : i + 3] for i in range(0, len(row), channels))
    assert len(colours) > 50, "the screenshot is blank or nearly so"
    for hex_fill in ("2e9d57", "e0a100", "d1382f", "8a55c9", "5b7fd6"):
        assert colours[bytes.fromhex(hex_fill)] > 100, f"chart colour #{hex_fill} missing from the screenshot"


def test_the_check_catches_an_unescaped_payload(tmp_path: Path, hostile: Report) -> None:
    """Control: the same page with one name pasted in raw (and no policy) does run the payload."""
    page = CSP_META.sub("", render_html(hostile)).replace("<body>", "<body>" + samples.HOSTILE_IMG, 1)
    path = tmp_path / "broken.html"
    path.write_text(page, encoding="utf-8")
    dom, _ = _chromium(tmp_path, path, "--dump-dom")
    assert _html_attrs(dom).get("data-pwned") == "img"


HARNESS = """<script>
(function () {
  var root = document.documentElement;
  function order() {
    return Array.prototype.map.call(document.querySelectorAll("#family-table tbody tr"), function (r) {
      return r.cells[0].textContent;
    }).join(",");
  }
  var th = document.querySelectorAll("#family-table thead th")[1];
  th.click();
  root.setAttribute("data-sort-first", order() + "/" + th.getAttribute("aria-sort"));
  th.click();
  root.setAttribute("data-sort-second", order() + "/" + th.getAttribute("aria-sort"));
  var f = document.getElementById("entry-filter");
  f.value = "CUBLAS";
  f.dispatchEvent(new Event("input"));
  var shown = Array.prototype.filter.call(document.querySelectorAll("#entries tbody tr"), function (r) {
    return !r.hidden;
  });
  root.setAttribute("data-filtered", String(shown.length));
})();
</script>"""


def test_tables_sort_and_filter_in_the_browser(tmp_path: Path) -> None:
    """The page's own script sorts a table on a header click and filters the entry points (a test script, added
    after it with the policy removed, clicks and types)."""
    doc = build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE)
    page = CSP_META.sub("", render_html(doc)).replace("</body>", HARNESS + "</body>")
    path = tmp_path / "sort.html"
    path.write_text(page, encoding="utf-8")
    dom, console = _chromium(tmp_path, path, "--dump-dom")
    assert console == ""
    attrs = _html_attrs(dom)
    assert attrs["data-sort-first"] == "driver,cublas,curand/descending"  # used: 4, 2, 1
    assert attrs["data-sort-second"] == "curand,cublas,driver/ascending"
    assert attrs["data-filtered"] == "2"  # cublasGemmGroupedBatchedEx, cublasSgemm_v2


# For every text in a table cell, the breaks the layout made: a break between two characters that belong to one
# token (no space, "_", "/", "," or "\" before the second) is a name split mid-token. Written to <html
# data-split-tokens="...">, "" when none.
SPLIT_HARNESS = """<script>
(function () {
  const splits = [];
  const walker = document.createTreeWalker(document.querySelector("main") || document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest("td")) continue;
    const text = node.textContent;
    let lastTop = null;
    for (let i = 0; i < text.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      const breakable = i > 0 && /[\\s_\\/,\\\\]/.test(text[i - 1]);
      if (lastTop !== null && rect.top > lastTop + 2 && !breakable && !/\\s/.test(text[i])) {
        splits.push(text.slice(Math.max(0, i - 12), i) + "|" + text.slice(i, i + 12));
      }
      lastTop = rect.top;
    }
  }
  document.documentElement.setAttribute("data-split-tokens", splits.join(" ; "));
})();
</script>"""


@pytest.mark.parametrize("width", [1400, 800])
def test_table_names_are_never_split_mid_token(tmp_path: Path, width: int) -> None:
    doc = build_report([samples.mixed_scan()], [samples.crashed_trace()], RELEASE)
    page = CSP_META.sub("", render_html(doc)).replace("</body>", SPLIT_HARNESS + "</body>")
    path = tmp_path / "split.html"
    path.write_text(page, encoding="utf-8")
    dom, console = _chromium(tmp_path, path, "--dump-dom", f"--window-size={width},1200")
    assert console == ""
    attrs = _html_attrs(dom)
    assert "data-split-tokens" in attrs, "the check did not run"
    assert attrs["data-split-tokens"] == ""
