#!/usr/bin/env python3
"""Checks the import grouping rustfmt.toml describes, which stable rustfmt cannot enforce.

In every block of `use` declarations (consecutive, at one indentation), imports come in
three groups, in this order, each separated from the next by a blank line: the standard
library (std, core, alloc), external crates (Sextant's own crates included), then this
crate (crate, super, self). `pub use` re-exports are a crate's surface and are not checked.

    python3 scripts/check_imports.py [--fix] [DIR ...]   # default: the workspace's crates
Exits 1 and lists each offending line when a block is out of order; `--fix` regroups the
blocks in place instead (keeping the order within each group; `cargo fmt` then sorts).
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


def fix(path: pathlib.Path) -> None:
    """Regroups every block of `use` declarations of `path`: std, external, crate."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        m = USE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, stmts, j = m.group(1), [], i
        while j < len(lines):
            mm = USE.match(lines[j])
            if mm and mm.group(1) == indent:
                k = j
                while ";" not in lines[k]:
                    k += 1
                stmts.append((group(mm.group(3)), lines[j : k + 1]))
                j = k + 1
            elif not lines[j].strip():
                k = j
                while k < len(lines) and not lines[k].strip():
                    k += 1
                nxt = USE.match(lines[k]) if k < len(lines) else None
                if not (nxt and nxt.group(1) == indent):
                    break
                j = k
            else:
                break
        block = []
        for g in (0, 1, 2):
            members = [s for kind, s in stmts if kind == g]
            if members and block:
                block.append("\n")
            for s in members:
                block.extend(s)
        out.extend(block)
        i = j
    path.write_text("".join(out), encoding="utf-8")


def main() -> int:
    args = sys.argv[1:]
    fixing = "--fix" in args
    roots = [pathlib.Path(a) for a in args if a != "--fix"] or [pathlib.Path(p) for p in ("lib", "cli", "functions", "tests", "fuzz")]
    problems = []
    for root in roots:
        for path in sorted(root.rglob("*.rs")):
            if "target" in path.parts:
                continue
            if fixing:
                fix(path)
            problems += check(path)
    print("\n".join(problems) or f"imports grouped std / external / crate in every file under {', '.join(map(str, roots))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
