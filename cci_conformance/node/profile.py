"""Node configuration: a node profile (profiles/node/*.yaml) plus the paths a backend fills in, strictly validated."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cpuset import CPUListError, CPUs, parse_cpulist
from ..errors import ConfigError

MODES = ("alpha", "coexistence")
POLICIES = ("none", "static")
# The static policy options the node implements (kubelet names, values "true"/"false").
POLICY_OPTIONS = ("full-pcpus-only", "distribute-cpus-across-numa", "strict-cpu-reservation")
PROFILE_KEYS = {"mode", "cpuManagerPolicy", "reservedSystemCPUs", "cpuManagerPolicyOptions", "cci",
                "rpcTimeoutSeconds", "description"}
PATH_KEYS = {"kubeletRoot", "sysfsRoot", "runtimeRoot"}
TUNING_KEYS = {"pluginPollSeconds", "registrationTimeoutSeconds"}


@dataclass(frozen=True)
class NodeConfig:
    """A validated node configuration (profile keys + paths)."""

    mode: str
    policy: str
    reserved: CPUs
    options: dict[str, bool]
    cci: bool
    rpc_timeout_s: float
    kubelet_root: Path | None = None
    sysfs_root: Path | None = None
    runtime_root: Path | None = None
    plugin_poll_s: float = 0.05
    registration_timeout_s: float = 2.0
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def option(self, name: str) -> bool:
        return self.options.get(name, False)

    @property
    def strict_reservation(self) -> bool:
        return self.option("strict-cpu-reservation")


def _fail(file: str | None, key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(problem, file=file, field=key, fix=fix)


def _number(data: dict, key: str, default: float, file: str | None, lo: float, hi: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo < value <= hi:
        raise _fail(file, key, f"{value!r} is not a number of seconds in ({lo}, {hi}]", f"set e.g. {key}: {default}")
    return float(value)


def parse_config(data: Any, file: str | None = None, *, need_paths: bool = False) -> NodeConfig:
    """Validate a profile mapping (optionally with paths) and return a NodeConfig; ConfigError on any problem."""
    if not isinstance(data, dict):
        raise ConfigError("a node profile must be a mapping of keys to values", file=file,
                          fix="write e.g. 'mode: alpha' and 'cpuManagerPolicy: none'")
    allowed = PROFILE_KEYS | PATH_KEYS | TUNING_KEYS
    for key in data:
        if key not in allowed:
            raise _fail(file, str(key), "unknown key", f"use only: {', '.join(sorted(allowed))}")
    mode = data.get("mode")
    if mode not in MODES:
        raise _fail(file, "mode", f"{mode!r} is not a mode", "use 'alpha' (policy none + CCI) or 'coexistence'")
    policy = data.get("cpuManagerPolicy", "none" if mode == "alpha" else "static")
    if policy not in POLICIES:
        raise _fail(file, "cpuManagerPolicy", f"{policy!r} is not a policy", "use 'none' or 'static'")
    # KEP-3675 l.109-111: with CCI on in alpha the CPU manager policy must be none.
    if mode == "alpha" and policy != "none":
        raise _fail(file, "cpuManagerPolicy", "mode alpha requires policy none (KEP-3675 l.109-111)",
                    "set cpuManagerPolicy: none, or mode: coexistence")
    if mode == "coexistence" and policy != "static":
        raise _fail(file, "cpuManagerPolicy", "mode coexistence means the static policy and CCI share one store",
                    "set cpuManagerPolicy: static, or mode: alpha")
    reserved_text = data.get("reservedSystemCPUs", "")
    if not isinstance(reserved_text, str):
        raise _fail(file, "reservedSystemCPUs", f"{reserved_text!r} is not a cpulist string", 'quote it: "0,1"')
    try:
        reserved = parse_cpulist(reserved_text)
    except CPUListError as exc:
        raise _fail(file, "reservedSystemCPUs", str(exc), 'write a cpulist such as "0-1,64"') from None
    raw_options = data.get("cpuManagerPolicyOptions") or {}
    if not isinstance(raw_options, dict):
        raise _fail(file, "cpuManagerPolicyOptions", "must be a mapping", 'write e.g. full-pcpus-only: "true"')
    options: dict[str, bool] = {}
    for name, value in raw_options.items():
        key = f"cpuManagerPolicyOptions.{name}"
        if name not in POLICY_OPTIONS:
            raise _fail(file, key, "unknown or unsupported policy option", f"use one of: {', '.join(POLICY_OPTIONS)}")
        if value not in ("true", "false"):
            raise _fail(file, key, f"{value!r} is not a kubelet option value", 'use the string "true" or "false"')
        options[name] = value == "true"
    if any(options.values()) and policy != "static":
        raise _fail(file, "cpuManagerPolicyOptions", "policy options need the static policy",
                    "remove the options or use mode: coexistence")
    cci = data.get("cci", True)
    if not isinstance(cci, bool):
        raise _fail(file, "cci", f"{cci!r} is not a boolean", "write cci: true or cci: false")
    paths: dict[str, Path | None] = {}
    for key in sorted(PATH_KEYS):
        value = data.get(key)
        if value is None and need_paths:
            raise _fail(file, key, "missing path", f"the backend must set {key} to an absolute directory")
        if value is not None and (not isinstance(value, str) or not value.startswith("/")):
            raise _fail(file, key, f"{value!r} is not an absolute path", f"set {key} to an absolute directory")
        paths[key] = Path(value) if value else None
    return NodeConfig(
        mode=mode, policy=policy, reserved=reserved, options=options, cci=cci,
        rpc_timeout_s=_number(data, "rpcTimeoutSeconds", 5.0, file, 0.0, 600.0),
        kubelet_root=paths["kubeletRoot"], sysfs_root=paths["sysfsRoot"], runtime_root=paths["runtimeRoot"],
        plugin_poll_s=_number(data, "pluginPollSeconds", 0.05, file, 0.0, 10.0),
        registration_timeout_s=_number(data, "registrationTimeoutSeconds", 2.0, file, 0.0, 60.0),
        raw=dict(data),
    )


def load_config(path: Path | str, *, need_paths: bool = True) -> NodeConfig:
    """Read a node config (YAML, or JSON when the file ends in .json) from ``path``; ConfigError names the file and
    field. The embedded backend writes JSON: the node process then never imports the YAML parser, about 15 ms of
    each of the hundreds of node starts of a run."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read node config: {exc.strerror}", file=str(path),
                          fix="pass an existing file to --config") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"not valid JSON: {exc}", file=str(path), fix="fix the JSON syntax") from None
        return parse_config(data, str(path), need_paths=need_paths)
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", file=str(path), fix="fix the YAML syntax") from None
    return parse_config(data, str(path), need_paths=need_paths)
