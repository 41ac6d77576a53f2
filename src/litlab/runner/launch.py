"""What every entry point does before Hydra starts a job: compose, check, and refuse bad runs in a second.

The command line is composed once with Hydra's compose API (the first point of a sweep), checked with
OmegaConf only (``validate.check_config``), the run folder is checked (a folder that holds a run is
never entered without ``resume=``), and only then are the configured targets imported and their
arguments checked. Nothing is written before all of this passes.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from litlab.core.errors import ConfigError, explain
from litlab.runner.cli import CONFIG_MODULE, help_text, option_listing
from litlab.runner.reporting import fail
from litlab.runner.resolvers import register_hydra_extensions
from litlab.runner.run_folder import check_not_taken, check_writable, holds_run
from litlab.runner.validate import check_arguments, check_config

INFO_FLAGS = (
    "--help",
    "-h",
    "--hydra-help",
    "--cfg",
    "-c",
    "--info",
    "--shell-completion",
    "-sc",
    "--version",
)
GROUP_OF_APP = {"train": "experiment", "eval": "experiment", "run": "task"}


def is_rank_zero() -> bool:
    """True in the process that owns the run folder (not a DDP child or a later SLURM task)."""
    return all(os.environ.get(var, "0") == "0" for var in ("RANK", "LOCAL_RANK", "SLURM_PROCID"))


def slurm_restarted() -> bool:
    return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) > 0


def start(config_name: str, argv: Sequence[str] | None = None) -> None:
    """Register resolvers and run the pre-checks for ``litlab-<config_name>``; exit 2 on a bad command."""
    register_hydra_extensions()
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" in args or "-h" in args:
        print(help_text(args))
        sys.exit(0)
    if any(arg in INFO_FLAGS or arg.startswith("--cfg") for arg in args) or not is_rank_zero():
        return
    try:
        precheck(config_name, args)
    except ConfigError as error:
        fail(str(error), 2)
    except Exception as error:
        fail(explain(error), 2)


def _overrides(args: Sequence[str]) -> tuple[list[str], bool]:
    """(overrides of the first sweep point, whether this is a multirun) from the raw arguments."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    multirun = any(arg in ("-m", "--multirun") for arg in args)
    raw = [arg for arg in args if not arg.startswith("-")]
    first = []
    for override in OverridesParser.create().parse_overrides(raw):
        if override.is_sweep_override():
            try:
                value = next(iter(override.sweep_string_iterator()))
            except Exception:  # glob() sweeps need the config loader: check them in the job instead
                continue
            first.append(f"{override.get_key_element()}={value}")
        else:
            first.append(override.input_line)
    return first, multirun


def compose_for_checks(config_name: str, overrides: list[str]) -> DictConfig:
    """The composed config with its ``hydra`` node, HydraConfig set as Hydra would set it."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.errors import ConfigCompositionException, MissingConfigException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            try:
                cfg = compose(config_name, overrides=overrides, return_hydra_config=True)
            except MissingConfigException as error:
                raise _unknown_option(config_name, overrides, error) from None
            except ConfigCompositionException as error:
                raise _unknown_key(config_name, overrides, error) from None
        HydraConfig.instance().set_config(cfg)
        return cfg
    finally:
        GlobalHydra.instance().clear()


def _unknown_option(config_name: str, overrides: list[str], error: Exception) -> Exception:
    """An unknown ``group=option`` as one line plus the options of that group."""
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if "." in key or not value or value == "null":
            continue
        listing = option_listing(key, overrides)
        if listing and f"{key}={value}" not in listing.split():
            return ConfigError(f"unknown {key} {value!r}. Available:\n{listing}")
    return ConfigError(str(error).strip().splitlines()[0])


def _unknown_key(config_name: str, overrides: list[str], error: Exception) -> Exception:
    """An override of a key that does not exist, with the closest existing keys."""
    import difflib

    from hydra import compose

    match = re.search(r"Could not override '([^']+)'", str(error))
    if match is None:
        return ConfigError(" ".join(str(error).split()))
    key = match.group(1)
    parent, _, leaf = key.rpartition(".")
    rest = [o for o in overrides if o.lstrip("+~").partition("=")[0] != key]
    try:
        node = OmegaConf.select(compose(config_name, overrides=rest), parent) if parent else None
    except Exception:
        node = None
    known = list(node.keys()) if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(leaf, [str(k) for k in known], n=3)
    hint = f" Did you mean {', '.join(f'{parent}.{c}' for c in close)}?" if close else ""
    listing = f" Keys of {parent}: {', '.join(map(str, known))}." if known and not close else ""
    return ConfigError(f"{key} is not a key of this config.{hint}{listing} (+{key}=... adds a new key)")


def run_folder_of(cfg: DictConfig, multirun: bool) -> Path:
    """The run folder (or sweep folder) a composed config will write to."""
    node = cfg.hydra.sweep.dir if multirun else cfg.hydra.run.dir
    return Path(str(node))


def precheck(config_name: str, args: Sequence[str]) -> None:
    """All checks that need no training: composition, values, run folder, target arguments."""
    overrides, multirun = _overrides(args)
    cfg = compose_for_checks(config_name, overrides)
    check_config(cfg)
    folder = run_folder_of(cfg, multirun)
    check_writable(Path(str(cfg.paths.log_dir)))
    resume = OmegaConf.select(cfg, "resume")
    if multirun:
        jobs = [p for p in folder.iterdir() if p.is_dir() and holds_run(p)] if folder.is_dir() else []
        if jobs and resume in (None, False, "none") and not slurm_restarted():
            raise ConfigError(
                f"{folder} already holds a sweep ({len(jobs)} runs); nothing was changed. Continue it with "
                "resume=auto, or give a new run_id=<name>"
            )
    elif config_name != "eval":
        check_not_taken(folder, resume, restarted=slurm_restarted())
    OmegaConf.set_readonly(cfg.hydra, False)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(folder / "0" if multirun else folder)
        cfg.hydra.job.num = 0
    for section in ("data", "model", "task", "trainer"):
        if section in cfg:
            check_arguments(OmegaConf.to_container(cfg[section], resolve=True), section)
