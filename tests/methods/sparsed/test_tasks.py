"""The tasks' ``recipe`` option (which cached model they decode) and the study's tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from litlab.core.errors import ConfigError
from litlab.methods.sparsed.model import Recipe
from litlab.methods.sparsed.tasks import _recipe, study
from litlab.task import TaskContext


def test_recipe_overrides_change_only_the_named_fields() -> None:
    assert _recipe(None) == Recipe()
    assert _recipe({"length": 512}) == Recipe(length=512)


def test_an_unknown_recipe_key_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"task.recipe has unknown keys \['lenght'\]"):
        _recipe({"lenght": 512})


def test_a_nested_init_is_the_recipe_fine_tuned_and_its_keys_are_checked_too() -> None:
    assert _recipe({"length": 128, "init": {"length": 64}}) == Recipe(length=128, init=Recipe(length=64))
    with pytest.raises(ConfigError, match=r"task.recipe.init has unknown keys \['stpes'\]"):
        _recipe({"init": {"stpes": 3}})
    with pytest.raises(ConfigError, match="hidden_size=32 differs from its init's; a fine-tune keeps"):
        _recipe({"hidden_size": 32, "init": {}})


def test_the_study_reports_the_swapped_value_accuracy_of_retrieval_only(tmp_path: Path) -> None:
    out = study(
        TaskContext.local(tmp_path),
        seeds=[100],
        n_examples=4,
        steps=4,
        rhos=[0.3],
        skips=[0.2],
        analysis_examples=2,
    )
    arms = out["tables"]["arms"]
    assert {r["kind"] for r in arms} == {"continuation", "retrieval"}
    assert all(("swapped_token_accuracy" in r) == (r["kind"] == "retrieval") for r in arms)
    assert {r["arm"] for r in arms} >= {"dense", "sparsed"} and len(out["tables"]["sweep"]) == 2
