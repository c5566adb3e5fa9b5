"""Structured driver logging: one JSON object per line on stderr."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO


class StructuredLog:
    """Writes ``{"ts": ..., "level": ..., "event": ..., **fields}`` lines; safe from several threads."""

    def __init__(self, driver: str, stream: TextIO | None = None):
        self.driver = driver
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        record = {"ts": round(time.time(), 6), "level": level, "driver": self.driver, "event": event, **fields}
        line = json.dumps(record, default=str, separators=(",", ":"))
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def info(self, event: str, **fields: Any) -> None:
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit("error", event, fields)
