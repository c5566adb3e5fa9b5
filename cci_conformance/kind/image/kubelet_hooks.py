"""Run the Go tests of the kubelet hooks (kubelet-cci/patches) inside the patched Kubernetes source tree."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..runner import CommandFailed, run, say
from . import components, gobuild, kubelet_cci

# The hook tests mirror the Kubernetes tree: testdata/hooks/pkg/kubelet/cm/x_test.go is laid at
# pkg/kubelet/cm/x_test.go of the patched copy. "testdata" keeps them out of kubelet-cci's own `go test ./...`
# (they belong to packages of k8s.io/kubernetes, which that module does not require).
HOOK_TESTS = kubelet_cci.KUBELET_CCI / "testdata" / "hooks"
# Only our tests run: every one is named TestCCI..., the upstream tests of those packages are Kubernetes' to run.
RUN_PATTERN = "^TestCCI"
TEST_TIMEOUT_S = 1800  # compiling the packages' test binaries cold is most of it


@dataclass(frozen=True)
class HookTestRun:
    packages: tuple[str, ...]
    output: str
    seconds: float


def hook_test_files(root: Path = HOOK_TESTS) -> tuple[tuple[str, str], ...]:
    """(path inside the Kubernetes tree, text) of every hook test; a file that is not a Go test is an error."""
    files = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if not rel.endswith("_test.go"):
            raise ValueError(f"{path}: only Go test files belong under {root} (each is laid into the patched tree)")
        files.append((rel, path.read_text()))
    if not files:
        raise FileNotFoundError(f"no *_test.go under {root}: the kubelet hooks have no tests")
    return tuple(files)


def packages_of(files: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(sorted({f"{components.KUBERNETES.module}/{Path(rel).parent.as_posix()}" for rel, _ in files}))


def lay_tests(source: Path, files: tuple[tuple[str, str], ...]) -> None:
    """Put the test files into the patched tree; each must land in a package the tree has."""
    for rel, text in files:
        target = source / rel
        if not target.parent.is_dir():
            raise FileNotFoundError(f"kubelet-cci/testdata/hooks/{rel}: {target.parent.relative_to(source)} is "
                                    f"not a package of {components.KUBERNETES.module} {components.KUBERNETES.version}")
        target.write_text(text)


def run_hook_tests(work: Path | None = None, verbose: bool = False) -> HookTestRun:
    """Prepare the patched tree as the node-image build does (kubelet_cci.prepare_tree), lay the hook tests in
    and run them; CommandFailed carries go test's output when one fails or does not compile."""
    started = time.monotonic()
    files = hook_test_files()
    packages = packages_of(files)
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="cci-hooks-")) if own else work
    work.mkdir(parents=True, exist_ok=True)
    log = work / "hooks.log"
    try:
        say(f"testing the kubelet hooks in the patched {components.KUBERNETES.version} tree (log: {log})")
        source = kubelet_cci.prepare_tree(kubelet_cci.read_inputs(), work, log)
        lay_tests(source, files)
        # -trimpath as the kubelet build: the test binaries' packages share its compile cache (go_env's GOCACHE)
        argv = ["go", "test", "-trimpath", "-count=1", "-run", RUN_PATTERN, *(["-v"] if verbose else []), *packages]
        try:
            output = run(argv, timeout=TEST_TIMEOUT_S, env=gobuild.go_env(), cwd=work, log=log, nice=True)
        except CommandFailed as exc:
            raise CommandFailed(f"the kubelet hook tests failed (kubelet-cci/testdata/hooks):\n{exc}") from None
        return HookTestRun(packages, output, time.monotonic() - started)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
