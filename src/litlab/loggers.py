"""Loggers that respect a run folder across resumes."""

from __future__ import annotations

import csv

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
    """CSV metrics that survive ``resume=auto``: both legs of a resumed run land in one metrics.csv."""

    @property
    @rank_zero_experiment
    def experiment(self) -> _FabricWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment
