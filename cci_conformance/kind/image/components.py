"""The Go programs of the node image: which module, which main packages, which version stamps."""

from __future__ import annotations

from . import versions
from .gobuild import GoComponent

_K8S_BINARIES = ("kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager",
                 "kube-scheduler", "kube-proxy")


def _kubernetes_version_flags(version: str) -> tuple[str, ...]:
    # Without these stamps kubeadm reports v0.0.0-master and tries to look the release up online;
    # it derives every control-plane image tag from its own version.
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
            f"-X {package}.gitCommit=0000000000000000000000000000000000000000",
            f"-X {package}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


KUBERNETES = GoComponent(
    name="kubernetes",
    module="k8s.io/kubernetes",
    version=versions.KUBERNETES,
    binaries={name: f"k8s.io/kubernetes/cmd/{name}" for name in _K8S_BINARIES},
    ldflags=_kubernetes_version_flags(versions.KUBERNETES),
    local_replace_version=versions.KUBERNETES_STAGING,
)

KIND = GoComponent(name="kind", module="sigs.k8s.io/kind", version=versions.KIND, binaries={"kind": "sigs.k8s.io/kind"})

ETCD = GoComponent(
    name="etcd",
    module="go.etcd.io/etcd/server/v3",
    version=versions.ETCD,
    binaries={"etcd": "go.etcd.io/etcd/server/v3"},
)

CONTAINERD = GoComponent(
    name="containerd",
    module="github.com/containerd/containerd/v2",
    version=versions.CONTAINERD,
    binaries={
        "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
        "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
        "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
    },
    ldflags=(f"-X github.com/containerd/containerd/v2/version.Version={versions.CONTAINERD}",),
    # btrfs needs cgo; the node uses the overlayfs snapshotter.
    tags=("no_btrfs",),
)

CRICTL = GoComponent(
    name="crictl",
    module="sigs.k8s.io/cri-tools",
    version=versions.CRICTL,
    binaries={"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
    ldflags=(f"-X sigs.k8s.io/cri-tools/pkg/version.Version={versions.CRICTL}",),
)

COREDNS = GoComponent(
    name="coredns",
    module="github.com/coredns/coredns",
    version=versions.COREDNS,
    binaries={"coredns": "github.com/coredns/coredns"},
)

ALL = (KUBERNETES, KIND, CONTAINERD, CRICTL, ETCD, COREDNS)
