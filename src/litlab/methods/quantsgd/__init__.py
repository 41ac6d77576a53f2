"""Learning under quantization (Zhang, Su & Zou, ICLR 2026): quantized SGD for linear regression."""
