#!/usr/bin/env python3
"""Checks the import grouping rustfmt.toml describes, which stable rustfmt cannot enforce.

In every block of `use` declarations (consecutive, at one indentation), imports come in
three groups, in this order, each separated from the next by a blank line: the standard
library (std, core, alloc), external crates (Sextant's own crates included), then this
crate (crate, super, self). `pub use` re-exports are a crate's surface and are not checked.

    python3 scripts/ci/check_imports.py [--fix] [DIR ...]   # default: the workspace's crates
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


def blocks(lines: list[str]):
    """Each block of `use` declarations in `lines`: `(start, end, items, plain)`, lines
    `start..end` holding `items`, each `(group, line index, its lines, blank line before it)`.
    A block is the uses at one indentation, with blank, comment and attribute lines between
    them (`plain` is false when it has comments or attributes); any other line ends it."""
    i = 0
    while i < len(lines):
        m = USE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, items, plain, blank, j, end = m.group(1), [], True, False, i, i
        while j < len(lines):
            mm = USE.match(lines[j])
            if mm and mm.group(1) == indent:
                k = j
                while k + 1 < len(lines) and ";" not in lines[k]:
                    k += 1
                items.append((group(mm.group(3)), j, lines[j : k + 1], blank))
                blank, j, end = False, k + 1, k + 1
            elif not lines[j].strip():
                blank, j = True, j + 1
            elif lines[j].strip().startswith(("#[", "//")):
                plain, j = False, j + 1
            else:
                break
        yield i, end, items, plain
        i = end


def check(path: pathlib.Path) -> list[str]:
    problems = []
    for _, _, items, _ in blocks(path.read_text(encoding="utf-8").splitlines(keepends=True)):
        for (before, _, _, _), (g, at, _, blank) in zip(items, items[1:]):
            if g < before:
                problems.append(f"{path}:{at + 1}: {NAMES[g]} import after {NAMES[before]} imports")
            elif g > before and not blank:
                problems.append(f"{path}:{at + 1}: {NAMES[g]} imports need a blank line before them")
    return problems


def fix(path: pathlib.Path) -> None:
    """Regroups every plain block of `use` declarations of `path`: std, external, crate."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out, done = [], 0
    for start, end, items, plain in blocks(lines):
        if not plain:
            continue
        regrouped = []
        for g in (0, 1, 2):
            members = [stmt for kind, _, stmt, _ in items if kind == g]
            if members and regrouped:
                regrouped.append("\n")
            for stmt in members:
                regrouped.extend(stmt)
        out.extend(lines[done:start])
        out.extend(regrouped)
        done = end
    out.extend(lines[done:])
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
