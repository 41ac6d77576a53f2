"""The notes' substitute (b) as a task: per seed, a tiny LM is trained on the questions and the game format
(``grpo_game``), then with GRPO (``litlab.lm.GRPOModule``) on Delegate Game trials and capabilities-test
prompts of a training bank; the model before and after GRPO plays the capabilities test and the Delegate
Game on unseen questions, and the existing analysis asks whether its own max option probability predicts its
delegation after the surface and teammate controls, and whether its delegation follows the teammate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from litlab.core.cache import cached_tensors
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.metacog_questions import LABELS, make_questions
from litlab.methods.metacog.games import capabilities_queries, capabilities_table, load_prompts
from litlab.methods.metacog.grpo_game import format_corpus_file, game_records, team_reward
from litlab.methods.metacog.lm_study import train_subject
from litlab.methods.metacog.local import LocalLMBackend
from litlab.methods.metacog.parsing import parse_label
from litlab.methods.metacog.session import GameConfig, analyse, play, share
from litlab.task import TaskContext

SFT_VERSION = "1"


def format_data(data: dict[str, Any], game_format: dict[str, Any]) -> Any:
    """The text data module of the question and game-format documents (``grpo_game.format_corpus_file``)."""
    from litlab.datamodules.text import TextDataModule

    bank = {k: data[k] for k in ("n_questions", "question_seed", "max_digits")}
    corpus = format_corpus_file(**bank, **game_format, root=data.get("cache_dir"))
    return TextDataModule(corpus=str(corpus), **{k: v for k, v in data.items() if k not in bank})


def sft_subject(
    ctx: TaskContext,
    data: dict[str, Any],
    game_format: dict[str, Any],
    seed: int,
    steps: int,
    lr: float,
    arch: dict[str, Any],
) -> Any:
    """The format-trained tiny LM of a seed (its weights cached by config, so tests and reruns reuse it)."""
    from litlab.lm.module import LanguageModel

    module_data = format_data(data, game_format)
    key = {"data": data, "format": game_format, "seed": seed, "steps": steps, "lr": lr, "arch": arch}

    def build() -> dict[str, torch.Tensor]:
        """The trained weights, each tensor copied (tied embeddings: safetensors refuses shared memory)."""
        trained = train_subject(ctx, module_data, seed, steps, lr, arch).lm
        return {k: v.detach().cpu().clone() for k, v in trained.state_dict().items()}

    weights = cached_tensors("metacog", "grpo-sft", SFT_VERSION, key, build)
    module = LanguageModel(torch.optim.AdamW, arch=arch)
    module.bind_data(module_data.data_spec())
    module.lm.load_state_dict(weights)
    return module.lm.eval(), module.tokenizer


def own_correctness(backend: LocalLMBackend, items: list[dict[str, Any]], batch_size: int = 64) -> np.ndarray:
    """The subject's greedy capabilities-test correctness on ``items`` (its phase-1 outcomes in training)."""
    queries = capabilities_queries(items, load_prompts("capabilities"))
    records = []
    for start in range(0, len(queries), batch_size):
        replies = backend.complete(queries[start : start + batch_size])
        records += [{"label": parse_label(r.text, LABELS), "logprobs": r.logprobs} for r in replies]
    return capabilities_table(records, items)["correct"]


def training_rows(
    lm: Any, tokenizer: Any, bank: list[dict[str, Any]], train_game: dict[str, Any], seed: int
) -> list[dict[str, Any]]:
    """GRPO prompts: Delegate Game trials on the training bank (the subject's own outcomes in the history)
    and, ``capabilities_share`` of them as many again, capabilities-test prompts (teammate accuracy 0)."""
    from litlab.lm import render_chat

    own = own_correctness(LocalLMBackend(lm, tokenizer), bank)
    games = game_records(
        bank, own, train_game["accuracies"], train_game["history_len"], train_game["n_trials"], seed
    )
    rows = [
        {"messages": g["messages"], "answer": g["answer"], "teammate_accuracy": g["teammate_accuracy"]}
        for g in games
    ]
    n_caps = round(train_game["capabilities_share"] * len(games))
    picks = np.random.default_rng(seed).choice(len(bank), n_caps, replace=n_caps > len(bank))
    for query in capabilities_queries([bank[i] for i in picks], load_prompts("capabilities")):
        rows.append(
            {"messages": query.messages, "answer": LABELS[query.item["answer"]], "teammate_accuracy": 0.0}
        )
    return [
        {"prompt": render_chat(tokenizer, r.pop("messages"), add_generation_prompt=True), **r} for r in rows
    ]


def grpo_train(
    ctx: TaskContext,
    lm: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    steps: int,
    batch_size: int,
    seed: int,
    options: dict[str, Any],
) -> tuple[Any, list[dict[str, float]]]:
    """GRPO on the prompt rows (expected team correctness the reward) by the Fitter: policy, history."""
    from litlab.lm import GRPOModule, prompt_loader

    module = GRPOModule(team_reward, model=lm.train(), tokenizer=tokenizer, seed=seed, **options)
    loader = prompt_loader(rows, batch_size, seed)
    result = ctx.fitter.fit(module, loader, max_steps=steps, val_every_n_steps=max(1, steps // 10), seed=seed)
    return module.lm.eval(), result.history


def arm_rows(seed: int, arm: str, played: dict[str, Any], n_boot: int) -> tuple[dict, list[dict]]:
    """The subject's summary (with its delegation rate per teammate accuracy) and signal regressions."""
    t = played["trials"]
    summary = analyse(played, n_boot=0, seed=seed)["summary"]
    per_mate = {
        f"delegation_rate@{a:g}": share(t["delegated"][t["parsed"] & (t["teammate_accuracy"] == a)])
        for a in np.unique(t["teammate_accuracy"])
    }
    row = {"seed": seed, "arm": arm, **{k: round(v, 4) for k, v in (summary | per_mate).items()}}
    signal = []
    for controls in (True, False):
        fits = analyse(played, n_boot=n_boot, seed=seed, controls=controls)["regressions"]
        for name in ("own_max_prob", "own_correct"):
            fit = fits.get(name, {"delegation_rate": summary["delegation_rate"], "n": int(t["parsed"].sum())})
            rounded = {k: round(v, 4) for k, v in fit.items()}
            signal.append({"seed": seed, "arm": arm, "signal": name, "controls": controls, **rounded})
    return row, signal


def grpo_study(
    ctx: TaskContext,
    *,
    seeds: list[int],
    sft_steps: int,
    lr: float,
    arch: dict[str, Any],
    data: dict[str, Any],
    game_format: dict[str, Any],
    train_game: dict[str, Any],
    grpo_steps: int,
    grpo_batch: int,
    grpo: dict[str, Any],
    game: dict[str, Any],
    n_boot: int = 300,
) -> TaskOutput:
    """Per seed: the format-trained LM plays; GRPO on the game; it plays again; choices and regressions."""
    bank = make_questions(train_game["n_questions"], train_game["question_seed"], data["max_digits"])
    config = GameConfig(**game)
    rows, signal, curves = [], [], []
    for seed in track(seeds, "metacog GRPO subjects"):
        lm, tokenizer = sft_subject(ctx, data, game_format, seed, sft_steps, lr, arch)
        for arm in ("sft", "grpo"):
            if arm == "grpo":
                prompts = training_rows(lm, tokenizer, bank, train_game, seed)
                lm, history = grpo_train(ctx, lm, tokenizer, prompts, grpo_steps, grpo_batch, seed, grpo)
                curves += [{"seed": seed, **h} for h in history]
            backend = LocalLMBackend(lm, tokenizer, max_new_tokens=2, name=f"{arm}-{seed}")
            played = play(backend, config, Path(ctx.output_dir) / "answers" / f"{arm}-seed{seed}", seed)
            row, fits = arm_rows(seed, arm, played, n_boot)
            rows.append(row)
            signal += fits
    metrics: dict[str, float] = {}
    for arm in ("sft", "grpo"):
        subjects = [r for r in rows if r["arm"] == arm]
        for key in subjects[0]:
            if key.startswith(("delegation_rate", "team_score", "capabilities_accuracy", "self_answered")):
                metrics[f"{arm}/{key}"] = share([r[key] for r in subjects])
        for controls in (True, False):
            zs = [
                s.get("z", float("nan"))
                for s in signal
                if s["arm"] == arm and s["signal"] == "own_max_prob" and s["controls"] == controls
            ]
            metrics[f"{arm}/max_prob_z/{'controls' if controls else 'no_controls'}"] = share(zs)
    return {"metrics": metrics, "tables": {"subjects": rows, "signal": signal, "grpo_curve": curves}}
