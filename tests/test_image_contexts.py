"""Which image contexts `leaseline images build` builds: every one, except a context whose
staged files (staged.txt: the Fluss jars, which neither the repository nor a wheel carries)
are missing, which is left out with one line instead of failing every other build."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.docker import images


def _context(root: Path, name: str, staged: str | None) -> Path:
    ctx = root / name
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM leaseline/base:bookworm\n")
    if staged is not None:
        (ctx / images.STAGED).write_text(staged)
    return ctx


def test_a_context_lacking_its_staged_files_says_what_and_how(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "fluss", "# comment\njars/ python -m stage-it\n")
    assert "jars" in images.unstaged(ctx) and "python -m stage-it" in images.unstaged(ctx)
    (ctx / "jars").mkdir()
    assert images.unstaged(ctx) is not None  # an empty folder is not staged either
    (ctx / "jars" / "a.jar").write_bytes(b"jar")
    assert images.unstaged(ctx) is None
    assert images.unstaged(_context(tmp_path, "plain", None)) is None


def test_build_all_leaves_out_only_the_unstaged_context(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    contexts = {"leaseline/plain:latest": _context(tmp_path, "plain", None),
                "leaseline/fluss:latest": _context(tmp_path, "fluss", "jars/ stage them\n")}
    built: list[str] = []
    monkeypatch.setattr(images, "image_contexts", lambda: contexts)
    monkeypatch.setattr(images, "build_base", lambda log: None)
    monkeypatch.setattr(images, "build_image", lambda tag, ctx, log: built.append(tag) or True)
    said: list[str] = []
    assert images.build_all(log=said.append) == ["leaseline/plain:latest"]
    assert built == ["leaseline/plain:latest"]
    assert len(said) == 1 and said[0].startswith("skipping leaseline/fluss:latest")
    # the shipped Fluss context declares its jars
    assert (Path(images.__file__).resolve().parents[3] / "sut" / "fluss" / images.STAGED).is_file()
