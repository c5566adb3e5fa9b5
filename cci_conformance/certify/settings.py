"""What one certification run was asked to do (driver, topologies, profiles, backend, report dir), validated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from ..errors import ConfigError
from ..paths import PROFILES_DIR, REFERENCE_DRIVER_DIR
from ..topology.model import Topology

# The default machine set: SMT2 Intel (2 sockets, 2 NUMA nodes, 32 CPUs), sub-NUMA clustering
# (80 CPUs, 4 NUMA nodes), and a hybrid P/E part (24 CPUs, E-cores without SMT). It spans 24 to
# 80 CPUs for the latency growth requirement and keeps a full run under a minute on 2 cores.
DEFAULT_TOPOLOGIES = ("server-2s8c-smt2-intel", "server-2s-snc4", "hybrid-8p8e")
DEFAULT_BACKEND = "embedded"
DEFAULT_NODE_PROFILE = "coexistence"
# ACCT-010's random examples per topology when the run does not ask for a number (--stateful-examples): fixed,
# so the verdict depends on the seed alone, not on the machine's speed. Measured with
# benchmarks/bench_stateful_catch.py (docs/certification.md, "ACCT-010"): of the mutants ACCT-010 targets, four
# are caught within 10 examples in each of 20 seeds; dead-after-restart (a new claim after a driver restart over
# live claims) within 30 in 55 of 60 seeds and within 51 in all, and a default run has three topologies, each
# with a seed of its own. An example costs about 0.6 s of CPU (its node and driver restarts are two thirds of
# it). On kind a step is a real pod start or kubelet restart (2-25 s, about 35 s an example): 6, the fewest
# examples kind runs got under the former 240 s budget (docs/kind.md, "Measured").
STATEFUL_EXAMPLES = {"embedded": 30, "kind": 6}
# Examples per seeded round: on kind a failure's replay of its round costs minutes, not ten of them.
STATEFUL_ROUND = {"embedded": 10, "kind": 2}
MAX_STATEFUL_EXAMPLES = 100_000

# Topologies registered in-process by name (the harness's own self-tests); checked before the library.
_EXTRA_TOPOLOGIES: dict[str, Callable[[], Topology]] = {}


def register_topology(name: str, factory: Callable[[], Topology]) -> None:
    _EXTRA_TOPOLOGIES[name] = factory


def load_topology(name_or_file: str) -> Topology:
    """A registered name, a library name, or a topology spec file; ConfigError when unknown."""
    if name_or_file in _EXTRA_TOPOLOGIES:
        return _EXTRA_TOPOLOGIES[name_or_file]()
    from ..topology import library

    return library.resolve(name_or_file)


def load_node_profile(name_or_file: str) -> dict:
    """A node profile (profiles/node/NAME.yaml or a file) as the dict SessionConfig carries."""
    path = Path(name_or_file)
    if not (path.suffix in (".yaml", ".yml") or "/" in name_or_file):
        path = PROFILES_DIR / "node" / f"{name_or_file}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (PROFILES_DIR / "node").glob("*.yaml")))
        raise ConfigError(f"unknown node profile {name_or_file!r}", field="--cci-node-profile",
                          fix=f"use one of: {known}, or a YAML file path")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", file=str(path), fix="correct the YAML syntax") from None
    from ..node.profile import parse_config

    parse_config(data, str(path))  # raises ConfigError naming the field
    return data


def check_backend(name: str) -> None:
    """ConfigError unless ``name`` is a registered (or built-in) backend."""
    from ..backends.registry import get_backend

    try:
        get_backend(name)
    except ImportError as exc:
        raise ConfigError(f"backend {name!r} is not available ({exc})", field="--backend",
                          fix="use a registered backend (default: embedded)") from None


def check_stateful_examples(count: int | None, option: str = "--cci-stateful-examples") -> None:
    """ConfigError unless ``count`` is None or a whole number of examples in range."""
    if count is not None and not (isinstance(count, int) and 1 <= count <= MAX_STATEFUL_EXAMPLES):
        raise ConfigError(f"{count!r} is not a number of ACCT-010 examples", field=option,
                          fix=f"give a whole number from 1 to {MAX_STATEFUL_EXAMPLES}, or leave it out for the "
                              f"backend's default ({', '.join(f'{b}: {n}' for b, n in STATEFUL_EXAMPLES.items())})")


@dataclass
class RunSettings:
    """Options of one run, from the command line; each part is loaded (and validated) on first use."""

    driver: Path = REFERENCE_DRIVER_DIR
    topologies: tuple[str, ...] = DEFAULT_TOPOLOGIES
    profile: str = "default"
    backend: str = DEFAULT_BACKEND
    node_profile: str = DEFAULT_NODE_PROFILE
    report_dir: Path | None = None
    catalog_path: Path | None = None
    progress: bool = False
    stateful_examples: int | None = None  # None: the backend's STATEFUL_EXAMPLES
    kubernetes: str | None = None  # a dra/v1 run's node release (None: the DRA suites' default)
    kubernetes_releases: tuple[str, ...] = ()  # --kubernetes named several: a run each (certify/releases.py)
    device_mode: str | None = None  # a dra/v1 run's --cpu-device-mode for the driver (None: individual)
    extra: dict = field(default_factory=dict)

    @cached_property
    def manifest(self):
        from ..drivers.manifest import load_manifest

        return load_manifest(self.driver)

    @cached_property
    def catalog(self):
        from .catalog import load_catalog

        return load_catalog(self.catalog_path)

    @cached_property
    def budgets(self):
        from .budgets import load_budgets

        return load_budgets(self.profile)

    @cached_property
    def node_profile_data(self) -> dict:
        return load_node_profile(self.node_profile)

    def stateful_examples_on(self, backend: str) -> int:
        """ACCT-010's examples per topology: the number asked, else the backend's default (a backend without
        one gets the embedded node's)."""
        if self.stateful_examples is not None:
            return self.stateful_examples
        return STATEFUL_EXAMPLES.get(backend, STATEFUL_EXAMPLES[DEFAULT_BACKEND])

    def stateful_pace(self, backend: str) -> tuple[int, int]:
        """ACCT-010's (examples per topology, examples per seeded round) on ``backend``: the run decides its pace,
        the suite never branches on a backend's name."""
        return self.stateful_examples_on(backend), STATEFUL_ROUND.get(backend, STATEFUL_ROUND[DEFAULT_BACKEND])

    @cached_property
    def node_config(self):
        """The run's node profile, typed (node/profile.py NodeConfig): what the suites read of it, with the
        defaults the node applies, so no suite repeats them with ``.get``."""
        from ..node.profile import parse_config

        return parse_config(self.node_profile_data, str(self.node_profile))

    def validate(self) -> None:
        """Load everything once, so a bad input stops the run before any test with one clear line."""
        if len(set(self.topologies)) != len(self.topologies):
            raise ConfigError("a topology is named twice", field="--topology", fix="name each topology once")
        self.manifest  # noqa: B018 - loading is the check
        self.catalog  # noqa: B018
        self.budgets  # noqa: B018
        self.node_profile_data  # noqa: B018
        check_stateful_examples(self.stateful_examples)
        for name in self.topologies:
            load_topology(name)
        check_backend(self.backend)
