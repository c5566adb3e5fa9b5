"""Load and validate a driver manifest (driver.yaml): strict schema, known capabilities, known placeholders."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from ..errors import ConfigError
from ..protocol.capabilities import KNOWN_CAPABILITIES, unknown_capabilities
from . import gomod

SCHEMA_PATH = Path(__file__).parent / "schema" / "driver.schema.json"
MANIFEST_FILE = "driver.yaml"
DEFAULT_STARTUP_TIMEOUT_S = 10.0
DEFAULT_BUILD_TIMEOUT_S = 300.0
# DESIGN §2.4's five placeholders plus {python}: the harness's interpreter, so an SDK driver
# runs in the harness's environment (docs/architecture.md "Driver manifest"), and {proc_root}:
# the rendered machine's proc dir beside {sysfs_root} (DESIGN §2.4a), holding its cpuinfo.
PLACEHOLDERS = ("registry_dir", "plugin_dir", "sysfs_root", "proc_root", "state_dir", "driver_name", "python")
# local.build runs before any session exists, so only the values known then (docs/spec.md S1.10).
BUILD_PLACEHOLDERS = ("python", "driver_name")
DRA_PROTOCOL = "dra/v1"
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


@cache
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@dataclass(frozen=True)
class DriverManifest:
    """A validated driver.yaml; ``folder`` is the working directory the driver is started in."""

    name: str
    protocol: str
    capabilities: frozenset[str]
    command: tuple[str, ...]
    path: Path
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    description: str = ""
    kind_image: str = ""  # an image archive, relative to the manifest's folder (docs/kind.md)
    kind_command: tuple[str, ...] = ()  # the argv inside that image, with local.command's placeholders
    kind_source: Path | None = None  # a Go module the harness builds the image from (instead of kind_image)
    kind_main: str = "."  # the main package inside kind_source (go build's path)
    kind_manifests: tuple[str, ...] = ()
    version: str | None = None
    build: tuple[str, ...] = ()
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S
    dra_module: str = ""  # protocol dra/v1: the Go module its image is built from
    dra_driver: str = ""  # protocol dra/v1: its DRA driver name (dra.device_class)
    dra_source: Path | None = None  # protocol dra/v1: a local Go source tree built instead of the module's copy
    dra_args: tuple[str, ...] = ()  # protocol dra/v1: extra flags of its program
    dra_main: str = "."  # protocol dra/v1: the main package inside dra_source (go build's path)
    dra_image: Path | None = None  # protocol dra/v1: a prebuilt image archive, loaded as is (no build)
    dra_program: str = ""  # protocol dra/v1: the executable inside dra_image

    @property
    def is_dra(self) -> bool:
        """A DRA kubelet plugin: deployed on kind by the DRA suites, never started as a local process."""
        return self.protocol == DRA_PROTOCOL

    @property
    def folder(self) -> Path:
        return self.path.parent

    def has(self, capability: str) -> bool:
        if capability not in KNOWN_CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; known: {', '.join(KNOWN_CAPABILITIES)}")
        return capability in self.capabilities

    def values(self, *, registry_dir: Path | str, plugin_dir: Path | str, sysfs_root: Path | str,
               state_dir: Path | str, driver_name: str | None = None) -> dict[str, str]:
        """The placeholder values for one start of the driver."""
        return {
            "registry_dir": str(registry_dir), "plugin_dir": str(plugin_dir), "sysfs_root": str(sysfs_root),
            "proc_root": str(Path(sysfs_root).parent / "proc"),  # DIR/sys beside DIR/proc (DESIGN §2.4a)
            "state_dir": str(state_dir), "driver_name": driver_name or self.name, "python": sys.executable,
        }

    def build_argv(self) -> list[str]:
        """``local.build`` with its placeholders filled in; empty when the manifest has none."""
        values = {"python": sys.executable, "driver_name": self.name}
        return [substitute(arg, values) for arg in self.build]

    def argv(self, **kwargs) -> list[str]:
        """``local.command`` with its placeholders filled in (keyword arguments as for :meth:`values`)."""
        if self.is_dra:
            raise ConfigError(f"driver {self.name!r} speaks {DRA_PROTOCOL}: it has no local command",
                              file=str(self.path), field="protocol", fix="certify it with the DRA suites on kind: "
                              f"cci-conformance run --driver {self.folder}")
        values = self.values(**kwargs)
        return [substitute(arg, values) for arg in self.command]

    def environment(self, **kwargs) -> dict[str, str]:
        """``env`` with its placeholders filled in."""
        values = self.values(**kwargs)
        return {k: substitute(v, values) for k, v in self.env.items()}


def substitute(text: str, values: dict[str, str]) -> str:
    """Replace each ``{name}`` by its value; names were validated when the manifest was loaded."""
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], text)


def _check_placeholders(text: str, file: str, field_name: str, allowed: tuple[str, ...] = PLACEHOLDERS) -> None:
    for match in _PLACEHOLDER_RE.finditer(text):
        if match.group(1) not in allowed:
            known = "unknown" if match.group(1) not in PLACEHOLDERS else "not available here:"
            raise ConfigError(f"{known} placeholder {match.group(0)!r}", file=file, field=field_name,
                              fix="use one of " + " ".join("{" + p + "}" for p in allowed))
    stray = _PLACEHOLDER_RE.sub("", text)
    if "{" in stray or "}" in stray:
        raise ConfigError(f"unbalanced brace in {text!r}", file=file, field=field_name,
                          fix="placeholders are written {name}; braces cannot be escaped")


def _schema_error(err: jsonschema.ValidationError, file: str) -> ConfigError:
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    if err.validator == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        key = f"{where}.{extra[0]}" if extra and where != "(top level)" else (extra[0] if extra else where)
        return ConfigError(f"unknown key {extra[0] if extra else '?'!r}", file=file, field=key,
                           fix="allowed keys here: " + ", ".join(allowed))
    if err.validator == "not":  # the schema's one `not`: a dra/v1 manifest with a local section
        return ConfigError("a dra/v1 driver has no local section", file=file, field="local",
                           fix="remove local: the harness deploys a DRA driver on kind from its image")
    if err.validator == "required":
        return ConfigError(err.message, file=file, field=where, fix="add the missing key (see docs/spec.md S1.10)")
    return ConfigError(err.message, file=file, field=where, fix="see the driver manifest schema (docs/spec.md S1.10)")


def parse_manifest(data: object, path: Path) -> DriverManifest:
    """Validate already-parsed manifest data read from ``path``."""
    file = str(path)
    if not isinstance(data, dict):
        raise ConfigError("a driver manifest must be a mapping", file=file, fix="start with `name: my-driver`")
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(data),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        raise _schema_error(errors[0], file)
    caps = list(data["capabilities"])
    unknown = unknown_capabilities(caps)
    if unknown:
        raise ConfigError(f"unknown capability {unknown[0]!r}", file=file, field="capabilities",
                          fix="known capabilities: " + ", ".join(KNOWN_CAPABILITIES))
    local = data.get("local", {})  # absent only for dra/v1 (the schema requires it for cci/v1alpha1)
    for i, arg in enumerate(local.get("command", ())):
        _check_placeholders(arg, file, f"local.command[{i}]")
    for i, arg in enumerate(local.get("build", ())):
        _check_placeholders(arg, file, f"local.build[{i}]", BUILD_PLACEHOLDERS)
    env = dict(data.get("env", {}))
    for key, value in env.items():
        _check_placeholders(value, file, f"env.{key}")
    kind = data.get("kind", {})
    for i, arg in enumerate(kind.get("command", ())):
        _check_placeholders(arg, file, f"kind.command[{i}]")
    kind_source = _kind_source(kind, path, file)
    return DriverManifest(
        name=data["name"], protocol=data["protocol"], capabilities=frozenset(caps),
        command=tuple(local.get("command", ())), path=path.resolve(), env=env,
        startup_timeout_s=float(data.get("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S)),
        description=data.get("description", ""), kind_image=kind.get("image", ""),
        kind_command=tuple(kind.get("command", ())), kind_source=kind_source, kind_main=kind.get("main", "."),
        kind_manifests=tuple(kind.get("manifests", ())), version=data.get("version"),
        build=tuple(local.get("build", ())),
        build_timeout_s=float(local.get("build_timeout_s", DEFAULT_BUILD_TIMEOUT_S)),
        dra_module=data.get("dra", {}).get("module", ""),
        dra_driver=data.get("dra", {}).get("device_class", ""),
        dra_source=_source_tree(data.get("dra", {}).get("source"), path, file),
        dra_args=tuple(data.get("dra", {}).get("args", ())),
        dra_main=_main_package(data.get("dra", {}), file),
        dra_image=_dra_image(data.get("dra"), path, file), dra_program=data.get("dra", {}).get("program", ""),
    )


def _dra_image(dra: dict | None, manifest: Path, file: str) -> Path | None:
    """dra.image: the vendor's own image archive; exactly one way to get the image, and the program to start."""
    if dra is None:
        return None
    if "image" not in dra:
        if "program" in dra:
            raise ConfigError("dra.program names the executable inside dra.image, and there is no dra.image",
                              file=file, field="dra.program",
                              fix="add dra.image (your image archive) or drop dra.program (a built image's program is "
                                  "known)")
        if "module" not in dra:
            raise ConfigError("no way to get the driver's image", file=file, field="dra.module",
                              fix="set dra.module (and dra.source for a local tree) for the harness to build it, or "
                                  "dra.image and dra.program for an archive of your own (`docker save -o driver.tar "
                                  "IMAGE:TAG`)")
        return None
    if "source" in dra:
        raise ConfigError("dra.image and dra.source both name the driver's image", file=file, field="dra.image",
                          fix="keep one: dra.source (the harness builds the Go module) or dra.image (your archive)")
    if "program" not in dra:
        raise ConfigError("dra.image needs the driver's executable inside it", file=file, field="dra.program",
                          fix="set dra.program to its absolute path in the image, e.g. /my-driver (the harness "
                              "starts it with dra-driver-cpu's flags, docs/dra-cpu.md)")
    archive = (manifest.resolve().parent / dra["image"]).resolve()
    if not archive.is_file():
        raise ConfigError(f"{archive} does not exist", file=file, field="dra.image",
                          fix="name the image archive relative to this manifest (`docker save -o driver.tar "
                              "IMAGE:TAG`, or `cci-conformance driver image DIR` for a Go module)")
    return archive


def _main_package(dra: dict, file: str) -> str:
    """dra.main: a package path inside dra.source; without a source tree there is nothing to name."""
    if "main" in dra and "source" not in dra:
        raise ConfigError("dra.main names a package of the source tree, and there is no dra.source", file=file,
                          field="dra.main", fix="add dra.source (the folder of the driver's go.mod) or drop dra.main")
    return dra.get("main", ".")


def _source_tree(source: str | None, manifest: Path, file: str, field_name: str = "dra.source") -> Path | None:
    """dra.source or kind.source, relative to the manifest's folder: a Go module (its go.mod) an image is built from."""
    if source is None:
        return None
    tree = (manifest.resolve().parent / source).resolve()
    if not (tree / "go.mod").is_file():
        raise ConfigError(f"{tree} is not a Go module (no go.mod)", file=file, field=field_name,
                          fix="name the folder of the driver's go.mod and main package, relative to this manifest")
    return tree


def _kind_source(kind: dict, manifest: Path, file: str) -> Path | None:
    """kind.source: a Go module the harness builds into the driver's image, whose program kind.command starts."""
    if "source" in kind and "image" in kind:
        raise ConfigError("kind.source and kind.image both name the driver's image", file=file, field="kind.source",
                          fix="keep one: kind.source (the harness builds the Go module) or kind.image (your own "
                              "archive, e.g. from `cci-conformance driver image` or `docker save`)")
    if "main" in kind and "source" not in kind:
        raise ConfigError("kind.main names a package of the source tree, and there is no kind.source", file=file,
                          field="kind.main",
                          fix="add kind.source (the folder of the driver's go.mod) or drop kind.main")
    if ("source" in kind or "image" in kind) and "command" not in kind:
        which = "kind.source" if "source" in kind else "kind.image"
        raise ConfigError(f"{which} needs the container's command", file=file, field="kind.command",
                          fix="give the argv inside the image with the same placeholders as local.command, e.g. "
                              '[/my-driver, "--registry-dir={registry_dir}", ...] (docs/kind.md "Your driver on kind")')
    tree = _source_tree(kind.get("source"), manifest, file, "kind.source")
    if tree is None:
        return None
    main = kind.get("main", ".")
    module, program = gomod.checked_module(tree, main, file=file, field="kind.source")
    binary = "/" + program
    if kind["command"][0] != binary:
        package = module if main == "." else f"{module}/{main.removeprefix('./')}"
        raise ConfigError(f"kind.command starts {kind['command'][0]!r}, and the image built from kind.source holds "
                          f"its program at {binary}", file=file, field="kind.command[0]",
                          fix=f"start kind.command with {binary} (go build names the program after the last element "
                              f"of the main package's import path, {package})")
    return tree


def load_manifest(path: Path | str) -> DriverManifest:
    """Load ``path`` (a driver.yaml, or a folder holding one); bad input raises ConfigError."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_FILE
    if not path.is_file():
        raise ConfigError("no driver manifest here", file=str(path),
                          fix=f"pass a driver folder containing {MANIFEST_FILE} or the manifest file itself")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", file=str(path), field=where,
                          fix="correct the YAML syntax") from None
    return parse_manifest(data, path)
