"""Registry of systems under test: a new profile is one module plus one entry here."""

from __future__ import annotations

from harness.errors import BadArguments
from harness.profiles.base import Endpoint, Option, Profile
from harness.profiles.leasekv import LeaseKV
from harness.profiles.redis_sentinel import RedisSentinel

PROFILES: dict[str, type[Profile]] = {
    RedisSentinel.name: RedisSentinel,
    LeaseKV.name: LeaseKV,
}

DEFAULT_PROFILE = "redis-sentinel"


def profile_class(name: str) -> type[Profile]:
    try:
        return PROFILES[name]
    except KeyError:
        raise BadArguments(
            f"unknown system under test {name!r} (valid: {', '.join(sorted(PROFILES))})."
        ) from None


__all__ = ["PROFILES", "DEFAULT_PROFILE", "Endpoint", "Option", "Profile", "profile_class"]
