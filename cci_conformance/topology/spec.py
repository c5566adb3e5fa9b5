"""Load a topology spec (YAML), validate it against its JSON schema and semantics, and build its Topology."""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from ..errors import ConfigError
from .build import Builder
from .model import Topology

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "topology.schema.json"


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema())


def field_path(parts) -> str:
    """Render a jsonschema path as ``packages[0].nodes[1].cores``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _allowed_keys(error: jsonschema.ValidationError) -> list[str]:
    return sorted(error.schema.get("properties", {}))


def _explain(error: jsonschema.ValidationError) -> tuple[str, str, str]:
    """(field, problem, fix) for the most useful schema error."""
    where = field_path(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties":
        allowed = _allowed_keys(error)
        unknown = sorted(set(error.instance) - set(allowed))
        key = unknown[0] if unknown else "?"
        near = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean '{near[0]}'? " if near else ""
        target = f"{where}.{key}" if where != "(top level)" else key
        return target, f"unknown key '{key}'", f"{hint}allowed keys here: {', '.join(allowed)}"
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return where, f"missing required key '{missing}'", f"add '{missing}'"
    if kind == "enum":
        choices = ", ".join(json.dumps(c) for c in error.validator_value)
        return where, f"{error.instance!r} is not allowed", f"use one of {choices}"
    if kind == "pattern":
        return where, f"{error.instance!r} has the wrong format", _PATTERN_FIXES.get(
            error.validator_value, f"match {error.validator_value}")
    if kind in ("minimum", "maximum", "minItems"):
        return where, error.message, "use a value inside the allowed range"
    if kind == "oneOf":
        return where, f"{error.instance!r} is not a valid value here", _ONEOF_FIXES.get(
            error.absolute_path[-1] if error.absolute_path else "", "see docs/topology.md for this field")
    return where, error.message, "see docs/topology.md for this field"


_PATTERN_FIXES = {
    "^[a-z0-9][a-z0-9-]*$": "use lower-case letters, digits and dashes",
    "^0x[0-9a-f]{6}$": "write a PCI class as 0x020000, or nic/nvme/gpu/accelerator",
    "^[0-9]+ *([KMGT]i?B?)?$": "write a size such as 48K, 2M, 64G or a number of KiB",
    "^ *([0-9]+(-[0-9]+)?( *, *[0-9]+(-[0-9]+)?)*)? *$": "write a cpulist such as '0-3,8'",
    "^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\\.[0-7]$":
        "write a PCI address as domain:bus:device.function, e.g. 0000:3b:00.0",
}
_ONEOF_FIXES = {
    "cores": "write a core count (8) or a list of core groups ([{count: 8, threads: 2, type: p}])",
    "memory": "write a size such as 64G or a number of KiB",
    "size": "write a size such as 48K, 2M or 32M",
    "per": "use core, cluster, node, die, package or a number of cores",
    "class": "write nic, nvme, gpu, accelerator or a class code such as 0x020000",
}


def _best_error(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    # Prefer the deepest error (the one closest to what the user wrote), then unknown keys.
    return max(errors, key=lambda e: (len(e.absolute_path), e.validator == "additionalProperties"))


def parse_spec(data, file: str = "<spec>", default_name: str = "") -> Topology:
    """Validate a loaded spec (dict) and build its Topology; any problem is a ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError("the file does not hold a mapping", file=file, field="(top level)",
                          fix="write a YAML mapping with at least 'packages'")
    errors = list(_validator().iter_errors(data))
    if errors:
        best = _best_error(errors)
        if best.validator == "oneOf" and best.context:
            deeper = [e for e in best.context if e.validator not in ("type", "oneOf")]
            best = _best_error(deeper) if deeper else best
        where, problem, fix = _explain(best)
        key = best.absolute_path[-1] if best.absolute_path else ""
        if best.validator in ("enum", "type") and key in _ONEOF_FIXES:  # one branch of a oneOf: name them all
            fix = _ONEOF_FIXES[key]
        raise ConfigError(problem, file=file, field=where, fix=fix)
    if default_name and "name" not in data:
        data = {**data, "name": default_name}
    return Builder(data, file).build()


def load_spec(path) -> Topology:
    """Read a topology spec file and return its Topology (ConfigError naming file, field and fix)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path),
                          fix="give the path of a topology YAML") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(f"not valid YAML ({getattr(exc, 'problem', exc)})", file=str(path), field=where,
                          fix="fix the YAML syntax") from None
    return parse_spec(data, str(path), default_name=path.stem)
