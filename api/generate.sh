#!/usr/bin/env bash
# Regenerate the Go stubs of cci_v1alpha1.proto into api/ (or into $1), with pinned code generators.
#   api/generate.sh                 rewrite api/cci/v1alpha1/*.pb.go
#   api/generate.sh OUT_DIR         write them under OUT_DIR instead (tests/unit/test_go_stubs.py)
#   api/generate.sh --install-tools go install the pinned plugins into $GOBIN (.ci/run)
# The pins match what Kubernetes v1.34 builds with (k8s.io/kubernetes v1.34.12 go.mod: grpc v1.72.1,
# protobuf v1.36.12 pre-release): protoc-gen-go v1.36.11 is the last protobuf release before it, and
# protoc-gen-go-grpc v1.5.1 emits code for grpc >= v1.64 (SupportPackageIsVersion9).
set -euo pipefail
PROTOC_GEN_GO_VERSION=v1.36.11
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
MODULE=github.com/cci-conformance/cci-conformance/api

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
# A private GOBIN keeps the pinned plugins apart from whatever else a developer has on PATH.
export GOBIN="${GOBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cci-conformance/gobin}"
export PATH="$GOBIN:$PATH"

if [ "${1:-}" = "--install-tools" ]; then
  mkdir -p "$GOBIN"
  nice -n 10 go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  nice -n 10 go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  exit 0
fi

out="${1:-$here}"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null || { echo "generate.sh: $tool not found; install protoc with" \
    "'apt-get install protobuf-compiler' and the plugins with 'api/generate.sh --install-tools'" >&2; exit 3; }
done
# A different plugin version changes the generated code: refuse it rather than write a diff.
got_go="$(protoc-gen-go --version | awk '{print $2}')"
got_grpc="$(protoc-gen-go-grpc --version | awk '{print $2}')"
if [ "$got_go" != "$PROTOC_GEN_GO_VERSION" ] || [ "v$got_grpc" != "$PROTOC_GEN_GO_GRPC_VERSION" ]; then
  echo "generate.sh: protoc-gen-go $got_go / protoc-gen-go-grpc v$got_grpc found, want" \
    "$PROTOC_GEN_GO_VERSION / $PROTOC_GEN_GO_GRPC_VERSION: run 'api/generate.sh --install-tools'" >&2
  exit 4
fi
mkdir -p "$out"
# module= strips the module path, so files land at <out>/cci/v1alpha1/ (the package's go_package).
protoc -I "$repo/cci_conformance/protocol/protos" \
  --go_out="$out" --go_opt="module=$MODULE" \
  --go-grpc_out="$out" --go-grpc_opt="module=$MODULE" \
  cci_v1alpha1.proto
