"""Closed-loop driving: a planner replans at a fixed rate, pure pursuit tracks the plan, highway-env steps.

Several episodes run in lockstep so the planner is called once per step on the batch of live episodes.
Per episode: success (no crash, no off-road, route of ``route_length`` m done within the time limit),
collision, off-road, a driving-score analogue (route completion × 0.6 if it collided, Bench2Drive's vehicle
collision penalty), mean speed and mean absolute longitudinal jerk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from litlab.datamodules.driving_geometry import to_ego, to_world
from litlab.datamodules.driving_sim import SceneConfig, apply_action, is_off_road, make_env, observe, pose
from litlab.methods.bridgedrive.controller import PurePursuit
from litlab.methods.bridgedrive.planners import Planner

COLLISION_PENALTY = 0.6


@dataclass
class EpisodeLog:
    """What one closed-loop episode did; ``poses: (T, 4)`` world x, y, heading, speed."""

    poses: list[np.ndarray] = field(default_factory=list)
    plans: list[np.ndarray] = field(default_factory=list)  # world-frame plans (H, 2) at replans
    anchors: list[np.ndarray] = field(default_factory=list)  # world-frame chosen anchors (H, 2)
    crashed: bool = False
    off_road: bool = False
    done: bool = False

    def metrics(self, route_length: float, dt: float) -> dict[str, float]:
        """Per-episode scores (see module docstring)."""
        poses = np.array(self.poses)
        distance = float(np.linalg.norm(np.diff(poses[:, :2], axis=0), axis=1).sum())
        completion = min(1.0, distance / route_length)
        speed = poses[:, 3]
        jerk = np.abs(np.diff(speed, n=2)).mean() / dt**2 if len(speed) > 2 else 0.0
        return {
            "success": float(self.done and not self.crashed and not self.off_road),
            "collision": float(self.crashed),
            "off_road": float(self.off_road),
            "completion": completion,
            "driving_score": completion * (COLLISION_PENALTY if self.crashed else 1.0),
            "mean_speed": float(speed.mean()),
            "jerk": float(jerk),
        }


class HeldPlan:
    """A world-frame plan and when it was made; ``ego_view`` drops waypoints whose time has passed."""

    def __init__(self, plan_world: np.ndarray, step: int, waypoint_dt: float, policy_dt: float) -> None:
        self.plan_world, self.step = plan_world, step
        self.waypoint_dt, self.policy_dt = waypoint_dt, policy_dt

    def ego_view(self, ego_pose: np.ndarray, step: int) -> np.ndarray:
        """``(h, 2)`` the waypoints still ahead in time, in the current ego frame (at least the last one)."""
        elapsed = (step - self.step) * self.policy_dt
        times = self.waypoint_dt * np.arange(1, len(self.plan_world) + 1)
        keep = times > elapsed + 1e-9
        keep[-1] = True
        return to_ego(self.plan_world[keep], ego_pose)


@torch.no_grad()
def run_episodes(
    planner: Planner,
    scene: SceneConfig,
    seeds: list[int],
    denoise_steps: int,
    waypoint_dt: float,
    replan_every: int = 1,
    controller: PurePursuit | None = None,
    record_plans: bool = False,
) -> list[EpisodeLog]:
    """One closed-loop episode per seed in ``seeds`` (the scene's traffic seed), all in lockstep."""
    controller = controller or PurePursuit(dt=waypoint_dt)
    envs = [make_env(scene) for _ in seeds]
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    logs = [EpisodeLog(poses=[pose(env.vehicle)]) for env in envs]
    held: list[HeldPlan | None] = [None] * len(envs)
    live = list(range(len(envs)))
    generator = torch.Generator().manual_seed(seeds[0])
    for step in range(scene.max_steps):
        if step % replan_every == 0:
            obs = torch.from_numpy(np.stack([observe(envs[i].vehicle, scene.n_vehicles) for i in live]))
            plans = planner.plan(obs, denoise_steps, generator).cpu().numpy()
            chosen = planner.anchors[planner.classify(obs)].cpu().numpy() if planner.uses_anchors else None
            for j, i in enumerate(live):
                ego = logs[i].poses[-1]
                held[i] = HeldPlan(to_world(plans[j], ego), step, waypoint_dt, scene.dt)
                if record_plans:
                    logs[i].plans.append(held[i].plan_world)
                    if chosen is not None:
                        logs[i].anchors.append(to_world(chosen[j], ego))
        still_live = []
        for i in live:
            env, log = envs[i], logs[i]
            apply_action(env, controller.action(held[i].ego_view(log.poses[-1], step), env.vehicle.speed))
            _, _, terminated, truncated, _ = env.step(None)
            log.poses.append(pose(env.vehicle))
            log.crashed = bool(env.vehicle.crashed)
            log.off_road = is_off_road(env.vehicle)
            distance = np.linalg.norm(np.diff(np.array(log.poses)[:, :2], axis=0), axis=1).sum()
            log.done = distance >= scene.route_length
            if not (log.crashed or log.off_road or log.done or terminated or truncated):
                still_live.append(i)
        live = still_live
        if not live:
            break
    for env in envs:
        env.close()
    return logs


def summarize(values: np.ndarray) -> dict[str, float]:
    """Mean, 95% normal-approximation half-width and count of per-episode ``values``."""
    n = len(values)
    half = 1.96 * values.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
    return {"mean": float(values.mean()), "ci95": float(half), "n": n}
