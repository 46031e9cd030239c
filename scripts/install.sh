#!/usr/bin/env bash
# Builds moonwire in release mode and installs it with its man page and shell completions.
# usage: scripts/install.sh [PREFIX]     (default /usr/local; DESTDIR is honoured for packaging)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local}
ROOT="${DESTDIR:-}$PREFIX"

scripts/deps.sh
scripts/release_build.sh --product moonwire
bin="$(scripts/release_build.sh --show-bin-path)/moonwire"

install -d "$ROOT/bin" "$ROOT/share/man/man1" \
    "$ROOT/share/bash-completion/completions" "$ROOT/share/zsh/site-functions" \
    "$ROOT/share/fish/vendor_completions.d"
install -m 755 "$bin" "$ROOT/bin/moonwire"
install -m 644 docs/moonwire.1 "$ROOT/share/man/man1/moonwire.1"
"$bin" --generate-completion-script bash > "$ROOT/share/bash-completion/completions/moonwire"
"$bin" --generate-completion-script zsh > "$ROOT/share/zsh/site-functions/_moonwire"
"$bin" --generate-completion-script fish > "$ROOT/share/fish/vendor_completions.d/moonwire.fish"
echo "moonwire: installed $ROOT/bin/moonwire, its man page and bash/zsh/fish completions" >&2
