"""The Python workers' daemon on a local Spark master: pyspark's own, with the checker's
modules imported before it forks a worker per task slot.

A forked worker starts with what its daemon imported (copy on write), so the checker's
modules, numpy and pandas are imported once per session instead of once per worker: about
1.5 CPU-s per worker, a tenth of a 10 M-operation check on two cores. Only where the
executors run this installation (a local master); a cluster's executors start pyspark's
daemon and import the shipped checkers themselves.

What it imported is then frozen out of the garbage collector (gc.freeze): pyspark's forked
worker runs a full gc.collect() after every task, which otherwise walked every object of
those modules each time (about 40 ms of CPU a task, 54 tasks in a 10 M-operation check),
and writing to their headers copied their pages into each worker.
"""

from __future__ import annotations

import gc
import importlib

PRELOAD = ("numpy", "pandas", "msgspec", "leaseline.checkers.job")


def main() -> None:
    for module in PRELOAD:
        importlib.import_module(module)
    from pyspark.daemon import manager

    gc.freeze()
    manager()


if __name__ == "__main__":
    main()
