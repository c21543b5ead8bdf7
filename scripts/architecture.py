"""The "Parts" section of ARCHITECTURE.md, made from the tree: every module and package of
the layers pyproject.toml's import contracts name, top layer first, each with the first
sentence of its docstring. So the page lists what is there, and says it in the words the
code itself uses; tests/test_layers.py fails when the page and the tree differ.

    python scripts/architecture.py           print the section
    python scripts/architecture.py --write   put it into ARCHITECTURE.md
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "ARCHITECTURE.md"
BEGIN = "<!-- parts: made by scripts/architecture.py from the docstrings; edit those, not this -->"
END = "<!-- /parts -->"
WIDTH = 96
COLUMN = 30


def layers() -> list[list[str]]:
    """The layers of the import contract, top first; each a list of modules (`a | b`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    return [["leaseline.cli"]] + [[m.strip() for m in layer.split("|")]
                                  for layer in contract["layers"]]


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n", 1)[0].split())
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", para)
    return para[: m.start() + 1] if m else para


def module_file(module: str) -> Path:
    """The file of `leaseline.a.b`: the checkout's root is the package `leaseline`."""
    base = ROOT / module.removeprefix("leaseline.").replace(".", "/")
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def entry(name: str, depth: int, text: str) -> list[str]:
    label = "  " * depth + name
    lead = label.ljust(COLUMN - 1) + " " if len(label) < COLUMN - 1 else label + "  "
    lines = textwrap.wrap(text, WIDTH, initial_indent=lead, subsequent_indent=" " * COLUMN)
    return lines or [label]


def tree(folder: Path, depth: int) -> list[str]:
    """A package's modules, then its sub-packages, each below its own line."""
    out: list[str] = []
    modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
    packages = sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file())
    for p in modules:
        out += entry(p.name, depth, summary(p))
    for p in packages:
        out += entry(p.name + "/", depth, summary(p / "__init__.py"))
        out += tree(p, depth + 1)
    return out


def section() -> str:
    lines: list[str] = []
    for layer in layers():
        for module in layer:
            path = module_file(module)
            rel = path.relative_to(ROOT)
            if path.name == "__init__.py":
                lines += entry(str(rel.parent) + "/", 0, summary(path))
                lines += tree(path.parent, 1)
            else:
                lines += entry(str(rel), 0, summary(path))
        lines.append("")
    body = "\n".join("    " + ln if ln else "" for ln in lines).rstrip()
    return f"{BEGIN}\n\n{body}\n\n{END}"


def listed_section(page: str) -> str | None:
    m = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), page, re.S)
    return m.group(0) if m else None


def main() -> int:
    made = section()
    if "--write" not in sys.argv:
        print(made)
        return 0
    page = PAGE.read_text(encoding="utf-8")
    old = listed_section(page)
    if old is None:
        sys.exit(f"{PAGE.name} has no {BEGIN!r} ... {END!r} block to replace.")
    PAGE.write_text(page.replace(old, made), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
