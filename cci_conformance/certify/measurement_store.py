"""A run's latency measurements kept in its report folder, so that each machine is measured once per run, not once
per worker process (LAT-004 measures the base and probe machines that other workers measure as their own)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .bundle import MEASUREMENTS_DIR


class MeasurementStore:
    """Measurements by machine name, as JSON-able dicts: the samples behind the report's latency figures, kept in
    the bundle. Without a folder (a bare `pytest suites` run) it keeps
    nothing, and each process measures what it needs, as before. Every worker of one run shares the driver, the
    node profile and the latency profile, so the machine's name is the whole key within a run's folder."""

    def __init__(self, report_dir: Path | None):
        self.folder = Path(report_dir) / MEASUREMENTS_DIR if report_dir is not None else None

    def _path(self, machine: str) -> Path:
        assert self.folder is not None
        return self.folder / (re.sub(r"[^A-Za-z0-9_.-]", "_", machine) + ".json")

    def load(self, machine: str) -> dict | None:
        if self.folder is None:
            return None
        try:
            return json.loads(self._path(machine).read_text())
        except FileNotFoundError:
            return None

    def save(self, machine: str, data: dict) -> None:
        """Written whole or not at all (a rename), so another worker never reads half of it."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(machine)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(data))
        partial.replace(path)
