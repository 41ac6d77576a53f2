"""SparseD (Wang et al., ICLR 2026, arXiv 2509.24014): head-specific block-sparse attention for diffusion
LMs, selected once after the dense early steps and reused for every later step."""

from litlab.methods.sparsed.decoding import DecodeOutput, generate
from litlab.methods.sparsed.selection import select_pattern, tile_importance

__all__ = ["DecodeOutput", "generate", "select_pattern", "tile_importance"]
