#!/usr/bin/env python3
"""Differential test of mw.msgpack and mw.cbor against Python's msgpack and cbor2.

A corpus of values covering every kind (integers at every encoding boundary up to the
int64 extremes, floats with NaN, the infinities and -0.0, str and bin, nested arrays and
maps, empty array and empty map, nil, ext types, CBOR tags) is encoded by the reference;
moonwire decodes each message and encodes the value again
(scripts/formats/roundtrip.lua). MessagePack: moonwire's bytes equal msgpack-python's
byte for byte (maps written in moonwire's order: keys sorted by their encoded bytes).
CBOR: cbor2 decodes moonwire's bytes to a value equal to the original (same types, float
bits, tags). Then messages moonwire must refuse (an integer past int64, invalid UTF-8 in
a string, truncated input, lengths past the end, a 2 GiB declared length, 10 000 levels
of nesting): each an error in words.

usage: diff.py MOONWIRE_BIN      (run from scripts/test.sh; takes a few seconds)
       diff.py --seeds           writes the messages of up to 4 KiB as the fuzz targets'
                                 seeds, Fuzz/corpus/lua-msgpack and Fuzz/corpus/lua-cbor
"""
import math
import os
import struct
import subprocess
import sys
import tempfile

import cbor2
import msgpack

MOONWIRE = sys.argv[1] if len(sys.argv) > 1 else "moonwire"
HERE = os.path.dirname(os.path.abspath(__file__))


def ints():
    values = [0, 1, 23, 24, 31, 32, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1]
    values += [-1, -24, -25, -31, -32, -33, -127, -128, -129, -255, -256, -257, -32767, -32768, -32769,
                -65536, -65537, -2**31, -2**31 - 1, -2**32, -2**32 - 1, -2**53 - 1, -2**63]
    return values


def floats():
    nan = float("nan")
    neg_nan = struct.unpack(">d", bytes.fromhex("fff8000000000000"))[0]
    payload_nan = struct.unpack(">d", bytes.fromhex("7ff0000000000001"))[0]
    return [0.0, -0.0, 1.5, -2.25, 0.1, 1e308, -1e-308, 5e-324, 3.141592653589793, 2.0**53, 1e16,
            math.inf, -math.inf, nan, neg_nan, payload_nan]


def strings():
    return ["", "a", "x" * 23, "x" * 24, "x" * 31, "x" * 32, "y" * 255, "y" * 256, "z" * 65535, "z" * 65536,
            "héllo ☃ 😀", "\x00nul\x7f"]


def blobs():
    return [b"", b"\x00\xff", b"\x80" * 255, b"\x81" * 256, b"\x82" * 65536, "ok".encode()]


def nested(depth):
    v = "leaf"
    for i in range(depth):
        v = [v] if i % 2 else {"k": v}
    return v


def containers():
    return [
        [], {}, [[]], [{}], {"a": []}, {"b": {}}, [1, 2, 3], list(range(15)), list(range(16)), list(range(65536)),
        {"a": 1}, {f"k{i}": i for i in range(15)}, {f"k{i}": i for i in range(16)}, {f"k{i}": i for i in range(300)},
        {1: "one", 2: "two", -1: "minus", "a": None}, {0: 1}, {True: "t", False: "f"}, {1.5: "float key"},
        [None, True, False, None], {"null": None},
        {"user": {"id": 2**62 + 7, "name": "ann", "tags": ["a", "b"], "none": [], "empty": {}}, "raw": b"\x00\x01",
         "score": -0.0, "big": -2**63},
        nested(100), nested(390),  # cbor2 stops at 400 levels
    ]


def corpus():
    return ints() + floats() + strings() + blobs() + [None, True, False] + containers()


def msgpack_canonical(v):
    """The value with every map's keys in moonwire's order: by their encoded bytes."""
    if isinstance(v, dict):
        items = [(k, msgpack_canonical(x)) for k, x in v.items()]
        return dict(sorted(items, key=lambda kv: msgpack.packb(kv[0])))
    if isinstance(v, list):
        return [msgpack_canonical(x) for x in v]
    return v


def cbor_canonical(v):
    if isinstance(v, dict):
        items = [(k, cbor_canonical(x)) for k, x in v.items()]
        return dict(sorted(items, key=lambda kv: cbor2.dumps(kv[0])))
    if isinstance(v, list):
        return [cbor_canonical(x) for x in v]
    if isinstance(v, cbor2.CBORTag):
        return cbor2.CBORTag(v.tag, cbor_canonical(v.value))
    return v


def same(a, b):
    """Equal values of the same types; floats by their bits (NaN too)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, cbor2.CBORTag):
        return a.tag == b.tag and same(a.value, b.value)
    return a == b


def run_moonwire(fmt, messages):
    with tempfile.NamedTemporaryFile("w", suffix=".hex", delete=False) as f:
        f.write("\n".join(m.hex() for m in messages) + "\n")
        path = f.name
    try:
        out = subprocess.run([MOONWIRE, "run", os.path.join(HERE, "roundtrip.lua"), fmt, path],
                             capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        sys.exit(f"formats: moonwire run failed ({out.returncode}): {out.stderr}")
    lines = out.stdout.split("\n")[:-1]
    assert len(lines) == len(messages), (len(lines), len(messages), out.stderr)
    return lines


def short(v):
    text = repr(v)
    return text if len(text) < 100 else text[:100] + "..."


# Messages moonwire must refuse, and a word its error says.
BAD_MSGPACK = [
    (msgpack.packb(2**64 - 1), "past Lua's integers"),
    (msgpack.packb(2**63), "past Lua's integers"),
    (b"\xa2\xff\xfe", "not valid UTF-8"),
    (b"\xa3\xed\xa0\x80", "not valid UTF-8"),  # a surrogate
    (msgpack.packb([1, 2, 3])[:-1], "items with"),
    (msgpack.packb({"a": "bc"})[:-1], "truncated"),
    (b"\xcb\x00\x00", "truncated"),
    (b"\xdb\x00\x00\x00\x10abc", "truncated"),  # a length past the end
    (b"\xc6\x80\x00\x00\x00", "truncated"),  # 2 GiB declared
    (b"\xdd\x80\x00\x00\x00\x01", "items with"),
    (b"\xdf\x80\x00\x00\x00\x01\x01", "pairs with"),
    (b"\x91" * 10000 + b"\x01", "nested more than 500"),
    (b"\x81\xa1a" * 10000 + b"\x01", "nested more than 500"),
    (b"\xc1", "not a MessagePack type"),
    (b"\x01\x02", "after the MessagePack value"),
    (b"", "empty message"),
    (b"\x81\xc0\x01", "nil map key"),
    (b"\x81\x90\x01", "array map key"),
]
BAD_CBOR = [
    (cbor2.dumps(2**64 - 1), "past Lua's integers"),
    (cbor2.dumps(-2**64), "past Lua's integers"),
    (cbor2.dumps(2**63), "past Lua's integers"),
    (b"\x62\xff\xfe", "not valid UTF-8"),
    (cbor2.dumps([1, 2, 3])[:-1], "items with"),
    (b"\xfb\x00\x00", "truncated"),
    (b"\x7a\x00\x00\x00\x10abc", "truncated"),
    (b"\x5a\x80\x00\x00\x00", "truncated"),  # 2 GiB declared
    (b"\x5b\x00\x00\x00\x00\x80\x00\x00\x00", "truncated"),
    (b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff\x01", "items with"),
    (b"\x81" * 10000 + b"\x01", "nested more than 500"),
    (b"\xd9\x0f\xa0" * 10000 + b"\x01", "nested more than 500"),  # tags
    (b"\x9f\x01", "truncated"),
    (b"\x5f\x41a\x61b\xff", "not a definite"),
    (b"\xff", "break"),
    (b"\x1c", "reserved"),
    (b"\xf0", "simple value"),
    (b"\x01\x02", "after the CBOR value"),
    (b"", "empty message"),
    (b"\xa1\xf6\x01", "nil map key"),
]


def write_seeds(mp_messages, cb_messages):
    import hashlib
    root = os.path.join(HERE, "..", "..", "Fuzz", "corpus")
    for target, messages in (("lua-msgpack", mp_messages), ("lua-cbor", cb_messages)):
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for m in messages:
            m = m[:4096]
            with open(os.path.join(d, hashlib.sha1(m).hexdigest()[:16]), "wb") as f:
                f.write(m)


def main():
    sys.setrecursionlimit(20000)
    failures = []
    values = corpus()

    # MessagePack: byte for byte.
    mp_values = values + [msgpack.ExtType(5, b"abcd"), msgpack.Timestamp(1700000000, 5), msgpack.Timestamp(2**34 + 1, 0), msgpack.ExtType(7, b"x" * 3),
                          msgpack.ExtType(8, b"y" * 300), {"ext": msgpack.ExtType(1, b"\x01")}]
    mp_messages = [msgpack.packb(msgpack_canonical(v)) for v in mp_values]
    cb_values = values + [cbor2.CBORTag(4000, "x"), cbor2.CBORTag(55799, {"a": [1, 2]}), 2**64, -2**64 - 1,
                          cbor2.CBORTag(4001, cbor2.CBORTag(4002, b"\x00"))]
    cb_messages = [cbor2.dumps(cbor_canonical(v)) for v in cb_values]
    if MOONWIRE == "--seeds":
        write_seeds(mp_messages + [m for m, _ in BAD_MSGPACK], cb_messages + [m for m, _ in BAD_CBOR]
                    + [b"\x9f\x01\x5f\x41a\x41b\xff\x7f\x61a\xff\xff", b"\xf9\x7e\x01", b"\xf7", b"\xfa\x7f\xc0\x00\x01"])
        return
    for v, m, line in zip(mp_values, mp_messages, run_moonwire("msgpack", mp_messages)):
        if line != "V " + m.hex():
            failures.append(f"msgpack {short(v)}: python {short(m.hex())}, moonwire {short(line)}")
    bad = run_moonwire("msgpack", [m for m, _ in BAD_MSGPACK])
    for (m, word), line in zip(BAD_MSGPACK, bad):
        if not (line.startswith("E ") and word in line):
            failures.append(f"msgpack bad input {short(m.hex())}: expected an error with '{word}', got {short(line)}")

    # CBOR: equal values both ways (and how many are also byte-equal to cbor2's).
    byte_equal = 0
    for v, m, line in zip(cb_values, cb_messages, run_moonwire("cbor", cb_messages)):
        if not line.startswith("V "):
            failures.append(f"cbor {short(v)}: moonwire {short(line)}")
            continue
        back = bytes.fromhex(line[2:])
        byte_equal += back == m
        if not same(cbor2.loads(back), cbor2.loads(m)):
            failures.append(f"cbor {short(v)}: python {short(m.hex())}, moonwire {short(line)}")
    bad = run_moonwire("cbor", [m for m, _ in BAD_CBOR])
    for (m, word), line in zip(BAD_CBOR, bad):
        if not (line.startswith("E ") and word in line):
            failures.append(f"cbor bad input {short(m.hex())}: expected an error with '{word}', got {short(line)}")

    for f in failures:
        print("formats: " + f, file=sys.stderr)
    print(f"formats: msgpack {len(mp_values)} values byte-equal to msgpack {msgpack.version}, {len(BAD_MSGPACK)} bad inputs refused; "
          f"cbor {len(cb_values)} values equal both ways with cbor2 ({byte_equal} also byte-equal), {len(BAD_CBOR)} bad inputs refused; "
          f"{len(failures)} failures", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
