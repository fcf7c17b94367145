#!/usr/bin/env python3
"""check_outputs.py KIND FILE... — checks of `vramguard report`'s outputs (tests/cli).

  chrome TRACE.json   the Chrome trace-event format Perfetto and chrome://tracing read
  svg FILE.svg        well-formed SVG with a timeline
  html FILE.html      self-contained: no external scripts, styles, images or fetches
  dom DOM.html PAGE   the page rendered (data-rendered), drawing every series its data holds
  png SHOT.png        a screenshot that is not blank
Standard library only. Exit 0 when the check passes, else 1 with the reason."""
import json, re, struct, sys, zlib
import xml.etree.ElementTree as ET


def fail(msg):
    print("check_outputs: " + msg, file=sys.stderr)
    sys.exit(1)


def chrome(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not events:
        fail("no traceEvents array")
    phases = {"M", "i", "I", "C", "X", "B", "E", "b", "e", "n"}
    counters = instants = 0
    for n, e in enumerate(events):
        if not isinstance(e, dict) or "ph" not in e or "name" not in e or "pid" not in e:
            fail("event %d lacks ph/name/pid: %r" % (n, e))
        if e["ph"] not in phases:
            fail("event %d has an unknown phase %r" % (n, e["ph"]))
        if e["ph"] != "M" and not isinstance(e.get("ts"), (int, float)):
            fail("event %d has no numeric ts" % n)
        if e["ph"] == "C":
            counters += 1
            if not all(isinstance(v, (int, float)) for v in e.get("args", {}).values()):
                fail("counter event %d has non-numeric values" % n)
        if e["ph"] in ("i", "I"):
            instants += 1
            if e.get("s", "t") not in ("t", "p", "g"):
                fail("instant event %d has a bad scope" % n)
    if counters == 0 or instants == 0:
        fail("no counter or no instant events (%d, %d)" % (counters, instants))


def svg(path):
    root = ET.parse(path).getroot()
    if not root.tag.endswith("svg"):
        fail("the root element is not <svg>")
    polys = [e for e in root.iter() if e.tag.endswith("polygon")]
    if not polys:
        fail("no timeline series (polygons) in the SVG")


def html(path):
    text = open(path, encoding="utf-8").read()
    for pat in (r"<script[^>]+src=", r"<link[^>]+href=", r"<img[^>]+src=\s*[\"']?http",
                r"\bfetch\(", r"XMLHttpRequest", r"@import", r"url\(\s*['\"]?http"):
        if re.search(pat, text, re.I):
            fail("the page loads something from outside: " + pat)
    if "const DATA = {" not in text:
        fail("no data in the page")


def dom(dom_path, page_path):
    d = open(dom_path, encoding="utf-8").read()
    if 'data-rendered="1"' not in d:
        fail("the page did not finish rendering (no data-rendered)")
    m = re.search(r'data-series="(\d+)"', d)
    if not m:
        fail("no data-series on the body")
    page = open(page_path, encoding="utf-8").read()
    data = json.loads(re.search(r"const DATA = (\{.*?\});\n", page, re.S).group(1))
    want = sum(len(p["series"]) for p in data["panels"])
    drawn = int(m.group(1))
    polys = len(re.findall(r'<polygon[^>]*class="series"', d))
    if drawn != want or polys != want:
        fail("drew %d series (%d polygons), the data holds %d" % (drawn, polys, want))
    if want == 0:
        fail("no series at all")


def png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail("unexpected PNG format")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colours, nonwhite, total, i = set(), 0, 0, 0
    for y in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):  # undo the PNG filters
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if y % 4 == 0:
            for x in range(0, w, 4):
                px = tuple(line[x * bpp:x * bpp + 3])
                colours.add(px)
                total += 1
                nonwhite += px != (255, 255, 255)
    if len(colours) < 8 or nonwhite < total * 0.02:
        fail("blank screenshot: %d colours, %.1f%% not white" % (len(colours), 100.0 * nonwhite / max(total, 1)))


kind = sys.argv[1]
{"chrome": chrome, "svg": svg, "html": html, "dom": dom, "png": png}[kind](*sys.argv[2:])
