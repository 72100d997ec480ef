#!/usr/bin/env python3
"""Checks every internal link of the built book: each relative href or src names a file that
exists in the book, and each #fragment an id in the page it points to. No network: links with a
scheme (https:, mailto:) are not followed.

Usage: tests/docs/check_links.py BOOK_DIR   (the folder `mdbook build` wrote)
Prints one line per broken link and exits 1 when there is any.
"""

import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (attribute, value)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and tag != "meta":
                self.ids.add(value)
            if (tag, name) in (("a", "href"), ("img", "src"), ("link", "href"), ("script", "src"), ("iframe", "src")):
                self.links.append((f"{tag} {name}", value))


def parse(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = os.path.abspath(sys.argv[1])
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[path] = parse(path)
    if not pages:
        sys.exit(f"no HTML under {root}: build the book first")
    broken = []
    checked = 0
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, root)
        # 404.html is served from the site's root with a <base>; its links are absolute.
        if rel == "404.html":
            continue
        for what, link in page.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("//") or link.startswith("javascript:"):
                continue
            checked += 1
            target = path if not url.path else os.path.normpath(
                os.path.join(os.path.dirname(path), urllib.parse.unquote(url.path)))
            if not target.startswith(root + os.sep) and target != root:
                broken.append(f"{rel}: {what}={link!r} leaves the book")
                continue
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{rel}: {what}={link!r}: no such file in the book")
                continue
            fragment = urllib.parse.unquote(url.fragment)
            if fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else parse(target).ids
                if fragment not in ids:
                    broken.append(f"{rel}: {what}={link!r}: no id {fragment!r} in {os.path.relpath(target, root)}")
    for line in broken:
        print(line)
    print(f"links: {checked} checked in {len(pages)} pages, {len(broken)} broken")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
