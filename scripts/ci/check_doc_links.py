#!/usr/bin/env python3
"""Checks that every relative link in README.md, scripts/README.md and docs/*.md points at an
existing file, and every #anchor at a heading of that file (GitHub's anchor rules).

    python3 scripts/ci/check_doc_links.py

Exits 1 and lists each broken link. Links inside code blocks and to other schemes (https:)
are not checked.
"""
import glob
import os
import re
import sys
import unicodedata

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"<[^>]+>", "", m.group(2)).lower()
        slug = "".join(c for c in text if c.isalnum() or c in " -_" or unicodedata.category(c).startswith("L"))
        slug = slug.replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


bad = 0
files = ["README.md", "scripts/README.md"] + sorted(glob.glob("docs/*.md"))
for f in files:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(dest):
            print(f"{f}: {target}: no file {dest}")
            bad += 1
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            print(f"{f}: {target}: no heading #{frag} in {dest}")
            bad += 1
print(f"{len(files)} files, {bad} broken links")
sys.exit(1 if bad else 0)
