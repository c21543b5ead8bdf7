"""Registry of systems under test: a new profile is one module plus one entry here, or one
TOML description (harness/systems/, docs/system-files.md) plus one entry in
SYSTEM_FILES (with a module of its own probes where the file's cannot say enough).
`--sut path/to/system.toml` names a description of the user's own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leaseline.harness.errors import BadArguments
from leaseline.harness.shipped import shipped
from leaseline.harness.systems.described import DescribedProfile, described_profile
from leaseline.harness.systems.fluss import Fluss
from leaseline.harness.systems.leasekv import LeaseKV
from leaseline.harness.systems.profile import Endpoint, Option, Profile
from leaseline.harness.systems.redis_sentinel import RedisSentinel

SYSTEMS_DIR = shipped(__package__)

PROFILES: dict[str, type[Profile]] = {
    RedisSentinel.name: RedisSentinel,
    Fluss.name: Fluss,
}
# Built-in systems described in one file, run through the same code as a user's file: the
# file, and the class whose probes find the leader, readiness and transfers.
SYSTEM_FILES: dict[str, tuple[Path, type[DescribedProfile]]] = {
    "elastickv": (SYSTEMS_DIR / "elastickv.toml", DescribedProfile),
    "leasekv": (SYSTEMS_DIR / "leasekv.toml", LeaseKV),
}


def system_file_path(name: str) -> Path | None:
    """The description behind `name`: a built-in's file, the user's file, or None."""
    if name in SYSTEM_FILES:
        return SYSTEM_FILES[name][0]
    return Path(name).expanduser() if name.endswith(".toml") else None


def profile_class(name: str, opts: dict[str, str] | None = None) -> type[Profile]:
    """The profile of `name`: a built-in system, or the system a TOML file describes (its
    options filled in from `opts`, since they may decide e.g. the number of nodes)."""
    if name in PROFILES:
        return PROFILES[name]
    if (path := system_file_path(name)) is not None:
        probes = SYSTEM_FILES[name][1] if name in SYSTEM_FILES else DescribedProfile
        return described_profile(path, {str(k): str(v) for k, v in (opts or {}).items()},
                                 name=name if name in SYSTEM_FILES else None, probes=probes)
    valid = ", ".join(sorted([*PROFILES, *SYSTEM_FILES]))
    raise BadArguments(
        f"unknown system under test {name!r} (valid: {valid}, or a system file NAME.toml)."
    )


def option_defaults(name: str) -> dict[str, str]:
    """The defaults of a system's options ({} when it cannot be told, e.g. a file gone)."""
    if name in PROFILES:
        return {k: o.default for k, o in PROFILES[name].options.items()}
    if (path := system_file_path(name)) is not None:
        from leaseline.harness.systems.system_file import load_option_defaults

        return load_option_defaults(path)
    return {}


def sut_label(test: Mapping[str, Any]) -> str:
    """The system and the options it ran with that differ from its defaults, e.g.
    "leasekv bug=local-read": an injected bug must show wherever the run is listed."""
    sut = str(test.get("sut") or "")
    opts = test.get("sut_opts")
    if not isinstance(opts, dict) or not opts:
        return sut
    defaults = option_defaults(sut)
    shown = [f"{k}={v}" for k, v in sorted(opts.items()) if defaults.get(k) != v]
    return " ".join([sut, *shown]).strip()


__all__ = ["PROFILES", "SYSTEM_FILES", "Endpoint", "Option", "Profile",
           "option_defaults", "profile_class", "sut_label"]
