"""`leaseline images prune` on real Docker: of a folder's images, it removes those its folder
no longer makes and no container uses, and keeps the current one, one a container (even a
stopped one) still uses, and one another checkout built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.client import client

pytestmark = [pytest.mark.docker]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A build folder of the test's own in place of the shipped ones; its images removed."""
    name = f"test-prune-{os.getpid()}"
    ctx = tmp_path / name
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {images.BASE_TAG}\nCOPY version /version\n")
    monkeypatch.setattr(images, "image_contexts", lambda: {name: ctx})
    images.build_base(lambda _m: None)
    yield ctx
    for image in client().images.list(name=f"leaseline/{name}"):
        for c in client().containers.list(all=True, filters={"ancestor": image.id}):
            c.remove(force=True)
        client().images.remove(image.id, force=True)


def _build(ctx: Path, version: str) -> str:
    (ctx / "version").write_text(version)
    tag = images.content_tag(ctx.name, ctx)
    assert images.build_image(tag, ctx, lambda _m: None)
    return tag


def test_prune_removes_only_stale_unused_images_of_this_checkout(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used = _build(folder, "1")
    box = client().containers.create(used, ["true"])  # never started: still a user
    stale = _build(folder, "2")
    with monkeypatch.context() as m:  # built from another checkout's folder
        m.setattr(images, "CONTEXTS_DIR", folder.parent / "elsewhere")
        other = _build(folder, "3")
    current = _build(folder, "4")
    assert len({used, stale, other, current}) == 4
    assert images.prune(lambda _m: None) == [stale]
    kept = [images.image_exists(t) for t in (used, stale, other, current)]
    assert kept == [True, False, True, True]
    box.remove()
    assert images.prune(lambda _m: None) == [used]
    assert images.image_exists(current) and images.image_exists(other)
