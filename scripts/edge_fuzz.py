#!/usr/bin/env python3
"""Network-edge fuzzer: attacks a moonwire WebSocket server over raw sockets for a
chosen time and checks after every batch that it still answers a well-formed echo
and that its resident memory stays bounded.

    scripts/edge_fuzz.py [--seconds 600] [--bin PATH] [--rss-mib 100] [--slowloris 20]

Starts `moonwire run bench/edge_fuzz_server.lua` (1 MiB max_message,
permessage-deflate, handshake_timeout 5 s). Each batch opens connections that send:
mutated upgrade requests (flipped, cut, duplicated bytes), frames after a valid
upgrade with bad lengths, 2^63 lengths, lengths just above max_message, reserved
opcodes and bits, unmasked client frames, invalid UTF-8, bad close payloads,
truncated frames, bad compressed data, random bytes. Meanwhile a pool of
slowloris connections sends a handshake one byte per second. Exit status 0 when
every check passed, 1 otherwise."""
import argparse, base64, os, random, socket, struct, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def request(port, extra=b""):
    key = base64.b64encode(os.urandom(16))
    return (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " % port + key + b"\r\nSec-WebSocket-Version: 13\r\n" + extra + b"\r\n")


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--bin", default=os.environ.get("MOONWIRE_BIN"))
    p.add_argument("--rss-mib", type=float, default=100)
    p.add_argument("--slowloris", type=int, default=20)
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args()
    if not a.bin:
        a.bin = os.path.join(subprocess.check_output(["swift", "build", "--show-bin-path"], cwd=ROOT, text=True).strip(), "moonwire")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    server = subprocess.Popen([a.bin, "run", os.path.join(ROOT, "bench/edge_fuzz_server.lua"), "0"],
                              stdout=subprocess.PIPE, stderr=open("/tmp/edge_fuzz_server.log", "w"), text=True)
    line = server.stdout.readline()
    if not line.startswith("READY"):
        print("edge_fuzz: server did not start: %r" % line, file=sys.stderr)
        return 1
    port = int(line.split()[1])
    stop = threading.Event()
    slow = Slowloris(port, a.slowloris, stop)
    slow.start()
    start = time.time()
    batches = sent = 0
    peak = 0.0
    failure = None
    try:
        while time.time() - start < a.seconds:
            for name, data in attacks(port, rng):
                try:
                    s = connect(port)
                    # Sometimes in pieces, so the server sees split headers and frames.
                    if rng.random() < 0.3:
                        for i in range(0, len(data), 7):
                            s.sendall(data[i:i + 7])
                    else:
                        s.sendall(data)
                    drain(s, 0.5)
                    s.close()
                except OSError:
                    pass
                sent += 1
            batches += 1
            if server.poll() is not None:
                failure = "the server exited with %s" % server.returncode
                break
            if not echo_ok(port):
                failure = "no echo after batch %d" % batches
                break
            rss = rss_mib(server.pid)
            peak = max(peak, rss)
            if rss > a.rss_mib:
                failure = "RSS %.1f MiB above %.0f MiB after batch %d" % (rss, a.rss_mib, batches)
                break
            if batches % 20 == 0:
                print("edge_fuzz: %ds, %d batches, %d attack connections, RSS %.1f MiB (peak %.1f), slowloris dropped %d"
                      % (time.time() - start, batches, sent, rss, peak, slow.dropped), flush=True)
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    print("edge_fuzz: seed %d, %.0fs, %d batches, %d attack connections, peak RSS %.1f MiB, slowloris connections dropped by handshake_timeout: %d"
          % (seed, time.time() - start, batches, sent, peak, slow.dropped))
    if failure:
        print("edge_fuzz: FAILED: " + failure, file=sys.stderr)
        return 1
    print("edge_fuzz: the server answered after every batch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
