"""Load and validate the requirement catalog (suites/requirements.yaml) that every report is keyed by."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from ..errors import ConfigError
from ..paths import REPORTS_DIR, SUITES_DIR
from ..protocol.capabilities import KNOWN_CAPABILITIES

CATALOG_PATH = SUITES_DIR / "requirements.yaml"
SCHEMA_PATH = REPORTS_DIR / "schemas" / "requirements.schema.json"
# Requirement kinds (docs/spec.md §4.3): a driver obligation, or a check of the harness's own node that
# no driver can fail; such a precondition must pass for the run to say anything, but is not the driver's pass.
DRIVER, NODE_PRECONDITION = "driver", "node-precondition"


@dataclass(frozen=True)
class Requirement:
    """One certifiable obligation; ``tests`` are ids relative to the suites folder, without parameters."""

    id: str
    area: str
    text: str
    source: str
    capability: str | None
    required: bool
    tests: tuple[str, ...]
    notes: str = ""
    modes: tuple[str, ...] = ()  # node modes it applies in; () = every mode
    kind: str = DRIVER  # or NODE_PRECONDITION

    @property
    def is_precondition(self) -> bool:
        return self.kind == NODE_PRECONDITION

    def applies_in(self, node_mode: str | None) -> bool:
        """False only when the catalog scopes it to other modes than a known ``node_mode``."""
        return not self.modes or node_mode is None or node_mode in self.modes


@dataclass(frozen=True)
class Catalog:
    """All requirements in file order, with the areas in report order."""

    path: Path
    areas: dict[str, str]
    requirements: tuple[Requirement, ...]

    def __contains__(self, req_id: str) -> bool:
        return any(r.id == req_id for r in self.requirements)

    def get(self, req_id: str) -> Requirement:
        for req in self.requirements:
            if req.id == req_id:
                return req
        raise KeyError(req_id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.requirements)

    def requirements_for_test(self, test_id: str) -> list[str]:
        """Catalog ids whose ``tests`` list names this test (``test_id`` as :func:`base_test_id` gives it)."""
        return [r.id for r in self.requirements if any(_same_test(listed, test_id) for listed in r.tests)]


def base_test_id(nodeid: str) -> str:
    """A node id without its parameters: ``suites/t.py::test_x[laptop]`` -> ``suites/t.py::test_x``."""
    head, sep, _ = nodeid.partition("[")
    return head if sep else nodeid


def _same_test(listed: str, test_id: str) -> bool:
    # Node ids are relative to pytest's rootdir, which may be the project or the suites folder.
    return test_id == listed or test_id.endswith("/" + listed)


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def _schema_error(err: jsonschema.ValidationError, file: str, data: object) -> ConfigError:
    parts = list(err.absolute_path)
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".") or "(top level)"
    if len(parts) >= 2 and parts[0] == "requirements" and isinstance(parts[1], int):
        item = data["requirements"][parts[1]]  # type: ignore[index]
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            where = f"requirements[{item['id']}]" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                                            for p in parts[2:])
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        return ConfigError(f"unknown key {extra[0]!r}", file=file, field=where,
                           fix="allowed keys: " + ", ".join(sorted(err.schema.get("properties", {}))))
    fixes = {
        "pattern": "see the pattern in the catalog schema (ids like CLAIM-001, text with MUST, "
                   "source starting 'KEP-3675 ', 'seed meeting', 'kubelet ' or 'docs/spec.md#')",
        "required": "add the missing key",
    }
    return ConfigError(err.message, file=file, field=where,
                       fix=fixes.get(err.validator, "see reports/schemas/requirements.schema.json"))


def parse_catalog(data: object, path: Path) -> Catalog:
    """Validate already-parsed catalog data; every problem is a ConfigError naming the field."""
    file = str(path)
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise _schema_error(errors[0], file, data)
    areas = dict(data["areas"])  # type: ignore[index]
    seen: set[str] = set()
    reqs = []
    for raw in data["requirements"]:  # type: ignore[index]
        rid = raw["id"]
        where = f"requirements[{rid}]"
        if rid in seen:
            raise ConfigError(f"duplicate id {rid!r}", file=file, field=where + ".id",
                              fix="ids are unique and stable; give the new requirement the next free number")
        seen.add(rid)
        if raw["area"] not in areas:
            raise ConfigError(f"unknown area {raw['area']!r}", file=file, field=where + ".area",
                              fix="use one of: " + ", ".join(areas))
        cap = raw["capability"]
        if cap is not None and cap not in KNOWN_CAPABILITIES:
            raise ConfigError(f"unknown capability {cap!r}", file=file, field=where + ".capability",
                              fix="use null or one of: " + ", ".join(KNOWN_CAPABILITIES))
        reqs.append(Requirement(id=rid, area=raw["area"], text=raw["text"], source=raw["source"],
                                capability=cap, required=raw["required"], tests=tuple(raw["tests"]),
                                notes=raw.get("notes", ""), modes=tuple(raw.get("modes", ())),
                                kind=raw.get("kind", DRIVER)))
    return Catalog(path=path, areas=areas, requirements=tuple(reqs))


def load_catalog(path: Path | str | None = None) -> Catalog:
    """Load the catalog (default: suites/requirements.yaml); bad input raises ConfigError."""
    path = Path(path) if path else CATALOG_PATH
    if not path.is_file():
        raise ConfigError("requirement catalog not found", file=str(path),
                          fix="pass --cci-catalog FILE or restore suites/requirements.yaml")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                          field=f"line {mark.line + 1}" if mark else None, fix="correct the YAML syntax") from None
    return parse_catalog(data, path)
