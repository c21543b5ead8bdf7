"""One function for doing a thing on every node at once, whatever the layer.

Probes (harness/systems), cluster operations (harness/clusters) and nemeses share it, so
every parallel step has the same failure rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from leaseline.harness.errors import LeaselineError

T = TypeVar("T")
R = TypeVar("R")


def in_parallel(fn: Callable[[T], R], items: Iterable[T]) -> dict[T, R]:
    """fn on every item at once; waits for all, then raises the first failure (in item
    order), so one bad node never leaves the others half done."""
    todo = list(items)
    if not todo:
        return {}
    results: dict[T, R] = {}
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        futures = [(item, pool.submit(fn, item)) for item in todo]
        for item, fut in futures:
            try:
                results[item] = fut.result()
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the others
                errors.append(e)
    for e in errors:
        if isinstance(e, LeaselineError):
            raise e
    if errors:
        raise errors[0]
    return results
