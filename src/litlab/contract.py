"""What litlab asks of a LightningModule and a LightningDataModule, yours or a paper's.

Required: ``model`` is a ``LightningModule``; ``data`` a ``LightningDataModule``.
Optional, each used when present:

- ``data.data_spec() -> Mapping``: what the model may know of the data before training (sizes, a graph's
  edges, class counts). It may load the data; ``setup`` then reuses what it loaded.
- ``model.bind_data(spec)``: receives ``data.data_spec()`` once, before training, to build the parts of
  the network that depend on the data. A model that has it needs a data module that has ``data_spec``.
- ``model.figures(stage) -> {name: Figure}``: plots written to ``plots/`` and the image loggers at the end
  of fit and test (``stage`` is ``fit`` or ``test``).
- ``model.logged_metrics() -> Collection[str]``: the keys the model logs, so a wrong
  ``optimized_metric`` is reported before training rather than after it.

Modules never read ``self.trainer.datamodule``: what they need comes through ``bind_data``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from litlab.core.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@runtime_checkable
class ProvidesDataSpec(Protocol):
    def data_spec(self) -> Mapping[str, Any]: ...


@runtime_checkable
class BindsData(Protocol):
    def bind_data(self, spec: Mapping[str, Any]) -> None: ...


@runtime_checkable
class ProvidesFigures(Protocol):
    def figures(self, stage: str) -> Mapping[str, Figure]: ...


@runtime_checkable
class DeclaresMetrics(Protocol):
    def logged_metrics(self) -> Collection[str]: ...


def check_pair(model: Any, data: Any) -> None:
    """Raise one ConfigError naming every way ``model``/``data`` miss the contract above."""
    import lightning as L

    problems = []
    if not isinstance(model, L.LightningModule):
        problems.append(f"model is a {type(model).__name__}, not a LightningModule")
    if data is not None and not isinstance(data, L.LightningDataModule):
        problems.append(f"data is a {type(data).__name__}, not a LightningDataModule")
    if isinstance(model, BindsData) and not isinstance(data, ProvidesDataSpec):
        problems.append(
            f"{type(model).__name__} has bind_data(spec), so its data module needs data_spec(); "
            f"{type(data).__name__} has none"
        )
    for name in ("figures", "logged_metrics", "bind_data"):
        if hasattr(model, name) and not callable(getattr(model, name)):
            problems.append(f"{type(model).__name__}.{name} must be a method")
    if problems:
        raise ConfigError("; ".join(problems) + " (see litlab.contract)")


def bind(model: Any, data: Any) -> None:
    """Give ``model`` the data's spec when it asks for one (``bind_data``)."""
    if isinstance(model, BindsData):
        model.bind_data(data.data_spec())


def check_metric(model: Any, name: str | None) -> None:
    """Fail before training when ``name`` is not among the metrics ``model`` declares it logs."""
    if not name or not isinstance(model, DeclaresMetrics):
        return
    logged = set(model.logged_metrics())
    if name not in logged:
        raise ConfigError(
            f"optimized_metric={name!r} is not logged by {type(model).__name__}; it logs: "
            f"{', '.join(sorted(logged))}"
        )
