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
    the bundle. Without a folder (a bare `pytest suites` run) it keeps nothing, and each process measures what it
    needs. Each file names what was measured (``key``: backend, driver, node and latency profiles); one whose key
    differs is never read, and the run's controller empties the folder when it starts (``clear``), so a report
    folder given to a second run cannot lend it the first run's figures."""

    def __init__(self, report_dir: Path | None, key: dict | None = None):
        self.folder = Path(report_dir) / MEASUREMENTS_DIR if report_dir is not None else None
        self.key = dict(key or {})

    def _path(self, machine: str) -> Path:
        assert self.folder is not None
        return self.folder / (re.sub(r"[^A-Za-z0-9_.-]", "_", machine) + ".json")

    def clear(self) -> None:
        if self.folder is not None and self.folder.is_dir():
            for path in self.folder.iterdir():
                path.unlink()

    def load(self, machine: str) -> dict | None:
        if self.folder is None:
            return None
        try:
            saved = json.loads(self._path(machine).read_text())
        except FileNotFoundError:
            return None
        if saved.get("key") != self.key or saved.get("machine") != machine:
            return None
        return saved["measurement"]

    def save(self, machine: str, data: dict) -> None:
        """Written whole or not at all (a rename), so another worker never reads half of it."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(machine)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps({"machine": machine, "key": self.key, "measurement": data}))
        partial.replace(path)


def run_key(settings) -> dict:
    """What a measurement depends on besides the machine: the run's backend, driver and profiles."""
    driver = settings.manifest.path if settings.manifest is not None else None
    return {"backend": settings.backend, "driver": str(driver), "node_profile": str(settings.node_profile),
            "latency_profile": str(settings.profile)}
