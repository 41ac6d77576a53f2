"""A local Hugging Face causal LM as the scorer: a tiny random GPT-2 and a BPE trained here, saved with
``save_pretrained``. The re-encoded rows hold the same text; the batched reward equals the model's own
log-likelihoods; per-step judging is greedy on it; the study task runs end to end; bad folders fail
with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

from litlab.core.errors import LitlabError
from litlab.datamodules.prontoqa import ProblemConfig, decode, generate_problems
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.lm.models import build_lm, llama_config
from litlab.methods.veracity.baselines import per_step_judge
from litlab.methods.veracity.hf_scorer import Reencoder, load_scorer
from litlab.methods.veracity.scoring import assignment_scores
from litlab.methods.veracity.search import all_assignments
from litlab.run import run_task


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised GPT-2 with a byte-level BPE trained on problem text and the tag words."""
    texts = [decode(row) for row in generate_problems(200, ProblemConfig(depth_max=6), seed=9)["tokens"]]
    tokenizer = wrap_tokenizer(train_bpe(texts + [" yes no unknown"] * 50, vocab_size=420))
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=512)
    folder = tmp_path_factory.mktemp("gpt2")
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def scorer(hf_folder: Path) -> tuple[torch.nn.Module, Reencoder]:
    model, tokenizer = load_scorer(hf_folder)
    return model, Reencoder(tokenizer)


@pytest.fixture(scope="module")
def encoded(scorer, chains) -> dict[str, torch.Tensor]:
    return scorer[1](chains)


def test_reencoded_rows_hold_the_same_text(hf_folder: Path, encoded, chains) -> None:
    _, tokenizer = load_scorer(hf_folder)
    yes, no = tokenizer.convert_tokens_to_ids(["Ġyes", "Ġno"])
    for i in range(len(chains["tokens"])):
        n = int(chains["n_steps"][i])
        row = encoded["tokens"][i, : int(encoded["answer_pos"][i]) + 1]
        gold = torch.where(chains["labels"][i, :n] == 1, yes, no)
        assert torch.equal(row[encoded["slots"][i, :n]], gold)
        words = decode(chains["tokens"][i, 1 : int(chains["answer_pos"][i]) + 1])
        words = words.replace("<T>", "yes").replace("<F>", "no")
        assert tokenizer.decode(row[1:]) == " " + words
        assert (
            tokenizer.encode(" " + words, add_special_tokens=False) == row[1:].tolist()
        )  # word by word = whole
        answer = tokenizer.decode(row[int(encoded["answer_start"][i]) :])
        assert answer == (" answer true" if chains["answer"][i] else " answer false")


def test_scores_equal_the_models_own_loglikelihoods(scorer, encoded, chains) -> None:
    model = scorer[0]
    width = chains["slots"].shape[1]
    candidates = all_assignments(width, width)[None].expand(len(chains["tokens"]), -1, -1)
    scores = assignment_scores(model, encoded, candidates, chunk=13)
    without = assignment_scores(model, encoded, candidates, answer_term=False)
    yes, no = encoded["tag_ids"][0, :2].tolist()
    for i in range(len(chains["tokens"])):
        n = int(chains["n_steps"][i])
        slots = encoded["slots"][i, :n]
        start, end = int(encoded["answer_start"][i]), int(encoded["answer_pos"][i])
        for k in (0, 3, 2**width - 1):
            x = encoded["tokens"][i, : end + 1].clone()
            x[slots] = torch.where(candidates[i, k, :n], yes, no)
            with torch.no_grad():
                logp = model(input_ids=x[None]).logits[0].double().log_softmax(-1)
            picked = logp[torch.arange(end), x[1:]]  # log p(x_t | x_<t) at t = 1 .. end
            tags = picked[slots - 1].sum().item()
            answer = picked[start - 1 : end].sum().item()
            assert abs(without[i, k].item() - tags) < 1e-5
            assert abs(scores[i, k].item() - tags - answer) < 1e-5


def test_per_step_judge_on_the_hf_model_is_greedy(scorer, encoded, chains) -> None:
    model = scorer[0]
    judged = per_step_judge(model, encoded)
    yes, no = encoded["tag_ids"][0, :2].tolist()
    for i in range(len(judged)):
        x = encoded["tokens"][i].clone()
        for k in range(int(chains["n_steps"][i])):
            s = int(encoded["slots"][i, k])
            with torch.no_grad():
                logits = model(input_ids=x[None, :s]).logits[0, -1]
            assert bool(judged[i, k]) == bool(logits[yes] >= logits[no])
            x[s] = yes if judged[i, k] else no


def test_study_runs_end_to_end_on_the_hf_model(hf_folder: Path, compose_config) -> None:
    overrides = ["task=veracity/study", f"task.scorer_path={hf_folder}", "task.seeds=[3]"]
    overrides += ["task.eval_size=12", "task.avi_train_size=16", "task.avi_steps=2", "extras.torch_threads=1"]
    cfg = compose_config("run", overrides)
    run_task(cfg)
    results = json.loads(next(Path(cfg.paths.output_dir).rglob("results.json")).read_text())
    assert 0.0 <= results["metrics"]["in-distribution/VS/localisation"] <= 1.0


def test_bad_scorer_folders_and_tags_fail_with_one_line(tmp_path: Path, hf_folder: Path) -> None:
    with pytest.raises(LitlabError, match="no config.json"):
        load_scorer(tmp_path / "missing")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-model"}')
    with pytest.raises(LitlabError, match="not a loadable causal LM"):
        load_scorer(broken)
    _, tokenizer = load_scorer(hf_folder)
    small = {"vocab_size": len(tokenizer), "hidden_size": 16, "num_layers": 1, "num_heads": 2}
    diffusion = tmp_path / "diffusion"
    config = llama_config(**small, mask_token_id=tokenizer.mask_token_id)
    build_lm(config, "masked_diffusion").save_pretrained(diffusion)
    tokenizer.save_pretrained(diffusion)
    with pytest.raises(LitlabError, match="needs a causal LM"):
        load_scorer(diffusion)
    bert = tmp_path / "bert"  # transformers loads it as BertLMHeadModel: caught by the look-ahead probe
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    config = BertConfig(vocab_size=len(tokenizer), **sizes)
    BertForMaskedLM(config).save_pretrained(bert)
    tokenizer.save_pretrained(bert)
    with pytest.raises(LitlabError, match="not causal"):
        load_scorer(bert)
    with pytest.raises(LitlabError, match="one token each"):
        Reencoder(tokenizer, (" yes", " no", " definitely uncertain"))
