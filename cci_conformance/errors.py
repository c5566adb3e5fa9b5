"""User-facing configuration errors: they name the file, the field and the fix, and map to exit code 2."""

from __future__ import annotations


class ConfigError(Exception):
    """Bad input from a user-written file (topology, manifest, profile, claim parameters).

    ``str()`` gives one line: ``<file>: <field>: <problem>; fix: <fix>``.
    """

    exit_code = 2

    def __init__(self, problem: str, *, file: str | None = None, field: str | None = None, fix: str | None = None):
        self.problem = problem
        self.file = file
        self.field = field
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        parts = [p for p in (self.file, self.field) if p]
        head = ": ".join(parts)
        text = f"{head}: {self.problem}" if head else self.problem
        if self.fix:
            text += f"; fix: {self.fix}"
        return text
