"""A Fitter fit on two CPU processes (DDP over gloo), run as a script by ``test_fitter_ddp.py``.

Usage: ``python fitter_ddp_fit.py <out.json> <max_steps> [<checkpoint>]``; every rank writes its history to
``<out.json>`` with its rank inserted before the suffix.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from litlab.fitting import Fitter

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: make ``tests`` importable
    from tests.test_fitting import Linear  # the Fitter tests' model: y = w·x + b by MSE

    out, max_steps = Path(sys.argv[1]), int(sys.argv[2])
    checkpoint = sys.argv[3] if len(sys.argv) > 3 else None
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    data = TensorDataset(x, x @ torch.tensor([[1.0], [-2.0], [0.5]]))
    fitter = Fitter(accelerator="cpu", devices=2, strategy="ddp")
    module = Linear()
    result = fitter.fit(
        module,
        DataLoader(data, batch_size=8, shuffle=True),
        DataLoader(data, batch_size=16),
        max_steps=max_steps,
        val_every_n_steps=4,
        monitor="val/loss",
        seed=1,
        checkpoint=checkpoint,
    )
    rank = fitter.fabric.global_rank
    weights = [p.detach().flatten().tolist() for p in module.parameters()]
    report = {"steps": result.steps, "history": result.history, "weights": weights}
    out.with_name(f"{out.stem}.rank{rank}{out.suffix}").write_text(json.dumps(report))
