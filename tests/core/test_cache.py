"""Cache entries: built once, read back by key, and read from the copy shipped with litlab when one is."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from litlab.core import cache


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache root and a stand-in for ``data/`` (the shipped entries)."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "shipped_data_dir", lambda family: tmp_path / "data" / family)
    return tmp_path / "data"


def _counting_build(built: list[int]) -> Callable[[], dict[str, torch.Tensor]]:
    def build() -> dict[str, torch.Tensor]:
        built.append(1)
        return {"w": torch.arange(4.0)}

    return build


def _ship_entry(tmp_path: Path, shipped: Path, built: list[int]) -> Path:
    """Build version 1 of ``family/model`` for seed 0 and move it into ``shipped`` (a fresh clone holds only
    the shipped copy); returns the shipped file."""
    cache.cached_tensors("family", "model", "1", {"seed": 0}, _counting_build(built))
    entry = next((tmp_path / "cache" / "family").glob("model-*.safetensors"))
    (shipped / "family").mkdir(parents=True)
    return Path(shutil.move(entry, shipped / "family" / entry.name))


def test_an_entry_is_built_once_then_read_back(shipped: Path) -> None:
    built: list[int] = []
    first = cache.cached_tensors("family", "model", "1", {"seed": 0}, _counting_build(built))
    again = cache.cached_tensors("family", "model", "1", {"seed": 0}, _counting_build(built))
    other = cache.cached_tensors("family", "model", "1", {"seed": 1}, _counting_build(built))
    assert torch.equal(first["w"], again["w"]) and torch.equal(first["w"], other["w"])
    assert len(built) == 2, "the same key was built twice, or a new key was not built"


def test_a_shipped_entry_is_read_instead_of_built(shipped: Path, tmp_path: Path) -> None:
    built: list[int] = []
    _ship_entry(tmp_path, shipped, built)
    again = cache.cached_tensors("family", "model", "1", {"seed": 0}, _counting_build(built))
    assert torch.equal(again["w"], torch.arange(4.0)) and len(built) == 1, "the shipped entry was rebuilt"
    cache.cached_tensors("family", "model", "2", {"seed": 0}, _counting_build(built))
    assert len(built) == 2, "a shipped entry of another version was used"


def test_a_shipped_entry_with_a_foreign_key_is_not_trusted(shipped: Path, tmp_path: Path) -> None:
    built: list[int] = []
    entry = _ship_entry(tmp_path, shipped, built)
    # the right file name, another config's metadata
    save_file({"w": torch.zeros(4)}, entry, metadata={"litlab_key": "another"})
    again = cache.cached_tensors("family", "model", "1", {"seed": 0}, _counting_build(built))
    assert len(built) == 2 and torch.equal(again["w"], torch.arange(4.0)), "a foreign entry was used"


def test_two_writers_of_one_entry_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Two runs side by side building the same cache entry (the 32x32 sprite script's two streams): the
    second finishes while the first is still writing, and both renames succeed onto a whole file."""
    path = tmp_path / "cache" / "sprites.npz"
    arrays = {"images": np.arange(12, dtype=np.uint8).reshape(3, 4)}

    def first(tmp: str) -> None:
        with open(tmp, "wb") as handle:
            cache.write_npz_atomic(path, arrays)  # the other run, start to end, while this one writes
            np.savez_compressed(handle, **arrays)

    cache.write_atomic(path, first)
    with np.load(path) as stored:
        assert np.array_equal(stored["images"], arrays["images"])
    assert [p.name for p in path.parent.iterdir()] == ["sprites.npz"], "a temporary file was left behind"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    cache.write_text_atomic(path, "old")

    def fail(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cache.write_atomic(path, fail)
    assert path.read_text() == "old" and list(tmp_path.iterdir()) == [path]
