"""Loggers that respect a run folder across resumes."""

from __future__ import annotations

import csv
from pathlib import Path

from lightning.fabric.loggers.csv_logs import _ExperimentWriter as _FabricWriter
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter


class _AppendingWriter(ExperimentWriter):
    """Lightning's CSV writer deletes an existing metrics.csv; this one keeps it and appends."""

    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as handle:
                header = next(csv.reader(handle), [])
            self.metrics_keys = sorted(header)


class ResumableCSVLogger(CSVLogger):
    """CSV metrics that survive ``resume=auto``: both legs of a resumed run land in one metrics.csv.

    Rows an interrupted leg logged after the checkpoint it is resumed from are dropped when the next leg
    starts (``forget_after``), so every step appears once, as in an uninterrupted run.
    """

    def forget_after(self, step: int) -> int:
        """Drop rows logged once ``step`` optimizer steps were done (the resumed leg logs them again).

        Lightning stamps a row with the number of steps done when it is logged; a checkpoint taken after
        ``step`` steps precedes every row stamped ``step`` (epoch-end rows carry the epoch's last step).
        Returns how many rows were dropped.
        """
        path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
        if not path.is_file():
            return 0
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            fields, rows = reader.fieldnames or [], list(reader)
        kept = [row for row in rows if not row.get("step") or int(float(row["step"])) < step]
        if len(kept) == len(rows):
            return 0
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(kept)
        tmp.replace(path)
        return len(rows) - len(kept)

    @property
    @rank_zero_experiment
    def experiment(self) -> _FabricWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment
