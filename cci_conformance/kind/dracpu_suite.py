"""The dra-cpu suites' side of a run: which kind clusters it makes, and how a finding becomes a test outcome."""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..certify.catalog import load_catalog
from ..errors import ConfigError
from ..paths import SUITES_DIR
from ..topology import library
from . import dracpu, dracpu_certify, dracpu_static
from .cluster.lifecycle import owned_name

CATALOG = SUITES_DIR / "dra_cpu" / "requirements.yaml"
INDIVIDUAL, GROUPED = "individual", "grouped"
NONE_POLICY, STATIC_POLICY = "none", "static"
# A requirement's test outcome from the finding that judges it (dracpu_certify.verdicts).
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
NO_CLUSTER = "none"  # an option value that turns the extra cluster off
FINDINGS_FILE = "findings.json"


@dataclass(frozen=True)
class ClusterSpec:
    """One kind cluster of a run: a library topology, the driver's device mode, the kubelet's CPU policy."""

    topology: str
    mode: str = INDIVIDUAL
    policy: str = NONE_POLICY

    @property
    def id(self) -> str:
        """The test parameter id: the topology, with the mode or policy when not the default."""
        if self.policy == STATIC_POLICY:
            return f"{self.topology}-static"
        return self.topology if self.mode == INDIVIDUAL else f"{self.topology}-{self.mode}"

    def measures(self, catalog_ids: list[str]) -> list[str]:
        """The requirements this cluster's scenarios judge (the static worker: dracpu_certify.STATIC_ONLY)."""
        if self.policy == STATIC_POLICY:
            return [r for r in catalog_ids if r in dracpu_certify.STATIC_ONLY]
        return [r for r in catalog_ids if r not in dracpu_certify.NOT_COVERED]


def numa_nodes(topology: str) -> int:
    return len(library.resolve(topology).nodes)


def cluster_specs(topologies: list[str], grouped: list[str] | None, static: list[str] | None) -> list[ClusterSpec]:
    """`individual` on every topology; `grouped` and the static policy on the named ones.

    Defaults (None): `grouped` on the first topology with more than one NUMA node (one group device
    per node, so claims must land on the right one), the static policy on the first topology. The
    value ``none`` turns either off.
    """
    if grouped is None:
        grouped = [t for t in topologies if numa_nodes(t) > 1][:1]
    if static is None:
        static = list(topologies[:1])
    specs = [ClusterSpec(t) for t in topologies]
    specs += [ClusterSpec(t, GROUPED) for t in grouped if t != NO_CLUSTER]
    specs += [ClusterSpec(t, policy=STATIC_POLICY) for t in static if t != NO_CLUSTER]
    seen: set[str] = set()
    for spec in specs:
        library.resolve(spec.topology)  # ConfigError names an unknown topology
        if spec.id in seen:
            raise ConfigError(f"cluster {spec.id} is named twice", field="--dra-grouped-topology/"
                              "--dra-static-topology", fix="name each topology once per option")
        seen.add(spec.id)
    return specs


def cluster_name(index: int) -> str:
    """Kind cluster names: CCI_KIND_PREFIX (as for the kind backend) keeps side-by-side runs apart."""
    return owned_name(os.environ.get('CCI_KIND_PREFIX', 'cci-dracpu'), str(index))


def run_cluster(spec: ClusterSpec, version: str, name: str, logs_dir: Path | None) -> dict:
    """Create the cluster, deploy, run its scenarios, delete it; the run with one verdict per requirement."""
    ids = [r.id for r in load_catalog(CATALOG).requirements]
    if spec.policy == STATIC_POLICY:
        factory, scenarios = dracpu_static.cluster_plan, (dracpu_static.coexistence,)
    else:
        factory, scenarios = dracpu_certify.cluster_plan, dracpu_certify.SCENARIOS
    run = dracpu_certify.certify_topology(spec.topology, version, name, logs_dir=logs_dir, plan_factory=factory,
                                          scenarios=scenarios, device_mode=spec.mode)
    run["cluster"] = spec.id
    run["verdicts"] = dracpu_certify.verdicts(run, spec.measures(ids))
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        (logs_dir / FINDINGS_FILE).write_text(json.dumps(run, indent=1))
    return run


@dataclass(frozen=True)
class Outcome:
    status: str  # PASSED, FAILED or SKIPPED
    message: str


def outcome(run: dict, requirement: str) -> Outcome:
    """A finding's verdict as a test outcome: pass passes, fail fails with its evidence; the rest never pass.

    `inconclusive` (measured, no budget) and `not run` (its scenario raised) are skips, so the
    requirement is reported untested, never passed.
    """
    verdict = run["verdicts"].get(requirement)
    if verdict is None:
        return Outcome(SKIPPED, f"cluster {run.get('cluster', run['topology'])} does not measure {requirement}")
    evidence = "; ".join(verdict["evidence"])
    where = f"{run.get('cluster', run['topology'])}, scenario {verdict['scenario'] or '-'}"
    if verdict["verdict"] == "pass":
        return Outcome(PASSED, f"{where}: {evidence}")
    if verdict["verdict"] == "fail":
        return Outcome(FAILED, f"{where}: {evidence}")
    return Outcome(SKIPPED, f"{verdict['verdict']} ({where}): {evidence}")


def figures(run: dict, requirement: str) -> list[dict]:
    """The figures the findings of ``requirement`` carry, labelled with the cluster (topology, mode, policy)."""
    label = run.get("cluster", run["topology"])
    return [dict(fig, topology=label) for f in run["findings"] if f["requirement"] == requirement
            for fig in f.get("figures", [])]


def build_for_run(settings) -> dracpu.BuiltImage:
    """Build (or reuse) the image of the manifest's version; the run's report names its digest.

    RunSettings.extra["driver_digest"] replaces the report's folder digest (certify/run_report.py):
    what ran on kind is the image, not the manifest's folder.
    """
    built = dracpu.build_image(dracpu.target(settings.manifest.version).version)
    settings.extra["driver_digest"] = image_digest(built.archive)
    return built


def image_digest(archive: Path) -> dict:
    """The report's driver digest: sha256 of the image manifest (what containerd runs) in the OCI archive."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        value = index["manifests"][0]["digest"].removeprefix("sha256:")
        manifest = json.load(tar.extractfile(f"blobs/sha256/{value}"))  # type: ignore[arg-type]
    # `files` counts the image's layers: what ran is exactly the manifest's blobs.
    return {"algorithm": "sha256", "of": "image", "value": value, "files": len(manifest["layers"])}
