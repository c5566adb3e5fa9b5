"""Build the kubelet with KEP-3675's CCI manager: module source unpacked, our patches applied, our package in."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from ..runner import CommandFailed, run, say
from . import components, gobuild
from .cache import Step, key_of

# kubelet-cci/ and api/ sit at the top of the repository (a source checkout: the patched kubelet is a
# developer build, like the node image itself).
REPO_ROOT = Path(__file__).resolve().parents[3]
KUBELET_CCI = REPO_ROOT / "kubelet-cci"
API = REPO_ROOT / "api"
PATCHES = KUBELET_CCI / "patches"
PACKAGE_MODULE = "github.com/cci-conformance/cci-conformance/kubelet-cci"
API_MODULE = "github.com/cci-conformance/cci-conformance/api"
# Directories inside the step's work dir (the wrapper module replaces the modules with them).
SOURCE_DIR, PACKAGE_DIR, API_DIR = "kubernetes", "kubelet-cci", "api"
KUBELET_PACKAGE = "k8s.io/kubernetes/cmd/kubelet"


@dataclass(frozen=True)
class Inputs:
    """Everything the patched kubelet is made of; its digest keys the build step."""

    patches: tuple[tuple[str, str], ...]  # (file name, text), applied in name order
    package: tuple[tuple[str, str], ...]  # (path under kubelet-cci/, sha256-free text) of the Go module
    api: tuple[tuple[str, str], ...]

    def key(self, go_version: str) -> str:
        recipe = Path(__file__).read_text()  # this build's own steps are an input too
        return key_of("kubelet-cci", components.KUBERNETES.module, components.KUBERNETES.version,
                      components.KUBERNETES.ldflags, self.patches, self.package, self.api, go_version, recipe)


def patch_digest(inputs: Inputs) -> str:
    """sha256 of what the CCI kubelet is made of from this project (patches, kubelet-cci, api): the node image
    carries it as a label and report.json names it, so a certificate says which kubelet patch it ran on."""
    sha = hashlib.sha256()
    for part in (inputs.patches, inputs.package, inputs.api):
        for name, text in part:
            sha.update(name.encode() + b"\0" + text.encode() + b"\0")
    return "sha256:" + sha.hexdigest()


def _module_files(root: Path) -> tuple[tuple[str, str], ...]:
    """The files of a Go module that go into a build: go.mod, go.sum and non-test .go files."""
    if not (root / "go.mod").is_file():
        raise FileNotFoundError(f"{root / 'go.mod'} is missing: the patched kubelet is built from a source checkout "
                                "of cci-conformance (kubelet-cci/ and api/ at its top)")
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or rel.startswith("patches/"):
            continue
        if path.name in ("go.mod", "go.sum") or (path.suffix == ".go" and not path.name.endswith("_test.go")):
            out.append((rel, path.read_text()))
    return tuple(out)


def read_inputs(kubelet_cci: Path = KUBELET_CCI, api: Path = API) -> Inputs:
    patch_dir = kubelet_cci / "patches"
    patches = tuple((p.name, p.read_text()) for p in sorted(patch_dir.glob("*.patch")))
    if not patches:
        raise FileNotFoundError(f"no *.patch under {patch_dir}: the CCI hooks into the kubelet are missing")
    return Inputs(patches=patches, package=_module_files(kubelet_cci), api=_module_files(api))


def unpack_source(dest: Path, log: Path) -> Path:
    """A writable copy of the k8s.io/kubernetes module source (the module cache's copy is read-only and
    `go build -overlay` refuses files under the module cache)."""
    out = run(["go", "mod", "download", "-json", f"{components.KUBERNETES.module}@{components.KUBERNETES.version}"],
              timeout=1800, env=gobuild.go_env(), cwd=dest.parent, log=log)
    source = Path(json.loads(out)["Dir"])
    if dest.exists():
        shutil.rmtree(dest, onerror=_make_writable_and_retry)
    shutil.copytree(source, dest, copy_function=shutil.copyfile)
    for root, dirs, _files in os.walk(dest):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    return dest


def _make_writable_and_retry(func, path, _exc) -> None:
    os.chmod(os.path.dirname(path), stat.S_IRWXU)
    func(path)


def apply_patches(source: Path, patches: tuple[tuple[str, str], ...], log: Path) -> None:
    """Apply each patch with `patch -p1`; a patch that does not apply names itself and the rejected hunks."""
    for name, text in patches:
        try:
            run(["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-d", str(source)],
                timeout=120, stdin=text.encode(), log=log)
        except CommandFailed as exc:
            raise CommandFailed(f"kubelet-cci/patches/{name} does not apply to {components.KUBERNETES.module} "
                                f"{components.KUBERNETES.version}; fix: regenerate it against that version "
                                f"(kubelet-cci/README.md)\n{exc}") from None


def _lay_module(files: tuple[tuple[str, str], ...], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    for rel, text in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def kubelet_component() -> gobuild.GoComponent:
    """The kubelet alone, from the patched copy of the Kubernetes module."""
    return gobuild.GoComponent(
        name="kubelet-cci", module=components.KUBERNETES.module, version=components.KUBERNETES.version,
        binaries={"kubelet": KUBELET_PACKAGE}, ldflags=components.KUBERNETES.ldflags,
        local_replace_version=components.KUBERNETES.local_replace_version)


def prepare_tree(inputs: Inputs, work: Path, log: Path) -> Path:
    """The build's source tree in ``work``: the module source patched, our two modules beside it, the wrapper
    module that replaces all three with those directories (tidied). Returns the patched source. The hook tests
    (kubelet_hooks.py) run in a tree made by this same function, so they test what the image builds."""
    for stale in ("go.mod", "go.sum"):  # an interrupted attempt's wrapper would point at a half-made tree
        (work / stale).unlink(missing_ok=True)
    source = unpack_source(work / SOURCE_DIR, log)
    apply_patches(source, inputs.patches, log)
    _lay_module(inputs.package, work / PACKAGE_DIR)
    _lay_module(inputs.api, work / API_DIR)
    gobuild.write_wrapper_module(kubelet_component(), work, log, local_dirs={
        components.KUBERNETES.module: SOURCE_DIR, PACKAGE_MODULE: PACKAGE_DIR, API_MODULE: API_DIR})
    run(["go", "mod", "tidy"], timeout=1800, env=gobuild.go_env(), cwd=work, log=log, nice=True)
    return source


def build_kubelet(inputs: Inputs | None = None) -> Path:
    """Build (or reuse) the patched kubelet; returns the binary. Only this step reruns when a patch or
    the CCI package changes: the other Kubernetes binaries keep their own cached step."""
    inputs = inputs or read_inputs()
    go_version = gobuild.go_version()
    step = Step("kubelet-cci", inputs.key(go_version))
    binary = step.dir / "bin" / "kubelet"
    if step.done:
        return binary
    work = step.prepare()
    log = work / "build.log"
    say(f"building the kubelet {components.KUBERNETES.version} with the CCI manager (log: {log})")
    prepare_tree(inputs, work, log)
    binary.parent.mkdir(parents=True, exist_ok=True)
    run(["go", "build", "-trimpath", "-ldflags", " ".join(("-s", "-w", *kubelet_component().ldflags)),
         "-o", str(binary), KUBELET_PACKAGE], timeout=gobuild.BUILD_TIMEOUT_S, env=gobuild.go_env(), cwd=work,
        log=log, nice=True)
    # the unpacked source is ~100 MB and only an intermediate: the binary and the log are what stays
    shutil.rmtree(work / SOURCE_DIR, ignore_errors=True)
    step.finish(patches=[name for name, _ in inputs.patches], size=binary.stat().st_size)
    return binary
