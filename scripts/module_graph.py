"""The first-party module graph in figures: how many modules, how many imports between them,
how many cross a package's border, how many go up or across a layer of the import contract
(pyproject.toml's `layers`), and which modules and packages import each other in a cycle.
Every import statement counts, wherever it stands (in a function, under TYPE_CHECKING), as
import-linter counts it; the figures say where the structure has room to rot, and a change
that tidies the layers shows in them.

    python scripts/module_graph.py              the figures
    python scripts/module_graph.py --list       and every up-going import and cycle
    python scripts/module_graph.py --root DIR   of another checkout
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

NO_LAYERS = "- (no layers contract in pyproject.toml)"
ROOTS = ("cli", "harness", "workloads", "nemesis", "checkers", "sut")


def prefix(root: Path) -> str:
    """How a checkout's folders are imported: as parts of the one package `leaseline` (the
    checkout's root is that package), or, in a checkout from before, each on its own."""
    return "leaseline." if (root / "__init__.py").is_file() else ""


def modules(root: Path) -> dict[str, Path]:
    """Every first-party module by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    lead = prefix(root)
    for top in ROOTS:
        single = root / f"{top}.py"
        if single.is_file():
            found[lead + top] = single
        folder = root / top
        if not (folder / "__init__.py").is_file():
            continue
        for path in folder.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if not all((root.joinpath(*parts[:i]) / "__init__.py").is_file()
                       for i in range(1, len(parts))):
                continue  # a script in a data folder, not an importable module
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[lead + name] = path
    return found


def package(name: str, known: dict[str, Path]) -> str:
    """The package a module lives in (a package is its own)."""
    if known[name].name == "__init__.py" or "." not in name:
        return name
    return name.rsplit(".", 1)[0]


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The first-party modules a module imports: `from a import b` names a.b where b is a
    module, else a; `import a.b` names the longest of a.b, a that is a module."""
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            stem = node.module or ""
            if node.level:
                kept = base.split(".")[: len(base.split(".")) - (node.level - 1)]
                stem = ".".join(kept + ([stem] if stem else []))
            targets = [f"{stem}.{a.name}" for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def edges(known: dict[str, Path]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for name, path in known.items():
        out.update((name, target) for target in imported(name, path, known))
    return out


def layer_of(root: Path) -> dict[str, int] | None:
    """Each layer's modules by prefix, 0 the top (cli.py), as pyproject.toml writes them;
    None for a tree without a layers contract (a checkout from before there was one)."""
    config = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {})
    contract = next((c for c in config.get("importlinter", {}).get("contracts", [])
                     if c.get("type") == "layers"), None)
    if contract is None:
        return None
    ranks = {prefix(root) + "cli": 0}
    for i, layer in enumerate(contract["layers"], start=1):
        ranks.update({m.strip(): i for m in layer.split("|")})
    return ranks


def rank(name: str, ranks: dict[str, int]) -> tuple[str, int] | None:
    """The layer entry a module belongs to (the longest prefix), with its rank."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in ranks:
            return prefix, ranks[prefix]
    return None


def cycles(pairs: set[tuple[str, str]]) -> list[list[str]]:
    graph = nx.DiGraph(list(pairs))
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def sibling_cycles(pairs: set[tuple[str, str]], known: dict[str, Path]) -> list[list[str]]:
    """Cycles among the children of one package (its modules, and its sub-packages with all
    they hold), as import-linter's acyclic_siblings contract sees them: A imports B and B
    imports A, directly or through other children of the same package."""
    found: list[list[str]] = []
    for parent in sorted(n for n, p in known.items() if p.name == "__init__.py"):
        depth = parent.count(".") + 1
        child = {n: ".".join(n.split(".")[: depth + 1]) for pair in pairs for n in pair
                 if n.startswith(parent + ".")}
        found += cycles({(child[a], child[b]) for a, b in pairs
                         if a in child and b in child and child[a] != child[b]})
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--list", action="store_true", help="name every up-going import and cycle")
    args = ap.parse_args()
    root = args.root.resolve()
    if not (root / "pyproject.toml").is_file():
        sys.exit(f"{root} is not a Leaseline checkout (no pyproject.toml).")
    known = modules(root)
    pairs = edges(known)
    ranks = layer_of(root)
    crossing = {(a, b) for a, b in pairs if package(a, known) != package(b, known)}
    package_pairs = {(package(a, known), package(b, known)) for a, b in crossing}
    up: list[tuple[str, str]] = []
    across: list[tuple[str, str]] = []
    for a, b in sorted(pairs) if ranks is not None else ():
        ra, rb = rank(a, ranks), rank(b, ranks)
        if ra is None or rb is None or ra[0] == rb[0]:
            continue
        if rb[1] < ra[1]:
            up.append((a, b))
        elif rb[1] == ra[1]:
            across.append((a, b))
    module_cycles = cycles(pairs)
    package_cycles = sibling_cycles(pairs, known)
    rows = [("modules", len(known)),
            ("first-party import edges", len(pairs)),
            ("  between packages", f"{len(crossing)} ({len(package_pairs)} package pairs)"),
            ("  going up a layer", len(up) if ranks is not None else NO_LAYERS),
            ("  across siblings of one layer", len(across) if ranks is not None else NO_LAYERS),
            ("module cycles", len(module_cycles)),
            ("sibling cycles (in one package)", len(package_cycles))]
    for label, value in rows:
        print(f"{label:34}{value}")
    if args.list:
        for label, rows in (("up", up), ("across", across)):
            for a, b in rows:
                print(f"{label:8} {a} -> {b}")
        for label, found in (("module cycle", module_cycles), ("sibling cycle", package_cycles)):
            for c in found:
                print(f"{label}: {' <-> '.join(c)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
