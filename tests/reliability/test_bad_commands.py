"""Bad command lines against a finished run: each fails with one clear line, and nothing written is lost.

The table is the reliability probe's, extended: every entry is a real mistake (typo, wrong type, value
out of range, unknown option, unsafe run id, missing or broken file). For each we check the exit code,
that stderr has exactly one ``litlab:`` line and no traceback, the words that say what to do, and at the
end that every file under ``outputs/`` has the hash it had before.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.conftest import run_cli

FAST = [
    "trainer.max_epochs=4",
    "data.steps_per_epoch=1",
    "data.n_samples=200",
    "data.grid_resolution=10",
    "extras.print_config=false",
]
CONFIG, JOB = 2, 1  # exit codes: found before any work / found while building the run

# (command, exit code, words the one line must contain)
BAD_COMMANDS: list[tuple[list[str], int, str]] = [
    (["litlab-train", "trainer.max_epochs=abc"], CONFIG, "trainer.max_epochs='abc' must be a whole number"),
    (["litlab-train", "trainer.max_epochs=0"], CONFIG, "must be a whole number >= 1"),
    (["litlab-train", "trainer.max_epochs=-5"], CONFIG, "trainer.max_epochs=-5"),
    (["litlab-train", "trainer.max_epochs=1e3"], CONFIG, "must be a whole number"),
    (["litlab-train", "trainer.max_steps=0"], CONFIG, "trainer.max_steps=0"),
    (["litlab-train", "trainer.max_epochs=-1"], CONFIG, "runs forever without trainer.max_steps"),
    (["litlab-train", "trainer.check_val_every_n_epoch=0"], CONFIG, "check_val_every_n_epoch=0"),
    (["litlab-train", "trainer.log_every_n_steps=0"], CONFIG, "log_every_n_steps=0"),
    (["litlab-train", "trainer.accumulate_grad_batches=0"], CONFIG, "accumulate_grad_batches=0"),
    (["litlab-train", "trainer.gradient_clip_val=-1"], CONFIG, "gradient_clip_val=-1"),
    (["litlab-train", "trainer.limit_train_batches=-1"], CONFIG, "limit_train_batches=-1"),
    (["litlab-train", "trainer.limit_val_batches=1.5"], CONFIG, "a fraction is in [0, 1]"),
    (["litlab-train", "trainer.precision=16-mixed"], CONFIG, "needs a GPU; on a CPU use bf16-mixed"),
    (["litlab-train", "trainer.precision=fp8"], CONFIG, "trainer.precision='fp8' is unknown"),
    (["litlab-train", "trainer.devices=0"], CONFIG, "trainer.devices=0"),
    (["litlab-train", "trainer.num_nodes=0"], CONFIG, "trainer.num_nodes=0"),
    (["litlab-train", "trainer.max_epoch=3"], CONFIG, "Did you mean trainer.max_epochs"),
    (["litlab-train", "+trainer.max_epoch=3"], CONFIG, "did you mean max_epochs"),
    (["litlab-train", "model.net.widht=8"], CONFIG, "Did you mean model.net.width"),
    (["litlab-train", "+model.net.widht=8"], CONFIG, "did you mean width"),
    (["litlab-train", "model.net.width=8.5"], CONFIG, "model.net.width=8.5 does not fit"),
    (["litlab-train", "model.net.width=abc"], CONFIG, "expected int"),
    (["litlab-train", "model.net.grid_size=2.5"], CONFIG, "model.net.grid_size=2.5"),
    (["litlab-train", "model.optimizer.lr=abc"], CONFIG, "model.optimizer.lr='abc' does not fit"),
    (["litlab-train", "data.n_samples=abc"], CONFIG, "data.n_samples='abc'"),
    (["litlab-train", "data.n_samples=10.5"], CONFIG, "data.n_samples=10.5"),
    (["litlab-train", "seed=abc"], CONFIG, "seed='abc' must be a whole number"),
    (["litlab-train", "seed=1.5"], CONFIG, "seed=1.5"),
    (["litlab-train", "foo=1"], CONFIG, "foo is not a key of this config"),
    (["litlab-train", "experiment=kan/nope"], CONFIG, "unknown experiment 'kan/nope'. Available"),
    (["litlab-train", "experiment=nope"], CONFIG, "unknown experiment 'nope'"),
    (["litlab-train", "model=kan/nope"], CONFIG, "unknown model 'kan/nope'"),
    (["litlab-train", "data=nope"], CONFIG, "unknown data 'nope'"),
    (["litlab-train", "trainer=nope"], CONFIG, "unknown trainer 'nope'"),
    (["litlab-train", "logger=nope"], CONFIG, "unknown logger 'nope'"),
    (["litlab-train", "callbacks=nope"], CONFIG, "unknown callbacks 'nope'"),
    (["litlab-train", "debug=nope"], CONFIG, "unknown debug 'nope'"),
    (["litlab-train", "model/kan/init=nope"], CONFIG, "unknown model/kan/init 'nope'"),
    (["litlab-train", "hparams_search=nope"], CONFIG, "unknown hparams_search 'nope'"),
    (["litlab-train", "run_id="], CONFIG, "is not a valid run id"),
    (["litlab-train", "run_id=../escaped"], CONFIG, "is not a valid run id"),
    (["litlab-train", "run_id=../../../escaped"], CONFIG, "no '/', no '..'"),
    (["litlab-train", "run_id=a/b"], CONFIG, "is not a valid run id"),
    (["litlab-train", "run_id=.."], CONFIG, "is not a valid run id"),
    (["litlab-train", "run_id=keep"], CONFIG, "already holds a finished run"),
    (["litlab-train", *FAST, "run_id=keep"], CONFIG, "Continue it with the same command plus resume=auto"),
    (["litlab-train", "run_id=keep", "trainer.max_epochs=2"], CONFIG, "nothing was changed"),
    (["litlab-train", "resume=/nonexistent.ckpt"], CONFIG, "resume=/nonexistent.ckpt is neither 'auto'"),
    (["litlab-train", "resume={empty}"], CONFIG, "is empty; it is not a checkpoint"),
    (["litlab-train", "resume={text}"], CONFIG, "is not a readable checkpoint"),
    (["litlab-train", "resume={truncated}"], CONFIG, "is not a readable checkpoint"),
    (["litlab-train", "resume={foreign}"], CONFIG, "has no state_dict"),
    (
        ["litlab-train", "test_ckpt=/nonexistent.ckpt"],
        CONFIG,
        "test_ckpt=/nonexistent.ckpt must be best, last",
    ),
    (["litlab-train", "test_ckpt=worst"], CONFIG, "test_ckpt=worst must be best, last"),
    (["litlab-train", "resources.devices=0"], CONFIG, "resources.devices=0"),
    (["litlab-train", "resources.nodes=0"], CONFIG, "resources.nodes=0"),
    (["litlab-train", "resources.timeout_min=0"], CONFIG, "resources.timeout_min=0"),
    (["litlab-train", "resources.cpus_per_task=0"], CONFIG, "resources.cpus_per_task=0"),
    (["litlab-train", "optimized_metric=''"], CONFIG, "optimized_metric='' must be a metric name"),
    (
        ["litlab-train", "experiment=adaspec/texas", "data.root=/nonexistent"],
        CONFIG,
        "data.root=/nonexistent",
    ),
    (["litlab-train", "paths.log_dir={readonly}/outputs"], CONFIG, "cannot write to"),
    (["litlab-train", *FAST, "model.net.depth=-1"], JOB, "need depth >= 0"),
    (["litlab-train", *FAST, "data.function=f9"], JOB, "unknown function-fitting target 'f9'"),
    (["litlab-train", *FAST, "data.batch_size=0"], JOB, "batch_size must be positive"),
    (["litlab-train", *FAST, "callbacks.divergence_guard.check_every_n_steps=0"], JOB, "check_every_n_steps"),
    (["litlab-train", *FAST, "callbacks.last_checkpoint.every_n_minutes=-1"], JOB, "every_n_minutes must be"),
    (["litlab-eval", "ckpt_path=/nonexistent.ckpt"], CONFIG, "ckpt_path=/nonexistent.ckpt does not exist"),
    (["litlab-eval", "ckpt_path={text}"], CONFIG, "is not a readable checkpoint"),
    (["litlab-eval"], CONFIG, "ckpt_path"),
    (["litlab-eval", *FAST[1:], "ckpt_path={keep}", "model.net.width=16"], CONFIG, "does not fit this model"),
    (["litlab-run", "task=nope"], CONFIG, "unknown task 'nope'"),
    (["litlab-run", "task=kan/ntk", "task.width=abc"], CONFIG, "task.width='abc'"),
    (["litlab-run", "task=kan/ntk", "task.nonexistent=1"], CONFIG, "task.nonexistent is not a key"),
    (["litlab-run", "task=kan/ntk", "trainer.max_epochs=0"], CONFIG, "trainer.max_epochs=0"),
]


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A folder holding a finished run ``keep`` and broken checkpoint files."""
    root = tmp_path_factory.mktemp("reliability")
    result = run_cli(["litlab-train", *FAST, "run_id=keep"], root)
    assert result.returncode == 0, result.stderr[-2000:]
    keep = root / "outputs" / "kan" / "function_fit" / "keep" / "checkpoints" / "last.ckpt"
    files = {"keep": keep, "empty": root / "empty.ckpt", "text": root / "text.ckpt"}
    files["empty"].write_bytes(b"")
    files["text"].write_text("not a checkpoint\n")
    files["truncated"] = root / "truncated.ckpt"
    files["truncated"].write_bytes(keep.read_bytes()[: keep.stat().st_size // 2])
    files["foreign"] = root / "foreign.ckpt"
    torch.save({"weights": torch.ones(2)}, files["foreign"])
    files["readonly"] = root / "readonly"
    files["readonly"].mkdir()
    return {"root": root, **files}


def _readonly(folder: Path) -> None:
    """Make ``folder`` unwritable for real: a read-only tmpfs as root (root ignores modes), else chmod."""
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], check=True)
    else:
        folder.chmod(0o555)


def _run(command: list[str], workspace: dict[str, Path]) -> subprocess.CompletedProcess:
    args = [arg.format(**{k: str(v) for k, v in workspace.items()}) for arg in command]
    return run_cli(args, workspace["root"], timeout=300)


def test_at_least_sixty_bad_commands_are_tried() -> None:
    assert len(BAD_COMMANDS) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("part", range(3), ids=lambda part: f"part{part}")
def test_each_bad_command_fails_with_one_clear_line_and_changes_nothing(
    part: int, workspace: dict[str, Path]
) -> None:
    root = workspace["root"]
    commands = BAD_COMMANDS[part::3]  # three parts, so that no single test runs for minutes
    _readonly(workspace["readonly"])
    try:
        before = _hashes(root / "outputs")
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda entry: _run(entry[0], workspace), commands))
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(workspace["readonly"])], check=False)
    failures = []
    for (command, code, words), result in zip(commands, results, strict=True):
        lines = [line for line in result.stderr.splitlines() if line.startswith("litlab:")]
        problems = []
        if result.returncode != code:
            problems.append(f"exit {result.returncode}, expected {code}")
        if len(lines) != 1:
            problems.append(f"{len(lines)} litlab lines")
        if "Traceback" in result.stderr + result.stdout:
            problems.append("a traceback")
        if not lines or words not in lines[0]:
            problems.append(f"message lacks {words!r}")
        if problems:
            failures.append(f"{' '.join(command)}: {', '.join(problems)}; stderr: {result.stderr[-400:]}")
    assert not failures, "\n".join(failures)
    after = _hashes(root / "outputs")
    changed = [name for name in before if before[name] != after.get(name)]
    assert not changed, f"files changed by failing commands: {changed}"
    new = sorted(set(after) - set(before))
    assert all(Path(name).name in ("train.log", "eval.log", "run.log", ".litlab.lock") for name in new), (
        f"a failing command may leave only its log (the traceback) behind, found: {new}"
    )
