"""Every override quoted in DeepWeightFlow's config header comments and every litlab command in its README
composes and passes the checks a run makes before it starts (keys, values, target signatures)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from litlab.runner.launch import _overrides, compose_for_checks
from litlab.runner.validate import check_arguments, check_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
README = ROOT / "src" / "litlab" / "methods" / "deepweightflow" / "README.md"
OVERRIDE = re.compile(r"'[~+]?[\w./]+(?:=[^']*)?'|[~+]?[a-z_][\w./]*=\S+")
# the command an override quoted in each folder's header comments is tried with ({name}: the config)
BASES = {
    "experiment/deepweightflow": ("train", ["experiment={name}"]),
    "task/deepweightflow": ("run", ["task={name}"]),
    "model/deepweightflow": ("train", ["experiment=deepweightflow/mlp_digits", "model={name}"]),
    "data/weights": ("train", ["experiment=deepweightflow/mlp_digits", "data={name}"]),
}


def _fill(token: str, folder: Path) -> str:
    """A quoted placeholder path (``<run>/zoo``) becomes a real folder; quotes are dropped."""
    return re.sub(r"<[^>]+>", str(folder), token.strip("'"))


def header_suggestions() -> list[tuple[str, list[str]]]:
    """(config name, overrides) for every comment line of a header that quotes overrides."""
    cases = []
    for group, (config_name, base) in BASES.items():
        for path in sorted((CONFIGS / group).glob("*.yaml")):
            name = f"{group.split('/', 1)[1]}/{path.stem}"
            base_args = [b.format(name=name) for b in base]
            for line in path.read_text().splitlines():
                if not line.startswith("#"):
                    break
                tokens = [t.rstrip(".,;:)") for t in OVERRIDE.findall(line) if "${" not in t]
                if not tokens:
                    continue
                head = line.split("litlab-", 1)[1].split()[0] if "litlab-" in line else None
                config = {"train": "train", "run": "run"}.get(head or "", config_name)
                explicit = any(t.startswith(("experiment=", "task=")) for t in tokens)
                cases.append((config, tokens if explicit else [*base_args, *tokens]))
    return cases


def readme_commands() -> list[tuple[str, list[str]]]:
    """(config name, arguments) of every ``litlab-train``/``litlab-run`` command quoted in the README."""
    commands = re.findall(r"litlab-(train|run|eval) ([^`\n]+)", README.read_text())
    return [(kind, shlex.split(args, comments=True)) for kind, args in commands]


CASES = header_suggestions() + readme_commands()


def test_headers_and_readme_quote_commands() -> None:
    assert len(header_suggestions()) >= 10 and len(readme_commands()) >= 8


@pytest.mark.parametrize(("config_name", "args"), CASES, ids=[" ".join(a) for _, a in CASES])
def test_quoted_overrides_compose_and_pass_the_prechecks(
    config_name: str, args: list, tmp_path: Path
) -> None:
    overrides, _ = _overrides([_fill(a, tmp_path) for a in args])
    cfg = compose_for_checks(config_name, overrides)
    check_config(cfg)
    for section in ("data", "model", "task"):
        if section in cfg:
            check_arguments(OmegaConf.to_container(cfg[section], resolve=True), section)
