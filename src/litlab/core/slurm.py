"""SLURM job facts for the Trainer: is this a job, its id, the rendezvous address, requeueing it."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess

from lightning.fabric.plugins.environments import SLURMEnvironment

log = logging.getLogger("litlab")


def in_slurm_job() -> bool:
    """True inside a SLURM job step that Lightning treats as a cluster (srun/submitit set SLURM_NTASKS)."""
    return "SLURM_JOB_ID" in os.environ and SLURMEnvironment.detect()


def job_id() -> str | None:
    """``<array job>_<task>`` for an array task, else SLURM_JOB_ID (what ``scontrol requeue`` takes)."""
    array_job, array_task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and array_task:
        return f"{array_job}_{array_task}"
    return os.environ.get("SLURM_JOB_ID")


def restart_count() -> int:
    """How many times SLURM has requeued this job (0 on the first run or outside SLURM)."""
    return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)


def node_address(host: str) -> str:
    """An address for ``host`` that this machine can connect to.

    Lightning uses the first host name of SLURM_NODELIST as MASTER_ADDR. On clusters whose node names
    are not in DNS (emulated nodes, some cloud clusters) that name does not resolve, so fall back to
    the node's ``NodeAddr`` from ``scontrol show node``.
    """
    try:
        socket.getaddrinfo(host, None)
        return host
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["scontrol", "show", "node", host], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("cannot resolve %s and scontrol failed (%s); keeping the name", host, error)
        return host
    match = re.search(r"\bNodeAddr=(\S+)", out)
    return match.group(1) if match else host


def set_master_addr() -> str:
    """Set MASTER_ADDR (unless the user did) to a connectable address of the job's first node."""
    if "MASTER_ADDR" not in os.environ:
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST", "127.0.0.1")
        os.environ["MASTER_ADDR"] = node_address(SLURMEnvironment.resolve_root_node_address(nodelist))
    return os.environ["MASTER_ADDR"]


def cluster_environment() -> SLURMEnvironment | None:
    """Lightning's SLURMEnvironment with its auto-requeue off, or None outside a SLURM job.

    Lightning's requeue handler saves a checkpoint inside the signal handler, mid-step, and submitit's
    replaces it anyway; litlab's LastCheckpoint callback saves at a step boundary and requeues instead.
    """
    if not in_slurm_job():
        return None
    set_master_addr()
    return SLURMEnvironment(auto_requeue=False)


def describe_task() -> str:
    """One line naming this task's rank and node, logged by every rank so a job's layout can be checked."""
    env = os.environ
    return (
        f"slurm job {job_id()} rank {env.get('SLURM_PROCID')}/{env.get('SLURM_NTASKS')} "
        f"on node {env.get('SLURMD_NODENAME')} (node index {env.get('SLURM_NODEID')}), "
        f"MASTER_ADDR={env.get('MASTER_ADDR')}, restart {restart_count()}"
    )


def requeue() -> bool:
    """Put this job back in the queue (``scontrol requeue``); True if SLURM accepted it."""
    target = job_id()
    if target is None:
        return False
    try:
        subprocess.run(
            ["scontrol", "requeue", target], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("scontrol requeue %s failed: %s", target, error)
        return False
    log.info("requeued SLURM job %s", target)
    return True
