"""The tasks' ``recipe`` option: which cached model they decode."""

from __future__ import annotations

import pytest

from litlab.core.errors import ConfigError
from litlab.methods.sparsed.model import Recipe
from litlab.methods.sparsed.tasks import _recipe


def test_recipe_overrides_change_only_the_named_fields() -> None:
    assert _recipe(None) == Recipe()
    assert _recipe({"length": 512}) == Recipe(length=512)


def test_an_unknown_recipe_key_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"task.recipe has unknown keys \['lenght'\]"):
        _recipe({"lenght": 512})
