"""The Go programs of the node image: which module, which main packages, which version stamps."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class ReleaseComponents:
    """The Go programs of one release's node image."""

    kubernetes: GoComponent
    kind: GoComponent
    containerd: GoComponent
    crictl: GoComponent
    etcd: GoComponent
    coredns: GoComponent

    @property
    def all(self) -> tuple[GoComponent, ...]:
        return (self.kubernetes, self.kind, self.containerd, self.crictl, self.etcd, self.coredns)


def for_release(release: versions.Release) -> ReleaseComponents:
    """Each program at the version the release pins (a component's cache step is keyed by its version)."""
    return ReleaseComponents(
        kubernetes=GoComponent(
            name="kubernetes",
            module="k8s.io/kubernetes",
            version=release.kubernetes,
            binaries={name: f"k8s.io/kubernetes/cmd/{name}" for name in _K8S_BINARIES},
            ldflags=_kubernetes_version_flags(release.kubernetes),
            local_replace_version=release.staging,
        ),
        kind=GoComponent(name="kind", module="sigs.k8s.io/kind", version=release.kind,
                         binaries={"kind": "sigs.k8s.io/kind"}),
        etcd=GoComponent(
            name="etcd",
            module="go.etcd.io/etcd/server/v3",
            version=release.etcd,
            binaries={"etcd": "go.etcd.io/etcd/server/v3"},
        ),
        containerd=GoComponent(
            name="containerd",
            module="github.com/containerd/containerd/v2",
            version=release.containerd,
            binaries={
                "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
                "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
                "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
            },
            ldflags=(f"-X github.com/containerd/containerd/v2/version.Version={release.containerd}",),
            # btrfs needs cgo; the node uses the overlayfs snapshotter.
            tags=("no_btrfs",),
        ),
        crictl=GoComponent(
            name="crictl",
            module="sigs.k8s.io/cri-tools",
            version=release.crictl,
            binaries={"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
            ldflags=(f"-X sigs.k8s.io/cri-tools/pkg/version.Version={release.crictl}",),
        ),
        coredns=GoComponent(
            name="coredns",
            module="github.com/coredns/coredns",
            version=release.coredns,
            binaries={"coredns": "github.com/coredns/coredns"},
        ),
    )


# The CCI release's programs under their old names (the CCI image, the patched kubelet, the host's kind).
_CCI = for_release(versions.CCI)
KUBERNETES = _CCI.kubernetes
KIND = _CCI.kind
ETCD = _CCI.etcd
CONTAINERD = _CCI.containerd
CRICTL = _CCI.crictl
COREDNS = _CCI.coredns
ALL = _CCI.all
