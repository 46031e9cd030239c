#!/usr/bin/env bash
# Creates (once) the Python venv the test peers run in: `websockets` (echo_websockets.py),
# `pexpect`, which drives `moonwire connect` and `listen` through a pseudo-terminal,
# `python-socketio` on `aiohttp` (socketio_server.py), `prometheus-client`, whose
# text-format parser checks `run --metrics-port`, and `kubernetes-validate`, which checks
# deploy/kubernetes/ against the Kubernetes schemas, `msgpack` and `cbor2`, the
# reference codecs scripts/formats/diff.py checks mw.msgpack and mw.cbor against, and
# `protobuf` (upb), the reference mw.protobuf's differential test (scripts/protobuf_diff.sh)
# compares against.
# usage: setup_venv.sh [VENV_DIR]   (default /tmp/mwvenv); prints the venv's python path.
set -euo pipefail
VENV=${1:-/tmp/mwvenv}
if ! "$VENV/bin/python" -c 'import websockets, pexpect, socketio, aiohttp' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check 'websockets>=13' 'pexpect>=4.8' 'python-socketio>=5' aiohttp >&2
fi
if ! "$VENV/bin/python" -c 'import prometheus_client, kubernetes_validate' 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check 'prometheus-client>=0.20' 'kubernetes-validate>=1.30' >&2
fi
# scripts/protocols/graphql_ws.sh: Strawberry (a GraphQL server speaking both WebSocket
# subprotocols) and the gql client, against moonwire's mock.
if ! "$VENV/bin/python" -c 'import strawberry, gql' 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check 'strawberry-graphql[aiohttp]>=0.240' 'gql[websockets]>=3.5' >&2
fi
# `ocpp` (mobilityhouse): the real central system and charge points of moonwire.ocpp's tests.
if ! "$VENV/bin/python" -c 'import ocpp' 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check 'ocpp>=2,<3' >&2
fi
# msgpack and cbor2: the reference encoders of scripts/formats/diff.py.
if ! "$VENV/bin/python" -c 'import msgpack, cbor2' 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check 'msgpack>=1.0' 'cbor2>=5.4' >&2
fi
# protobuf (upb): the reference of scripts/protobuf_diff.sh.
if ! "$VENV/bin/python" -c 'import google.protobuf' 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check 'protobuf>=4.21' >&2
fi
echo "$VENV/bin/python"
