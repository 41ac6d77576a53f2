"""Write what is needed to reproduce a run into its folder: command, git state, resolved config."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

import litlab


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def code_root() -> Path:
    """The folder of the litlab source (a git work tree for an editable install)."""
    return Path(litlab.__file__).resolve().parents[2]


def write_run_record(cfg: DictConfig, output_dir: str | Path) -> None:
    """Write ``command.txt``, ``git.txt`` (+ ``git.diff`` when dirty) and ``config_resolved.yaml``."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text(shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\n")
    root = code_root()
    commit = _git(["rev-parse", "HEAD"], root)
    if commit is None:
        (out / "git.txt").write_text(f"not a git checkout; litlab {litlab.__version__}\n")
    else:
        diff = _git(["diff", "HEAD"], root) or ""
        status = _git(["status", "--porcelain"], root) or ""
        (out / "git.txt").write_text(
            f"commit: {commit.strip()}\ndirty: {bool(status.strip())}\nlitlab: {litlab.__version__}\n"
        )
        if diff:
            (out / "git.diff").write_text(diff)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
