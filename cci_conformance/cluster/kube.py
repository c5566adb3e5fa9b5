"""One run's view of an existing cluster: kubectl with its kubeconfig, the run's label, each node's namespace."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..kind.runner import CommandFailed, run

# Everything a run creates carries this label with the run's id; the final sweep deletes by it (and only by it).
RUN_LABEL = "cci-conformance.io/run"
NODE_LABEL = "cci-conformance.io/node"
SUITE_NAMESPACE = "default"  # where the DRA suites put their pods and claims (dra/objects.py)
# What the sweep deletes, in order: pods and claims while the driver still runs (a claimed pod terminates only
# once the driver unprepared its claim), the run's namespaces, then the driver and its cluster-wide objects.
SWEEP_ORDER = (("pods", "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io"),
               ("namespaces",), ("daemonsets.apps", "serviceaccounts"),
               ("deviceclasses.resource.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
                "clusterroles.rbac.authorization.k8s.io"))
_RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r} is not a label value of up to 32 lowercase letters, digits and '-'")
    return run_id


def selector(run_id: str) -> str:
    return f"{RUN_LABEL}={check_run_id(run_id)}"


def node_namespace(run_id: str, node: str) -> str:
    """The namespace of one node's pods in one run: a DNS label (63 characters), unique per (run, node)."""
    slug = re.sub(r"[^a-z0-9-]", "-", node.lower()).strip("-")
    name = f"cci-{run_id}-{slug}"
    if len(name) > 63 or not slug:  # a long node name: cut, and keep it unique with a digest of the whole
        name = f"cci-{run_id}-{slug[:40].strip('-')}-{hashlib.sha256(node.encode()).hexdigest()[:8]}"
    return name[:63].strip("-")


def labelled(obj: dict, run_id: str, node: str = "") -> dict:
    """``obj`` with the run's label (and the node's) on its metadata, and on a workload's pod template too."""
    out = json.loads(json.dumps(obj))
    labels = {RUN_LABEL: check_run_id(run_id), **({NODE_LABEL: _label_value(node)} if node else {})}
    out.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    template = out.get("spec", {}).get("template")
    if out.get("kind") in ("DaemonSet", "Deployment") and template is not None:
        template.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    return out


def namespace_object(name: str, run_id: str) -> dict:
    """A namespace of the run; its helper pod is privileged, so Pod Security admission must allow that here."""
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    return labelled(ns, run_id)


def _label_value(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-._")
    return value or "node"


def in_namespace(obj: dict, namespace: str) -> dict:
    """The suites' namespace mapped to the node's: two nodes of one run make pods of the same names."""
    if obj.get("metadata", {}).get("namespace") == SUITE_NAMESPACE:
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    return obj


def map_args(args: tuple[str, ...], namespace: str) -> tuple[str, ...]:
    """kubectl arguments with ``-n default`` (the suites' namespace) replaced by the node's namespace."""
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg in ("-n", "--namespace") and out[i + 1] == SUITE_NAMESPACE:
            out[i + 1] = namespace
    return tuple(out)


class Kube:
    """kubectl on the cluster of ``kubeconfig``; with ``namespace``, the suites' ``default`` becomes it."""

    def __init__(self, kubeconfig: Path, kubectl: Path | str = "kubectl", namespace: str = ""):
        self.kubeconfig = Path(kubeconfig)
        self.kubectl_bin = str(kubectl)
        self.namespace = namespace

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        if self.namespace:
            args = map_args(args, self.namespace)
            if stdin is not None and stdin.lstrip().startswith("{"):
                stdin = json.dumps(self._map_document(json.loads(stdin)))
        return run([self.kubectl_bin, "--kubeconfig", str(self.kubeconfig), *args], timeout=timeout,
                   stdin=stdin.encode() if stdin is not None else None)

    def _map_document(self, document: dict) -> dict:
        if document.get("kind") == "List":
            return {**document, "items": [in_namespace(i, self.namespace) for i in document.get("items", [])]}
        return in_namespace(document, self.namespace)

    def get_json(self, *args: str, timeout: float = 60) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json", timeout=timeout))

    def sweep(self, run_id: str, timeout: float = 180) -> list[str]:
        """Delete everything labelled with the run (never raises); what could not be deleted, with why."""
        problems = []
        sel = selector(run_id)
        for kinds in SWEEP_ORDER:
            try:
                self.kubectl("delete", ",".join(kinds), "-A", "-l", sel, "--ignore-not-found", "--wait=true",
                             f"--timeout={int(timeout)}s", timeout=timeout + 15)
            except CommandFailed as exc:
                problems.append(f"{', '.join(kinds)}: {exc}")
        return problems

    def leftovers(self, run_id: str) -> list[str]:
        """Objects still labelled with the run (a namespace still terminating counts)."""
        kinds = ",".join(kind for group in SWEEP_ORDER for kind in group)
        out = self.kubectl("get", kinds, "-A", "-l", selector(run_id), "-o", "name", timeout=60)
        return [line for line in out.splitlines() if line.strip()]
