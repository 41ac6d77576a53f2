"""Every command and override that the docs and config headers quote composes: docs cannot drift from configs.

Sources: ``litlab-train|-run|-eval`` commands in README.md, docs/, the method READMEs and config comments,
and the bare ``key=value`` overrides in a config's header comment (composed with that config's own
experiment or task). Sweeps take their first value; placeholders (``<...>``) and shell variables are
left out, since they name things only a user has.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from litlab.runner.sweeps import compose_train

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
APPS = {"litlab-train": "train", "litlab-eval": "eval", "litlab-run": "run"}
COMMAND = re.compile(r"(litlab-(?:train|eval|run))((?:[ \t]+(?:'[^']*'|\"[^\"]*\"|[^\s`#;]+))*)")
OVERRIDE = re.compile(r"^[+~]?[\w./-]+=\S+$")
PLACEHOLDERS = ("experiment=X", "key=value", "<", ">", "$")


def _first_values(tokens: list[str]) -> list[str]:
    """Overrides with each sweep replaced by its first value (what one job of the sweep composes)."""
    parser = OverridesParser.create()
    out = []
    for token in tokens:
        override = parser.parse_override(token)
        if override.is_sweep_override():
            try:
                token = f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}"
            except Exception:
                continue
        out.append(token)
    return out


def _clean(token: str) -> str:
    """A token as prose quotes it, without trailing punctuation, and the first of ``a|b|c`` alternatives."""
    token = token.rstrip(".,;:)")
    if "|" in token and "=" in token:
        key, _, value = token.partition("=")
        token = f"{key}={value.split('|')[0]}"
    return token


TOP_LEVEL = {"seed", "trainer", "model", "data", "run_id", "resume", "test", "test_ckpt", "optimized_metric"}
TOP_LEVEL |= {"publish", "logger", "callbacks", "debug", "experiment", "task", "hparams_search"}


def _usable(token: str) -> bool:
    """An override (not prose such as ``G=5``): a dotted or grouped key, or a known top-level key."""
    key = token.lstrip("+~").partition("=")[0]
    known = "." in key or "/" in key or key in TOP_LEVEL
    return known and OVERRIDE.match(token) is not None and not any(p in token for p in PLACEHOLDERS)


def documented_commands() -> list[tuple[str, str, list[str]]]:
    """(source, app, overrides) for every quoted command."""
    sources = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "src").rglob("README.md")]
    sources += sorted(CONFIGS.rglob("*.yaml"))
    found = []
    for path in sources:
        text = path.read_text()
        if path.suffix == ".yaml":
            text = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
        for match in COMMAND.finditer(text):
            try:
                tokens = shlex.split(match.group(2))
            except ValueError:
                continue
            tokens = [_clean(t) for t in tokens]
            if any(t.startswith(("ckpt_path=", "task.sweep_dir=")) or t in PLACEHOLDERS for t in tokens):
                continue  # names a user's file or experiment
            overrides = [t for t in tokens if _usable(t) and not t.startswith("hydra/launcher")]
            found.append((str(path.relative_to(REPO)), APPS[match.group(1)], overrides))
    return found


def header_overrides() -> list[tuple[str, str, list[str]]]:
    """Bare ``key=value`` overrides of each experiment/task header line, with that config selected."""
    found = []
    for group, app in (("experiment", "train"), ("task", "run")):
        for path in sorted((CONFIGS / group).rglob("*.yaml")):
            name = str(path.relative_to(CONFIGS / group).with_suffix(""))
            for line in path.read_text().splitlines():
                if not line.startswith("#") or "litlab-" in line:
                    continue
                tokens = [t for t in (_clean(t) for t in line[1:].split()) if _usable(t)]
                if tokens:
                    found.append((str(path.relative_to(REPO)), app, [f"{group}={name}", *tokens]))
    return found


def _compose(app: str, overrides: list[str]) -> None:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    if app == "train":
        compose_train(overrides)
        return
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="litlab.configs", version_base="1.3"):
            compose(app, overrides=overrides + (["ckpt_path=unused.ckpt"] if app == "eval" else []))
    finally:
        GlobalHydra.instance().clear()


def unique_cases(cases: list[tuple[str, str, list[str]]]) -> list[tuple[str, str, list[str]]]:
    """One case per distinct (app, overrides), its sources joined: a command quoted twice composes once."""
    sources: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for source, app, overrides in cases:
        sources.setdefault((app, tuple(overrides)), []).append(source)
    return [(", ".join(dict.fromkeys(s)), app, list(o)) for (app, o), s in sources.items()]


CASES = unique_cases(documented_commands() + header_overrides())
EXAMPLE = REPO / "examples" / "external_project" / "src"


@pytest.fixture(autouse=True)
def _example_project_on_the_search_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "your own experiments" commands name the example project's configs."""
    monkeypatch.setenv("LITLAB_CONFIG_PATH", str(EXAMPLE / "mylab" / "configs"))
    monkeypatch.syspath_prepend(str(EXAMPLE))


def test_the_docs_quote_many_commands() -> None:
    assert len(CASES) > 50


@pytest.mark.parametrize(
    ("source", "app", "overrides"), CASES, ids=[f"{c[0].split(', ')[0]}:{i}" for i, c in enumerate(CASES)]
)
def test_documented_command_composes(source: str, app: str, overrides: list[str]) -> None:
    try:
        _compose(app, _first_values(overrides))
    except Exception as error:
        pytest.fail(f"{source}: litlab-{app} {' '.join(overrides)} does not compose: {error}")
