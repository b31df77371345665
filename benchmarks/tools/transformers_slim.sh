#!/usr/bin/env bash
# The GPU machine's image has an older transformers than frost's adapter accepts (frost.integrations.TRANSFORMERS_MIN),
# and the whole wheel does not fit beside .devbundle in what travels there (64 MiB). This packs the pinned version
# with only the model families the integration tests and benchmarks build (gpt_oss, llama, mistral, qwen3, auto),
# plus the huggingface_hub it requires and what that imports (the image's hub is older):
# .devbundle/transformers-slim.tar.xz, about 2 MB. The GPU scripts pick it up (benchmarks/tools/use_transformers_slim.sh);
# by hand, after activate.sh: source benchmarks/tools/use_transformers_slim.sh
set -euo pipefail
version=${1:-5.25.0}
deps="huggingface_hub==2.4.0 httpx2==2.17.0 httpcore2==2.17.0 truststore==0.10.5 h11==0.16.0"
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: -d "$work" "transformers==$version" $deps
(cd "$work" && for whl in *.whl; do python3 -m zipfile -e "$whl" site; done)
(cd "$work/site/transformers/models" && ls | grep -v -E '^(gpt_oss|llama|mistral|qwen3|auto|__init__\.py)$' | xargs rm -rf)
tar cJf .devbundle/transformers-slim.tar.xz -C "$work/site" .
rm -rf "$work"
ls -la .devbundle/transformers-slim.tar.xz
