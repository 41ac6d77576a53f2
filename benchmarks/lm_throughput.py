"""Tokens per second of the tiny-LM substrate against plain transformers code on the same model and data.

- train: ``LanguageModel`` under Lightning's Trainer (what ``litlab-train experiment=lm/pretrain_shakespeare``
  runs: loss, bits-per-byte accounting, logging, AdamW, warm-up/cosine schedule, gradient clipping) against
  a hand loop over the same batches: ``model(input_ids, labels=labels).loss.backward()``, the same clipping,
  optimizer and schedule. Target: litlab ≥ 0.9 × the hand loop.
- sample: ``litlab.lm.sample`` (KV-cached decoding that also returns log-probs and the end-of-text mask)
  against transformers' ``generate`` (sampling, no filters), 16 prompts × 64 new tokens. Target ≥ 0.9×.
- diffusion: LLaDA's sampler with and without prompt caching (256-token prompts, 32 new tokens in 32 steps):
  the speed-up prompt caching buys.

Both sides get the same seeded model (the experiment's 4 × d128 LLaMA, BPE 1024, context 128, batch 16).
Time is the process's CPU time (other jobs on a shared machine hardly move it) on one thread; contenders
take turns in every repeat and ratios are of the medians.

Run:  python benchmarks/lm_throughput.py [--quick | --smoke]
Writes benchmarks/results/lm_throughput[_quick|_smoke].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info, skip_gpu_probe_on_cpu_machines
from litlab.datamodules.text import TextDataModule
from litlab.lm import LanguageModel, diffusion_generate, sample, warmup_cosine
from litlab.lm.models import build_lm, llama_config

RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 0.9
ARCH = {"hidden_size": 128, "num_layers": 4, "num_heads": 4, "max_position_embeddings": 1024}


def optimizer(params: object) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)


class Clock(L.Callback):
    """CPU seconds from the start of step ``warmup`` to the end of fit."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.seconds = warmup, 0.0, 0.0

    def on_train_batch_start(self, trainer: L.Trainer, *args: object) -> None:
        if trainer.global_step == self.warmup:
            self.start = time.process_time()

    def on_train_end(self, trainer: L.Trainer, *args: object) -> None:
        self.seconds = time.process_time() - self.start


def litlab_train(data: TextDataModule, steps: int, warmup: int) -> float:
    """Seconds per timed step of ``LanguageModel`` under the Trainer (the experiment's settings)."""
    torch.manual_seed(0)
    schedule = lambda optimizer, total_steps: warmup_cosine(optimizer, total_steps, 30)  # noqa: E731
    module = LanguageModel(optimizer, schedule, arch=ARCH)
    module.bind_data(data.data_spec())
    clock = Clock(warmup)
    with tempfile.TemporaryDirectory() as folder:
        trainer = L.Trainer(
            max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, gradient_clip_val=1.0,
            callbacks=[clock], default_root_dir=folder, log_every_n_steps=10,
        )  # fmt: skip
        trainer.fit(module, datamodule=data)
    return clock.seconds / (steps - warmup)


def hand_train(data: TextDataModule, steps: int, warmup: int) -> float:
    """Seconds per timed step of a plain transformers loop on the same model and the same batches."""
    torch.manual_seed(0)
    tokenizer = data.tokenizer
    ids = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    config = llama_config(len(tokenizer), **ids, **ARCH)
    model = build_lm(config).train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = optimizer([{"params": decay}, {"params": rest, "weight_decay": 0.0}])
    schedule = warmup_cosine(opt, steps, 30)
    loader = iter(data.train_dataloader())
    start = 0.0
    for step in range(steps):
        if step == warmup:
            start = time.process_time()
        batch = next(loader)
        loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
    return (time.process_time() - start) / (steps - warmup)


def _timed(run: Callable[[], object]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def sampling(model: torch.nn.Module, prompts: torch.Tensor, new: int) -> dict[str, float]:
    """CPU seconds of 16 × ``new`` sampled tokens: ``litlab.lm.sample`` and transformers' ``generate``."""
    ours = _timed(lambda: sample(model, prompts, None, new, temperature=1.0, seed=0))
    theirs = _timed(
        lambda: model.generate(
            input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
            min_new_tokens=new, do_sample=True, top_k=0, top_p=1.0, temperature=1.0, pad_token_id=1,
        )
    )  # fmt: skip
    return {"litlab": ours, "transformers": theirs}


def diffusion(model: torch.nn.Module, prompts: torch.Tensor, mask_id: int, new: int) -> dict[str, float]:
    """CPU seconds of LLaDA's sampler (``new`` tokens in ``new`` steps) without and with prompt caching."""
    return {
        f"prompt_cache_{cached}": _timed(
            lambda cached=cached: diffusion_generate(model, prompts, new, new, mask_id, prompt_cache=cached)
        )
        for cached in (False, True)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    torch.set_num_threads(1)
    skip_gpu_probe_on_cpu_machines()
    steps, warmup, repeats = (3, 1, 1) if args.smoke else (40, 10, 2) if args.quick else (120, 20, 5)
    new_tokens, diffusion_tokens = (4, 4) if args.smoke else (64, 32)
    data = TextDataModule("tinyshakespeare", vocab_size=1024, block_size=128, batch_size=16, seed=0)
    data.prepare_data()
    data.setup("fit")
    tokenizer = data.tokenizer
    load_before = os.getloadavg()[0]
    train = {"litlab": [], "hand": []}
    for _ in range(repeats):
        train["litlab"].append(litlab_train(data, steps, warmup))
        train["hand"].append(hand_train(data, steps, warmup))
    tokens_per_step = 16 * 127  # predicted tokens per batch of 16 blocks of 128
    train_tps = {k: tokens_per_step / statistics.median(v) for k, v in train.items()}

    torch.manual_seed(0)
    common = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id, **ARCH}
    causal = build_lm(llama_config(len(tokenizer), **common)).eval()
    prompts = data.datasets[1].blocks["input_ids"][:16, :32]
    sample_times = {"litlab": [], "transformers": []}
    with torch.no_grad():
        for _ in range(repeats):
            for key, value in sampling(causal, prompts, new_tokens).items():
                sample_times[key].append(value)
    sample_tps = {k: 16 * new_tokens / statistics.median(v) for k, v in sample_times.items()}

    mask_id = tokenizer.mask_token_id
    masked = build_lm(
        llama_config(len(tokenizer), mask_token_id=mask_id, **common), "masked_diffusion"
    ).eval()
    long_prompts = data.datasets[1].blocks["input_ids"][:4].reshape(2, 256)
    diffusion_times = {"prompt_cache_False": [], "prompt_cache_True": []}
    for _ in range(repeats):
        for key, value in diffusion(masked, long_prompts, mask_id, diffusion_tokens).items():
            diffusion_times[key].append(value)
    diffusion_median = {k: statistics.median(v) for k, v in diffusion_times.items()}

    result = {
        "benchmark": "lm_throughput",
        "quick": args.quick,
        **machine_info(),
        "threads": 1,
        "clock": "process CPU time",
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "model": {
            **ARCH,
            "vocab_size": len(tokenizer),
            "block_size": 128,
            "batch_size": 16,
            "parameters": sum(p.numel() for p in causal.parameters()),
        },  # fmt: skip
        "train": {
            "steps_timed": steps - warmup,
            "repeats": repeats,
            "seconds_per_step": train,
            "tokens_per_second": train_tps,
            "ratio_litlab_to_hand": train_tps["litlab"] / train_tps["hand"],
        },
        "sample": {
            "prompts": 16,
            "new_tokens": new_tokens,
            "seconds": sample_times,
            "tokens_per_second": sample_tps,
            "ratio_litlab_to_transformers": sample_tps["litlab"] / sample_tps["transformers"],
        },
        "diffusion": {
            "prompts": 2,
            "prompt_tokens": 256,
            "new_tokens": diffusion_tokens,
            "steps": diffusion_tokens,
            "seconds": diffusion_times,
            "speedup_of_prompt_cache": diffusion_median["prompt_cache_False"]
            / diffusion_median["prompt_cache_True"],
        },
        "target_ratio": TARGET,
    }
    result["meets_target"] = bool(
        result["train"]["ratio_litlab_to_hand"] >= TARGET
        and result["sample"]["ratio_litlab_to_transformers"] >= TARGET
    )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"lm_throughput{suffix(args)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("train", "sample", "diffusion")}, indent=2, default=str))
    print(f"wrote {path}; within target: {result['meets_target']}")


if __name__ == "__main__":
    main()
