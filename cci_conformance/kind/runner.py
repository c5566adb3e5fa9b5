"""Run build and cluster commands with a deadline, a log file, and an error that quotes the log's tail."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


class CommandFailed(RuntimeError):
    """A command exited non-zero or ran past its deadline; the message holds the command and its last output."""


def run(
    argv: Sequence[str | os.PathLike],
    *,
    timeout: float,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    nice: bool = False,
) -> str:
    """Run ``argv``; return its stdout (also appended to ``log`` when given, with stderr)."""
    argv = [str(a) for a in argv]
    if nice:
        # Builds share a small machine with other work: lowest CPU priority.
        argv = ["nice", "-n", "19", *argv]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    try:
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, timeout=timeout, env=full_env, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(f"{' '.join(argv)}: no result within {timeout:.0f} s") from exc
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    if log is not None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {' '.join(argv)}\n{out}{err}\n[exit {proc.returncode}]\n")
    if proc.returncode != 0:
        tail = "\n".join((out + err).strip().splitlines()[-25:])
        where = f" (log: {log})" if log else ""
        raise CommandFailed(f"{' '.join(argv)} exited {proc.returncode}{where}:\n{tail}")
    return out


def say(message: str) -> None:
    """Progress for long builds, on stderr so stdout stays machine-readable."""
    print(f"[kind] {message}", file=sys.stderr, flush=True)
