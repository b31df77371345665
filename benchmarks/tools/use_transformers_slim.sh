# Sourced by the GPU scripts (tests/kernels/gpu_validation.sh, benchmarks/gpu_benches.sh), from the project root:
# when the bundle carries the pinned transformers (.devbundle/transformers-slim.tar.xz, made by
# benchmarks/tools/transformers_slim.sh), unpack it once per machine and put it first on PYTHONPATH, so the
# integration tests and benchmarks run instead of skipping on the machine's older transformers.
_frost_tar=.devbundle/transformers-slim.tar.xz
if [ -f "$_frost_tar" ]; then
  _frost_tf="$(python3 -c 'import tempfile; print(tempfile.gettempdir())')/frost-transformers"
  _frost_tf="$_frost_tf-$(cksum < "$_frost_tar" | cut -d' ' -f1)"
  if [ ! -d "$_frost_tf" ]; then
    mkdir -p "$_frost_tf.tmp" && tar xJf "$_frost_tar" -C "$_frost_tf.tmp" && mv "$_frost_tf.tmp" "$_frost_tf"
  fi
  export PYTHONPATH="$_frost_tf${PYTHONPATH:+:$PYTHONPATH}"
fi
