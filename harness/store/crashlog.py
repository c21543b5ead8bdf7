"""Where an unexpected failure's traceback goes, so the user sees one sentence and a path."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def write_crash_log(text: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"leaseline-crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
    path.write_text(text)
    return path
