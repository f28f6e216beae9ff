#!/usr/bin/env bash
# Regenerates the Python stubs in gen/ (committed) from the repository's proto/.
# Needs grpcio-tools (in requirements.txt), which bundles protoc and the well-known types
# (google/protobuf/struct.proto, timestamp.proto, ...).
# Usage: ./gen.sh   (uses .venv/bin/python if there is one; PYTHON=... to choose another)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ -x "$here/.venv/bin/python" ]]; then python="$here/.venv/bin/python"; else python=python3; fi
elif [[ "$python" == */* && "$python" != /* ]]; then
  python="$PWD/$python"
fi
out="${OUT:-$here/gen}" # OUT=dir writes elsewhere (the interop test checks gen/ is fresh this way)
rm -rf "$out"
mkdir -p "$out"
cd "$here/../../proto"
"$python" -m grpc_tools.protoc -I . \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  evora/v1/job.proto evora/v1/queue.proto evora/v1/worker.proto
echo "generated $(find "$out" -type f | wc -l) files in $out"
