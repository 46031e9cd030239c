#!/usr/bin/env python3
"""Network-edge fuzzer: attacks a moonwire WebSocket server over raw sockets for a
chosen time and checks after every batch that it still answers a well-formed echo
and that its resident memory stays bounded.

    scripts/edge_fuzz.py [--seconds 600] [--bin PATH] [--rss-mib 100] [--slowloris 20]
                         [--server script|listen] [--rss-log FILE]

Starts `moonwire run bench/edge_fuzz_server.lua` (1 MiB max_message,
permessage-deflate, handshake_timeout 5 s), or with `--server listen`
`moonwire listen --echo --compress --max-message 1M` (handshake timeout 10 s).
Each batch opens connections that send: mutated upgrade requests (flipped, cut,
duplicated bytes), upgrade requests RFC 6455 forbids (a method other than GET,
HTTP/1.0, a Sec-WebSocket-Key that is not the base64 of 16 bytes, more header
fields than the server's 128), frames after a valid upgrade with bad lengths,
2^63 lengths, lengths just above max_message, reserved opcodes and bits, unmasked
client frames, invalid UTF-8, bad close payloads, truncated frames, bad
compressed data, random bytes. Meanwhile a pool of slowloris connections sends a
handshake one byte per second. A forbidden upgrade request that gets `101` fails
the run. Exit status 0 when every check passed, 1 otherwise."""
import argparse, base64, os, random, socket, struct, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def request(port, extra=b"", method=b"GET", version=b"HTTP/1.1", key=None):
    key = base64.b64encode(os.urandom(16)) if key is None else key
    return (method + b" / " + version + b"\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " % port + key + b"\r\nSec-WebSocket-Version: 13\r\n" + extra + b"\r\n")


def bad_key(rng):
    """A Sec-WebSocket-Key that is not the base64 of 16 bytes."""
    choice = rng.randrange(4)
    if choice == 0:
        return base64.b64encode(os.urandom(rng.choice([n for n in range(0, 40) if n != 16])))
    if choice == 1:
        return base64.b64encode(os.urandom(16)).rstrip(b"=")
    if choice == 2:
        return bytes(rng.choice(b"!*.-_~@#$%") for _ in range(22)) + b"=="
    return b""


def broken_upgrades(port, rng):
    """Yields (name, request): upgrade requests RFC 6455 forbids; none may get 101."""
    yield "method not GET", request(port, method=rng.choice([b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"HEAD"]))
    yield "HTTP/1.0", request(port, version=b"HTTP/1.0")
    yield "key not 16 bytes", request(port, key=bad_key(rng))
    yield "header flood", request(port, extra=b"a:b\r\n" * rng.randint(129, 10000))


def frame(opcode, payload, fin=True, rsv=0, mask=True, length=None):
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask:
        key = os.urandom(4)
        return head + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return head + payload


def connect(port, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def drain(s, limit=1.0):
    """Reads until the server closes or `limit` seconds; returns the bytes."""
    s.settimeout(limit)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, OSError):
        pass
    return data


def mutate(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        i = rng.randrange(len(data)) if data else 0
        if op == 0 and data:
            data[i] = rng.randrange(256)
        elif op == 1:
            del data[i:i + rng.randint(1, 16)]
        elif op == 2:
            data[i:i] = data[i:i + rng.randint(1, 64)] * rng.randint(1, 20)
        else:
            data[i:i] = os.urandom(rng.randint(1, 32))
    return bytes(data)


def attacks(port, rng):
    """Yields (name, bytes sent after connecting, True when it must not be upgraded)."""
    for name, data in broken_upgrades(port, rng):
        yield name, data, True
    for name, data in loose_attacks(port, rng):
        yield name, data, False


def loose_attacks(port, rng):
    """Yields (name, bytes sent after connecting)."""
    ok = request(port)
    deflate = request(port, b"Sec-WebSocket-Extensions: permessage-deflate\r\n")
    yield "mutated handshake", mutate(ok, rng)
    yield "mutated handshake + frame", mutate(ok + frame(1, b"hello"), rng)
    yield "huge header", b"GET / HTTP/1.1\r\nX: " + b"a" * rng.randint(10000, 200000) + b"\r\n\r\n"
    yield "2^63 length", ok + frame(2, b"", length=(1 << 63) + rng.randrange(1 << 20))
    yield "length above max_message", ok + frame(2, b"x" * 100, length=(1 << 20) + 1 + rng.randrange(1 << 30))
    yield "claimed length never sent", ok + frame(2, b"x" * 100, length=900000)
    yield "reserved opcode", ok + frame(rng.choice([3, 4, 5, 6, 7, 11, 12, 13, 14, 15]), b"x")
    yield "reserved bits", ok + frame(1, b"x", rsv=rng.randrange(1, 8))
    yield "unmasked", ok + frame(1, b"hello", mask=False)
    yield "invalid UTF-8", ok + frame(1, b"\xce\xba\xe1\xbd", fin=False) + frame(0, b"\xff\xfe", fin=False)
    yield "bad close", ok + frame(8, struct.pack(">H", rng.choice([0, 999, 1004, 1005, 1006, 2999, 5000])) + b"\xff")
    yield "long ping", ok + frame(9, b"p" * 126)
    yield "fragmented ping", ok + frame(9, b"p", fin=False)
    yield "truncated frame", ok + frame(2, os.urandom(300))[:rng.randint(1, 200)]
    yield "bad deflate", deflate + frame(1, os.urandom(rng.randint(1, 200)), rsv=4)
    yield "deflate bomb", deflate + frame(2, b"\x00" * 20 + bytes([0x78]) + b"\x00" * 3000, rsv=4)
    yield "random frames", ok + mutate(b"".join(frame(rng.randrange(16), os.urandom(rng.randint(0, 300))) for _ in range(5)), rng)
    yield "random bytes", os.urandom(rng.randint(1, 4096))


def echo_ok(port):
    try:
        s = connect(port)
        s.sendall(request(port))
        if not read_response(s).startswith(b"HTTP/1.1 101"):
            return False
        s.sendall(frame(1, b"still there?"))
        want = bytes([0x81, 12]) + b"still there?"
        got = b""
        while len(got) < len(want):
            chunk = s.recv(4096)
            if not chunk:
                return False
            got += chunk
        s.close()
        return got[:len(want)] == want
    except OSError:
        return False


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Slowloris(threading.Thread):
    """Keeps `n` connections each sending a valid handshake one byte per second."""
    def __init__(self, port, n, stop):
        super().__init__(daemon=True)
        self.port, self.n, self.stop, self.dropped = port, n, stop, 0

    def run(self):
        conns = []
        while not self.stop.is_set():
            while len(conns) < self.n:
                try:
                    conns.append([connect(self.port), request(self.port), 0])
                except OSError:
                    break
            for c in list(conns):
                s, data, i = c
                try:
                    s.send(data[i:i + 1])
                    c[2] += 1
                except OSError:
                    # Dropped by handshake_timeout, as it should be.
                    self.dropped += 1
                    s.close()
                    conns.remove(c)
            self.stop.wait(1.0)
        for s, _, _ in conns:
            s.close()


def start_server(a):
    """Starts the server under attack; returns (process, port) or (process, None)."""
    log = open("/tmp/edge_fuzz_server.log", "w")
    if a.server == "listen":
        server = subprocess.Popen([a.bin, "listen", "--echo", "--compress", "--max-message", "1M", "ws://127.0.0.1:0/"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 30
        while time.time() < deadline and server.poll() is None:
            with open("/tmp/edge_fuzz_server.log") as f:
                for line in f:
                    if "listening on ws://127.0.0.1:" in line:
                        return server, int(line.split("ws://127.0.0.1:")[1].split("/")[0])
            time.sleep(0.05)
        return server, None
    server = subprocess.Popen([a.bin, "run", os.path.join(ROOT, "bench/edge_fuzz_server.lua"), "0"],
                              stdout=subprocess.PIPE, stderr=log, text=True)
    line = server.stdout.readline()
    if not line.startswith("READY"):
        return server, None
    return server, int(line.split()[1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--bin", default=os.environ.get("MOONWIRE_BIN"))
    p.add_argument("--rss-mib", type=float, default=100)
    p.add_argument("--slowloris", type=int, default=20)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--server", choices=["script", "listen"], default="script")
    p.add_argument("--rss-log", default=None, help="append 'seconds RSS_MiB' after every batch to this file")
    a = p.parse_args()
    if not a.bin:
        a.bin = os.path.join(subprocess.check_output(["swift", "build", "--show-bin-path"], cwd=ROOT, text=True).strip(), "moonwire")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    server, port = start_server(a)
    if port is None:
        print("edge_fuzz: the server did not start; see /tmp/edge_fuzz_server.log", file=sys.stderr)
        server.kill()
        return 1
    rss_log = open(a.rss_log, "w") if a.rss_log else None
    stop = threading.Event()
    slow = Slowloris(port, a.slowloris, stop)
    slow.start()
    start = time.time()
    batches = sent = broken = 0
    upgraded = {}
    first_rss = rss_mib(server.pid)
    peak = first_rss
    failure = None
    try:
        while time.time() - start < a.seconds:
            for name, data, must_refuse in attacks(port, rng):
                answer = b""
                try:
                    s = connect(port)
                    # Sometimes in pieces, so the server sees split headers and frames.
                    if rng.random() < 0.3:
                        for i in range(0, len(data), 7):
                            s.sendall(data[i:i + 7])
                    else:
                        s.sendall(data)
                    answer = drain(s, 0.5)
                    s.close()
                except OSError:
                    pass
                sent += 1
                if must_refuse:
                    broken += 1
                    if answer.startswith(b"HTTP/1.1 101"):
                        upgraded[name] = upgraded.get(name, 0) + 1
            batches += 1
            if server.poll() is not None:
                failure = "the server exited with %s" % server.returncode
                break
            if not echo_ok(port):
                failure = "no echo after batch %d" % batches
                break
            rss = rss_mib(server.pid)
            peak = max(peak, rss)
            if rss_log:
                rss_log.write("%.1f %.1f\n" % (time.time() - start, rss))
                rss_log.flush()
            if rss > a.rss_mib:
                failure = "RSS %.1f MiB above %.0f MiB after batch %d" % (rss, a.rss_mib, batches)
                break
            if batches % 20 == 0:
                print("edge_fuzz: %ds, %d batches, %d attack connections, RSS %.1f MiB (peak %.1f), slowloris dropped %d, "
                      "broken upgrades %d (upgraded %d)"
                      % (time.time() - start, batches, sent, rss, peak, slow.dropped, broken, sum(upgraded.values())), flush=True)
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    print("edge_fuzz: seed %d, %s server, %.0fs, %d batches, %d attack connections, RSS %.1f MiB at the start, peak %.1f MiB, "
          "slowloris connections dropped by handshake_timeout: %d"
          % (seed, a.server, time.time() - start, batches, sent, first_rss, peak, slow.dropped))
    print("edge_fuzz: %d upgrade requests RFC 6455 forbids, %d of them upgraded%s"
          % (broken, sum(upgraded.values()), "".join(" (%s: %d)" % kv for kv in sorted(upgraded.items()))))
    if upgraded and not failure:
        failure = "the server upgraded %d requests RFC 6455 forbids" % sum(upgraded.values())
    if failure:
        print("edge_fuzz: FAILED: " + failure, file=sys.stderr)
        return 1
    print("edge_fuzz: the server answered after every batch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
