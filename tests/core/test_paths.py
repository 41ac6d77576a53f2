"""Data lookup: an explicit root only, else $LITLAB_DATA_ROOT, else the shipped copy; no sibling folders."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from litlab.core import paths
from litlab.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_explicit_root_is_the_only_candidate_and_must_exist(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path / "env"))
    (tmp_path / "explicit").mkdir()
    assert paths.data_root_candidates("graphs", tmp_path / "explicit") == [tmp_path / "explicit"]
    with pytest.raises(ConfigError, match="data.root=.*does not exist"):
        paths.data_root_candidates("graphs", tmp_path / "typo")


def test_environment_then_shipped_copy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path / "env"))
    candidates = paths.data_root_candidates("graphs")
    assert candidates == [tmp_path / "env" / "graphs", paths.shipped_data_dir("graphs")]
    assert paths.find_data("graphs", "texas/raw") == paths.shipped_data_dir("graphs")
    (tmp_path / "env" / "graphs" / "texas" / "raw").mkdir(parents=True)  # empty: not a copy
    assert paths.find_data("graphs", "texas/raw") == paths.shipped_data_dir("graphs")


def test_missing_data_names_every_place_tried(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path / "env"))
    message = str(paths.missing_data_error("graphs", "pubmed/raw"))
    assert str(tmp_path / "env" / "graphs" / "pubmed" / "raw") in message
    assert str(paths.shipped_data_dir("graphs") / "pubmed" / "raw") in message
    assert "data.root" in message and "LITLAB_DATA_ROOT" in message


def test_cache_dir_is_keyed_and_under_litlab_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    a, b = paths.cache_dir("events", {"seed": 0}), paths.cache_dir("events", {"seed": 1})
    assert a.parent == tmp_path / "cache" / "events" and a != b and a.is_dir()


def test_shipped_data_matches_its_checksums() -> None:
    root = paths.shipped_data_dir("")
    listed = {}
    for line in (root / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.removeprefix("./")] = digest
    assert len(listed) >= 80
    for name, digest in listed.items():
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name


def test_every_shipped_file_has_a_checksum() -> None:
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=REPO, capture_output=True, text=True).stdout
    files = {name.removeprefix("data/") for name in tracked.split()}
    sums = (REPO / "data" / "SHA256SUMS").read_text().splitlines()
    listed = {line.split(maxsplit=1)[1].removeprefix("./") for line in sums}
    missing = files - listed - {"README.md", "SHA256SUMS", "__init__.py"}
    assert not missing, f"shipped files without a line in data/SHA256SUMS: {sorted(missing)}"


def test_nothing_refers_to_a_sibling_shared_folder() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    pattern = re.compile(r"\.\./shared|shared/data|shared/papers")
    offenders = [
        name
        for name in tracked
        if name.endswith((".py", ".yaml", ".md", ".toml", ".sh", ".cfg", "Makefile"))
        and name != Path(__file__).relative_to(REPO).as_posix()
        and (REPO / name).is_file()
        and pattern.search((REPO / name).read_text(errors="ignore"))
    ]
    assert offenders == [], f"these files refer to a sibling shared/ folder: {offenders}"
