"""The notes' substitutes on a real (tiny) language model: a litlab LLaMA trained on the question bank plays
the capabilities test, the Delegate Game and the greedy Second Chance Game through ``LocalLMBackend``.

What it can answer at this scale: does the model's own max option probability carry information about
its correctness beyond the surface features (the precondition for metacognitive delegation), does it
delegate at all, and does its greedy Second Chance change rate differ with its earlier answer shown or
redacted. It is never trained on the games (no GRPO here), so its delegate replies are reported as given.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.metacog_questions import MetacogQADataModule
from litlab.methods.metacog.analysis import delegation_regression
from litlab.methods.metacog.local import LocalLMBackend
from litlab.methods.metacog.session import GameConfig, analyse, play, share
from litlab.task import TaskContext


def train_subject(
    ctx: TaskContext, data: MetacogQADataModule, seed: int, steps: int, lr: float, arch: dict
) -> Any:
    """A tiny causal LLaMA trained for ``steps`` steps on the question documents (AdamW, warm-up/cosine)."""
    from litlab.lm.module import LanguageModel, warmup_cosine

    module = LanguageModel(
        partial(torch.optim.AdamW, lr=lr, betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=max(1, steps // 15)),
        total_steps=steps,
        arch=arch,
    )
    torch.manual_seed(seed)
    module.bind_data(data.data_spec())
    data.setup("fit")
    ctx.fitter.fit(module, data.train_dataloader(), max_steps=steps, seed=seed)
    return module


def lm_study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    steps: int,
    lr: float,
    arch: dict[str, Any],
    data: dict[str, Any],
    game: dict[str, Any],
    n_boot: int = 300,
) -> TaskOutput:
    """Train one tiny subject per seed, let it play, and tabulate its signal, choices and change rates."""
    module_data = MetacogQADataModule(**data)
    rows, signal_rows, second = [], [], []
    for seed in track(seeds, "metacog tiny-LM subjects"):
        module = train_subject(ctx, module_data, seed, steps, lr, arch)
        backend = LocalLMBackend(module.lm, module.tokenizer, max_new_tokens=3, name=f"tiny-lm-{seed}")
        played = play(backend, GameConfig(**game), ctx.output_dir / "answers" / f"seed{seed}", seed)
        caps, t = played["capabilities"], played["trials"]
        summary = analyse(played, n_boot=0, seed=seed)["summary"]
        by_digits = {
            f"accuracy_digits={d}": float(caps["correct"][caps["digits"] == d].mean())
            for d in np.unique(caps["digits"])
        }
        rows.append({"seed": seed, **{k: round(v, 4) for k, v in (summary | by_digits).items()}})
        surface = {"log_length": caps["log_length"], "product": caps["product"].astype(float)}
        if len(np.unique(caps["correct"])) == 2:
            calibration = delegation_regression(
                caps["correct"], caps["max_prob"], surface, caps["digits"], n_boot, seed
            )
        else:  # always right or always wrong: nothing to predict
            calibration = {"z": float("nan"), "n": len(caps["correct"])}
        signal_rows.append(
            {
                "seed": seed,
                "outcome": "own correctness (capabilities test)",
                **{k: round(v, 4) for k, v in calibration.items()},
            }
        )
        regression = analyse(played, n_boot=n_boot, seed=seed)["regressions"].get("own_max_prob")
        if regression is None:  # a subject that never (or always) delegates has no regression
            regression = {
                "delegation_rate": share(t["delegated"][t["parsed"]]),
                "n": int(t["parsed"].sum()),
            }
        signal_rows.append(
            {
                "seed": seed,
                "outcome": "delegation (Delegate Game)",
                **{k: round(v, 4) for k, v in regression.items()},
            }
        )
        second += [{"seed": seed, **r} for r in played.get("second_chance", [])]
    metrics = {
        "capabilities_accuracy": float(np.mean([r["capabilities_accuracy"] for r in rows])),
        "delegation_rate": share([r["delegation_rate"] for r in rows]),
        "max_prob_predicts_correct_z": float(
            share([r["z"] for r in signal_rows if r["outcome"].startswith("own")])
        ),
    }
    for follow in ("incorrect", "neutral", "positive"):
        for shown in ("shown", "redacted"):
            cells = [
                r["change_rate"] for r in second if r["follow_up"] == follow and r["earlier_answer"] == shown
            ]
            metrics[f"change_rate/{shown}/{follow}"] = share(cells)
    return {"metrics": metrics, "tables": {"subjects": rows, "signal": signal_rows, "second_chance": second}}
