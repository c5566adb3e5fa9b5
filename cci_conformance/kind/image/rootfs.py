"""The node's root filesystem: a Debian minbase made with debootstrap, trimmed the way kind trims its base."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..runner import run, say
from . import versions
from .cache import Step

# What kind's node entrypoint and a kubeadm node need besides the binaries we build:
# systemd as PID 1, mount/iproute tools, iptables for the CNI bridge's masquerading,
# conntrack/socat/ethtool for kubelet and kubeadm, and Debian's runc and CNI plugins.
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "runc", "containernetworking-plugins", "iproute2", "iptables",
    "mount", "util-linux", "procps", "conntrack", "ethtool", "socat", "ca-certificates", "kmod",
    "libseccomp2", "fuse-overlayfs",
)

# Units that make no sense in a container node (kind masks the same kinds of units).
MASKED_UNITS = (
    "getty.target", "getty@tty1.service", "console-getty.service", "systemd-udevd.service",
    "systemd-udev-trigger.service", "systemd-udevd-control.socket", "systemd-udevd-kernel.socket",
    "systemd-firstboot.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
    "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
    "fstrim.timer", "systemd-tmpfiles-clean.timer", "systemd-modules-load.service",
    "kmod-static-nodes.service", "systemd-remount-fs.service", "sys-kernel-config.mount",
    "sys-kernel-debug.mount", "sys-kernel-tracing.mount", "systemd-journald-audit.socket",
)

# Emptied in every rootfs we make (the node's and the Python driver image's base).
TRIMMED_DIRS = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/locale", "usr/share/info")


def debian_mirror() -> str:
    return os.environ.get("CCI_KIND_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def _trim(root: Path) -> None:
    system = root / "etc/systemd/system"
    for unit in MASKED_UNITS:
        link = system / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    journald = root / "etc/systemd/journald.conf.d"
    journald.mkdir(parents=True, exist_ok=True)
    # The kernel ring buffer is the host's; volatile storage keeps /var small.
    (journald / "10-node.conf").write_text("[Journal]\nStorage=volatile\nReadKMsg=no\n")
    # An empty machine-id makes systemd generate a fresh one at each node's first boot.
    (root / "etc/machine-id").write_text("")
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    trim_caches(root)


def trim_caches(root: Path) -> None:
    """Empty what no container reads: apt's downloads and lists, docs, man pages, locales."""
    for path in TRIMMED_DIRS:
        target = root / path
        if target.is_dir():
            shutil.rmtree(target)
            target.mkdir(parents=True)


def debootstrap(root: Path, packages: tuple[str, ...], log: Path) -> None:
    """A fresh ``debootstrap --variant=minbase`` of the pinned suite into ``root`` (replacing it)."""
    if root.exists():
        shutil.rmtree(root)
    run(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", versions.DEBIAN_SUITE,
         str(root), debian_mirror()], timeout=1800, log=log, nice=True)


def build_rootfs() -> Path:
    """Make (or reuse) the trimmed rootfs tarball; returns its path."""
    step = Step("rootfs", versions.DEBIAN_SUITE, PACKAGES, MASKED_UNITS, debian_mirror(), 2)
    tarball = step.dir / "rootfs.tar"
    if step.done:
        return tarball
    work = step.prepare()
    root = work / "root"
    log = work / "build.log"
    say(f"debootstrap {versions.DEBIAN_SUITE} node rootfs (log: {log})")
    debootstrap(root, PACKAGES, log)
    _trim(root)
    run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(tarball), "."], timeout=600, log=log)
    shutil.rmtree(root)
    step.finish(packages=list(PACKAGES))
    return tarball
