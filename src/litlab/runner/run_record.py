"""Write what is needed to reproduce a run into its folder: command, git state, resolved config."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

import litlab
from litlab.core.nested import leaf_changes

log = logging.getLogger(__name__)
SHOWN_CHANGES = 6  # config differences named in the resume warning; the rest are counted
LEG_KEYS = ("resume",)  # keys that say how a leg starts, not what the run is: not warned about


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def code_root() -> Path:
    """The folder of the litlab source (a git work tree for an editable install)."""
    return Path(litlab.__file__).resolve().parents[2]


def _git_state() -> tuple[list[str], str]:
    """What names the code that runs (commit, dirty, version) and the diff of a dirty tree."""
    root = code_root()
    commit = _git(["rev-parse", "HEAD"], root)
    if commit is None:
        return [f"not a git checkout; litlab {litlab.__version__}"], ""
    status = _git(["status", "--porcelain"], root) or ""
    diff = _git(["diff", "HEAD"], root) or ""
    fields = [f"commit: {commit.strip()}", f"dirty: {bool(status.strip())}", f"litlab: {litlab.__version__}"]
    return fields, diff


def config_changes(before: str, after: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """``key: old -> new`` for every leaf outside ``ignore`` that differs between two resolved configs."""
    old, new = (OmegaConf.to_container(OmegaConf.create(config)) for config in (before, after))
    return leaf_changes(old, new, ignore)


def _record_later_leg(out: Path, command: str, resolved: str) -> None:
    """Append this leg's command and code, keep its config when it differs, and say what changed."""
    with open(out / "command.txt", "a") as handle:
        handle.write(command)
    leg = max(2, len((out / "command.txt").read_text().splitlines()))
    state, diff = _git_state()
    with open(out / "git.txt", "a") as handle:
        handle.write(f"leg {leg}: {'  '.join(state)}\n")
    if diff:
        (out / f"git.leg{leg}.diff").write_text(diff)
    first = (out / "config_resolved.yaml").read_text()
    if first == resolved:
        return
    (out / f"config_resolved.leg{leg}.yaml").write_text(resolved)
    changes = config_changes(first, resolved, ignore=LEG_KEYS)
    if not changes:
        return
    more = f" (and {len(changes) - SHOWN_CHANGES} more)" if len(changes) > SHOWN_CHANGES else ""
    log.warning(
        "resumed leg %d runs with a config that differs from the first leg's: %s%s; both are kept "
        "(config_resolved.yaml, config_resolved.leg%d.yaml)",
        leg,
        "; ".join(changes[:SHOWN_CHANGES]),
        more,
        leg,
    )


def write_run_record(cfg: DictConfig, output_dir: str | Path) -> None:
    """Record the command, git state and resolved config; a resumed leg adds to the record, never replaces it.

    The first leg writes ``command.txt``, ``git.txt`` (+ ``git.diff`` when dirty) and
    ``config_resolved.yaml``. Each later leg N appends its command line and a ``leg N:`` line naming its
    code to ``git.txt`` (+ ``git.legN.diff``), and, when its resolved config differs from the first leg's,
    writes it as ``config_resolved.legN.yaml`` and warns with the keys that changed.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]) + "\n"
    resolved = OmegaConf.to_yaml(cfg, resolve=True)
    first = out / "config_resolved.yaml"
    if first.exists():
        _record_later_leg(out, command, resolved)
        return
    (out / "command.txt").write_text(command)
    state, diff = _git_state()
    (out / "git.txt").write_text("\n".join(state) + "\n")
    if diff:
        (out / "git.diff").write_text(diff)
    first.write_text(resolved)
