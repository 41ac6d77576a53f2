"""Expert driving demonstrations from highway-env and their DataModule (BridgeDrive and other planners).

An IDM+MOBIL driver with randomised politeness, desired speed and lane-change gain drives the ego in each
scene (``highway-fast-v0``, ``merge-v0``); every policy step logs the ego-frame observation
(``sim.observe``) and the ego's next ``horizon`` positions, ``stride`` steps apart, in its own frame.
Datasets are seeded, stored as ``.npz`` (``obs: (N, D)``, ``plan: (N, H, 2)``, ``episode: (N,)``) and
cached under ``$LITLAB_CACHE/driving``; batches are ``(obs, plan)`` float32 tensors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from litlab.core.cache import write_npz_atomic
from litlab.core.errors import LitlabError
from litlab.core.paths import cache_dir
from litlab.datamodules.base import GlobalBatchDataModule, TensorBatchDataset, batch_loader
from litlab.datamodules.driving_geometry import future_waypoints
from litlab.datamodules.driving_sim import SceneConfig, install_expert, make_env, observe, pose


def expert_episode(scene: SceneConfig, seed: int, horizon: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """One expert episode: ``obs: (n, D)`` and ``plan: (n, horizon, 2)`` for its first n steps that have a
    full future (a crash ends the log; its steps keep the future that was driven)."""
    env = make_env(scene)
    env.reset(seed=seed)
    expert = install_expert(env, np.random.default_rng(seed))
    observations, poses = [observe(expert, scene.n_vehicles)], [pose(expert)]
    for _ in range(scene.max_steps):
        _, _, terminated, truncated, _ = env.step(None)
        observations.append(observe(expert, scene.n_vehicles))
        poses.append(pose(expert))
        if terminated or truncated:
            break
    env.close()
    plan = future_waypoints(np.array(poses), horizon, stride)
    return np.array(observations[: len(plan)], dtype=np.float32), plan.astype(np.float32)


def collect_expert_dataset(
    scenes: Sequence[SceneConfig], episodes: int, seed: int, horizon: int, stride: int
) -> dict[str, np.ndarray]:
    """``episodes`` expert episodes per scene, episode i of scene s seeded ``seed + 1000·s + i``; arrays as
    in the module docstring."""
    obs, plan, episode = [], [], []
    for s, scene in enumerate(scenes):
        for i in range(episodes):
            o, p = expert_episode(scene, seed + 1000 * s + i, horizon, stride)
            obs.append(o)
            plan.append(p)
            episode.append(np.full(len(p), s * episodes + i))
    dims = {len(o[0]) for o in obs if len(o)}
    if len(dims) > 1:
        raise LitlabError("all scenes of one dataset must use the same n_vehicles")
    return {
        "obs": np.concatenate(obs),
        "plan": np.concatenate(plan),
        "episode": np.concatenate(episode).astype(np.int64),
    }


def dataset_key(scenes: Sequence[SceneConfig], episodes: int, seed: int, horizon: int, stride: int) -> str:
    """A short hash naming the cached dataset of these settings."""
    spec = {
        "scenes": [asdict(s) for s in scenes],
        "episodes": episodes,
        "seed": seed,
        "h": horizon,
        "s": stride,
    }
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def load_or_collect(
    scenes: Sequence[SceneConfig],
    episodes: int,
    seed: int,
    horizon: int,
    stride: int,
    path: str | Path | None = None,
) -> dict[str, np.ndarray]:
    """The dataset at ``path`` if given (it must exist), else the cached one, collected on first use."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise LitlabError(
                f"driving dataset {path} not found; write it with `litlab-run task=bridgedrive/data` or set "
                "data.path=null to collect one on the fly"
            )
    else:
        path = cache_dir("driving") / f"expert_{dataset_key(scenes, episodes, seed, horizon, stride)}.npz"
        if not path.is_file():
            data = collect_expert_dataset(scenes, episodes, seed, horizon, stride)
            write_npz_atomic(path, data)
    with np.load(path) as f:
        return {k: f[k] for k in ("obs", "plan", "episode")}


def split_by_episode(episode: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean train and val masks over samples; whole episodes go to one side (no leakage of futures)."""
    ids = np.unique(episode)
    n_val = max(1, int(round(len(ids) * val_fraction)))
    if n_val >= len(ids):
        raise LitlabError(f"val_fraction={val_fraction} leaves no training episode among {len(ids)}")
    val_ids = np.random.default_rng(seed).choice(ids, size=n_val, replace=False)
    val = np.isin(episode, val_ids)
    return ~val, val


class DrivingDataModule(GlobalBatchDataModule):
    """Expert (observation, future ego-frame waypoints) pairs, split by episode into train and val=test.

    Args:
        scenes: simulator settings (``SceneConfig`` fields), one dataset over all of them.
        episodes: expert episodes per scene.
        horizon, stride: waypoints per plan and policy steps between waypoints.
        path: an ``.npz`` written by the data task; None collects (or reuses the cached) dataset.
    """

    def __init__(
        self,
        scenes: Sequence[dict],
        episodes: int = 4,
        horizon: int = 8,
        stride: int = 2,
        val_fraction: float = 0.25,
        path: str | None = None,
        seed: int = 0,
        batch_size: int = 256,
        num_workers: int = 0,
    ) -> None:
        super().__init__(batch_size, num_workers)
        self.scenes = [SceneConfig(**dict(s)) for s in scenes]
        self.episodes, self.horizon, self.stride = episodes, horizon, stride
        self.val_fraction, self.path, self.seed = val_fraction, path, seed
        self.train_set: TensorBatchDataset | None = None
        self.val_set: TensorBatchDataset | None = None

    @property
    def dt(self) -> float:
        """Seconds between plan waypoints."""
        return self.stride * self.scenes[0].dt

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        data = load_or_collect(self.scenes, self.episodes, self.seed, self.horizon, self.stride, self.path)
        train, val = split_by_episode(data["episode"], self.val_fraction, self.seed)
        obs, plan = torch.from_numpy(data["obs"]), torch.from_numpy(data["plan"])
        self.train_set = TensorBatchDataset(obs[train], plan[train])
        self.val_set = TensorBatchDataset(obs[val], plan[val])

    @property
    def train_plans(self) -> torch.Tensor:
        """``(N, H, 2)`` training plans (for anchors and normalisation)."""
        self.setup()
        return self.train_set.tensors[1]

    @property
    def obs_dim(self) -> int:
        self.setup()
        return self.train_set.tensors[0].shape[1]

    def train_dataloader(self) -> DataLoader:
        """Seeded per-epoch shuffle (a resumed run draws the same batches), batches gathered in one op."""
        return batch_loader(self.train_set, self.per_device_batch_size, True, self.seed, self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return batch_loader(self.val_set, self.per_device_batch_size, False, self.seed, self.num_workers)

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()
