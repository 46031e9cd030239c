#!/usr/bin/env bash
# Creates (once) the Python venv the test peers run in: `websockets` (echo_websockets.py),
# `python-socketio` and `aiohttp` (socketio_server.py).
# usage: setup_venv.sh [VENV_DIR]   (default /tmp/mwvenv); prints the venv's python path.
set -euo pipefail
VENV=${1:-/tmp/mwvenv}
if ! "$VENV/bin/python" -c 'import websockets, socketio, aiohttp' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  # websockets: the echo peer; python-socketio on aiohttp: the Socket.IO v4 server.
  "$VENV/bin/pip" install -q --disable-pip-version-check 'websockets>=13' 'python-socketio>=5' aiohttp >&2
fi
echo "$VENV/bin/python"
