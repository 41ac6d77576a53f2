"""What a folder of saved sprite-claim fits was made with, so that no run reads back fits made with another
data grid, early stopping, classifier or model config as if they were its own.

Each case's fits folder keeps ``protocol.json``: the data settings, early stopping and classifier epochs of
its fits and each model's config. ``max_steps`` is left out on purpose: a larger one continues capped fits.
A larger early-stopping ``min_steps`` is accepted too: the fits that stopped before it move aside (kept) to be
fit again, and the rest are what the new rule makes as well.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litlab.core.cache import write_text_atomic
from litlab.core.errors import LitlabError
from litlab.core.nested import leaf_changes

PROTOCOL_FILE = "protocol.json"
SHOWN_CHANGES = 3  # differences named in the error; the rest are counted
MIN_STEPS = "early_stopping.min_steps"  # the one shared setting a run may raise over the saved fits'
SUPERSEDED = "superseded"  # fits_dir/superseded/min_steps<n>/: fits made under an earlier, lower min_steps

log = logging.getLogger("litlab")


def describe(value: Any) -> Any:
    """A JSON-ready description of a setting: a partial (Hydra's ``_partial_``) as its target and keywords."""
    if isinstance(value, functools.partial):
        described = {"_target_": describe(value.func), **{k: describe(v) for k, v in value.keywords.items()}}
        return described | ({"_args_": describe(value.args)} if value.args else {})
    if isinstance(value, Mapping):
        return {str(key): describe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [describe(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def fit_protocol(
    models: Mapping[str, Any], data: Mapping[str, Any], stopping: Any, classifier_epochs: int
) -> dict[str, Any]:
    """The settings a case's saved fits depend on, besides each fit's model name and seed."""
    shared = {"data": data, "early_stopping": dataclasses.asdict(stopping) if stopping else None}
    return describe(shared | {"classifier_epochs": classifier_epochs, "models": dict(models)})


def check_protocol(fits_dir: Path, protocol: dict[str, Any]) -> None:
    """Refuse a run whose settings differ from those of the fits saved in ``fits_dir``; then record them.

    The shared settings are compared when anything is saved there, a model's config when a fit of that model
    is (finished or under way); a model with nothing saved takes this run's config. A folder saved before
    protocols were kept takes this run's settings as its own. A raised ``min_steps`` is not a difference:
    :func:`supersede_early_stops` moves the fits it changes aside.
    """
    file = fits_dir / PROTOCOL_FILE
    if file.is_file():
        recorded = json.loads(file.read_text())
        anything_saved = _saved(fits_dir, "*") or (fits_dir / "data.json").is_file()
        shared = [key for key in protocol if key != "models"] if anything_saved else []
        models = [
            name for name in protocol["models"] if name in recorded["models"] and _saved(fits_dir, name)
        ]

        def part(settings: dict[str, Any]) -> dict[str, Any]:
            return {key: settings.get(key) for key in shared} | {
                "models": {name: settings["models"][name] for name in models}
            }

        changes = leaf_changes(part(recorded), part(protocol), ignore=(MIN_STEPS,))
        if changes:
            more = f" and {len(changes) - SHOWN_CHANGES} more" if len(changes) > SHOWN_CHANGES else ""
            raise LitlabError(
                f"{fits_dir} holds fits made with other settings (saved -> this run: "
                f"{'; '.join(changes[:SHOWN_CHANGES])}{more}); run with those or another task.fits_dir"
            )
        if shared:
            supersede_early_stops(fits_dir, _min_steps(recorded), _min_steps(protocol))
        protocol = protocol | {"models": recorded["models"] | protocol["models"]}
    write_text_atomic(file, json.dumps(protocol, indent=1, sort_keys=True) + "\n")


def supersede_early_stops(fits_dir: Path, old: int, new: int) -> list[str]:
    """Move the fits that stopped early before ``new`` min_steps into ``superseded/min_steps<old>/`` and
    return their names; refuse a lower ``new``.

    Patience is only checked from ``min_steps`` on, so a fit that stopped at step S >= ``new`` never ran out
    of patience between ``old`` and S: the new rule stops it at S too, with the same weights kept. One that
    stopped before ``new`` would train on, so it is fit again. Capped fits (their state kept) just continue.
    """
    if new == old:
        return []
    if new < old:
        raise LitlabError(
            f"{fits_dir} holds fits made with early_stopping.min_steps={old}; a lower one ({new}) could have "
            "stopped them sooner, so it cannot apply to them: run with min_steps >= "
            f"{old} or another task.fits_dir"
        )
    target = fits_dir / SUPERSEDED / f"min_steps{old}"
    moved = []
    for marker in fit_markers(fits_dir):
        if marker.with_suffix(".ckpt").is_file():
            continue
        if json.loads(marker.read_text())["steps"] >= new:
            continue
        files = [marker.with_name(marker.stem + suffix) for suffix in (".json", ".pt", ".val.json")]
        taken = [target / f.name for f in files if (target / f.name).exists()]
        if taken:
            raise LitlabError(f"{taken[0]} exists; move it before raising min_steps again")
        target.mkdir(parents=True, exist_ok=True)
        for file in files:
            if file.is_file():
                file.rename(target / file.name)
        moved.append(marker.stem)
    if moved:
        log.warning(
            "%s: min_steps %d -> %d: %d fits stopped before %d move to %s to be fit again: %s",
            fits_dir,
            old,
            new,
            len(moved),
            new,
            target,
            ", ".join(moved),
        )
    return moved


def fit_markers(fits_dir: Path) -> list[Path]:
    """The ``<model>_seed<s>.json`` file of every finished fit in ``fits_dir`` (not the validation curves)."""
    return [path for path in sorted(fits_dir.glob("*_seed*.json")) if not path.name.endswith(".val.json")]


def _min_steps(protocol: dict[str, Any]) -> int:
    """The early-stopping ``min_steps`` of a protocol (0 without early stopping or before it was kept)."""
    return int((protocol.get("early_stopping") or {}).get("min_steps", 0))


def _saved(fits_dir: Path, model: str) -> bool:
    """Whether ``fits_dir`` holds a fit of ``model`` (a glob pattern), saved or under way."""
    return any(fits_dir.glob(f"{model}_seed*.json")) or any(fits_dir.glob(f"{model}_seed*.ckpt"))
