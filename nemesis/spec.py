"""Parsing one `--nemesis` entry: NAME[:TARGET][:d=SECONDS][:KEY=VALUE]...

    pause:leader:d=2      pause the leader for 2 s (then resume, then the usual gap)
    kill:minority         SIGKILL a random minority of the nodes
    loss:all:p=0.3        drop 30 % of the packets between nodes
    delay:leader:ms=300:jitter=50:dir=in   the leader receives its peers' packets late

Targets: leader, one (a random node), minority, majority, all. Which ones a fault accepts,
and its other parameters, are checked by the fault class (Nemesis.check). Parameters are
numbers, except the words of WORDS (dir=in|out|both).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leaseline.harness.errors import BadArguments

TARGETS = ("leader", "one", "minority", "majority", "all")
# Parameters whose value is a word, and the words they accept.
WORDS: dict[str, tuple[str, ...]] = {"dir": ("in", "out", "both")}


@dataclass(frozen=True)
class NemesisSpec:
    name: str
    target: str | None = None
    duration_s: float | None = None
    params: dict[str, float] = field(default_factory=dict)
    text: str = ""
    words: dict[str, str] = field(default_factory=dict)

    def param(self, key: str, default: float) -> float:
        return self.params.get(key, default)

    def word(self, key: str, default: str) -> str:
        return self.words.get(key, default)


def parse_spec(text: str) -> NemesisSpec:
    name, *parts = [p.strip() for p in text.strip().split(":")]
    target: str | None = None
    duration: float | None = None
    params: dict[str, float] = {}
    words: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            if part not in TARGETS:
                raise BadArguments(
                    f"{text!r}: {part!r} is not a target (valid: {', '.join(TARGETS)}) "
                    "nor a key=value parameter."
                )
            target = part
            continue
        if key in WORDS:
            if value not in WORDS[key]:
                raise BadArguments(
                    f"{text!r}: {key}= must be one of {', '.join(WORDS[key])}, got {value!r}."
                )
            words[key] = value
            continue
        try:
            number = float(value)
        except ValueError:
            raise BadArguments(f"{text!r}: {key}= needs a number, got {value!r}.") from None
        if key == "d":
            if number < 0.1:
                raise BadArguments(f"{text!r}: d= (seconds held) must be at least 0.1.")
            duration = number
        else:
            params[key] = number
    return NemesisSpec(name, target, duration, params, text.strip(), words)
