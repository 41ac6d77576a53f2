"""Print the composed config as a rich tree (the groups a user chose first)."""

from __future__ import annotations

import rich
import rich.syntax
import rich.tree
from omegaconf import DictConfig, OmegaConf

ORDER = ("experiment_name", "data", "model", "trainer", "callbacks", "logger", "paths", "resources")


def print_config_tree(cfg: DictConfig) -> None:
    """Show each top-level section as a branch with its resolved YAML."""
    tree = rich.tree.Tree("config", style="dim", guide_style="dim")
    keys = [k for k in ORDER if k in cfg] + [k for k in cfg if k not in ORDER and k != "hydra"]
    for key in keys:
        branch = tree.add(str(key), style="bold")
        value = cfg[key]
        text = OmegaConf.to_yaml(value, resolve=True) if isinstance(value, DictConfig) else str(value)
        branch.add(rich.syntax.Syntax(text, "yaml"))
    rich.print(tree)
