#!/usr/bin/env python3
"""Looks at the built book as a reader would: headless Chromium renders the front page and a
reference page into PNG screenshots, and the check fails unless each page has its navigation
(the sidebar with the table of contents), no broken image, and a screenshot that is not blank
(the picture's size, its distinct colours, text in the sidebar's strip and in the content).

Usage: tests/docs/screenshot.py BOOK_DIR OUT_DIR
Writes OUT_DIR/front.png and OUT_DIR/reference.png. Needs `chromium` (Debian's package);
CHROMIUM names another binary. PNGs are decoded with zlib and struct only.
"""

import collections
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

WIDTH, HEIGHT = 1280, 900
PAGES = [("front", "index.html"), ("reference", "reference/command-line.html")]


class Html(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = collections.Counter()
        self.ids = set()
        self.images = []
        self.sidebar_links = 0
        self._in_sidebar = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] += 1
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag in ("nav", "iframe") and "sidebar" in (a.get("id", "") + a.get("class", "") + a.get("src", "") + a.get("aria-label", "")).lower():
            self.sidebar_links += 1


def png_pixels(path):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{path}: unexpected PNG format (depth {depth}, colour type {colour})")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if kind == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif kind == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 255
        elif kind == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 255
        elif kind == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def colours(rows, bpp, x0, x1):
    seen = collections.Counter()
    for row in rows:
        for x in range(x0, x1, 2):
            seen[row[x * bpp:x * bpp + 3]] += 1
    return seen


def check_png(path):
    problems = []
    size = os.path.getsize(path)
    if size < 20_000:
        problems.append(f"only {size} bytes")
    width, height, rows, bpp = png_pixels(path)
    if (width, height) != (WIDTH, HEIGHT):
        problems.append(f"{width}x{height}, not {WIDTH}x{HEIGHT}")
    whole = colours(rows, bpp, 0, width)
    top = whole.most_common(1)[0][1] / sum(whole.values())
    sidebar = colours(rows, bpp, 0, min(250, width))
    content = colours(rows, bpp, 350, width)
    if len(whole) < 50:
        problems.append(f"{len(whole)} distinct colours: blank or nearly")
    if top > 0.97:
        problems.append(f"one colour covers {top:.0%} of the picture")
    if len(sidebar) < 10:
        problems.append(f"the sidebar's strip has {len(sidebar)} colours: no table of contents drawn")
    if len(content) < 10:
        problems.append(f"the content has {len(content)} colours: no text drawn")
    return problems, f"{width}x{height}, {size} bytes, {len(whole)} colours (sidebar {len(sidebar)}, content {len(content)}), commonest {top:.0%}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    book, out = (os.path.abspath(a) for a in sys.argv[1:])
    os.makedirs(out, exist_ok=True)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("screenshot.py: chromium not installed (apt-get install chromium)")
    failures = 0
    for name, page in PAGES:
        path = os.path.join(book, page)
        problems = []
        doc = Html()
        with open(path, encoding="utf-8") as f:
            doc.feed(f.read())
        if not doc.sidebar_links:
            problems.append("no sidebar navigation in the HTML")
        if not doc.tags["h1"]:
            problems.append("no heading")
        for src in doc.images:
            target = os.path.normpath(os.path.join(os.path.dirname(path), src))
            if not src or (not src.startswith(("http:", "https:", "data:")) and not os.path.exists(target)):
                problems.append(f"broken image {src!r}")
        png = os.path.join(out, f"{name}.png")
        if os.path.exists(png):
            os.remove(png)
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
                 "--virtual-time-budget=5000", f"--screenshot={png}",
                 f"--window-size={WIDTH},{HEIGHT}", "file://" + path],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
        if not os.path.exists(png):
            problems.append("chromium wrote no screenshot")
            summary = "no picture"
        else:
            more, summary = check_png(png)
            problems += more
        print(f"{'ok' if not problems else 'FAIL'} - {page}: {summary}")
        for p in problems:
            print(f"    {p}")
        failures += bool(problems)
    print(f"screenshots: {len(PAGES) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
