"""The tiny-LM substrate shared by the language-model papers (see README.md): LLaMA models (causal and
masked diffusion) and any local HF checkpoint, one LightningModule, sampling with log-probs, step-wise
decoding, chat, block-sparse attention, evaluation, document scores and a layer-by-layer weight reader.

Every name below is importable from ``litlab.lm``; its module is imported on first use, so
``import litlab.lm`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "attention": ("BlockMask", "reference_block_attention", "use_block_attention"),
    "chat": ("DEFAULT_CHAT_TEMPLATE", "Conversation", "encode_chat", "render_chat"),
    "chat_models": ("ChatModel", "LocalChat", "OpenAIChat", "parse_json"),
    "checkpoints": ("CheckpointReader", "Layout"),
    "decoding": ("DecodeState", "beam_search"),
    "diffusion": ("diffusion_generate",),
    "documents": ("document_embeddings", "document_windows", "score_documents"),
    "evaluation": ("evaluate_batches", "evaluate_text", "exact_match", "multiple_choice", "text_windows"),
    "generation": (
        "Generation", "decode", "generate", "generate_text", "pad_sequences", "sample", "sample_text",
        "score_continuations", "token_logprobs",
    ),
    "grpo": (
        "Rollout", "all_tie_fraction", "group_advantages", "grpo_loss", "grpo_rollout", "policy_logprobs",
    ),
    "grpo_module": ("GRPOModule", "prompt_loader"),
    "losses": (
        "NLLTerms", "causal_nll_terms", "causal_token_nll", "diffusion_loss_terms", "diffusion_nll_terms",
        "diffusion_row_nll", "forward_process", "masked_diffusion_loss", "nll_terms",
    ),
    "models": (
        "LlamaForMaskedDiffusion", "build_lm", "is_masked_diffusion", "llama_config", "load_pretrained",
    ),
    "module": ("LanguageModel", "warmup_cosine"),
}  # fmt: skip
_WHERE = {name: module for module, names in _API.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'litlab.lm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"litlab.lm.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
