#!/usr/bin/env bash
# Creates (once) the Python venv with `websockets` that echo_websockets.py runs in, and
# `pexpect`, which drives `moonwire connect` and `listen` through a pseudo-terminal.
# usage: setup_venv.sh [VENV_DIR]   (default /tmp/mwvenv); prints the venv's python path.
set -euo pipefail
VENV=${1:-/tmp/mwvenv}
if ! "$VENV/bin/python" -c 'import websockets, pexpect' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check 'websockets>=13' 'pexpect>=4.8' >&2
fi
echo "$VENV/bin/python"
