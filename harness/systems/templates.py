"""The template engine of system descriptions, shared by Docker runs (system_file.py) and
the user's own machines (host_system.py).

`{name}` is replaced by a value, `{{`/`}}` are braces. In an argv list each element is
filled in and then quoted as one word; in a shell string each value is quoted as one word
where it is put, so a node named `n 1; rm -rf ~` stays one harmless word. The shared
tables of a description are parsed here too: `[ports]` (NAME = number, `{port.NAME}`) and
`[lists.NAME]` (`item` filled in once per node, joined by `separator`: `{list.NAME}`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leaseline.harness.errors import BadArguments

LIST_VARS = ("name", "id", "ip", "port.", "opt.")
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


class TemplateProblem(ValueError):
    pass


def _names(text: str) -> list[str]:
    if {"{", "}"} & set(_TOKEN.sub("", text)):
        raise TemplateProblem(f"has an unmatched brace in {text!r} (write {{{{ or }}}})")
    return [m.group(1).strip() for m in _TOKEN.finditer(text) if m.group(1) is not None]


def check_template(text: str, allowed: tuple[str, ...]) -> None:
    for name in _names(text):
        if name in allowed or ("." in name and name.split(".", 1)[0] + "." in allowed):
            continue
        valid = ", ".join("{" + (a + "NAME" if a.endswith(".") else a) + "}" for a in allowed)
        raise TemplateProblem(f"refers to {{{name}}}, which it cannot use here (valid: {valid})")


def render(text: str, values: Mapping[str, str], quote: bool = False) -> str:
    """Fills a template; quote=True puts each value in as one shell word."""

    def sub(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        name = m.group(1).strip()
        if name not in values:
            raise TemplateProblem(f"has no value for {{{name}}}")
        return shlex.quote(str(values[name])) if quote else str(values[name])

    return _TOKEN.sub(sub, text)


@dataclass(frozen=True)
class Command:
    """A command of the description: a shell script, or an argv list (quoted per element)."""

    script: str | None = None
    argv: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.script is None and not self.argv

    def shell(self, values: Mapping[str, str]) -> str:
        if self.script is not None:
            return render(self.script, values, quote=True)
        return " ".join(shlex.quote(render(a, values)) for a in self.argv)

    def args(self, values: Mapping[str, str]) -> list[str]:
        """An argv to execute directly: a list element by element, a script through sh -c."""
        if self.script is not None:
            return ["sh", "-c", self.shell(values)]
        return [render(a, values) for a in self.argv]


def fail(label: str, where: str, what: str) -> BadArguments:
    return BadArguments(f"{label}: {where} {what}.")


def check_field(label: str, where: str, text: str, allowed: tuple[str, ...]) -> None:
    try:
        check_template(text, allowed)
    except TemplateProblem as e:
        raise fail(label, where, str(e)) from None


def parse_command(label: str, where: str, raw: Any, allowed: tuple[str, ...]) -> Command:
    if raw is None:
        return Command()
    if isinstance(raw, str):
        texts, cmd = [raw], Command(script=raw)
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        texts, cmd = list(raw), Command(argv=tuple(raw))
    else:
        raise fail(label, where, "must be a shell string or a list of strings (an argv)")
    for text in texts:
        check_field(label, where, text, allowed)
    return cmd


def parse_env(label: str, where: str, raw: Any, allowed: tuple[str, ...]) -> dict[str, str]:
    """An environment table: variable names to templates."""
    env = raw or {}
    if not isinstance(env, dict) or not all(
            isinstance(v, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
            for k, v in env.items()):
        raise fail(label, where, "must map variable names to strings")
    for k, v in env.items():
        check_field(label, f"{where}.{k}", v, allowed)
    return dict(env)


def parse_ports(label: str, raw: Any) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise fail(label, "ports", "must be a table of NAME = port number")
    ports: dict[str, int] = {}
    for key, port in raw.items():
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise fail(label, f"ports.{key}", "must be a port number (1-65535)")
        ports[key] = port
    return ports


def parse_lists(label: str, tables: Sequence[tuple[str, Any]]) -> dict[str, tuple[str, str]]:
    """name -> (item, separator) from `[lists.NAME]` tables (later tables win)."""
    lists: dict[str, tuple[str, str]] = {}
    for prefix, table in tables:
        if table is not None and not isinstance(table, dict):
            raise fail(label, prefix, "must be a table of lists")
        for key, spec in (table or {}).items():
            where = f"{prefix}.{key}"
            if not isinstance(spec, dict) or not isinstance(spec.get("item"), str):
                raise fail(label, where, "must be a table with item (and separator)")
            sep = spec.get("separator", ",")
            if not isinstance(sep, str):
                raise fail(label, f"{where}.separator", "must be a string")
            check_field(label, f"{where}.item", spec["item"], LIST_VARS)
            lists[key] = (spec["item"], sep)
    return lists


def list_values(lists: Mapping[str, tuple[str, str]], base: Mapping[str, str],
                peers: Sequence[tuple[str, int, str]]) -> dict[str, str]:
    """`{list.NAME}` values; base holds the port and option values, peers (name, id, ip)
    of every node in order."""
    return {f"list.{k}": sep.join(render(item, {**base, "name": n, "id": str(i), "ip": a})
                                  for n, i, a in peers)
            for k, (item, sep) in lists.items()}
