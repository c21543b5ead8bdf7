"""DynamoDB ConditionExpression / UpdateExpression: a parser and an evaluator.

Enough of the grammar for conditional writes: comparisons (= <> < <= > >=), BETWEEN,
IN, AND/OR/NOT, parentheses, attribute_exists, attribute_not_exists, begins_with;
updates with SET (values, paths, `a + :n`, `a - :n`, if_not_exists, list_append) and REMOVE.
Only top-level attribute names are supported (no nested paths).
Parsing is pure and deterministic so every replica evaluates the same way.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

Item = dict[str, dict[str, Any]]


_MISSING_ATTR = "The provided expression refers to an attribute that does not exist in the item"
_UNDEFINED_NAME = "An expression attribute name used in the document path is not defined"
_UNDEFINED_VALUE = "An expression attribute value used in expression is not defined"


class ExpressionError(ValueError):
    """The expression is malformed or refers to an undefined name/value (ValidationException)."""


_TOKEN = re.compile(
    r"\s*(?:(?P<op><>|<=|>=|=|<|>|\(|\)|,|\+|-)|(?P<name>#[A-Za-z0-9_]+)"
    r"|(?P<value>:[A-Za-z0-9_]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE"}
_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "begins_with", "if_not_exists",
              "list_append"}


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"Invalid expression: unexpected {text[pos:pos + 10]!r}")
        kind = m.lastgroup or ""
        tok = m.group(kind)
        if kind == "word" and tok.upper() in _KEYWORDS:
            kind, tok = "kw", tok.upper()
        tokens.append((kind, tok))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str, names: dict[str, str], values: dict[str, Any]) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.names = names
        self.values = values
        self.used_names: set[str] = set()
        self.used_values: set[str] = set()

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, kind: str | None = None, tok: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (kind and t[0] != kind) or (tok and t[1] != tok):
            want = tok or kind or "a token"
            found = t[1] if t else "end"
            raise ExpressionError(f"Invalid expression: expected {want}, found {found}")
        self.i += 1
        return t

    def at(self, tok: str) -> bool:
        t = self.peek()
        return t is not None and t[1] == tok

    def done(self) -> None:
        if self.peek() is not None:
            raise ExpressionError(f"Invalid expression: unexpected {self.peek()[1]!r}")  # type: ignore[index]

    # --- operands -------------------------------------------------------------------
    def path(self) -> tuple:
        kind, tok = self.take()
        if kind == "name":
            if tok not in self.names:
                raise ExpressionError(f"{_UNDEFINED_NAME}; attribute name: {tok}")
            self.used_names.add(tok)
            return ("path", self.names[tok])
        if kind == "word":
            return ("path", tok)
        raise ExpressionError(f"Invalid expression: expected an attribute name, found {tok!r}")

    def operand(self) -> tuple:
        t = self.peek()
        if t is None:
            raise ExpressionError("Invalid expression: missing operand")
        if t[0] == "value":
            self.i += 1
            if t[1] not in self.values:
                raise ExpressionError(f"{_UNDEFINED_VALUE}; attribute value: {t[1]}")
            self.used_values.add(t[1])
            return ("value", self.values[t[1]])
        if t[0] == "word" and t[1] == "if_not_exists":
            self.i += 1
            self.take("op", "(")
            p = self.path()
            self.take("op", ",")
            v = self.operand()
            self.take("op", ")")
            return ("if_not_exists", p, v)
        if t[0] == "word" and t[1] == "list_append":
            self.i += 1
            self.take("op", "(")
            a = self.operand()
            self.take("op", ",")
            b = self.operand()
            self.take("op", ")")
            return ("list_append", a, b)
        return self.path()

    # --- conditions -----------------------------------------------------------------
    def condition(self) -> tuple:
        left = self.conjunction()
        while self.at("OR"):
            self.i += 1
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple:
        left = self.negation()
        while self.at("AND"):
            self.i += 1
            left = ("and", left, self.negation())
        return left

    def negation(self) -> tuple:
        if self.at("NOT"):
            self.i += 1
            return ("not", self.negation())
        return self.primary()

    def primary(self) -> tuple:
        if self.at("("):
            self.i += 1
            c = self.condition()
            self.take("op", ")")
            return c
        t = self.peek()
        if t and t[0] == "word" and t[1] in ("attribute_exists", "attribute_not_exists"):
            self.i += 1
            self.take("op", "(")
            p = self.path()
            self.take("op", ")")
            return (t[1], p)
        if t and t[0] == "word" and t[1] == "begins_with":
            self.i += 1
            self.take("op", "(")
            p = self.operand()
            self.take("op", ",")
            v = self.operand()
            self.take("op", ")")
            return ("begins_with", p, v)
        left = self.operand()
        if self.at("BETWEEN"):
            self.i += 1
            lo = self.operand()
            self.take("kw", "AND")
            return ("between", left, lo, self.operand())
        if self.at("IN"):
            self.i += 1
            self.take("op", "(")
            options = [self.operand()]
            while self.at(","):
                self.i += 1
                options.append(self.operand())
            self.take("op", ")")
            return ("in", left, options)
        kind, op = self.take("op")
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise ExpressionError(f"Invalid expression: expected a comparator, found {op!r}")
        return ("cmp", op, left, self.operand())

    # --- updates --------------------------------------------------------------------
    def update(self) -> list[tuple]:
        actions: list[tuple] = []
        seen = set()
        while self.peek() is not None:
            kind, clause = self.take("kw")
            if clause in seen or clause not in ("SET", "REMOVE"):
                raise ExpressionError(f"Invalid UpdateExpression: bad clause {clause}")
            seen.add(clause)
            while True:
                p = self.path()
                if clause == "SET":
                    self.take("op", "=")
                    v = self.operand()
                    if self.at("+") or self.at("-"):
                        op = self.take("op")[1]
                        v = ("arith", op, v, self.operand())
                    actions.append(("set", p[1], v))
                else:
                    actions.append(("remove", p[1]))
                if not self.at(","):
                    break
                self.i += 1
        if not actions:
            raise ExpressionError("Invalid UpdateExpression: The expression can not be empty")
        return actions


def parse_condition(text: str, names: dict[str, str], values: dict[str, Any]) -> tuple:
    p = _Parser(text, names, values)
    tree = p.condition()
    p.done()
    return tree


def parse_update(text: str, names: dict[str, str], values: dict[str, Any]) -> list[tuple]:
    p = _Parser(text, names, values)
    actions = p.update()
    p.done()
    return actions


# --- evaluation ---------------------------------------------------------------------
def _number(v: dict[str, Any]) -> Decimal:
    try:
        return Decimal(v["N"])
    except (InvalidOperation, KeyError, TypeError):
        raise ExpressionError("An operand is not a number") from None


def normalize(v: dict[str, Any] | None) -> tuple | None:
    """A hashable, comparable form of an AttributeValue (numbers compared by value)."""
    if v is None:
        return None
    (t, x), = v.items() if len(v) == 1 else (("?", repr(sorted(v.items()))),)
    if t == "N":
        return ("N", _number(v))
    if t in ("SS", "NS", "BS"):
        return (t, frozenset(x))
    if t in ("L", "M"):
        return (t, repr(x))
    return (t, x)


def _resolve(operand: tuple, item: Item | None) -> dict[str, Any] | None:
    kind = operand[0]
    if kind == "value":
        return operand[1]
    if kind == "path":
        return (item or {}).get(operand[1])
    if kind == "if_not_exists":
        cur = _resolve(operand[1], item)
        return cur if cur is not None else _resolve(operand[2], item)
    if kind == "list_append":
        a, b = _resolve(operand[1], item), _resolve(operand[2], item)
        if a is None or b is None:
            raise ExpressionError(_MISSING_ATTR)
        if "L" not in a or "L" not in b:
            raise ExpressionError("Incorrect operand type for operator or function; "
                                  "operator or function: list_append, operand type: not a list")
        return {"L": [*a["L"], *b["L"]]}
    if kind == "arith":
        a, b = _resolve(operand[2], item), _resolve(operand[3], item)
        if a is None or b is None:
            raise ExpressionError(_MISSING_ATTR)
        r = _number(a) + _number(b) if operand[1] == "+" else _number(a) - _number(b)
        return {"N": str(r)}
    raise ExpressionError(f"unknown operand {kind}")


def evaluate(tree: tuple, item: Item | None) -> bool:
    kind = tree[0]
    if kind == "or":
        return evaluate(tree[1], item) or evaluate(tree[2], item)
    if kind == "and":
        return evaluate(tree[1], item) and evaluate(tree[2], item)
    if kind == "not":
        return not evaluate(tree[1], item)
    if kind == "attribute_exists":
        return _resolve(tree[1], item) is not None
    if kind == "attribute_not_exists":
        return _resolve(tree[1], item) is None
    if kind == "begins_with":
        a, b = _resolve(tree[1], item), _resolve(tree[2], item)
        return bool(a and b and "S" in a and "S" in b and a["S"].startswith(b["S"]))
    if kind == "between":
        v, lo, hi = (normalize(_resolve(x, item)) for x in tree[1:])
        return _ordered(lo, v) and _ordered(v, hi)
    if kind == "in":
        v = normalize(_resolve(tree[1], item))
        return v is not None and any(v == normalize(_resolve(o, item)) for o in tree[2])
    if kind == "cmp":
        op, a, b = tree[1], normalize(_resolve(tree[2], item)), normalize(_resolve(tree[3], item))
        if op == "=":
            return a is not None and a == b
        if op == "<>":
            return a != b
        if a is None or b is None or a[0] != b[0]:
            return False
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    raise ExpressionError(f"unknown condition {kind}")


def _ordered(a: tuple | None, b: tuple | None) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a <= b


def apply_update(actions: list[tuple], item: Item) -> Item:
    """A new item with the update applied (the old one is left untouched)."""
    new = dict(item)
    for action in actions:
        if action[0] == "set":
            value = _resolve(action[2], item)
            if value is None:
                raise ExpressionError(_MISSING_ATTR)
            new[action[1]] = value
        else:
            new.pop(action[1], None)
    return new
