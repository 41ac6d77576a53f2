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
    """Record the command, git state and resolved config; a resumed leg adds to the record, never replaces it.

    The first leg writes ``command.txt``, ``git.txt`` (+ ``git.diff`` when dirty) and
    ``config_resolved.yaml``. Each later leg appends its command line, and writes its resolved config as
    ``config_resolved.leg<N>.yaml`` when it differs from the first leg's.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\n"
    resolved = OmegaConf.to_yaml(cfg, resolve=True)
    first = out / "config_resolved.yaml"
    if first.exists():
        with open(out / "command.txt", "a") as handle:
            handle.write(command)
        if first.read_text() != resolved:
            legs = len(list(out.glob("config_resolved.leg*.yaml"))) + 2
            (out / f"config_resolved.leg{legs}.yaml").write_text(resolved)
        return
    (out / "command.txt").write_text(command)
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
    first.write_text(resolved)
