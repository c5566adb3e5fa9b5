"""The static policy's options (``cpuManagerPolicyOptions``), parsed and checked as policy_options.go does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .topology import CPUTopology

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_BY_UNCORE_CACHE = "prefer-align-cpus-by-uncorecache"

ALPHA_OPTIONS = frozenset({ALIGN_BY_SOCKET, DISTRIBUTE_CPUS_ACROSS_CORES})
BETA_OPTIONS = frozenset({STRICT_CPU_RESERVATION, DISTRIBUTE_CPUS_ACROSS_NUMA, PREFER_ALIGN_BY_UNCORE_CACHE})
STABLE_OPTIONS = frozenset({FULL_PCPUS_ONLY})

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class PolicyOptionError(ValueError):
    """An option the kubelet refuses at start-up; ``str()`` is the kubelet's error text."""


@dataclass(frozen=True)
class StaticPolicyOptions:
    full_pcpus_only: bool = False
    distribute_cpus_across_numa: bool = False
    align_by_socket: bool = False
    distribute_cpus_across_cores: bool = False
    strict_cpu_reservation: bool = False
    prefer_align_by_uncore_cache: bool = False


_FIELD = {
    FULL_PCPUS_ONLY: "full_pcpus_only",
    DISTRIBUTE_CPUS_ACROSS_NUMA: "distribute_cpus_across_numa",
    ALIGN_BY_SOCKET: "align_by_socket",
    DISTRIBUTE_CPUS_ACROSS_CORES: "distribute_cpus_across_cores",
    STRICT_CPU_RESERVATION: "strict_cpu_reservation",
    PREFER_ALIGN_BY_UNCORE_CACHE: "prefer_align_by_uncore_cache",
}

# Pairs NewStaticPolicyOptions refuses, in the order it checks them.
_EXCLUSIVE = (
    (FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES),
    (DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE_CACHE, DISTRIBUTE_CPUS_ACROSS_CORES),
    (PREFER_ALIGN_BY_UNCORE_CACHE, DISTRIBUTE_CPUS_ACROSS_NUMA),
)


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _parse_bool(value: str) -> bool:
    """Go's strconv.ParseBool, with its error text."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"strconv.ParseBool: parsing {_go_quote(value)}: invalid syntax")


def check_option_available(name: str, *, alpha_enabled: bool = False, beta_enabled: bool = True) -> None:
    """CheckPolicyOptionAvailable; the feature gates default to alpha off, beta on."""
    if name not in ALPHA_OPTIONS | BETA_OPTIONS | STABLE_OPTIONS:
        raise PolicyOptionError(f"unknown CPU Manager Policy option: {_go_quote(name)}")
    if name in ALPHA_OPTIONS and not alpha_enabled:
        raise PolicyOptionError(
            f"CPU Manager Policy Alpha-level Options not enabled, but option {_go_quote(name)} provided"
        )
    if name in BETA_OPTIONS and not beta_enabled:
        raise PolicyOptionError(
            f"CPU Manager Policy Beta-level Options not enabled, but option {_go_quote(name)} provided"
        )


def parse_options(
    options: Mapping[str, str], *, alpha_enabled: bool = False, beta_enabled: bool = True
) -> StaticPolicyOptions:
    """NewStaticPolicyOptions. The kubelet walks a Go map (random order); we walk names sorted, so when
    several options are bad the one reported is deterministic."""
    values: dict[str, bool] = {}
    for name in sorted(options):
        check_option_available(name, alpha_enabled=alpha_enabled, beta_enabled=beta_enabled)
        try:
            values[_FIELD[name]] = _parse_bool(options[name])
        except ValueError as e:
            raise PolicyOptionError(f"bad value for option {_go_quote(name)}: {e}") from None
    parsed = StaticPolicyOptions(**values)
    for first, second in _EXCLUSIVE:
        if getattr(parsed, _FIELD[first]) and getattr(parsed, _FIELD[second]):
            raise PolicyOptionError(f"static policy options {first} and {second} can not be used at the same time")
    return parsed


def validate_options(opts: StaticPolicyOptions, topology: CPUTopology, topology_manager_policy: str = "none") -> None:
    """ValidateStaticPolicyOptions: machine-dependent checks (texts as the kubelet spells them)."""
    if opts.align_by_socket:
        if topology_manager_policy == "single-numa-node":
            raise PolicyOptionError(
                "Topolgy manager single-numa-node policy is incompatible with CPUManager "
                f"{ALIGN_BY_SOCKET} policy option"
            )
        if topology.num_sockets > topology.num_numa_nodes:
            raise PolicyOptionError(
                "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"
            )
