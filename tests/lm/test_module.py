"""The LightningModule: built through the data contract (bind_data, no trainer.datamodule), losses fall for
both objectives, metrics agree with the harness and are declared, the masked-diffusion validation score is
a reproducible multi-draw bound, it trains under the Fitter, fine-tuning from a checkpoint keeps its
tokenizer, and both experiments run end to end (fast_dev_run) and export hf_model/."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import pytest
import torch

from litlab import contract
from litlab.core.errors import LitlabError
from litlab.datamodules.text import TextDataModule
from litlab.datamodules.tokenizers import token_byte_lengths
from litlab.fitting import Fitter
from litlab.lm.evaluation import evaluate_batches
from litlab.lm.models import is_masked_diffusion, load_pretrained
from litlab.lm.module import LanguageModel, warmup_cosine
from litlab.train import train


def _data(cache: Path, **kwargs: object) -> TextDataModule:
    options = {
        "corpus": "arithmetic",
        "n_documents": 400,
        "vocab_size": 320,
        "block_size": 64,
        "batch_size": 16,
    }
    return TextDataModule(cache_dir=str(cache), **{**options, **kwargs})


def _module(objective: str = "causal", data: TextDataModule | None = None, **kwargs: object) -> LanguageModel:
    """A tiny module, bound to ``data`` as litlab-train binds it (``litlab.contract``)."""
    options = {"arch": {"hidden_size": 32, "num_layers": 2, "num_heads": 4}, **kwargs}
    module = LanguageModel(lambda params: torch.optim.AdamW(params, lr=3e-3), objective=objective, **options)
    if data is not None:
        contract.check_pair(module, data)
        contract.bind(module, data)
    return module


def _trainer(root: Path, steps: int) -> L.Trainer:
    quiet = {"logger": False, "enable_progress_bar": False, "enable_model_summary": False}
    return L.Trainer(
        max_steps=steps, accelerator="cpu", enable_checkpointing=False, default_root_dir=root,
        limit_val_batches=4, num_sanity_val_steps=0, **quiet,
    )  # fmt: skip


@pytest.mark.parametrize("objective", ["causal", "masked_diffusion"])
def test_validation_loss_falls_over_a_few_steps(tmp_path: Path, objective: str) -> None:
    torch.manual_seed(0)
    data = _data(tmp_path)
    module = _module(objective, data)
    trainer = _trainer(tmp_path, 20)
    before = trainer.validate(module, datamodule=data, verbose=False)[0]
    trainer.fit(module, datamodule=data)
    after = trainer.validate(module, datamodule=data, verbose=False)[0]
    assert before["val/loss"] > math.log(320) - 0.5  # an untrained model is near uniform
    assert after["val/loss"] < 0.8 * before["val/loss"]
    assert after["val/bpb"] < before["val/bpb"] and after["val/ppl"] == pytest.approx(
        math.exp(after["val/loss"]), rel=1e-4
    )


def test_module_metrics_equal_the_harness_on_the_same_loader(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data = _data(tmp_path)
    module = _module("causal", data)
    metrics = _trainer(tmp_path, 1).validate(module, datamodule=data, verbose=False)[0]
    batches = list(data.val_dataloader())[:4]
    reference = evaluate_batches(module.lm, batches, token_byte_lengths(data.tokenizer))
    assert metrics["val/loss"] == pytest.approx(reference["loss"], rel=1e-5)
    assert metrics["val/bpb"] == pytest.approx(reference["bpb"], rel=1e-5)
    assert reference["bytes"] == int(torch.cat([b["byte_counts"][:, 1:] for b in batches]).sum())
    assert set(metrics) <= set(module.logged_metrics())


def test_prompt_completion_labels_train_only_the_completion(tmp_path: Path) -> None:
    from litlab.datamodules.text import encode_prompt_completion

    data = _data(tmp_path)
    data.setup()
    module = _module()
    module.build(data.tokenizer)
    batch = encode_prompt_completion(data.tokenizer, ["Q: 2 + 2?\nA:", "Q: 7 * 3?\nA:"], [" 4", " 21"], 24)
    terms = module.nll(batch)
    assert int(terms.tokens) == sum(len(data.tokenizer.encode(c)) + 1 for c in (" 4", " 21"))
    changed = {**batch, "input_ids": batch["input_ids"].clone()}
    changed["input_ids"][:, -1] = 5  # padding after the completion does not change the loss
    assert torch.allclose(module.nll(changed).nll, terms.nll)


def test_warmup_cosine_schedule() -> None:
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    scheduler = warmup_cosine(optimizer, total_steps=110, warmup_steps=10, min_lr_ratio=0.1)
    rates = []
    for _ in range(111):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[60] == pytest.approx(0.55) and rates[110] == pytest.approx(0.1)


def test_fine_tuning_needs_the_checkpoint_tokenizer(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _module("causal", data).export(tmp_path / "hf")
    with pytest.raises(LitlabError, match="tokenizer_path"):
        _module(pretrained_path=str(tmp_path / "hf"), data=_data(tmp_path, vocab_size=300))
    same = _data(tmp_path, tokenizer_path=str(tmp_path / "hf"))
    module = _module(pretrained_path=str(tmp_path / "hf"), data=same)
    _trainer(tmp_path, 1).validate(module, datamodule=same, verbose=False)


def test_the_module_is_built_through_the_data_contract_only(tmp_path: Path) -> None:
    """No trainer.datamodule: the model comes from data_spec() through bind_data, and plain loaders work."""
    data = _data(tmp_path)
    unbound = _module()
    with pytest.raises(LitlabError, match="bind_data"):
        _trainer(tmp_path, 1).validate(unbound, datamodule=data)
    module = _module("causal", data)
    data.setup()
    metrics = _trainer(tmp_path, 1).validate(module, dataloaders=data.val_dataloader(), verbose=False)[0]
    assert set(metrics) == {"val/loss", "val/ppl", "val/bpb"} <= set(module.logged_metrics())
    contract.check_metric(module, "test/bpb")  # the experiments' optimized_metric is declared
    with pytest.raises(LitlabError, match="block_size=64 exceeds"):
        _module("causal", data, arch={"hidden_size": 32, "num_layers": 1, "max_position_embeddings": 32})


def test_the_fitter_trains_it(tmp_path: Path) -> None:
    """Tasks fit LMs through litlab.fitting.Fitter (Fabric): the same hooks, no Trainer."""
    torch.manual_seed(0)
    data = _data(tmp_path)
    module = _module("causal", data, scheduler=warmup_cosine, total_steps=15)
    result = Fitter().fit(module, data, max_steps=15, val_every_n_steps=15, seed=0)
    assert result.steps == 15 and result.metrics["val/loss"] < math.log(320) - 0.5


def test_diffusion_validation_is_a_reproducible_multi_draw_bound(tmp_path: Path) -> None:
    """The issue's defect: one mask draw per sequence. Now the same weights always score the same, and the
    score averages ``eval_draws`` draws: its spread over mask seeds is far below the one-draw estimate's."""
    torch.manual_seed(0)
    data = _data(tmp_path)
    module = _module("masked_diffusion", data, eval_draws=8)
    trainer = _trainer(tmp_path, 1)
    first, second = (trainer.validate(module, datamodule=data, verbose=False)[0] for _ in range(2))
    assert first == second
    batches = list(data.val_dataloader())[:4]
    with torch.no_grad():
        eight, one = [], []
        for seed in range(6):
            generator = torch.Generator().manual_seed(seed)
            eight.append(sum(float(module.eval_nll(b, seed * 100 + i).nll) for i, b in enumerate(batches)))
            one.append(sum(float(module.nll(b, generator).nll) for b in batches))
    eight, one = torch.tensor(eight), torch.tensor(one)
    assert float(eight.std()) < float(one.std()) / 3


@pytest.mark.parametrize(
    ("experiment", "model"),
    [("lm/pretrain_shakespeare", "lm/causal"), ("lm/pretrain_procedural", "lm/causal"),
     ("lm/pretrain_procedural", "lm/diffusion")],
)  # fmt: skip
def test_experiment_runs_and_exports_a_loadable_checkpoint(
    compose_config: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, experiment: str, model: str
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    overrides = [
        "debug=fdr",
        "logger=csv",
        "data.batch_size=4",
        "model.sample_tokens=4",
        "model.eval_draws=2",
    ]
    cfg = compose_config("train", [f"experiment={experiment}", f"model={model}", *overrides])
    assert cfg.data.cache_dir == str(tmp_path / "cache")
    value = train(cfg)
    assert math.isfinite(value)
    lm, tokenizer = load_pretrained(tmp_path / "hf_model")
    assert lm.config.vocab_size == len(tokenizer) == cfg.data.vocab_size
    assert is_masked_diffusion(lm.config) == (model == "lm/diffusion")
    assert (tmp_path / "samples.txt").is_file()
    assert list((tmp_path / "cache" / "tokenizers").glob("bpe-*.json"))
