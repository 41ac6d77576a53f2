"""litlab.runner.hook_calls: empty hooks are skipped, the others run under their hook name, signatures
stay right."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.utilities import signature_utils
from torch.utils.data import DataLoader, TensorDataset

from litlab.runner.hook_calls import (
    _is_empty,
    _set_fx_name,
    cache_hook_signatures,
    streamline_hook_calls,
)


class _Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.seen: list[str] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.seen.append(f"training_step as {self._current_fx_name}")
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train/loss", loss, on_step=False, on_epoch=True)
        return loss

    def on_before_backward(self, loss: torch.Tensor) -> None:
        self.seen.append(f"on_before_backward as {self._current_fx_name}")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _Recorder(Callback):
    """Overrides two per-step hooks and records the module's hook name while they run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # noqa: ANN001
        self.calls.append(("on_train_batch_start", pl_module._current_fx_name))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:  # noqa: ANN001
        self.calls.append(("on_before_optimizer_step", pl_module._current_fx_name))


def _fit(callbacks: list[Callback], module: L.LightningModule, steps: int = 4) -> L.Trainer:
    data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=steps,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, DataLoader(data, batch_size=4))
    return trainer


def test_only_bodies_that_do_nothing_count_as_empty() -> None:
    def returns_five() -> int:
        return 5

    assert _is_empty(Callback.on_train_batch_start) and _is_empty(L.LightningModule.on_train_batch_end)
    assert not _is_empty(returns_five)
    assert not _is_empty(L.LightningModule.on_before_batch_transfer)  # returns the batch
    assert not _is_empty(L.LightningModule.on_validation_model_eval)  # switches to eval mode
    assert not _is_empty(ModelCheckpoint.on_train_batch_end)


def test_overridden_and_instance_hooks_still_run_with_their_hook_name() -> None:
    streamline_hook_calls()
    recorder, module = _Recorder(), _Tiny()
    ends: list[int] = []
    recorder.on_train_batch_end = lambda trainer, pl_module, outputs, batch, batch_idx: ends.append(batch_idx)
    _fit([recorder], module)
    assert recorder.calls.count(("on_train_batch_start", "on_train_batch_start")) == 4
    assert recorder.calls.count(("on_before_optimizer_step", "on_before_optimizer_step")) == 4
    assert ends == [0, 1, 2, 3]  # set on the object, not the class: called
    # module hooks and the strategy's training_step run under their own names (self.log checks them)
    assert module.seen == ["training_step as training_step", "on_before_backward as on_before_backward"] * 4
    assert module._current_fx_name is None  # restored after each call


def test_the_hook_name_goes_through_a_class_own_setattr() -> None:
    names_set: list[object] = []

    class Watched(_Tiny):
        def __setattr__(self, name: str, value: object) -> None:
            if name == "_current_fx_name":
                names_set.append(value)
            super().__setattr__(name, value)

    plain, watched = _Tiny(), Watched()
    names_set.clear()  # drop the set in LightningModule.__init__
    _set_fx_name(plain, "training_step")
    _set_fx_name(watched, "training_step")
    assert plain._current_fx_name == watched._current_fx_name == "training_step"
    assert names_set == ["training_step"]  # the override saw its own set, the plain module needed none


def test_a_profiler_still_sees_every_hook() -> None:
    streamline_hook_calls()
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=2,
        profiler="simple",
        callbacks=[_Recorder()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(_Tiny(), DataLoader(data, batch_size=4))
    recorded = trainer.profiler.recorded_durations
    assert "[LightningModule]_Tiny.on_train_batch_start" in recorded
    assert "[Callback]_Recorder.on_before_zero_grad" in recorded


def test_cached_signatures_answer_as_lightning_does() -> None:
    original = signature_utils.is_param_in_hook_signature
    cache_hook_signatures()
    cached = signature_utils.is_param_in_hook_signature
    module = _Tiny()

    def no_index(self, batch):  # noqa: ANN001, ANN202
        return batch

    def star(self, *args):  # noqa: ANN001, ANN202
        return args

    for hook in (module.training_step, no_index, star, _Tiny.training_step):
        for param, explicit, min_args in (("batch_idx", False, 2), ("dataloader_iter", True, None)):
            expected = getattr(original, "__wrapped__", original)(hook, param, explicit, min_args)
            assert cached(hook, param, explicit, min_args) == expected
            assert cached(hook, param, explicit, min_args) == expected  # the cached answer too
