#!/usr/bin/env bash
# Installs what the interop tests (test/interop) need on a Debian machine that already has
# Go and Python 3: grpcurl, the Go worker's modules (by building it), and a Python venv
# with the Python worker's pinned requirements. Idempotent, and quick when all is there.
#
#   scripts/install-interop-tools.sh
#
# Then: EVORA_INTEROP_REQUIRED=1 npx vitest run test/interop
#
# Where things go (the tests look in the same places):
#   grpcurl       $(go env GOPATH)/bin/grpcurl (unless a grpcurl of that version is there)
#   Go worker     examples/go-worker/bin/go-worker (git-ignored; the test builds its own
#                 copy from the source, which is then a build-cache hit)
#   Python venv   .venv-interop/ at the repository root (git-ignored), or the python named
#                 by EVORA_PYTHON, which must already have the requirements
set -euo pipefail

GRPCURL_VERSION=v1.9.4

root="$(cd "$(dirname "$0")/.." && pwd)"
started=$(date +%s.%N)
step() { printf 'install-interop-tools: %s\n' "$*"; }
die() { printf 'install-interop-tools: %s\n' "$*" >&2; exit 1; }
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1fs", e - s }'; }

command -v go >/dev/null || die "go is not on PATH (install Go 1.26+ first)"
command -v python3 >/dev/null || die "python3 is not on PATH (install Python 3.10+ first)"
gobin="$(go env GOPATH)/bin"

# 1. grpcurl, pinned.
t=$(date +%s.%N)
have=""
if [[ -x "$gobin/grpcurl" ]]; then
  have="$(go version -m "$gobin/grpcurl" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/fullstorydev/grpcurl" { print $3 }')"
fi
if [[ "$have" == "$GRPCURL_VERSION" ]]; then
  step "grpcurl $GRPCURL_VERSION already in $gobin"
else
  step "go install grpcurl@$GRPCURL_VERSION${have:+ (found $have)}"
  go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
  step "grpcurl installed in $gobin ($(elapsed "$t"))"
fi

# 2. The Go worker: downloads its modules and fills the build cache. Its stubs are
# committed, so no code generator is needed.
t=$(date +%s.%N)
(cd "$root/examples/go-worker" && go build -o bin/go-worker .)
step "built examples/go-worker/bin/go-worker ($(elapsed "$t"))"

# 3. The Python venv with the worker's pinned requirements.
t=$(date +%s.%N)
req="$root/examples/python-worker/requirements.txt"
if [[ -n "${EVORA_PYTHON:-}" ]]; then
  "$EVORA_PYTHON" -c 'import grpc, grpc_tools, google.protobuf' 2>/dev/null ||
    die "EVORA_PYTHON=$EVORA_PYTHON cannot import grpc, grpc_tools and google.protobuf: pip install -r $req"
  step "using EVORA_PYTHON=$EVORA_PYTHON"
else
  venv="$root/.venv-interop"
  stamp="$venv/.requirements.sha256"
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    "$venv/bin/python" -c 'import grpc, grpc_tools, google.protobuf' 2>/dev/null; then
    step "python venv .venv-interop is up to date"
  else
    if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
      rm -rf "$venv"
      python3 -m venv "$venv" ||
        die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
    fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
    step "python venv .venv-interop: $("$venv/bin/python" -m pip freeze --disable-pip-version-check | grep -iE '^(grpcio|grpcio-tools|protobuf)==' | tr '\n' ' ')($(elapsed "$t"))"
  fi
fi

step "done in $(elapsed "$started")"
