"""The tiny-LM substrate shared by the language-model papers: byte-level BPE tokenizers, LLaMA models
(causal and masked diffusion), one LightningModule, generation and an evaluation harness. See README.md."""
