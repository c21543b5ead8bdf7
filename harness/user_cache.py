"""Where Leaseline keeps what it fetches or builds for this user: $XDG_CACHE_HOME/leaseline
(~/.cache/leaseline by default), one folder per kind beneath it (builds of a system's
source, staged Fluss releases). sut/fluss/jars.py, which knows nothing of harness/, keeps
its Maven cache in the same place by the same rule.
"""

from __future__ import annotations

import os
from pathlib import Path

USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "leaseline"
