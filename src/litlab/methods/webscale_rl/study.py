"""The tiny-scale RL study: from one tiny LLaMA pretrained on the procedural crawl, at a matched number of
optimizer steps, (a) continual pretraining on the documents, (b) SFT on the pipeline's QA, (c) a short SFT
warm-up (or none, as the paper runs it) then GRPO with the exact-match reward, and (d) = (c) on QA made with
the checker off. Closed-book accuracy on the held-out questions (facts stated only in the documents,
decontaminated out of the QA) is tracked against the training tokens each arm consumed; a cloze probe
(``The <noun> of <name> is``) tells knowledge in the weights apart from the question format.

Every arm is asked the same few-shot prompt (``shots`` training QA pairs about other entities, then the
held-out question), so the continual-pretraining arm is not penalised for never having seen the format;
the crawl states each fact in several phrasings and sentence orders (``pages_per_entity``, ``permute``),
without which a tiny model stores facts it cannot extract (Allen-Zhu & Li, Physics of LMs 3.1), and the base
model's pretraining also holds pages and FAQ pages about other entities (``background_entities``), where it
meets the QA format.
"""

from __future__ import annotations

import copy
import json
import math
import multiprocessing
import random
import statistics
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning as L
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from litlab.core.cache import cached_tensors, write_text_atomic  # noqa: E402
from litlab.core.errors import ConfigError  # noqa: E402
from litlab.core.paths import key_digest  # noqa: E402
from litlab.core.progress import track  # noqa: E402
from litlab.core.results import TaskOutput  # noqa: E402
from litlab.datamodules.text import encode_prompt_completion  # noqa: E402
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer  # noqa: E402
from litlab.datamodules.webscale_rl import make_corpus, question  # noqa: E402
from litlab.lm import (  # noqa: E402
    GRPOModule,
    all_tie_fraction,
    build_lm,
    exact_match,
    llama_config,
    prompt_loader,
    score_continuations,
)
from litlab.lm.evaluation import normalize_answer  # noqa: E402
from litlab.methods.webscale_rl.pipeline import run_pipeline  # noqa: E402
from litlab.methods.webscale_rl.rl import exact_match_reward, prompt_records, qa_prompt  # noqa: E402
from litlab.methods.webscale_rl.stages import STAGES, RuleBackend, read_intro  # noqa: E402
from litlab.methods.webscale_rl.tasks import procedural_demonstrations  # noqa: E402
from litlab.task import TaskContext  # noqa: E402

ARMS = ("cpt", "sft", "sft_grpo", "sft_grpo_no_checker")
FLAWS = ("clean", "leaked", "unnamed", "wrong")  # kinds of QA pair (flaw_kinds)
RATIOS = tuple(f"{c}_ratio_{m}" for m in ("acc", "logprob") for c in ("tokens", "data_tokens"))
# the settings the pretrained model and its curve depend on (with the seed and the tokenizer's vocabulary)
PRETRAINING_KEYS = (
    "n_entities", "pages_per_entity", "permute", "noise", "background_entities", "shots", "vocab_size",
    "arch", "block_size", "doc_batch_size", "lr", "pretrain_steps",
)  # fmt: skip
PRETRAINING_VERSION = "1"  # bump when the corpus, the pretraining loop or the probes change


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


Probes = dict[str, tuple[list[str], list[str]]]


def probes(
    held_out: Sequence[Mapping[str, str]], qa: Sequence[Mapping[str, str]], shots: int, seed: int
) -> Probes:
    """The held-out prompts and answers: ``qa``, the question behind ``shots`` QA pairs (seeded) about other
    entities from the training QA, the same for every arm; ``cloze``, ``The <noun> of <name> is``."""
    rng = random.Random(seed)
    prompts = []
    for item in held_out:
        others = [p for p in qa if item["entity"] not in p["question"]]
        context = "".join(f"{qa_prompt(p['question'])} {p['answer']}\n" for p in rng.sample(others, shots))
        prompts.append(context + qa_prompt(item["question"]))
    answers = [i["answer"] for i in held_out]
    cloze = [f"The {i['noun']} of {i['entity']} is" for i in held_out]
    return {"qa": (prompts, answers), "cloze": (cloze, answers)}


def accuracy(model: Any, tokenizer: Any, probe: Probes) -> dict[str, float]:
    """Greedy closed-book exact match of each probe, and ``qa_logprob``: the mean log-likelihood of the
    held-out answers after the QA prompt (finer than 30 exact matches, so it resolves smaller changes)."""
    scores = {k: exact_match(model, tokenizer, p, a, 8)["accuracy"] for k, (p, a) in probe.items()}
    prompts, answers = probe["qa"]
    logprob = score_continuations(model, tokenizer, prompts, [f" {a}" for a in answers])["logprob"]
    return scores | {"qa_logprob": logprob.mean().item()}


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """``model`` in eval mode for the block, then back in the mode it was in."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def facts_by_question(entities: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str, str]]:
    """Each true fact of the crawl by its clean question: (entity name, attribute noun, value)."""
    return {question(e["name"], e["kind"], n): (e["name"], n, v) for e in entities for n, v in e["facts"]}


def wrong_fact_probe(
    unchecked: Sequence[Mapping[str, str]],
    entities: Sequence[Mapping[str, Any]],
    probe_qa: Sequence[Mapping[str, str]],
    shots: int,
    seed: int,
) -> dict[str, list[str]]:
    """The training facts that the unchecked QA teaches wrong (``wrong`` pairs of :func:`flaw_kinds`), asked
    as the held-out probe asks (``shots`` pairs of ``probe_qa`` about other entities, then the fact's own
    question): ``prompts``, the true ``answers`` and the ``spoiled`` answers the unchecked pairs reward."""
    facts = facts_by_question(entities)
    kinds = flaw_kinds(unchecked, entities)
    wrong = [p for p in unchecked if kinds[(qa_prompt(p["question"]), p["answer"])] == "wrong"]
    asked = []
    for pair in wrong:
        name, noun, value = facts[pair["question"]]
        asked.append({"entity": name, "noun": noun, "question": pair["question"], "answer": value})
    prompts, answers = probes(asked, probe_qa, shots, seed)["qa"]
    return {"prompts": prompts, "answers": answers, "spoiled": [p["answer"] for p in wrong]}


def wrong_fact_recall(model: Any, tokenizer: Any, probe: Mapping[str, list[str]]) -> dict[str, float]:
    """On :func:`wrong_fact_probe`'s facts, the shares of greedy answers that are the true value
    (``wrong_facts_true``) and the spoiled value that the unchecked QA pays for (``wrong_facts_spoiled``)."""
    if not probe["prompts"]:
        return {}
    with evaluating(model):
        predictions = exact_match(model, tokenizer, probe["prompts"], probe["answers"], 8)["predictions"]
    said = [normalize_answer(p) for p in predictions]
    spoiled = sum(s == normalize_answer(a) for s, a in zip(said, probe["spoiled"], strict=True))
    true = sum(s == normalize_answer(a) for s, a in zip(said, probe["answers"], strict=True))
    return {"wrong_facts_true": true / len(said), "wrong_facts_spoiled": spoiled / len(said)}


class Tracking:
    """Mix-in: counts training tokens two ways and, at each validation, records held-out accuracy against
    them. ``tokens``: what the arm's forward passes trained on (compute). ``data_tokens``: the tokens of the
    training examples the arm drew from its data set (document blocks, QA pairs), the count the paper's
    "fewer tokens" compares (reconstructed: RL's sampled completions are the model's own, not data)."""

    def setup_tracking(self, tokenizer: Any, probe: Probes, tokens: int = 0, data_tokens: int = 0) -> None:
        self.track_tokenizer, self.probe, self.curve = tokenizer, probe, []
        self.tokens, self.data_tokens = tokens, data_tokens

    def record(self) -> None:
        point = {"tokens": self.tokens, "data_tokens": self.data_tokens}
        with evaluating(self.lm):
            self.curve.append(point | accuracy(self.lm, self.track_tokenizer, self.probe))

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.record()


class CausalLM(Tracking, L.LightningModule):
    """Cross-entropy of a causal LM on ``{input_ids, attention_mask, labels}`` (CPT and SFT), AdamW."""

    def __init__(self, lm: torch.nn.Module, lr: float) -> None:
        super().__init__()
        self.lm, self.lr = lm, lr

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        seen = int(batch["attention_mask"].sum())
        self.tokens, self.data_tokens = self.tokens + seen, self.data_tokens + seen
        loss = self.lm(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
        ).loss
        self.log("train/loss", loss.detach())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.lm.parameters(), lr=self.lr, betas=(0.9, 0.99))


class TrackedGRPO(Tracking, GRPOModule):
    """The substrate's GRPOModule, counting the tokens of each rollout (prompts and sampled completions), the
    data tokens of its QA pairs (each question and reference answer once, as SFT would train on them), and
    recording each rollout's mean reward and share of all-tie groups (no learning signal), overall and per
    kind of QA pair (``flaws``: (prompt, answer) → a kind of :func:`flaw_kinds`; clean when absent)."""

    flaws: Mapping[tuple[str, str], str] = {}

    def record(self) -> None:
        super().record()
        self.curve[-1] |= {
            "all_tie": sum(self.ties) / max(len(self.ties), 1),
            "reward": sum(self.rewards) / max(len(self.rewards), 1),
        }
        for kind, groups in self.by_flaw.items():
            self.curve[-1] |= {
                f"groups_{kind}": len(groups),
                f"all_tie_{kind}": sum(tie for tie, _ in groups) / len(groups),
                f"reward_{kind}": sum(reward for _, reward in groups) / len(groups),
            }
        self.ties, self.rewards, self.by_flaw = [], [], {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        new_rollout = self.rollout is None or self.n_updates % self.num_iterations == 0
        loss = super().training_step(batch, batch_idx)
        if new_rollout:
            r = self.rollout
            self.ties.append(float(all_tie_fraction(r.rewards)))
            self.rewards.append(float(r.rewards.mean()))
            tied = (r.rewards == r.rewards[:, :1]).all(1).tolist()
            kinds = [self.flaws.get(pair, "clean") for pair in zip(batch["prompt"], batch["answer"])]
            for kind, tie, reward in zip(kinds, tied, r.rewards.mean(1).tolist(), strict=True):
                self.by_flaw.setdefault(kind, []).append((float(tie), reward))
            prompt = r.attention_mask[:, : r.sequences.shape[1] - r.completion_ids.shape[1]]
            self.tokens += int(prompt.sum() + r.completion_mask.sum())
            self.data_tokens += qa_tokens(self.track_tokenizer, batch["prompt"], batch["answer"])
        return loss


def qa_tokens(tokenizer: Any, prompts: Sequence[str], answers: Sequence[str]) -> int:
    """Tokens of QA pairs as SFT trains on them: the prompt, `` <answer>`` and a newline, end of sequence."""
    encode = tokenizer.backend_tokenizer.encode_batch
    pieces = encode(list(prompts), add_special_tokens=False) + encode(
        [f" {a}\n" for a in answers], add_special_tokens=False
    )
    return sum(len(e.ids) for e in pieces) + len(answers)


def flaw_kinds(
    qa: Sequence[Mapping[str, str]], entities: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], str]:
    """(GRPO prompt, answer) → what the rule generator's noise did to each QA pair, read against the crawl's
    true facts: ``clean``, ``leaked`` (the answer stated in the question), ``unnamed`` (the entity dropped)
    or ``wrong`` (another value than the entity's)."""
    facts = facts_by_question(entities)
    kinds = {}
    for pair in qa:
        q, a = pair["question"], pair["answer"]
        if q in facts:
            kind = "clean" if facts[q][2] == a else "wrong"
        else:
            kind = "unnamed" if q.startswith("According to the material") else "leaked"
        kinds[(qa_prompt(q), a)] = kind
    return kinds


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


def background_texts(n: int, seed: int, cfg: Mapping[str, Any], taken: set[str]) -> list[str]:
    """The base model's earlier pretraining: pages about ``n`` other invented entities (none in the crawl)
    and, for each, a FAQ page asking every fact in the QA format, so the base model has met question
    answering about document facts, as the paper's pretrained base model has."""
    crawl = make_corpus(
        n,
        seed=seed + 50_000,
        repost_rate=0.0,
        noise_rate=0.0,
        pages_per_entity=cfg["pages_per_entity"],
        permute=cfg["permute"],
    )
    kept = [e for e in crawl["entities"] if e["name"] not in taken]
    texts = [d["text"] for d in crawl["documents"] if read_intro(d["text"])[0] not in taken]
    for e in kept:
        pairs = [f"{qa_prompt(question(e['name'], e['kind'], noun))} {v}" for noun, v in e["facts"]]
        texts.append("\n".join(pairs))
    return texts


def pretrained(ctx: TaskContext, seed: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """One seed's crawl, its checked and unchecked QA, tokenizer, probes, and the model pretrained on the
    documents (with its accuracy curve); ``fit`` trains a tracked module with the study's settings."""
    folder = ctx.output_dir / f"seed{seed}"
    corpus = make_corpus(
        cfg["n_entities"], seed=seed, pages_per_entity=cfg["pages_per_entity"], permute=cfg["permute"]
    )
    qa = _qa(corpus, folder / "qa_checked", True, cfg["noise"])
    noisy = _qa(corpus, folder / "qa_unchecked", False, cfg["noise"])
    texts = [d["text"] for d in corpus["documents"]]
    if cfg["background_entities"]:
        names = {e["name"] for e in corpus["entities"]}
        texts = texts + background_texts(cfg["background_entities"], seed, cfg, names)
    tokenizer = wrap_tokenizer(
        train_bpe(texts + [f"{qa_prompt(p['question'])} {p['answer']}" for p in qa], cfg["vocab_size"])
    )
    torch.manual_seed(seed)
    base = build_lm(llama_config(len(tokenizer), **cfg["arch"]))
    pretraining = _loader(_blocks(tokenizer, texts, cfg["block_size"]), cfg["doc_batch_size"], seed)
    docs = _blocks(tokenizer, [d["text"] for d in corpus["documents"]], cfg["block_size"])
    probe = probes(corpus["eval"], qa, cfg["shots"], seed)
    val = [0]  # one validation batch: the held-out set is evaluated inside validation_step

    def fit(
        module: Any, rows: Any, steps: int, every: int | None = None, progress: str | None = None
    ) -> None:
        every = every or cfg["eval_every"]
        ctx.fitter.fit(
            module, rows, val, max_steps=steps, val_every_n_steps=every, seed=seed, progress=progress
        )
        if not module.curve or module.curve[-1]["tokens"] != module.tokens:
            module.record()  # the end of the fit, when it fell between two validations

    pre = CausalLM(base, cfg["lr"])
    pre.setup_tracking(tokenizer, probe)
    key = {k: cfg[k] for k in PRETRAINING_KEYS} | {
        "seed": seed,
        "eval_every": cfg.get("pretrain_eval_every") or cfg["eval_every"],
        "vocab": key_digest(sorted(tokenizer.get_vocab().items())),
    }

    def build() -> dict[str, torch.Tensor]:
        steps, every = cfg["pretrain_steps"], cfg.get("pretrain_eval_every")
        fit(pre, pretraining, steps, every, progress=f"pretraining the seed-{seed} base model")
        return curve_tensors(pre.curve) | {f"model.{k}": v.clone() for k, v in base.state_dict().items()}

    stored = cached_tensors("webscale_rl", f"pretrained_seed{seed}", PRETRAINING_VERSION, key, build)
    base.load_state_dict({k.removeprefix("model."): v for k, v in stored.items() if k.startswith("model.")})
    return {
        "corpus": corpus,
        "qa": qa,
        "noisy": noisy,
        "tokenizer": tokenizer,
        "base": base,
        "docs": docs,
        "probe": probe,
        "fit": fit,
        "curve": curve_points(stored),
    }


def curve_tensors(curve: Sequence[Mapping[str, float]]) -> dict[str, torch.Tensor]:
    """An accuracy curve as one float64 tensor per measure (``curve.<measure>``), for a tensor cache."""
    return {f"curve.{k}": torch.tensor([p[k] for p in curve], dtype=torch.float64) for k in curve[0]}


def curve_points(tensors: Mapping[str, torch.Tensor]) -> list[dict[str, float]]:
    """The curve that :func:`curve_tensors` stored; token counts back as ints."""
    columns = {k.removeprefix("curve."): v.tolist() for k, v in tensors.items() if k.startswith("curve.")}
    first = ("tokens", "data_tokens", "qa", "cloze", "qa_logprob")  # the order Tracking.record writes
    names = sorted(columns, key=lambda k: first.index(k) if k in first else len(first))
    rows = zip(*(columns[k] for k in names), strict=True)
    points = [dict(zip(names, values, strict=True)) for values in rows]
    return [p | {k: int(p[k]) for k in ("tokens", "data_tokens")} for p in points]


def one_seed(ctx: TaskContext, seed: int, cfg: Mapping[str, Any]) -> dict[str, list[dict]]:
    """Every arm's accuracy curve for one seed (corpus, tokenizer, base model and arms all seeded); a
    seed whose ``curves.json`` is already in the run folder (a killed run rerun with ``resume=auto``) is read
    back."""
    saved = ctx.output_dir / f"seed{seed}" / "curves.json"
    if saved.is_file():
        curves = json.loads(saved.read_text())
        if "data_tokens" not in curves["cpt"][-1]:
            raise ConfigError(f"{saved} predates data-token counting; rerun the study with a new run_id")
        return curves
    run = pretrained(ctx, seed, cfg)
    qa, noisy, tokenizer, base, docs, probe, fit = (
        run[k] for k in ("qa", "noisy", "tokenizer", "base", "docs", "probe", "fit")
    )
    curves: dict[str, list[dict]] = {"pretrain": run["curve"]}
    curves["majority_answer"] = [
        {"tokens": 0, "data_tokens": 0, "qa": majority_accuracy(qa, run["corpus"]["eval"]), "cloze": 0.0}
    ]
    budget, warmup = cfg["steps"], cfg["sft_warmup_steps"]
    finetune_lr = cfg.get("finetune_lr") or cfg["lr"]  # CPT and SFT after pretraining (GRPO has its own)
    recall = wrong_fact_probe(noisy, run["corpus"]["entities"], qa, cfg["shots"], seed)
    start = [{"tokens": 0, "data_tokens": 0, **accuracy(base, tokenizer, probe)}]
    start[0] |= wrong_fact_recall(base, tokenizer, recall)
    for arm in cfg["arms"]:
        lm = copy.deepcopy(base)
        if arm in ("cpt", "sft"):
            module = CausalLM(lm, finetune_lr)
            module.setup_tracking(tokenizer, probe)
            rows = docs if arm == "cpt" else _qa_rows(tokenizer, qa, cfg["qa_length"])
            size = cfg["doc_batch_size"] if arm == "cpt" else cfg["batch_size"]
            fit(module, _loader(rows, size, seed + 1), budget)
            curves[arm] = start + module.curve
            curves[arm][-1] |= wrong_fact_recall(lm, tokenizer, recall)
            continue
        data = qa if arm == "sft_grpo" else noisy
        sft = CausalLM(lm, finetune_lr)
        sft.setup_tracking(tokenizer, probe)
        if warmup:  # 0: GRPO straight from the pretrained model, as the paper runs it
            rows = _qa_rows(tokenizer, data, cfg["qa_length"])
            fit(sft, _loader(rows, cfg["batch_size"], seed + 1), warmup)
        grpo = TrackedGRPO(
            exact_match_reward, model=lm, tokenizer=tokenizer, stop_strings=("\n",), seed=seed, **cfg["grpo"]
        )
        grpo.setup_tracking(tokenizer, probe, tokens=sft.tokens, data_tokens=sft.data_tokens)
        grpo.ties, grpo.rewards, grpo.by_flaw = [], [], {}
        grpo.flaws = flaw_kinds(data, run["corpus"]["entities"])
        fit(grpo, prompt_loader(prompt_records(data), cfg["grpo_batch_size"], seed), budget - warmup)
        curves[arm] = start + sft.curve + grpo.curve
        curves[arm][-1] |= wrong_fact_recall(lm, tokenizer, recall)
    write_text_atomic(saved, json.dumps(curves))  # whole or absent: a kill never leaves half a seed
    return curves


def tokens_to_reach(
    curve: Sequence[Mapping[str, float]], target: float, metric: str = "qa", count: str = "tokens"
) -> int | None:
    """Training tokens (``count``: ``tokens`` or ``data_tokens``) at an arm's first evaluation after it began
    training where its held-out ``metric`` (``qa`` accuracy or ``qa_logprob``) is at least ``target`` (at
    least one question right when the accuracy target is 0); None if never."""
    floor = max(target, 1e-9) if metric == "qa" else target
    return next((p[count] for p in curve if p["tokens"] > 0 and p[metric] >= floor), None)


def reach_columns(curve: Sequence[Mapping[str, float]], cpt: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Tokens an arm took to reach the continual-pretraining arm's final accuracy and final held-out answer
    log-likelihood, counted both ways, and ``*_ratio``: the tokens CPT itself took to first reach that value
    over the arm's (above 1: the arm got there on fewer tokens; 0.0 when the arm never did)."""
    columns: dict[str, Any] = {}
    for metric, suffix in (("qa", "acc"), ("qa_logprob", "logprob")):
        for count in ("tokens", "data_tokens"):
            reach = tokens_to_reach(curve, cpt[-1][metric], metric, count)
            columns[f"{count}_to_cpt_{suffix}"] = reach
            own = tokens_to_reach(cpt, cpt[-1][metric], metric, count) or cpt[-1][count]
            columns[f"{count}_ratio_{suffix}"] = own / reach if reach else 0.0
    return columns


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _sd(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)) ** 0.5


def rl_study(
    ctx: TaskContext, *, seeds: list[int], arms: Sequence[str] = ARMS, processes: int = 1, **cfg: Any
) -> TaskOutput:
    """Every arm on every seed; the table compares each arm's final held-out accuracy and the tokens it
    took, and the tokens the RL arm needed to reach the continual-pretraining arm's final accuracy. One CPU
    thread per process unless ``extras.torch_threads`` says otherwise."""
    ctx.pin_threads(1)
    arms = tuple(arms)
    if "cpt" not in arms or not set(arms) <= set(ARMS):
        raise ConfigError(f"arms must include cpt and be among {ARMS}, got {arms}")
    cfg["arms"] = arms
    if processes > 1:  # seeds are independent: one forked process each, one thread apiece
        with multiprocessing.get_context("fork").Pool(min(processes, len(seeds))) as pool:
            results = dict(zip(seeds, pool.starmap(one_seed, [(ctx, s, cfg) for s in seeds]), strict=True))
    else:
        results = {seed: one_seed(ctx, seed, cfg) for seed in track(seeds, "webscale_rl study seeds")}
    rows, curve_rows = [], []
    for seed, curves in results.items():
        for arm, curve in curves.items():
            last = curve[-1]
            compared = arm in ARMS and arm != "cpt"
            rows.append(
                {
                    "seed": seed,
                    "arm": arm,
                    "tokens": last["tokens"],
                    "data_tokens": last.get("data_tokens"),
                    "qa_acc": last["qa"],
                    "cloze_acc": last["cloze"],
                    "qa_logprob": last.get("qa_logprob"),
                    "all_tie": last.get("all_tie"),
                    "reward": last.get("reward"),
                    "wrong_facts_true": last.get("wrong_facts_true"),
                    "wrong_facts_spoiled": last.get("wrong_facts_spoiled"),
                    **(reach_columns(curve, curves["cpt"]) if compared else {}),
                }
            )
            curve_rows += [{"seed": seed, "arm": arm, **p} for p in curve]
    summary = []
    for arm in (*arms, "majority_answer"):
        mine = [r for r in rows if r["arm"] == arm]
        entry = {
            k: _mean([r[k] for r in mine])
            for k in ("tokens", "data_tokens", "qa_acc", "cloze_acc", "qa_logprob", "all_tie", "reward")
            + ("wrong_facts_true", "wrong_facts_spoiled")
        }
        entry["qa_acc_sd"] = _sd([r["qa_acc"] for r in mine])
        for ratio in RATIOS:
            values = [r[ratio] for r in mine if ratio in r]  # 0.0 on a seed where the arm never got there
            entry[f"{ratio}_median"] = statistics.median(values) if values else None
        summary.append({"arm": arm, **entry})
    metrics = {
        f"{r['arm']}/{k}": r[k] for r in summary for k in ("qa_acc", "cloze_acc", "tokens", "data_tokens")
    }
    for r in summary:
        if r["arm"] in ARMS[1:]:
            metrics |= {f"{r['arm']}/{ratio}_median": r[f"{ratio}_median"] for ratio in RATIOS}
    return {
        "metrics": metrics,
        "tables": {
            "summary": summary,
            "per_seed": rows,
            "curves": curve_rows,
            "grpo_signal_by_flaw": signal_by_flaw(curve_rows),
        },
        "figures": {
            "accuracy_vs_tokens": accuracy_figure(curve_rows, arms, "tokens"),
            "accuracy_vs_data_tokens": accuracy_figure(curve_rows, arms, "data_tokens"),
        },
    }


def signal_by_flaw(curve_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per GRPO arm and kind of QA pair, over all seeds: rollout groups, their all-tie share and mean reward,
    and the kind's share of all groups and of the groups with a learning signal (rewards not all tied)."""
    table = []
    for arm in sorted({r["arm"] for r in curve_rows if any(k.startswith("groups_") for k in r)}):
        mine = [r for r in curve_rows if r["arm"] == arm]
        groups = {kind: _group_sum(mine, kind) for kind in FLAWS}
        ties = {kind: _group_sum(mine, kind, "all_tie") for kind in FLAWS}
        signal = sum(groups.values()) - sum(ties.values())
        for kind in (k for k in FLAWS if groups[k]):
            table.append(
                {
                    "arm": arm,
                    "kind": kind,
                    "groups": groups[kind],
                    "all_tie": ties[kind] / groups[kind],
                    "reward": _group_sum(mine, kind, "reward") / groups[kind],
                    "share_of_groups": groups[kind] / sum(groups.values()),
                    "share_of_signal": (groups[kind] - ties[kind]) / signal if signal else None,
                }
            )
    return table


def _group_sum(rows: Sequence[Mapping[str, Any]], kind: str, measure: str | None = None) -> float:
    """The rollout groups of ``kind`` over curve points, each weighted by its ``measure`` if one is given."""
    counted = [r for r in rows if f"groups_{kind}" in r]
    return sum(r[f"groups_{kind}"] * (r[f"{measure}_{kind}"] if measure else 1) for r in counted)


PANELS = {
    "qa": "closed-book QA accuracy (held-out)",
    "qa_logprob": "held-out answer log-likelihood (nats)",
    "cloze": "cloze accuracy (held-out)",
}
COUNTS = {
    "tokens": "training tokens after pretraining (forward passes)",
    "data_tokens": "data tokens after pretraining (examples drawn)",
}


def accuracy_figure(curve_rows: Sequence[Mapping[str, Any]], arms: Sequence[str], count: str) -> Any:
    """Each arm's held-out accuracy, answer log-likelihood and cloze accuracy (one line per seed) against
    its training tokens counted as ``count``."""
    figure, axes = plt.subplots(1, len(PANELS), figsize=(15, 3.5), sharex=True)
    colours = dict(zip(ARMS, ("tab:grey", "tab:blue", "tab:red", "tab:orange"), strict=True))
    seeds = list(dict.fromkeys(r["seed"] for r in curve_rows))
    for arm in arms:
        for seed in seeds:
            points = [p for p in curve_rows if p["arm"] == arm and p["seed"] == seed]
            for axis, key in zip(axes, PANELS, strict=True):
                axis.plot(
                    [p[count] for p in points],
                    [p.get(key) for p in points],
                    color=colours[arm],
                    alpha=0.7,
                    label=arm if seed == seeds[0] else None,
                )
    linthresh = 1e3 if count == "data_tokens" else 1e4
    top = max((p[count] for p in curve_rows if p["arm"] in arms), default=0)
    ticks = [0.0] + [10.0**k for k in range(int(math.log10(linthresh)), int(math.log10(max(top, 1))) + 1)]
    for axis, label in zip(axes, PANELS.values(), strict=True):
        axis.set_xscale("symlog", linthresh=linthresh)
        axis.set_xticks(ticks)  # no decade ticks crowding 0 inside the linear part
        axis.set_xlabel(COUNTS[count])
        axis.set_ylabel(label)
    axes[0].legend()
    figure.tight_layout()
    return figure
