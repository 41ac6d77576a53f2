"""The tiny-scale RL study: from one tiny LLaMA pretrained on the procedural crawl, at a matched number of
optimizer steps, (a) continual pretraining on the documents, (b) SFT on the pipeline's QA, (c) a short SFT
warm-up then GRPO with the exact-match reward, and (d) = (c) on QA made with the checker off. Closed-book
accuracy on the held-out questions (facts stated only in the documents, decontaminated out of the QA) is
tracked against the training tokens each arm consumed; a cloze probe (``The <noun> of <name> is``) tells
knowledge in the weights apart from the question format.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from litlab.core.progress import track  # noqa: E402
from litlab.core.results import TaskOutput  # noqa: E402
from litlab.datamodules.text import encode_prompt_completion  # noqa: E402
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer  # noqa: E402
from litlab.datamodules.webscale_rl import make_corpus  # noqa: E402
from litlab.lm import (  # noqa: E402
    GRPOModule,
    all_tie_fraction,
    build_lm,
    exact_match,
    llama_config,
    prompt_loader,
)
from litlab.methods.webscale_rl.pipeline import run_pipeline  # noqa: E402
from litlab.methods.webscale_rl.rl import exact_match_reward, prompt_records, qa_prompt  # noqa: E402
from litlab.methods.webscale_rl.stages import STAGES, RuleBackend  # noqa: E402
from litlab.methods.webscale_rl.tasks import procedural_demonstrations  # noqa: E402
from litlab.task import TaskContext  # noqa: E402

ARMS = ("cpt", "sft", "sft_grpo", "sft_grpo_no_checker")


def _records(batch: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {key: torch.stack([r[key] for r in batch]) for key in batch[0]}


def majority_accuracy(qa: Sequence[Mapping[str, str]], held_out: Sequence[Mapping[str, str]]) -> float:
    """The trivial baseline: answer each held-out question with the training QA's most frequent answer to
    the same attribute (``What is the <noun> of``), no model at all."""
    answers: dict[str, Counter[str]] = {}
    for pair in qa:
        noun = pair["question"].split("What is the ", 1)[-1].rsplit(" of ", 1)[0]
        answers.setdefault(noun, Counter())[pair["answer"]] += 1
    hits = [i["noun"] in answers and answers[i["noun"]].most_common(1)[0][0] == i["answer"] for i in held_out]
    return sum(hits) / max(len(hits), 1)


def accuracy(model: Any, tokenizer: Any, items: Sequence[Mapping[str, str]]) -> dict[str, float]:
    """Greedy closed-book exact match on the question (``qa``) and on its cloze form (``cloze``)."""
    qa = exact_match(
        model, tokenizer, [qa_prompt(i["question"]) for i in items], [i["answer"] for i in items], 8
    )
    prompts = [f"The {i['noun']} of {i['entity']} is" for i in items]
    cloze = exact_match(model, tokenizer, prompts, [i["answer"] for i in items], 8)
    return {"qa": qa["accuracy"], "cloze": cloze["accuracy"]}


class Tracking:
    """Mix-in: counts training tokens and, at each validation, records held-out accuracy against them."""

    def setup_tracking(self, tokenizer: Any, held_out: Sequence[Mapping[str, str]], tokens: int = 0) -> None:
        self.track_tokenizer, self.held_out, self.tokens, self.curve = tokenizer, list(held_out), tokens, []

    def record(self) -> None:
        was = self.lm.training
        self.lm.eval()
        self.curve.append({"tokens": self.tokens, **accuracy(self.lm, self.track_tokenizer, self.held_out)})
        self.lm.train(was)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.record()


class CausalLM(Tracking, L.LightningModule):
    """Cross-entropy of a causal LM on ``{input_ids, attention_mask, labels}`` (CPT and SFT), AdamW."""

    def __init__(self, lm: torch.nn.Module, lr: float) -> None:
        super().__init__()
        self.lm, self.lr = lm, lr

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.tokens += int(batch["attention_mask"].sum())
        loss = self.lm(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
        ).loss
        self.log("train/loss", loss.detach())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.lm.parameters(), lr=self.lr, betas=(0.9, 0.99))


class TrackedGRPO(Tracking, GRPOModule):
    """The substrate's GRPOModule, counting the tokens of each rollout (prompts and sampled completions) and
    recording each rollout's mean reward and share of all-tie groups (no learning signal)."""

    def record(self) -> None:
        super().record()
        self.curve[-1] |= {
            "all_tie": sum(self.ties) / max(len(self.ties), 1),
            "reward": sum(self.rewards) / max(len(self.rewards), 1),
        }
        self.ties, self.rewards = [], []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        new_rollout = self.rollout is None or self.n_updates % self.num_iterations == 0
        loss = super().training_step(batch, batch_idx)
        if new_rollout:
            r = self.rollout
            self.ties.append(float(all_tie_fraction(r.rewards)))
            self.rewards.append(float(r.rewards.mean()))
            prompt = r.attention_mask[:, : r.sequences.shape[1] - r.completion_ids.shape[1]]
            self.tokens += int(prompt.sum() + r.completion_mask.sum())
        return loss


def _blocks(tokenizer: Any, texts: Sequence[str], block: int) -> list[dict[str, torch.Tensor]]:
    ids = [i for t in texts for i in tokenizer.backend_tokenizer.encode(t).ids + [tokenizer.eos_token_id]]
    blocks = torch.tensor(ids[: len(ids) // block * block]).view(-1, block)
    return [{"input_ids": b, "attention_mask": torch.ones_like(b), "labels": b.clone()} for b in blocks]


def _qa_rows(tokenizer: Any, qa: Sequence[Mapping[str, str]], length: int) -> list[dict[str, torch.Tensor]]:
    enc = encode_prompt_completion(
        tokenizer, [qa_prompt(p["question"]) for p in qa], [f" {p['answer']}\n" for p in qa], length
    )
    return [{k: enc[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in range(len(qa))]


def _loader(rows: Sequence[dict], batch_size: int, seed: int) -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(
        list(rows), batch_size, shuffle=True, collate_fn=_records, generator=generator
    )


def _qa(corpus: dict, folder: Path, checker: bool, noise: float) -> list[dict]:
    backends = dict.fromkeys(STAGES, RuleBackend(noise=noise))
    return run_pipeline(
        corpus["documents"],
        corpus["eval"],
        backends,
        folder,
        demonstrations=procedural_demonstrations(0),
        checker=checker,
    )["qa"]


def one_seed(ctx: TaskContext, seed: int, cfg: Mapping[str, Any]) -> dict[str, list[dict]]:
    """Every arm's accuracy curve for one seed (corpus, tokenizer, base model and arms all seeded)."""
    folder = ctx.output_dir / f"seed{seed}"
    corpus = make_corpus(cfg["n_entities"], seed=seed)
    qa = _qa(corpus, folder / "qa_checked", True, cfg["noise"])
    noisy = _qa(corpus, folder / "qa_unchecked", False, cfg["noise"])
    texts = [d["text"] for d in corpus["documents"]]
    tokenizer = wrap_tokenizer(
        train_bpe(texts + [f"{qa_prompt(p['question'])} {p['answer']}" for p in qa], cfg["vocab_size"])
    )
    torch.manual_seed(seed)
    base = build_lm(llama_config(len(tokenizer), **cfg["arch"]))
    docs = _blocks(tokenizer, texts, cfg["block_size"])
    held_out = corpus["eval"]
    val = [0]  # one validation batch: the held-out set is evaluated inside validation_step

    def fit(module: Any, rows: Any, steps: int) -> None:
        ctx.fitter.fit(module, rows, val, max_steps=steps, val_every_n_steps=cfg["eval_every"], seed=seed)
        if not module.curve or module.curve[-1]["tokens"] != module.tokens:
            module.record()  # the end of the fit, when it fell between two validations

    pre = CausalLM(base, cfg["lr"])
    pre.setup_tracking(tokenizer, held_out)
    fit(pre, _loader(docs, cfg["batch_size"], seed), cfg["pretrain_steps"])
    curves: dict[str, list[dict]] = {"pretrain": pre.curve}
    curves["majority_answer"] = [{"tokens": 0, "qa": majority_accuracy(qa, held_out), "cloze": 0.0}]
    budget, warmup = cfg["steps"], cfg["sft_warmup_steps"]
    start = [{"tokens": 0, **accuracy(base, tokenizer, held_out)}]
    for arm in ARMS:
        lm = copy.deepcopy(base)
        if arm in ("cpt", "sft"):
            module = CausalLM(lm, cfg["lr"])
            module.setup_tracking(tokenizer, held_out)
            rows = docs if arm == "cpt" else _qa_rows(tokenizer, qa, cfg["qa_length"])
            fit(module, _loader(rows, cfg["batch_size"], seed + 1), budget)
            curves[arm] = start + module.curve
            continue
        data = qa if arm == "sft_grpo" else noisy
        sft = CausalLM(lm, cfg["lr"])
        sft.setup_tracking(tokenizer, held_out)
        fit(sft, _loader(_qa_rows(tokenizer, data, cfg["qa_length"]), cfg["batch_size"], seed + 1), warmup)
        grpo = TrackedGRPO(
            exact_match_reward, model=lm, tokenizer=tokenizer, stop_strings=("\n",), seed=seed, **cfg["grpo"]
        )
        grpo.setup_tracking(tokenizer, held_out, tokens=sft.tokens)
        grpo.ties, grpo.rewards = [], []
        fit(grpo, prompt_loader(prompt_records(data), cfg["grpo_batch_size"], seed), budget - warmup)
        curves[arm] = start + sft.curve + grpo.curve
    return curves


def rl_study(ctx: TaskContext, *, seeds: list[int], **cfg: Any) -> TaskOutput:
    """Every arm on every seed; the table compares each arm's final held-out accuracy and the tokens it
    took, and the tokens the RL arm needed to reach the continual-pretraining arm's final accuracy."""
    torch.set_num_threads(1)
    results = {seed: one_seed(ctx, seed, cfg) for seed in track(seeds, "webscale_rl study seeds")}
    rows, curve_rows = [], []
    for seed, curves in results.items():
        target = max(curves["cpt"][-1]["qa"], 1e-9)
        reach = next((p["tokens"] for p in curves["sft_grpo"] if p["qa"] >= target), None)
        for arm, curve in curves.items():
            last = curve[-1]
            rows.append(
                {
                    "seed": seed,
                    "arm": arm,
                    "tokens": last["tokens"],
                    "qa_acc": last["qa"],
                    "cloze_acc": last["cloze"],
                    "all_tie": last.get("all_tie"),
                    "reward": last.get("reward"),
                    "rl_tokens_to_cpt_acc": reach if arm == "sft_grpo" else None,
                }
            )
            curve_rows += [{"seed": seed, "arm": arm, **p} for p in curve]
    summary = []
    for arm in (*ARMS, "majority_answer"):
        mine = [r for r in rows if r["arm"] == arm]
        summary.append(
            {
                "arm": arm,
                "tokens": sum(r["tokens"] for r in mine) / len(mine),
                "qa_acc": sum(r["qa_acc"] for r in mine) / len(mine),
                "cloze_acc": sum(r["cloze_acc"] for r in mine) / len(mine),
            }
        )
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharex=True)
    for arm, colour in zip(ARMS, ("tab:grey", "tab:blue", "tab:red", "tab:orange"), strict=True):
        for seed in results:
            points = [p for p in curve_rows if p["arm"] == arm and p["seed"] == seed]
            for axis, key in zip(axes, ("qa", "cloze"), strict=True):
                axis.plot(
                    [p["tokens"] for p in points],
                    [p[key] for p in points],
                    color=colour,
                    alpha=0.7,
                    label=arm if seed == seeds[0] else None,
                )
    for axis, key in zip(
        axes, ("closed-book QA accuracy (held-out)", "cloze accuracy (held-out)"), strict=True
    ):
        axis.set_xscale("symlog", linthresh=1e4)
        axis.set_xlabel("training tokens after pretraining")
        axis.set_ylabel(key)
    axes[0].legend()
    figure.tight_layout()
    metrics = {f"{r['arm']}/{k}": r[k] for r in summary for k in ("qa_acc", "cloze_acc", "tokens")}
    return {
        "metrics": metrics,
        "tables": {"summary": summary, "per_seed": rows, "curves": curve_rows},
        "figures": {"accuracy_vs_tokens": figure},
    }
