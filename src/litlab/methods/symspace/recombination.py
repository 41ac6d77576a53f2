"""Held-out reconstruction of CartanFM, the flow-matching-only ablation and the VAE on a recombination split.

The measurement behind the numbers in src/litlab/methods/symspace/README.md: every model is trained for the
same number of Adam steps on the observed combinations of the procedural sprites (seeded), then scored
on the held-out combinations and on in-distribution images (BCE and squared error per image, 10 Euler
steps for flow-matching decoders), with a factor classifier trained on the full grid.

Run:  python -m litlab.methods.symspace.recombination --tag ci          (the small `ci` grid)
      python -m litlab.methods.symspace.recombination --tag r2r_case0 --grid full --steps 1500 --lr 5e-4
Writes results/symspace/recombination/<tag>.json (under the working directory; ``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path

import torch

from litlab.core.machine import cpu_model
from litlab.fitting import Fitter
from litlab.methods.symspace.benchmark import run_case
from litlab.methods.symspace.module import VAE, CartanFM

GRIDS = {
    "ci": {"image_size": 16, "n_scales": 2, "n_orientations": 1, "n_positions": 8},
    "full": {"image_size": 16},
}
DECODERS = {
    "ours": {"normalize_condition": True, "condition_channels": 8},
    "paper": {"normalize_condition": False, "condition_channels": 0},
}
NO_STRUCTURE = {"cartan_weight": 0.0, "geodesic_weight": 0.0, "nontrivial_weight": 0.0, "gsc_weight": 0.0}


def models(
    lr: float, width: int, names: list[str], decoder: str = "ours", cartan_form: str = "projection"
) -> dict:
    """Module factories by name: vae, beta_vae, fm_only, cartanfm, cartanfm_code_sign, cartanfm_no_gsc.

    ``decoder="paper"`` conditions the U-Net through AdaGN only (no condition norm, no condition channels);
    ``cartan_form="orthogonality"`` is the official code's L_Cartan (the README's sprite numbers used it).
    """
    adam = partial(torch.optim.Adam, lr=lr)
    fm = partial(
        CartanFM,
        optimizer=adam,
        unet_width=width,
        sample_steps=10,
        cartan_form=cartan_form,
        **DECODERS[decoder],
    )
    every = {
        "vae": partial(VAE, optimizer=adam),
        "beta_vae": partial(VAE, optimizer=adam, beta=4.0),
        "fm_only": partial(fm, **NO_STRUCTURE),
        "cartanfm": fm,
        "cartanfm_code_sign": partial(fm, gsc_sign="code"),
        "cartanfm_no_gsc": partial(fm, gsc_weight=0.0),
    }
    return {name: every[name] for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="ci")
    parser.add_argument("--split", default="r2r")
    parser.add_argument("--case", type=int, default=0)
    parser.add_argument("--grid", choices=sorted(GRIDS), default="ci")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--models", default="vae,fm_only,cartanfm")
    parser.add_argument("--decoder", choices=sorted(DECODERS), default="ours")
    parser.add_argument("--cartan-form", choices=["projection", "orthogonality"], default="projection")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/symspace/recombination"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    frame, _, _, _ = run_case(
        Fitter(),
        models(args.lr, args.width, args.models.split(","), args.decoder, args.cartan_form),
        {"split": args.split, "case": args.case, "grid": GRIDS[args.grid], "batch_size": args.batch},
        [int(s) for s in args.seeds.split(",")],
        args.steps,
        classifier_epochs=20,
    )
    print(frame.round(3).T.to_string())
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "settings": {**vars(args), "out": str(args.out)},
        "grid": GRIDS[args.grid],
        "seconds": round(time.perf_counter() - start, 1),
        "machine": cpu_model(),
        "rows": json.loads(frame.to_json(orient="records")),
    }
    (args.out / f"{args.tag}.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
