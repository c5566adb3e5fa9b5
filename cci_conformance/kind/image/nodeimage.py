"""Build the offline kind node image: Go-built binaries on a debootstrap rootfs, images pre-imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...waiting import wait_for
from ..runner import CommandFailed, run, say
from . import components, control_plane, gobuild, kubelet_cci, node_files, oci_archive, rootfs, versions
from .cache import Step, ensure_may_build, key_of

ASSETS = Path(__file__).parent / "assets"
DEFAULT_REPOSITORY = "cci-conformance/kind-node"
BASE_REPOSITORY = "cci-conformance/kind-base"


def default_image(release: versions.Release = versions.CCI) -> str:
    return f"{DEFAULT_REPOSITORY}:{release.kubernetes}"


@dataclass
class BuildResult:
    image: str
    tagged: str
    seconds: float
    reused: bool


def image_exists(reference: str) -> bool:
    proc = subprocess.run(["docker", "image", "inspect", reference], capture_output=True, check=False)
    return proc.returncode == 0


def _base_image(tarball: Path, key: str) -> str:
    reference = f"{BASE_REPOSITORY}:{key}"
    if not image_exists(reference):
        ensure_may_build(reference)
        say("importing the node rootfs into docker")
        run(["docker", "import", "-c", "ENV container=docker", str(tarball), reference], timeout=600)
    return reference


def _import_store(archives: list[Path], store: Path, log: Path) -> list[str]:
    """Import the image archives into a containerd content store (namespace k8s.io), as the node will use it."""
    binaries = gobuild.build(components.CONTAINERD)
    state = Path(tempfile.mkdtemp(prefix="cci-ctrd-", dir="/tmp"))
    socket = state / "c.sock"
    config = state / "config.toml"
    # Only the content store, metadata and snapshotter are needed: no CRI, no NRI.
    config.write_text(
        "version = 3\ndisabled_plugins = ['io.containerd.grpc.v1.cri', 'io.containerd.cri.v1.runtime', "
        "'io.containerd.cri.v1.images', 'io.containerd.nri.v1.nri',\n"
        " 'io.containerd.podsandbox.controller.v1.podsandbox']\n"
    )
    with log.open("a") as log_handle:
        daemon = subprocess.Popen(
            [binaries / "containerd", "--config", config, "--root", store, "--state", state / "state",
             "--address", socket],
            stdout=log_handle, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(socket.exists, timeout=30, interval=0.1, what="build-time containerd socket")
        ctr = [binaries / "ctr", "--address", str(socket), "--namespace", "k8s.io"]
        for archive in archives:
            # Pinned images are never garbage-collected by the kubelet (kind pins its images the same way).
            run([*ctr, "images", "import", "--snapshotter", "overlayfs", "--label", "io.cri-containerd.pinned=pinned",
                 archive], timeout=600, log=log)
        listed = run([*ctr, "images", "list", "--quiet"], timeout=60, log=log).split()
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        shutil.rmtree(state, ignore_errors=True)
    # Every node must make its own containerd instance id at first start.
    (store / "io.containerd.grpc.v1.introspection" / "uuid").unlink(missing_ok=True)
    return listed


def _link(source: Path, target: Path, mode: int = 0o755) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.unlink()
    shutil.copyfile(source, target)
    os.chmod(target, mode)


def _write(target: Path, text: str, mode: int = 0o644) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    os.chmod(target, mode)


def _node_files(files: Path, k8s: Path, kubelet: Path, ctrd: Path, crictl: Path, recorder: Path,
                pause_image: str, kubernetes: str = versions.KUBERNETES) -> None:
    for name in ("kubeadm", "kubectl"):
        _link(k8s / name, files / "usr/bin" / name)
    # the CCI image: the kubelet with KEP-3675's CCI manager (kubelet-cci/README.md), unchanged without a
    # CCI driver; the vanilla image: the release's own kubelet
    _link(kubelet, files / "usr/bin/kubelet")
    for name in ("containerd", "containerd-shim-runc-v2", "ctr"):
        _link(ctrd / name, files / "usr/local/bin" / name)
    _link(crictl / "crictl", files / "usr/local/bin/crictl")
    _link(recorder, files / "usr/local/sbin/cpuset-recorder")
    _link(ASSETS / "entrypoint.sh", files / "usr/local/bin/cci-node-entrypoint")
    _link(ASSETS / "node-cni.sh", files / "usr/local/bin/cci-node-cni")
    system = files / "etc/systemd/system"
    for unit in ("kubelet.service", "containerd.service"):
        _link(ASSETS / unit, system / unit, 0o644)
    _link(ASSETS / "node-cni.service", system / "cci-node-cni.service", 0o644)
    _link(ASSETS / "10-kubeadm.conf", system / "kubelet.service.d/10-kubeadm.conf", 0o644)
    _write(files / "etc/containerd/config.toml", node_files.containerd_config(pause_image))
    _write(files / "etc/crictl.yaml", node_files.CRICTL_YAML)
    _write(files / "kind/version", kubernetes + "\n")
    _write(files / "kind/manifests/default-cni.yaml", node_files.DEFAULT_CNI_MANIFEST)
    _write(files / "kind/manifests/default-storage.yaml", node_files.DEFAULT_STORAGE_MANIFEST)
    for directory in ("etc/cni/net.d", "opt/nri/plugins", "etc/nri/conf.d", "var/lib/kubelet",
                      "etc/kubernetes/manifests"):
        (files / directory).mkdir(parents=True, exist_ok=True)


def _prune(keep: set[str], kubernetes: str = versions.KUBERNETES) -> None:
    """Remove node images of earlier builds of this release and unused base images (each is over a gigabyte);
    keep the current ones, and the other releases' node images (the CCI and the vanilla image live side by side)."""
    for repository in (DEFAULT_REPOSITORY, BASE_REPOSITORY):
        out = run(["docker", "images", repository, "--format", "{{.Repository}}:{{.Tag}}"], timeout=60)
        ours = f"{DEFAULT_REPOSITORY}:{kubernetes}"
        stale = [ref for ref in out.split() if ref not in keep and not ref.endswith(":<none>")
                 and (repository == BASE_REPOSITORY or ref == ours or ref.startswith(ours + "-"))]
        if stale:
            subprocess.run(["docker", "rmi", *stale], capture_output=True, check=False, timeout=300)


# Labels of the node image: what a run on it reports (run_cluster.RunCluster.facts), and how a stale image is found.
PATCH_LABEL = "io.cci-conformance.kubelet-patch"
K8S_LABEL = "io.cci-conformance.kubernetes"
# The patch label of an image whose kubelet is the release's own (no kubelet-cci patch).
VANILLA_PATCH = "none"

DOCKERFILE = """FROM {base}
COPY files/ /
COPY store/ /var/lib/containerd/
RUN systemctl enable containerd.service kubelet.service cci-node-cni.service
LABEL {patch_label}="{patch}" {k8s_label}="{kubernetes}"
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/cci-node-entrypoint", "/sbin/init"]
"""


def build_node_image(tag: str | None = None, release: versions.Release = versions.CCI) -> BuildResult:
    """Build (or reuse) the node image of a release; every step is cached by the versions and files that feed it."""
    start = time.monotonic()
    tag = tag or default_image(release)
    built = {c.name: gobuild.build(c) for c in components.for_release(release).all}
    if release.cci_kubelet:
        kubelet = kubelet_cci.build_kubelet()  # its own step: a patch change rebuilds only the kubelet
    else:
        kubelet = built["kubernetes"] / "kubelet"
    pause = gobuild.build_local("pause", ASSETS / "pause.go")
    recorder = gobuild.build_local("cpuset-recorder", ASSETS / "cpuset-recorder.go")
    tarball = rootfs.build_rootfs()
    base = _base_image(tarball, key_of(str(tarball)))

    references = control_plane.image_list(built["kubernetes"] / "kubeadm", release.kubernetes)
    pause_image = next(r for r in references if control_plane.role_of(r) == "pause")
    component_keys = [str(p) for p in built.values()] + [str(pause)]
    # The image recipes are code: a change to them must rebuild the images.
    recipes = [Path(control_plane.__file__).read_text(), Path(oci_archive.__file__).read_text()]
    store_step = Step("containerd-store", references, component_keys, base, recipes)
    if not store_step.done:
        work = store_step.prepare()
        log = work / "build.log"
        say("making control-plane images and importing them into containerd (k8s.io namespace)")
        payload = control_plane.iptables_payload(base, work / "iptables", log)
        bins = {name: built["kubernetes"] / name for name in ("kube-apiserver", "kube-controller-manager",
                                                              "kube-scheduler", "kube-proxy")}
        bins.update(etcd=built["etcd"] / "etcd", coredns=built["coredns"] / "coredns", pause=pause)
        archives = []
        (work / "archives").mkdir(exist_ok=True)
        for spec in control_plane.image_specs(references, bins, payload):
            name = f"{control_plane.role_of(spec.reference)}.tar"
            archives.append(oci_archive.write_archive(spec, work / "archives" / name))
        store = work / "store"
        if store.exists():
            shutil.rmtree(store)
        imported = _import_store(archives, store, log)
        missing = sorted(set(references) - set(imported))
        if missing:
            raise CommandFailed(f"images missing from the node's containerd after import: {missing} (log: {log})")
        store_step.finish(images=references)

    assets = sorted((p.name, p.read_bytes().hex()) for p in ASSETS.iterdir() if p.is_file())
    # This module and node_files decide the file tree and the Dockerfile: their text is part of the key.
    layout = [Path(__file__).read_text(), Path(node_files.__file__).read_text()]
    final_key = key_of(store_step.key, assets, pause_image, layout, str(kubelet))
    keyed = f"{DEFAULT_REPOSITORY}:{release.kubernetes}-{final_key[:12]}"
    reused = image_exists(keyed)
    if not reused:
        ensure_may_build(keyed)
        context = store_step.dir
        files = context / "files"
        if files.exists():
            shutil.rmtree(files)
        _node_files(files, built["kubernetes"], kubelet, built["containerd"], built["crictl"], recorder,
                    pause_image, release.kubernetes)
        patch = kubelet_cci.patch_digest(kubelet_cci.read_inputs()) if release.cci_kubelet else VANILLA_PATCH
        (context / "Dockerfile").write_text(DOCKERFILE.format(
            base=base, patch_label=PATCH_LABEL, k8s_label=K8S_LABEL, kubernetes=release.kubernetes, patch=patch))
        (context / ".dockerignore").write_text("archives\niptables\n*.log\n.done\n")
        say(f"docker build {keyed}")
        run(["docker", "build", "-t", keyed, str(context)], timeout=1800, log=context / "build.log",
            env={"DOCKER_BUILDKIT": "0"})
    run(["docker", "tag", keyed, tag], timeout=60)
    _prune(keep={keyed, tag, base}, kubernetes=release.kubernetes)
    return BuildResult(image=keyed, tagged=tag, seconds=time.monotonic() - start, reused=reused)


def image_facts(reference: str) -> dict:
    """The image's id and the labels it was built with ("" for an image built before they existed)."""
    proc = subprocess.run(["docker", "image", "inspect", reference], capture_output=True, text=True, check=False,
                          timeout=60)
    if proc.returncode != 0:
        return {"id": "", "kubernetes": "", "kubelet_patch": ""}
    info = json.loads(proc.stdout)[0]
    labels = info.get("Config", {}).get("Labels") or {}
    return {"id": info.get("Id", ""), "kubernetes": labels.get(K8S_LABEL, ""),
            "kubelet_patch": labels.get(PATCH_LABEL, "")}


def stale_patch(facts: dict) -> str:
    """Why the image's kubelet is not this checkout's kubelet-cci ("" when it is, or no source is at hand)."""
    try:
        here = kubelet_cci.patch_digest(kubelet_cci.read_inputs())
    except FileNotFoundError:
        return ""  # an installed harness has no kubelet-cci sources: the label is all there is
    if facts["kubelet_patch"] == VANILLA_PATCH:
        return ""  # an unpatched release: nothing of this checkout is in its kubelet
    if facts["kubelet_patch"] != here:
        return (f"the node image's kubelet was built from patch {facts['kubelet_patch'] or '(unlabelled)'}, "
                f"this checkout's kubelet-cci is {here}")
    return ""


__all__ = ["BuildResult", "CommandFailed", "build_node_image", "default_image", "image_exists"]
