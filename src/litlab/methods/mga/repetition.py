"""The repetition study: at one training-token budget, a tiny LLaMA trained on (a) the original corpus
repeated ×k, (b) upsampling (the real text once, the fact documents repeated to fill the budget), (c) the
original corpus plus its MGA reformulations (rule backend, consistency-filtered), cycled to the budget, and
ablations of (c): the reformulations replaced by copies of the original (``mga_copies``) or kept unfiltered
from a noisy rewriter (``mga_unfiltered``).

The original corpus is procedural fact documents (``litlab.datamodules.text.make_entities``, base style)
plus a slice of tiny Shakespeare (real text). One genre (``held_out_genre``) is never trained on: its
rewrites are dropped from the MGA corpus, and it supplies the probe format and the new-style validation set.
Measured per arm: greedy answers to fact probes in formats never trained on (the held-out genre's frame, the
schema's natural question, a cloze) and in the original format, and validation loss (nats per token) on
unseen entities in the original style, in the held-out genre, and on held-out Shakespeare.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.stats import mean_and_sd
from litlab.datamodules.base import batch_loader
from litlab.datamodules.text import (
    _SCHEMAS,
    BlockDataset,
    TokenStream,
    encode_texts,
    make_entities,
    text_file,
)
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.lm import generate_text
from litlab.lm.module import LanguageModel, warmup_cosine
from litlab.methods.mga.grammar import ATTRIBUTES, rewrite
from litlab.methods.mga.pipeline import run_pipeline
from litlab.methods.mga.stages import RuleBackend
from litlab.methods.mga.tasks import fact_documents
from litlab.task import TaskContext

ARMS = ("repetition", "upsampling", "mga", "mga_copies", "mga_unfiltered")
PROBES = ("heldout_genre", "question", "cloze", "original")
UNSEEN_PROBES = ("heldout_genre", "question", "cloze")
VAL_SETS = ("original_style", "heldout_genre_style", "shakespeare")
# the held-out genre's frame for a fact, cut before the value ({label}, {name}, {kind} filled in)
HELD_OUT_FRAMES = {
    "quiz": "Q1: Name the {label} of {name}? Answer:",
    "dialogue": "Ana: Tell me the {label} of {name}? Ben: It is",
    "news": "NEWS: new details emerge about {name}.\nSources confirm the {label} is",
    "children's story": (
        "Once upon a time there was a {kind} called {name}.\nGuess what the {label} was? It was"
    ),
    "encyclopedia": "{name} ({kind})\n{Label}:",
}
_NO_FILTER = {"min_recall": 0.0, "max_overlap": 1.0, "reject_contradictions": False}


def shakespeare_documents(n_chars: int, from_end: bool = False) -> list[str]:
    """The speeches (blank-line separated) in the first (or last) ``n_chars`` characters of tiny Shakespeare
    (the first ones train, the last ones validate)."""
    text = text_file("tinyshakespeare").read_text()
    text = text[-n_chars:] if from_end else text[:n_chars]
    return [s.strip() for s in text.split("\n\n")[:-1] if s.strip()]


def _statement_prefix(entity: Any, key: str) -> str | None:
    """The original style's sentence for ``key`` cut before the value, when the value ends it."""
    template = _SCHEMAS[entity.kind][key][0]
    return (
        template.split("{value}")[0].format(name=entity.name).strip()
        if template.endswith("{value}.")
        else None
    )


def probes(entities: Sequence[Any], held_out_genre: str = "quiz") -> dict[str, list[tuple[str, str]]]:
    """``(prompt, answer)`` per fact and probe format. Never trained on: the held-out genre's frame
    (``HELD_OUT_FRAMES``, e.g. ``Q1: Name the <label> of <name>? Answer:``), the schema's natural question
    (``Question: ... Answer:``)
    and a cloze (``The <label> of <name> is``; its labels are the rewriter's, the phrase is in no grammar).
    Seen in training, for reference: the original style's sentence cut before its value."""
    out: dict[str, list[tuple[str, str]]] = {name: [] for name in PROBES}
    for entity in entities:
        questions = dict(zip((k for k, _ in entity.attributes), entity.questions(), strict=True))
        for key, value in entity.attributes:
            label = ATTRIBUTES[key][0][0]
            frame = HELD_OUT_FRAMES[held_out_genre].format(
                label=label, Label=label.capitalize(), name=entity.name, kind=entity.kind
            )
            out["heldout_genre"].append((frame, value))
            out["question"].append((f"Question: {questions[key][0]}\nAnswer:", value))
            out["cloze"].append((f"The {ATTRIBUTES[key][0][1]} of {entity.name} is", value))
            if (prefix := _statement_prefix(entity, key)) is not None:
                out["original"].append((prefix, value))
    return out


def answer_match(predictions: Sequence[str], answers: Sequence[str]) -> float:
    """Share of greedy continuations that begin with the answer (case-insensitive) and end it there."""
    hits = 0
    for prediction, answer in zip(predictions, answers, strict=True):
        text, answer = prediction.strip().lower(), answer.lower()
        hits += text.startswith(answer) and (len(text) == len(answer) or not text[len(answer)].isalnum())
    return hits / max(len(answers), 1)


def build_corpora(cfg: Mapping[str, Any], seed: int, folder: Path) -> dict[str, Any]:
    """The seed's texts: original fact documents, their filtered MGA rewrites (held-out genre dropped), an
    unfiltered noisy rewrite set, Shakespeare train/val, the new-style validation texts and the probes."""
    entities = make_entities(cfg["n_entities"] + cfg["n_val_entities"], seed)
    train, val = entities[: cfg["n_entities"]], entities[cfg["n_entities"] :]
    documents = fact_documents(cfg["n_entities"] + cfg["n_val_entities"], seed)[: cfg["n_entities"]]
    held_out = cfg["held_out_genre"]
    if held_out not in HELD_OUT_FRAMES:
        raise ConfigError(f"held_out_genre={held_out!r}; choose one of {list(HELD_OUT_FRAMES)}")

    def reformulate(noise: float, consistency: Mapping[str, Any], name: str) -> list[str]:
        backend = RuleBackend(n_pairs=cfg["n_pairs"], noise=noise, seed=seed)
        result = run_pipeline(
            documents,
            dict.fromkeys(("pairs", "rewrite"), backend),
            folder / name,
            cfg["n_pairs"],
            64,
            consistency,
        )
        return [r["text"] for r in result["corpus"] if r["genre"] != held_out]

    shakespeare = shakespeare_documents(cfg["shakespeare_chars"])
    return {
        "facts": [d["text"] for d in documents],
        "mga": reformulate(cfg["noise"], cfg["consistency"], "mga"),
        "mga_unfiltered": reformulate(cfg["noise"], _NO_FILTER, "mga_unfiltered"),
        "shakespeare": shakespeare,
        "val": {
            "original_style": [e.text for e in val],
            "heldout_genre_style": [
                rewrite(held_out, "general readers", e.name, e.kind, e.attributes, seed + i)
                for i, e in enumerate(val)
            ],
            "shakespeare": shakespeare_documents(cfg["shakespeare_val_chars"], from_end=True),
        },
        "probes": probes(train, held_out),
    }


def _docs(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> list[TokenStream]:
    """Each text's tokens followed by EOS, one stream per document."""
    stream = encode_texts(tokenizer, list(texts), tokenizer.eos_token_id)
    lengths = torch.bincount(stream.doc_ids, minlength=len(texts)).tolist()
    return [
        TokenStream(*parts)
        for parts in zip(
            *(t.split(lengths) for t in (stream.ids, stream.byte_counts, stream.doc_ids)), strict=True
        )
    ]


def _size(docs: Sequence[TokenStream]) -> int:
    return sum(len(d) for d in docs)


def _copies(docs: Sequence[TokenStream], tokens: int) -> list[TokenStream]:
    """Copies of ``docs`` taken in order (cycled) until they hold at least ``tokens`` tokens."""
    out: list[TokenStream] = []
    while _size(out) < tokens:
        out.append(docs[len(out) % len(docs)])
    return out


def arm_pool(arm: str, docs: Mapping[str, list[TokenStream]], budget: int) -> list[TokenStream]:
    """The documents one pass of ``arm`` draws from (the stream cycles them, reshuffled, up to ``budget``)."""
    facts, text = docs["facts"], docs["shakespeare"]
    if arm == "repetition":
        return facts + text
    if arm == "upsampling":
        return text + facts * max(1, round((budget - _size(text)) / _size(facts)))
    if arm == "mga":
        return facts + docs["mga"] + text
    if arm == "mga_copies":
        return facts + _copies(facts, _size(docs["mga"])) + text
    if arm == "mga_unfiltered":
        return facts + docs["mga_unfiltered"] + text
    raise ValueError(f"unknown arm {arm!r}; choose from {ARMS}")


def fill(pool: Sequence[TokenStream], budget: int, seed: int) -> TokenStream:
    """Passes over ``pool``, each in a fresh seeded order, concatenated and cut at ``budget`` tokens."""
    rng, order, total = random.Random(seed), [], 0
    while total < budget:
        permutation = rng.sample(range(len(pool)), len(pool))
        order += permutation
        total += _size(pool)
    return TokenStream.cat([pool[i] for i in order])[:budget]


def original_passes(pool: Sequence[TokenStream], facts: Sequence[TokenStream], budget: int) -> float:
    """How many times the budget shows each original fact document (copies in the pool count)."""
    originals = {id(d) for d in facts}
    return sum(len(d) for d in pool if id(d) in originals) / _size(pool) * budget / _size(facts)


@torch.no_grad()
def val_loss(module: LanguageModel, blocks: dict[str, torch.Tensor]) -> float:
    """Nats per predicted token of ``module`` over packed ``blocks``."""
    module.eval()
    terms = None
    for batch in batch_loader(BlockDataset(blocks), 64, False, 0, 0):
        step = module.eval_nll(batch, 0)
        terms = step if terms is None else terms + step
    return float(terms.nll) / max(int(terms.tokens), 1)


def train_arm(
    ctx: TaskContext,
    tokenizer: PreTrainedTokenizerBase,
    stream: TokenStream,
    arch: Mapping[str, int],
    cfg: Mapping[str, Any],
    seed: int,
) -> LanguageModel:
    """A tiny LLaMA trained for one pass over ``stream`` (its blocks shuffled), AdamW + warmup-cosine."""
    blocks = BlockDataset(stream.pack(cfg["block_size"]))
    steps = len(blocks) // cfg["batch_size"]
    module = LanguageModel(
        optimizer=partial(torch.optim.AdamW, lr=cfg["lr"], betas=(0.9, 0.95), weight_decay=0.1),
        scheduler=partial(warmup_cosine, warmup_steps=max(1, steps // 10), min_lr_ratio=0.1),
        total_steps=steps,
        arch={**arch, "max_position_embeddings": cfg["block_size"]},
    )
    torch.manual_seed(seed)  # the weights are drawn in bind_data, before the Fitter seeds the fit
    module.bind_data({"tokenizer": tokenizer, "block_size": cfg["block_size"]})
    ctx.fitter.fit(module, batch_loader(blocks, cfg["batch_size"], True, seed, 0), max_steps=steps, seed=seed)
    return module


def evaluate_arm(
    module: LanguageModel,
    tokenizer: PreTrainedTokenizerBase,
    corpora: Mapping[str, Any],
    val_blocks: Mapping[str, dict],
    cfg: Mapping[str, Any],
) -> dict[str, float]:
    """Probe accuracies (``probe/<format>``, ``probe/unseen`` their mean over unseen formats) and validation
    losses (``val/<set>``)."""
    module.eval()
    out = {}
    for name, items in corpora["probes"].items():
        prompts, answers = zip(*items, strict=True)
        predictions = generate_text(module.lm, tokenizer, list(prompts), cfg["probe_tokens"])
        out[f"probe/{name}"] = answer_match(predictions, answers)
    out["probe/unseen"] = sum(out[f"probe/{p}"] for p in UNSEEN_PROBES) / len(UNSEEN_PROBES)
    out |= {f"val/{name}": val_loss(module, blocks) for name, blocks in val_blocks.items()}
    return out


def one_seed(ctx: TaskContext, seed: int, cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{seed, arm, size, budget_tokens, original_fact_passes, probe/*, val/*}`` per arm × size."""
    corpora = build_corpora(cfg, seed, ctx.output_dir / f"seed{seed}")
    train_texts = corpora["facts"] + corpora["mga"] + corpora["shakespeare"]
    tokenizer = wrap_tokenizer(train_bpe(train_texts, cfg["vocab_size"]))
    docs = {
        name: _docs(tokenizer, corpora[name]) for name in ("facts", "mga", "mga_unfiltered", "shakespeare")
    }
    budget = cfg["repeats"] * (_size(docs["facts"]) + _size(docs["shakespeare"]))
    val_blocks = {
        name: encode_texts(tokenizer, texts, tokenizer.eos_token_id).pack(cfg["block_size"])
        for name, texts in corpora["val"].items()
    }
    streams = {arm: fill(arm_pool(arm, docs, budget), budget, seed) for arm in cfg["arms"]}
    passes = {arm: original_passes(arm_pool(arm, docs, budget), docs["facts"], budget) for arm in cfg["arms"]}
    fits = [(arm, size) for arm in cfg["arms"] for size in cfg["sizes"]]
    rows = []
    for arm, size in track(fits, f"mga repetition seed {seed}: arm x size"):
        module = train_arm(ctx, tokenizer, streams[arm], cfg["sizes"][size], cfg, seed)
        rows.append(
            {
                "seed": seed,
                "arm": arm,
                "size": size,
                "budget_tokens": len(streams[arm]),
                "original_fact_passes": round(passes[arm], 2),
                **evaluate_arm(module, tokenizer, corpora, val_blocks, cfg),
            }
        )
    return rows


def summarise(rows: Sequence[Mapping[str, Any]], arms: Sequence[str], sizes: Sequence[str]) -> list[dict]:
    """Mean and sample sd over seeds of every probe and validation loss, per arm × size."""
    keys = [f"probe/{p}" for p in (*PROBES, "unseen")] + [f"val/{v}" for v in VAL_SETS]
    out = []
    for size in sizes:
        for arm in arms:
            mine = [r for r in rows if r["arm"] == arm and r["size"] == size]
            entry: dict[str, Any] = {"size": size, "arm": arm, "seeds": len(mine)}
            for key in keys:
                entry[key], entry[f"{key}_sd"] = (round(x, 4) for x in mean_and_sd([r[key] for r in mine]))
            out.append(entry)
    return out


def gaps(rows: Sequence[Mapping[str, Any]], sizes: Sequence[str], baselines: Sequence[str]) -> list[dict]:
    """Per size and baseline: the paired (same seed) gap MGA − baseline in unseen-format probe accuracy, and
    in original-style validation loss (positive: MGA's loss is higher), mean ± sd over seeds."""
    out = []
    for size in sizes:
        for base in baselines:
            pairs = [
                (m, b)
                for m in rows
                for b in rows
                if m["size"] == b["size"] == size
                and m["seed"] == b["seed"]
                and m["arm"] == "mga"
                and b["arm"] == base
            ]
            if not pairs:
                continue
            probe = mean_and_sd([m["probe/unseen"] - b["probe/unseen"] for m, b in pairs])
            loss = mean_and_sd([m["val/original_style"] - b["val/original_style"] for m, b in pairs])
            out.append(
                {
                    "size": size,
                    "baseline": base,
                    "unseen_probe_gap": round(probe[0], 4),
                    "unseen_probe_gap_sd": round(probe[1], 4),
                    "original_val_loss_gap": round(loss[0], 4),
                    "original_val_loss_gap_sd": round(loss[1], 4),
                }
            )
    return out


def _figure(summary: Sequence[Mapping[str, Any]], arms: Sequence[str], sizes: Sequence[str]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("probe/unseen", "fact probes, unseen formats"),
        ("probe/original", "fact probes, original format"),
    )
    panels += (
        ("val/original_style", "val loss, original style"),
        ("val/heldout_genre_style", "val loss, held-out genre"),
    )
    figure, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for axis, (key, title) in zip(axes, panels, strict=True):
        for arm in arms:
            mine = [next(r for r in summary if r["arm"] == arm and r["size"] == s) for s in sizes]
            axis.errorbar(
                range(len(sizes)),
                [r[key] for r in mine],
                [r[f"{key}_sd"] for r in mine],
                label=arm,
                capsize=3,
                marker="o",
            )
        axis.set_xticks(range(len(sizes)), list(sizes))
        axis.set_xlabel("model width (2 layers)")
        axis.set_title(title)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    return figure


def repetition_study(ctx: TaskContext, *, seeds: Sequence[int], **cfg: Any) -> dict[str, Any]:
    """Every arm × size on every seed at one token budget; tables: per-seed rows, mean ± sd per arm × size,
    paired MGA gaps per size, and the paper's claims beside ours. One CPU thread unless
    ``extras.torch_threads`` says otherwise."""
    ctx.pin_threads(1)
    unknown = set(cfg["arms"]) - set(ARMS)
    if unknown:
        raise ConfigError(f"unknown arms {sorted(unknown)}; choose from {list(ARMS)}")
    rows = [
        row for seed in track(list(seeds), "mga repetition study seeds") for row in one_seed(ctx, seed, cfg)
    ]
    arms, sizes = list(cfg["arms"]), list(cfg["sizes"])
    summary = summarise(rows, arms, sizes)
    gap_rows = gaps(rows, sizes, [a for a in arms if a != "mga"])
    metrics = {
        f"{r['arm']}/{r['size']}/{k}": r[k] for r in summary for k in r if "/" in k and not k.endswith("_sd")
    }
    return {
        "metrics": metrics,
        "tables": {
            "summary": summary,
            "gaps": gap_rows,
            "per_seed": rows,
            "paper_vs_ours": paper_vs_ours(summary, gap_rows, sizes),
        },
        "figures": {"repetition_study": _figure(summary, arms, sizes)},
    }


def paper_vs_ours(
    summary: Sequence[Mapping[str, Any]], gap_rows: Sequence[Mapping[str, Any]], sizes: Sequence[str]
) -> list[dict]:
    """The abstract's claims (no numeric tables are available to us) beside what this run measured."""

    def gap(base: str) -> str:
        found = [g for g in gap_rows if g["baseline"] == base]
        return (
            "; ".join(
                f"{g['size']}: {g['unseen_probe_gap']:+.3f} ± {g['unseen_probe_gap_sd']:.3f}" for g in found
            )
            or "not run"
        )

    def loss_rank(size: str) -> str:
        mine = sorted((r for r in summary if r["size"] == size), key=lambda r: r["val/original_style"])
        return " < ".join(r["arm"] for r in mine)

    def probe_rank(size: str) -> str:
        mine = sorted((r for r in summary if r["size"] == size), key=lambda r: -r["probe/unseen"])
        return " > ".join(r["arm"] for r in mine)

    return [
        {
            "claim": "original + MGA beats repetition (fact probes, unseen formats)",
            "paper": "yes, up to 13B",
            "ours (MGA − baseline, mean ± sd over seeds)": gap("repetition"),
        },
        {
            "claim": "original + MGA beats upsampling",
            "paper": "yes",
            "ours (MGA − baseline, mean ± sd over seeds)": gap("upsampling"),
        },
        {
            "claim": "MGA's text, not its extra fact exposures (ablation: copies)",
            "paper": "—",
            "ours (MGA − baseline, mean ± sd over seeds)": gap("mga_copies"),
        },
        *(
            {
                "claim": f"ranking at {s}: original-style val loss vs unseen probes",
                "paper": "loss can mislead",
                "ours (MGA − baseline, mean ± sd over seeds)": (
                    f"loss: {loss_rank(s)} | probes: {probe_rank(s)}"
                ),
            }
            for s in sizes
        ),
    ]
