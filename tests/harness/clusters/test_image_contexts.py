"""Which image contexts `leaseline images build` builds: every one, except a context whose
staged files (staged.txt: the Fluss jars, which neither the repository nor a wheel carries)
are missing, which is left out with one line instead of failing every other build. Each is
tagged by its content, so two checkouts whose folders differ never share a tag."""

from __future__ import annotations

from pathlib import Path

import pytest

from leaseline.harness.clusters.docker import images


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
    contexts = {"plain": _context(tmp_path, "plain", None),
                "fluss": _context(tmp_path, "fluss", "jars/ stage them\n")}
    built: list[str] = []
    monkeypatch.setattr(images, "image_contexts", lambda: contexts)
    monkeypatch.setattr(images, "build_base", lambda log: None)
    monkeypatch.setattr(images, "build_image", lambda tag, ctx, log: built.append(tag) or True)
    said: list[str] = []
    plain = images.content_tag("plain", contexts["plain"])
    assert images.build_all(log=said.append) == [plain]
    assert built == [plain]
    assert len(said) == 1 and said[0].startswith("skipping leaseline/fluss: ")
    # the shipped Fluss context declares its jars
    assert (Path(images.__file__).resolve().parents[3] / "sut" / "fluss" / images.STAGED).is_file()


def test_a_folder_is_tagged_by_its_content(tmp_path: Path) -> None:
    """Two checkouts' redis folders: the same content gets the same tag (one image, shared
    harmlessly), different content another tag (neither overwrites the other's image)."""
    a, b = tmp_path / "a" / "redis", tmp_path / "b" / "redis"
    for ctx in (a, b):
        (ctx / "conf").mkdir(parents=True)
        (ctx / "Dockerfile").write_text("FROM leaseline/base:bookworm\nCOPY conf /etc\n")
        (ctx / "conf" / "redis.conf").write_text("port 6379\n")
    tag = images.content_tag("redis", a)
    assert tag == images.content_tag("redis", b)
    assert tag.startswith("leaseline/redis:") and len(tag.rpartition(":")[2]) == 16
    (b / "conf" / "redis.conf").write_text("port 6380\n")  # same size, new content
    assert images.content_tag("redis", b) not in (tag, images.content_tag("redis", a))
    (b / "conf" / "redis.conf").write_text("port 6379\n")
    assert images.content_tag("redis", b) == tag
    (b / "conf" / "redis.conf").rename(b / "conf" / "other.conf")  # a file's name counts too
    assert images.content_tag("redis", b) != tag


def test_the_shipped_compose_file_names_every_image_by_a_variable_images_py_fills() -> None:
    """No image of docker-compose.yml is spelt out: each is ${LL_IMAGE_<FOLDER>...}, and
    compose_env() gives each such variable the tag of that folder as it is now."""
    import re

    from leaseline.harness.clusters.docker.cluster import COMPOSE_FILE, Cluster

    text = COMPOSE_FILE.read_text()
    named = re.findall(r"^\s*image:\s*(.*)$", text, re.M)
    assert named and all(re.fullmatch(r'"\$\{LL_IMAGE_[A-Z_]+:\?[^}]+\}"', n) for n in named)
    env = images.compose_env()
    for variable in {re.search(r"LL_IMAGE_[A-Z_]+", n).group(0) for n in named}:
        name = variable.removeprefix("LL_IMAGE_").lower()
        assert env[variable] == images.context_tag(name) == images.content_tag(
            name, images.image_contexts()[name])
    cluster = Cluster("ll-imgtags-unit", "redis-sentinel", env={"LL_NET": "10.97.1"})
    assert cluster.env == env | {"LL_NET": "10.97.1"}
    assert not any(tag.endswith(":latest") for tag in env.values())
