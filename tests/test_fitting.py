"""The Fitter trains a LightningModule exactly as a hand loop would, tracks validation, stops early."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from litlab.core.errors import LitlabError
from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.fitting import Fitter


class Linear(L.LightningModule):
    """y = w·x + b by MSE; logs train/loss and val/loss, val/mae."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.net = torch.nn.Linear(3, 1)
        self.lr = lr

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train/loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        prediction = self.net(x)
        self.log("val/loss", torch.nn.functional.mse_loss(prediction, y))
        self.log("val/mae", (prediction - y).abs().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def _data(n: int = 64, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=generator)
    return TensorDataset(x, x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3)


def test_fit_equals_a_hand_written_loop() -> None:
    data = _data()
    torch.manual_seed(0)
    module = Linear()
    torch.manual_seed(0)
    reference = Linear()
    optimizer = torch.optim.Adam(reference.parameters(), lr=0.05)
    x, y = data.tensors
    for _ in range(30):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference.net(x), y).backward()
        optimizer.step()
    result = Fitter().fit(module, DataLoader(data, batch_size=64), max_steps=30)
    assert result.steps == 30 and result.epochs == 30
    for ours, theirs in zip(module.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs)


def test_a_zero_step_budget_leaves_the_weights_unchanged() -> None:
    module = Linear()
    before = [p.detach().clone() for p in module.parameters()]
    result = Fitter().fit(module, DataLoader(_data(), batch_size=16), max_steps=0)
    assert result.steps == 0 and result.epochs == 0
    assert all(torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


def test_progress_is_a_log_line_per_tenth_of_the_steps_off_a_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    torch.manual_seed(0)
    quiet = Linear()
    torch.manual_seed(0)
    reported = Linear()
    Fitter().fit(quiet, DataLoader(_data(), batch_size=16), max_steps=40)
    with caplog.at_level("INFO", logger="litlab"):
        Fitter().fit(reported, DataLoader(_data(), batch_size=16), max_steps=40, progress="demo fit")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("demo fit")]
    assert lines == [f"demo fit: {i}/40" for i in range(0, 40, 4)] + ["demo fit: done"]
    assert all(torch.equal(a, b) for a, b in zip(quiet.parameters(), reported.parameters(), strict=True))
    with pytest.raises(LitlabError, match="progress against max_steps"):
        Fitter().fit(Linear(), DataLoader(_data(), batch_size=16), max_epochs=1, progress="demo fit")


def test_validation_history_metrics_and_seeded_shuffling() -> None:
    def run() -> tuple[list[dict[str, float]], torch.Tensor]:
        torch.manual_seed(1)
        module = Linear()
        loader = DataLoader(_data(), batch_size=16, shuffle=True)
        result = Fitter().fit(module, loader, DataLoader(_data(32, 1), batch_size=8), max_epochs=3, seed=5)
        return result.history, module.net.weight.detach().clone()

    (history, weight), (history_again, weight_again) = run(), run()
    assert [row["step"] for row in history] == [4.0, 8.0, 12.0]
    assert {"train/loss", "val/loss", "val/mae"} <= set(history[-1])
    assert history[-1]["val/loss"] < history[0]["val/loss"]
    assert history == history_again and torch.equal(weight, weight_again)


class _Recorder(Linear):
    """Records the rows of every training batch."""

    def training_step(self, batch, batch_idx):
        self.seen = [*getattr(self, "seen", []), batch[0][:, 0].tolist()]
        return super().training_step(batch, batch_idx)


def test_each_epoch_of_an_epoch_seeded_shuffle_draws_a_new_order() -> None:
    # batch_loader's EpochShuffle is seeded by (seed, epoch): the order changes only if set_epoch is called.
    dataset = TensorBatchDataset(torch.arange(24.0).view(8, 3), torch.zeros(8, 1))
    module = _Recorder()
    Fitter().fit(module, batch_loader(dataset, 4, shuffle=True, seed=0, num_workers=0), max_epochs=3)
    epochs = [sum(module.seen[i : i + 2], []) for i in range(0, 6, 2)]
    assert all(sorted(e) == sorted(epochs[0]) for e in epochs) and len({tuple(e) for e in epochs}) == 3


def test_early_stopping_restores_the_best_weights() -> None:
    torch.manual_seed(0)
    module = Linear(lr=0.3)
    train, val = DataLoader(_data(), batch_size=64), DataLoader(_data(32, 1), batch_size=32)
    result = Fitter().fit(
        module,
        train,
        val,
        max_steps=400,
        val_every_n_steps=5,
        monitor="val/loss",
        patience=3,
        restore_best=True,
    )
    best = min(result.history, key=lambda row: row["val/loss"])
    assert result.best_step == best["step"] and result.metrics["val/loss"] == best["val/loss"]
    assert result.stopped_early and result.steps < 400
    x, y = _data(32, 1).tensors
    restored = torch.nn.functional.mse_loss(module.net(x), y).item()
    assert restored == pytest.approx(best["val/loss"], rel=1e-5)


def test_early_stopping_waits_for_min_steps() -> None:
    # patience 0 ends a fit at its first validation; min_steps holds it to 20 steps (the 4th validation).
    train, val = DataLoader(_data(), batch_size=64), DataLoader(_data(32, 1), batch_size=32)
    stopping = {"val_every_n_steps": 5, "monitor": "val/loss", "patience": 0}
    assert Fitter().fit(Linear(lr=0.3), train, val, max_steps=400, **stopping).steps == 5
    held = Fitter().fit(Linear(lr=0.3), train, val, max_steps=400, min_steps=18, **stopping)
    assert held.steps == 20 and held.stopped_early
    assert [row["step"] for row in held.history] == [5, 10, 15, 20]


def test_unknown_monitor_and_missing_length_are_clear_errors() -> None:
    loader = DataLoader(_data(), batch_size=64)
    with pytest.raises(LitlabError, match="max_steps or max_epochs"):
        Fitter().fit(Linear(), loader)
    with pytest.raises(LitlabError, match="monitor='val/acc' was not logged; logged: .*val/loss"):
        Fitter().fit(Linear(), loader, loader, max_steps=2, val_every_n_steps=1, monitor="val/acc")


def test_from_config_takes_the_device_keys_of_a_trainer_config() -> None:
    fitter = Fitter.from_config(
        {
            "accelerator": "cpu",
            "devices": 1,
            "max_epochs": 7,
            "precision": "bf16-mixed",
            "gradient_clip_val": 1,
        }
    )
    assert fitter.settings["precision"] == "bf16-mixed" and fitter.gradient_clip_val == 1
    assert "max_epochs" not in fitter.settings
    ddp = Fitter.from_config({"strategy": {"_target_": "lightning.pytorch.strategies.DDPStrategy"}})
    assert ddp.settings["strategy"] == "ddp"


class _Hooked(Linear):
    """Records gradients seen after backward and the weights seen after each optimizer step."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def on_after_backward(self) -> None:
        assert self.net.weight.grad is not None
        self.seen.append(("after_backward", len(self.seen)))

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        assert torch.is_tensor(outputs) and len(batch) == 2
        self.seen.append(("batch_end", batch_idx))


def test_fit_calls_the_per_step_hooks_in_lightning_order() -> None:
    module = _Hooked()
    Fitter().fit(module, DataLoader(_data(), batch_size=32), max_steps=3)
    assert [name for name, _ in module.seen] == ["after_backward", "batch_end"] * 3
    assert [index for name, index in module.seen if name == "batch_end"] == [0, 1, 0]


class _Noisy(Linear):
    """Adds Gaussian noise to its inputs, so its steps draw from the global generator."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        return super().training_step([x + 0.1 * torch.randn_like(x), y], batch_idx)


def _noisy_fit(max_steps: int, loader: str, checkpoint=None, patience: int = 50, every_s: float = 600.0):
    """A seeded, shuffled, validated fit of ``_Noisy``: 3 batches an epoch, validation every 4 steps."""
    torch.manual_seed(0)
    module = _Noisy()
    if loader == "generator":  # the shuffle draws from the loader's own generator (the sprites' loaders)
        generator = torch.Generator().manual_seed(3)
        train = DataLoader(_data(), batch_size=24, shuffle=True, generator=generator)
    else:  # an EpochShuffle, seeded by (seed, epoch) through set_epoch
        train = batch_loader(TensorBatchDataset(*_data().tensors), 24, shuffle=True, seed=3, num_workers=0)
    val = DataLoader(_data(32, 1), batch_size=32)
    stopping = {"val_every_n_steps": 4, "monitor": "val/loss", "patience": patience, "restore_best": True}
    saving = {"checkpoint": checkpoint, "checkpoint_every_s": every_s}
    result = Fitter().fit(module, train, val, max_steps=max_steps, seed=7, **saving, **stopping)
    return module, result


@pytest.mark.parametrize("loader", ["generator", "epoch_shuffle"])
def test_a_fit_continued_from_its_checkpoint_equals_one_never_stopped(tmp_path, loader: str) -> None:
    whole, whole_result = _noisy_fit(22, loader)
    checkpoint = tmp_path / "fit.ckpt"
    _noisy_fit(10, loader, checkpoint)  # saved at step 8: inside epoch 2, two of its batches done
    assert torch.load(checkpoint, weights_only=True)["loop"]["batches_done"] == 2
    _noisy_fit(13, loader, checkpoint)  # continues from step 8; saved at step 12, the end of epoch 3
    assert torch.load(checkpoint, weights_only=True)["loop"]["batches_done"] == 3
    legs, result = _noisy_fit(22, loader, checkpoint)
    assert result.history == whole_result.history and result.best_step == whole_result.best_step
    assert (result.steps, result.epochs) == (whole_result.steps, whole_result.epochs) == (22, 8)
    assert all(torch.equal(a, b) for a, b in zip(legs.parameters(), whole.parameters(), strict=True))


def test_a_fit_saved_at_an_epoch_end_validation_continues_as_if_never_stopped(tmp_path) -> None:
    def fit(max_epochs: int, checkpoint=None):
        torch.manual_seed(0)
        module = _Noisy()
        train = DataLoader(_data(), batch_size=24, shuffle=True, generator=torch.Generator().manual_seed(3))
        result = Fitter().fit(module, train, max_epochs=max_epochs, seed=7, checkpoint=checkpoint)
        return module, result

    whole, whole_result = fit(5)
    checkpoint = tmp_path / "fit.ckpt"
    fit(2, checkpoint)  # validated (training means only) and saved at the end of epoch 1
    assert torch.load(checkpoint, weights_only=True)["loop"]["batches_done"] == 0
    legs, result = fit(5, checkpoint)
    assert result.history == whole_result.history and len(result.history) == 5
    assert all(torch.equal(a, b) for a, b in zip(legs.parameters(), whole.parameters(), strict=True))


def test_a_fit_saved_between_validations_continues_as_if_never_stopped(tmp_path) -> None:
    whole, whole_result = _noisy_fit(22, "generator")
    checkpoint = tmp_path / "fit.ckpt"
    _noisy_fit(14, "generator", checkpoint, every_s=0.0)  # a save after every step: the last at step 13
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["loop"]["step"] == 13 and saved["collector"][1] == {"train/loss": 1}  # step 13's loss
    legs, result = _noisy_fit(22, "generator", checkpoint)
    assert result.history == whole_result.history  # the training means over steps 13-16 included
    assert all(torch.equal(a, b) for a, b in zip(legs.parameters(), whole.parameters(), strict=True))


def test_a_continued_fit_reports_the_steps_left(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint = tmp_path / "fit.ckpt"
    _noisy_fit(10, "generator", checkpoint)  # saved at step 8
    torch.manual_seed(0)
    loader = DataLoader(_data(), batch_size=24, shuffle=True, generator=torch.Generator().manual_seed(3))
    with caplog.at_level("INFO", logger="litlab"):
        Fitter().fit(_Noisy(), loader, max_steps=18, progress="demo", checkpoint=checkpoint)
    assert caplog.messages[0] == "demo (continued from step 8): 8/18"


def test_a_finished_fit_continued_from_its_checkpoint_trains_no_further(tmp_path) -> None:
    checkpoint = tmp_path / "fit.ckpt"
    first, stopped = _noisy_fit(400, "generator", checkpoint, patience=1)
    assert stopped.stopped_early and stopped.steps < 400
    again, result = _noisy_fit(400, "generator", checkpoint, patience=1)
    assert (result.steps, result.best_step, result.stopped_early) == (stopped.steps, stopped.best_step, True)
    assert result.history == stopped.history
    assert all(torch.equal(a, b) for a, b in zip(again.parameters(), first.parameters(), strict=True))
    _, extended = _noisy_fit(400, "generator", checkpoint, patience=3)  # more patience extends it
    assert extended.steps > stopped.steps and extended.history[: len(stopped.history)] == stopped.history


class _Counting(_Noisy):
    """Counts its training steps in a plain attribute, kept through Lightning's checkpoint hooks."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def training_step(self, batch, batch_idx):
        self.seen += 1
        return super().training_step(batch, batch_idx)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["seen"] = self.seen

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.seen = checkpoint["seen"]


def test_a_continued_fit_restores_what_the_module_saved_through_its_checkpoint_hooks(tmp_path) -> None:
    train, val = DataLoader(_data(), batch_size=24), DataLoader(_data(32, 1), batch_size=32)
    checkpoint = tmp_path / "fit.ckpt"
    Fitter().fit(_Counting(), train, val, max_steps=10, val_every_n_steps=4, checkpoint=checkpoint)
    continued = _Counting()
    Fitter().fit(continued, train, val, max_steps=12, val_every_n_steps=4, checkpoint=checkpoint)
    assert continued.seen == 12  # 8 before the checkpoint at step 8, 4 after it


def test_a_checkpoint_that_does_not_fit_the_model_is_a_clear_error(tmp_path) -> None:
    checkpoint = tmp_path / "fit.ckpt"
    _noisy_fit(4, "generator", checkpoint)
    wider = Linear()
    wider.net = torch.nn.Linear(3, 2)
    with pytest.raises(LitlabError, match=r"cannot continue the fit saved in .*fit.ckpt: .*size mismatch"):
        Fitter().fit(wider, DataLoader(_data(), batch_size=64), max_steps=8, checkpoint=checkpoint)
    saved = torch.load(checkpoint, weights_only=True)
    del saved["collector"]  # as written before the running means were kept
    torch.save(saved, checkpoint)
    with pytest.raises(LitlabError, match=r"fit.ckpt: it has no 'collector' \(written by another version"):
        Fitter().fit(Linear(), DataLoader(_data(), batch_size=64), max_steps=8, checkpoint=checkpoint)
    checkpoint.write_bytes(b"not a checkpoint")
    with pytest.raises(LitlabError, match="delete the file to start the fit afresh"):
        Fitter().fit(Linear(), DataLoader(_data(), batch_size=64), max_steps=8, checkpoint=checkpoint)
