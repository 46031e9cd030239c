#!/usr/bin/env python3
"""Writes the seed corpora in Fuzz/corpus/ from Autobahn|Testsuite reports (the
wire logs of scripts/autobahn.sh runs, client and --server mode) plus a few
hand-made inputs. Each seed starts with the one byte the harness uses to choose
read sizes (0xFF: one read).

    Fuzz/make_seeds.py REPORTDIR...     # run dirs holding moonwire_case_*.json
"""
import glob, hashlib, json, os, struct, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
MAX = 4096
count = {}


def put(target, data, limit=150):
    if len(data) > MAX:
        data = data[:MAX]
    if count.get(target, 0) >= limit:
        return
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, hashlib.sha1(data).hexdigest()[:16])
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
        count[target] = count.get(target, 0) + 1


def frame(opcode, payload, fin=True, rsv1=False, mask=None):
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask:
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        head += mask
    return head + payload


def handmade():
    key = b"\x37\xfa\x21\x3d"
    hello_deflated = bytes.fromhex("f248cdc9c90700")
    for role, mask in (("client", None), ("server", key)):
        f = lambda *a, **k: frame(*a, mask=mask, **k)
        seeds = [
            f(1, b"Hello"), f(2, bytes(range(200))), f(1, b"Hel", fin=False) + f(9, b"p") + f(0, b"lo"),
            f(8, struct.pack(">H", 1000) + b"bye"), f(8, b""), f(10, b"pong"), f(1, "κόσμε".encode()),
            f(1, b"\xce\xba\xe1", fin=False) + f(0, b"\xbd\xb9"),
        ]
        for s in seeds:
            put("ws-" + role, b"\xff" + s)
            put("ws-" + role, b"\x01" + s)
        for s in seeds + [f(1, hello_deflated, rsv1=True), f(1, hello_deflated[:3], rsv1=True, fin=False) + f(0, hello_deflated[3:])]:
            put("ws-%s-deflate" % role, b"\xff" + s)
    req = (b"GET /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits; server_max_window_bits=10\r\n\r\n")
    put("http-request", b"\xff" + req)
    put("http-request", b"\xff" + req + frame(1, b"hi", mask=key))
    put("http-request", b"\xff" + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    resp = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\n"
            b"Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n\r\n")
    put("http-response", b"\xff" + resp)
    put("http-response", b"\xff" + b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno!")
    put("tcp-line", b"\xff" + b"hello\nworld\r\n\n" + b"x" * 300 + b"\n")
    put("tcp-delimiter", b"\xff\x01" + b"a\r\n.b\r\n.\r\n.")
    put("tcp-delimiter", b"\xff\x40" + b"a\x00bb\x00")
    put("tcp-fixed", b"\xff\x03" + b"abcdefgh")
    for shape in (0, 1, 2, 3, 4, 6, 0x20):
        put("tcp-length", b"\xff" + bytes([shape]) + b"\x00\x00\x00\x05hello\x00\x00\x00\x00")


def from_reports(dirs):
    for d in dirs:
        for path in glob.glob(os.path.join(d, "*_case_*.json")):
            try:
                case = json.load(open(path))
            except ValueError:
                continue
            cid = case.get("id", "")
            deflate = cid.startswith("12.") or cid.startswith("13.")
            # isServer: the suite was the server (client mode), so what it sent is
            # what moonwire's client parses; otherwise moonwire's server parsed it.
            role = "client" if case.get("isServer") else "server"
            sent = b""
            outgoing = [e for e in case.get("wirelog") or [] if e[0] == "TO"]
            # The first is the handshake (full text in httpRequest/httpResponse); the
            # log cuts long chunks short, so a stream ends at the first cut one.
            for entry in outgoing[1:]:
                hexdata = entry[1][1]
                if hexdata.endswith(" ..."):
                    break
                sent += bytes.fromhex(hexdata)
            if role == "server" and case.get("httpRequest"):
                put("http-request", b"\xff" + case["httpRequest"].encode("latin-1"), limit=40)
            if role == "client" and case.get("httpResponse"):
                put("http-response", b"\xff" + case["httpResponse"].encode("latin-1"), limit=40)
            if sent:
                put("ws-%s%s" % (role, "-deflate" if deflate else ""), b"\xff" + sent, limit=250)


handmade()
from_reports(sys.argv[1:])
for t in sorted(count):
    print("%-18s %d new seeds" % (t, count[t]))
