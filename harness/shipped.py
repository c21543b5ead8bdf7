"""Files Leaseline ships inside its packages: the compose file and the images' build folders
(harness/clusters/docker), the system descriptions (harness/systems), leasekv's build folder
(sut/leasekv). They are package data found with importlib.resources, so the same lookup
works in a checkout, in an editable install and in a wheel installed anywhere; nothing is
looked up relative to the checkout, and nothing is written beside the code."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from leaseline.harness.errors import EnvironmentProblem


def shipped(package: str, *parts: str) -> Path:
    """The file or folder `parts` of `package` as a real path (Docker builds from folders
    and Compose reads files: a package imported from a zip archive cannot serve them)."""
    root = files(package)
    if not isinstance(root, Path):
        raise EnvironmentProblem(f"{package} is not installed as files on disk; install "
                                 "Leaseline with pip or pipx (not as a zip).")
    return root.joinpath(*parts)
