#!/usr/bin/env bash
# The GPU machine's image has an older transformers than frost's adapter accepts (frost.integrations.TRANSFORMERS_MIN),
# and the whole wheel does not fit beside .devbundle in what travels there (64 MiB). This packs the pinned version
# with only the model families the integration tests and benchmarks build (gpt_oss, llama, mistral, qwen3, auto):
# .devbundle/transformers-slim.tar.xz, about 1.5 MB. On the GPU machine, after activate.sh:
#   mkdir -p /tmp/tf && tar xJf .devbundle/transformers-slim.tar.xz -C /tmp/tf && export PYTHONPATH=/tmp/tf:$PYTHONPATH
set -euo pipefail
version=${1:-5.25.0}
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work" "transformers==$version"
(cd "$work" && python3 -m zipfile -e transformers-"$version"-py3-none-any.whl site)
(cd "$work/site/transformers/models" && ls | grep -v -E '^(gpt_oss|llama|mistral|qwen3|auto|__init__\.py)$' | xargs rm -rf)
tar cJf .devbundle/transformers-slim.tar.xz -C "$work/site" transformers "transformers-$version.dist-info"
rm -rf "$work"
ls -la .devbundle/transformers-slim.tar.xz
