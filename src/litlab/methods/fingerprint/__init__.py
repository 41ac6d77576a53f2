"""AWM (arXiv 2510.06738, ICLR 2026): training-free model-lineage fingerprinting from weight matrices.

A linear assignment over shared-token embedding columns undoes residual permutations, sign flips and width
pruning; the unbiased CKA of the aligned W_q / W_k Gram matrices, matched across layers, gives the score.
"""
