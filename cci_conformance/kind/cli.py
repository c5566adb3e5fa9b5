"""``cci-conformance kind``: build the offline node image, create and delete clusters with faked topologies."""

from __future__ import annotations

import argparse
import json
import re
import sys

from ..dra import upstream_image
from ..errors import ConfigError
from ..node.profile import load_config
from ..topology import library
from .cluster import lifecycle, toolchain
from .cluster.config import ClusterPlan, NodePlan
from .image import cache, kubelet_hooks, nodeimage, versions
from .runner import CommandFailed

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


def _build(args: argparse.Namespace) -> int:
    release = versions.release(args.kubernetes)
    if args.cached_only:
        try:
            with cache.cached_only():
                result = nodeimage.build_node_image(args.tag, release)
        except cache.NotCached as exc:
            print(json.dumps({"cached": False, "missing": str(exc)}))
            return 3
    else:
        with cache.building("the node image"):  # its steps are shared with every other build of this host
            result = nodeimage.build_node_image(args.tag, release)
    print(json.dumps({"kubernetes": release.kubernetes, "cci_kubelet": release.cci_kubelet, "image": result.image,
                      "tag": result.tagged, "seconds": round(result.seconds, 1),
                      "reused": result.reused}))
    return 0


def _plan(args: argparse.Namespace) -> ClusterPlan:
    if not NAME_RE.match(args.name):
        raise ConfigError(f"{args.name!r} is not a usable cluster name", field="--name",
                          fix="use lower-case letters, digits and '-' (at most 41 characters)")
    profile = load_config(args.profile, need_paths=False) if args.profile else None
    topology = library.resolve(args.topology) if args.topology else None
    workers = [NodePlan("worker", topology, profile)] + [NodePlan("worker") for _ in range(args.extra_workers)]
    release = versions.release(args.kubernetes)
    return ClusterPlan(args.name, args.image or nodeimage.default_image(release), [NodePlan("control-plane"), *workers],
                       release=release)


def _create(args: argparse.Namespace) -> int:
    plan = _plan(args)
    kind = lifecycle.KindCluster(plan, kind=toolchain.kind_binary(plan.release),
                                 kubectl=toolchain.kubectl_binary(plan.release))
    try:
        kind.create()
        kind.wait_ready()
    except BaseException:
        kind.delete()
        raise
    print(json.dumps({"name": plan.name, "kubeconfig": str(kind.kubeconfig), "nodes": plan.node_names(),
                      "create_seconds": round(kind.create_seconds or 0, 1)}))
    return 0


def _delete(args: argparse.Namespace) -> int:
    removed = lifecycle.delete_clusters(toolchain.kind_binary(), prefix=args.prefix)
    print(json.dumps({"deleted": removed}))
    return 0


def _test_hooks(args: argparse.Namespace) -> int:
    try:
        result = kubelet_hooks.run_hook_tests(verbose=args.verbose)
    except CommandFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    print(result.output.rstrip())
    print(json.dumps({"packages": list(result.packages), "seconds": round(result.seconds, 1)}))
    return 0


def driver_image_command(args: argparse.Namespace) -> int:
    """`cci-conformance driver image DIR`: the driver's Go module as an image archive for kind.image."""
    from .cci.driver_image import make_archive

    try:
        made = make_archive(args.folder, args.out, args.main)
    except CommandFailed as exc:  # the toolchain itself (bad input is a ConfigError naming the file)
        print(f"cci-conformance: error: {exc}", file=sys.stderr)
        return 1
    how = "reused from the build cache" if made.reused else f"built in {made.seconds:.1f} s"
    print(f"image:   {made.reference} ({how})")
    print(f"archive: {made.archive}")
    print(f"sha256:  {made.digest.removeprefix('sha256:')}")
    print("for driver.yaml (in place of dra.source and dra.main):" if made.dra else
          "for driver.yaml (in place of kind.source and kind.main; placeholders as in local.command):")
    print(made.manifest_section(), end="")
    return 0


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("kind", help="kind clusters with faked topologies (real kubelets)")
    sub = parser.add_subparsers(dest="kind_command", metavar="ACTION")
    build = sub.add_parser("build-node-image", help="build the offline node image (cached by versions)")
    releases = ", ".join(sorted(versions.RELEASES))
    build.add_argument("--kubernetes", default=versions.CCI.kubernetes,
                       help=f"release to build ({releases}; default {versions.CCI.kubernetes}, the CCI-patched "
                            "kubelet; the others are the release's own kubelet)")
    build.add_argument("--tag", default=None, help="image tag (default cci-conformance/kind-node:<release>)")
    build.add_argument("--cached-only", action="store_true",
                       help="build nothing: exit 3 unless the image and every step are already cached (for CI)")
    build.set_defaults(handler=_build)
    create = sub.add_parser("create", help="create a cluster whose worker sees a faked topology and keep it")
    create.add_argument("--name", default="cci-dev")
    create.add_argument("--topology", help="library topology name or spec file for the worker")
    create.add_argument("--profile", help="node profile (profiles/node/*.yaml) for the worker's CPU manager")
    create.add_argument("--kubernetes", default=versions.CCI.kubernetes, help=f"release of the nodes ({releases})")
    create.add_argument("--image", help="node image (default: the one build-node-image tags for --kubernetes)")
    create.add_argument("--extra-workers", type=int, default=0, help="plain workers besides the faked one")
    create.set_defaults(handler=_create)
    delete = sub.add_parser("delete", help="delete clusters (and their networks) by name prefix")
    delete.add_argument("--prefix", default="cci-")
    delete.set_defaults(handler=_delete)
    hooks = sub.add_parser("test-kubelet-hooks", help="run the Go tests of the kubelet patch's hooks inside the "
                           "patched Kubernetes source tree (kubelet-cci/testdata/hooks)")
    hooks.add_argument("--verbose", action="store_true", help="go test -v")
    hooks.set_defaults(handler=_test_hooks)
    upstream_image.add_parser(sub)  # build-dra-cpu: kubernetes-sigs/dra-driver-cpu image archives
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)
