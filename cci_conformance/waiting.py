"""The one polling helper: wait for a condition with a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """A condition did not hold before its deadline; the message says what was awaited."""


def wait_for(condition: Callable[[], T], timeout: float, interval: float = 0.02, what: str = "condition") -> T:
    """Call ``condition`` until it returns a truthy value and return that value.

    Raises WaitTimeout naming ``what`` (and the last exception raised by the condition, if any)
    when ``timeout`` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # the condition may fail while the thing awaited is still starting
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}{detail}")
        time.sleep(interval)
