"""Input problems the checker reports as `file:line: what is wrong` (exit 254)."""

from __future__ import annotations


class HistoryFormatError(Exception):
    def __init__(self, path: str, line: int, what: str) -> None:
        super().__init__(f"{path}:{line}: {what}")
        self.path, self.line, self.what = path, line, what
