"""Pinned versions of everything the offline node image is built from; the build cache is keyed by them."""

from __future__ import annotations

# Kubernetes 1.34 is the newest minor whose kubelet still runs on cgroup v1 hosts by default
# (1.35 made failCgroupV1 default to true, KEP-5573).
KUBERNETES = "v1.34.12"
# The published k8s.io/* staging modules carry v0.<minor>.<patch> of the same release.
KUBERNETES_STAGING = "v0.34.12"
# kind v0.30 still writes the kubeadm v1beta3 API for 1.34 nodes.
KIND = "v0.30.0"
CONTAINERD = "v2.2.9"
CRICTL = "v1.34.0"
# etcd, CoreDNS and pause follow what kubeadm v1.34 asks for (`kubeadm config images list`);
# nodeimage checks that they still match after building kubeadm.
ETCD = "v3.6.5"
COREDNS = "v1.12.1"
# Debian release of the node rootfs (runc and the CNI plugins come from its packages).
DEBIAN_SUITE = "bookworm"
