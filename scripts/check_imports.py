#!/usr/bin/env python3
"""Checks the import grouping rustfmt.toml describes, which stable rustfmt cannot enforce.

In every block of `use` declarations (consecutive, at one indentation), imports come in
three groups, in this order, each separated from the next by a blank line: the standard
library (std, core, alloc), external crates (Sextant's own crates included), then this
crate (crate, super, self). `pub use` re-exports are a crate's surface and are not checked.

    python3 scripts/check_imports.py [DIR ...]     # default: the workspace's crates
Exits 1 and lists each offending line when a block is out of order.
"""
import pathlib
import re
import sys

USE = re.compile(r"^(\s*)use\s+(::)?([A-Za-z_][A-Za-z0-9_]*)")
STD = {"std", "core", "alloc"}
LOCAL = {"crate", "super", "self"}
NAMES = {0: "std", 1: "external", 2: "crate"}


def group(root: str) -> int:
    return 0 if root in STD else 2 if root in LOCAL else 1


def check(path: pathlib.Path) -> list[str]:
    problems = []
    lines = path.read_text(encoding="utf-8").splitlines()
    last = None  # (indent, group, line number) of the previous use in the block
    blank_since = False
    depth = 0  # lines of a multi-line use still open
    for n, line in enumerate(lines, 1):
        if depth:
            if ";" in line:
                depth = 0
            continue
        m = USE.match(line)
        if m:
            indent, g = m.group(1), group(m.group(3))
            if last is not None and last[0] == indent:
                if g < last[1]:
                    problems.append(f"{path}:{n}: {NAMES[g]} import after {NAMES[last[1]]} imports")
                elif g > last[1] and not blank_since:
                    problems.append(f"{path}:{n}: {NAMES[g]} imports need a blank line before them")
            last, blank_since = (indent, g), False
            if ";" not in line:
                depth = 1
        elif not line.strip():
            blank_since = True
        elif line.strip().startswith(("#[", "//")):
            continue
        else:
            last, blank_since = None, False
    return problems


def main() -> int:
    roots = [pathlib.Path(a) for a in sys.argv[1:]] or [pathlib.Path(p) for p in ("lib", "cli", "functions", "tests", "fuzz")]
    problems = []
    for root in roots:
        for path in sorted(root.rglob("*.rs")):
            if "target" not in path.parts:
                problems += check(path)
    print("\n".join(problems) or f"imports grouped std / external / crate in every file under {', '.join(map(str, roots))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
