"""The control-plane images kubeadm asks for, made from our binaries as single-layer OCI archives."""

from __future__ import annotations

from pathlib import Path

from ..runner import run
from .oci_archive import ImageSpec

# kube-proxy in iptables mode runs the iptables tools; they come from the node rootfs (nft backend).
IPTABLES_TOOLS = ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore")


def image_list(kubeadm: Path, version: str) -> list[str]:
    """What ``kubeadm config images list`` prints for this version: the exact names to import."""
    out = run([kubeadm, "config", "images", "list", f"--kubernetes-version={version}"], timeout=120)
    names = [line.strip() for line in out.splitlines() if line.strip()]
    if not names:
        raise RuntimeError("kubeadm config images list printed nothing")
    return names


def role_of(reference: str) -> str:
    """``registry.k8s.io/coredns/coredns:v1.12.1`` -> ``coredns``."""
    return reference.rsplit("/", 1)[-1].split(":", 1)[0]


def iptables_payload(base_image: str, out_dir: Path, log: Path) -> Path:
    """Copy the iptables tools and every library they load out of the node base image."""
    if (out_dir / ".done").exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    script = (
        "set -e; cd /; bins=/usr/sbin/xtables-nft-multi; ext=/usr/lib/x86_64-linux-gnu/xtables; "
        "libs=$(for f in $bins $ext/*.so; do ldd $f | awk '/=>/ {print $3} /^[ \\t]*\\/lib/ {print $1}'; done "
        "| sort -u); cp -L --parents $bins $libs /out/; cp -rL --parents $ext /out/"
    )
    run(["docker", "run", "--rm", "--entrypoint", "/bin/sh", "-v", f"{out_dir}:/out", base_image, "-c", script],
        timeout=300, log=log)
    (out_dir / ".done").write_text("")
    return out_dir


def _tree(root: Path) -> dict[str, Path]:
    return {"/" + str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file() and p.name != ".done"}


def image_specs(references: list[str], bins: dict[str, Path], iptables_dir: Path) -> list[ImageSpec]:
    """One spec per reference; ``bins`` maps program name to its static binary."""
    specs = []
    for reference in references:
        role = role_of(reference)
        if role == "pause":
            specs.append(ImageSpec(reference, {"/pause": bins["pause"]}, entrypoint=["/pause"]))
        elif role == "coredns":
            specs.append(ImageSpec(reference, {"/coredns": bins["coredns"]}, entrypoint=["/coredns"]))
        elif role == "kube-proxy":
            files = {"/usr/local/bin/kube-proxy": bins["kube-proxy"], **_tree(iptables_dir)}
            links = {f"/usr/sbin/{tool}": "xtables-nft-multi" for tool in IPTABLES_TOOLS}
            specs.append(ImageSpec(reference, files, links))
        elif role in bins:
            # kubeadm's static pods run the component by bare name, found on PATH.
            specs.append(ImageSpec(reference, {f"/usr/local/bin/{role}": bins[role]}))
        else:
            raise RuntimeError(f"no binary to make image {reference} from")
    return specs
