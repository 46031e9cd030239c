"""mw.protobuf against Python's protobuf (upb): the reference half of
scripts/protobuf_diff.sh.

  diff.py gen DESCRIPTOR_SET CASES       random and edge-case messages of every type,
                                         one line each: type, bytes (hex), value, re-encoding
  diff.py check DESCRIPTOR_SET LUA_CASES moonwire's encodings: Python must read the same
                                         value and write the same bytes

Values are compared in one canonical text both sides write (dump): fields sorted
by name, integers in decimal (uint64 at or above 2^63 as the negative integer of
the same bits, as mw.protobuf gives them), doubles and floats by their 64 bits,
strings and bytes in hex, enums by name (unknown numbers as numbers).
"""
import random
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD

INT_TYPES = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_SINT32, FD.TYPE_SINT64,
             FD.TYPE_FIXED32, FD.TYPE_FIXED64, FD.TYPE_SFIXED32, FD.TYPE_SFIXED64}


def load_pool(path):
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(path, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return pool


def repeated(f):
    r = getattr(f, "is_repeated", None)
    return r if isinstance(r, bool) else f.label == FD.LABEL_REPEATED


def is_map(f):
    return f.message_type is not None and f.message_type.GetOptions().map_entry


def scalar(f, v):
    t = f.type
    if t in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        return dump(v)
    if t == FD.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    if t == FD.TYPE_BOOL:
        return "true" if v else "false"
    if t == FD.TYPE_STRING:
        return "s:" + v.encode("utf-8").hex()
    if t == FD.TYPE_BYTES:
        return "b:" + v.hex()
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return "f:" + struct.pack("<d", v).hex()
    if v >= 1 << 63:
        v -= 1 << 64
    return str(v)


def dump(msg):
    parts = []
    for f in sorted(msg.DESCRIPTOR.fields, key=lambda f: f.name):
        v = getattr(msg, f.name)
        if is_map(f):
            kf = f.message_type.fields_by_name["key"]
            vf = f.message_type.fields_by_name["value"]
            items = sorted(scalar(kf, k) + "=" + scalar(vf, v[k]) for k in v)
            parts.append(f.name + ":{" + ",".join(items) + "}")
        elif repeated(f):
            parts.append(f.name + ":[" + ",".join(scalar(f, x) for x in v) + "]")
        elif f.has_presence:
            if msg.HasField(f.name):
                parts.append(f.name + ":" + scalar(f, v))
        else:
            parts.append(f.name + ":" + scalar(f, v))
    return "{" + ",".join(parts) + "}"


# ---------------------------------------------------------------- random values

EDGE_DOUBLES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.5, -2.25, 1e308, 5e-324, 2.0 ** 53 + 2]
EDGE_FLOATS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.5, 3.4028234663852886e38, 1.401298464324817e-45]


def rand_int(rng, t):
    bits, signed = {
        FD.TYPE_INT32: (32, True), FD.TYPE_SINT32: (32, True), FD.TYPE_SFIXED32: (32, True),
        FD.TYPE_INT64: (64, True), FD.TYPE_SINT64: (64, True), FD.TYPE_SFIXED64: (64, True),
        FD.TYPE_UINT32: (32, False), FD.TYPE_FIXED32: (32, False),
        FD.TYPE_UINT64: (64, False), FD.TYPE_FIXED64: (64, False)}[t]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    r = rng.random()
    if r < 0.3:
        return rng.choice([lo, hi, 0, 1, lo + 1, hi - 1, 127, 128, 300] + ([-1, -128] if signed else [1 << (bits - 1)]))
    if r < 0.6:
        return max(lo, min(hi, rng.randint(-1000, 1000)))
    return rng.randint(lo, hi)


def rand_text(rng):
    alphabet = "abcxyz _-\"\\\n\t\u00e9\u00fc\u4e2d\u6587\U0001F600\u0000\u007f\u0800\uffff"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 10, 40])))


def rand_scalar(rng, f, closed_enum):
    t = f.type
    if t in INT_TYPES:
        return rand_int(rng, t)
    if t == FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FD.TYPE_DOUBLE:
        return rng.choice(EDGE_DOUBLES) if rng.random() < 0.4 else rng.uniform(-1e6, 1e6)
    if t == FD.TYPE_FLOAT:
        x = rng.choice(EDGE_FLOATS) if rng.random() < 0.4 else rng.uniform(-1e6, 1e6)
        return struct.unpack("<f", struct.pack("<f", x))[0]
    if t == FD.TYPE_STRING:
        return rand_text(rng)
    if t == FD.TYPE_BYTES:
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 33])))
    if t == FD.TYPE_ENUM:
        values = [v.number for v in f.enum_type.values]
        if not closed_enum and rng.random() < 0.15:
            return rng.choice([7, 99, -100, 2147483647])
        return rng.choice(values)
    raise ValueError(t)


def closed(f):
    if f.enum_type is None:
        return False
    return f.enum_type.is_closed if hasattr(f.enum_type, "is_closed") else f.file.syntax == "proto2"


def fill(rng, msg, depth):
    d = msg.DESCRIPTOR
    chosen = {o.name: rng.choice(list(o.fields) + [None]) for o in d.oneofs
              if not getattr(o, "is_synthetic", False) and len(o.fields) > 1}
    for f in d.fields:
        o = f.containing_oneof
        if o is not None and o.name in chosen and chosen[o.name] is not f:
            continue
        required = f.is_required if hasattr(f, "is_required") else f.label == FD.LABEL_REQUIRED
        if not required and rng.random() < 0.3:
            continue
        v = getattr(msg, f.name)
        if is_map(f):
            kf = f.message_type.fields_by_name["key"]
            vf = f.message_type.fields_by_name["value"]
            for _ in range(rng.choice([0, 1, 3])):
                k = rand_scalar(rng, kf, False)
                if vf.type == FD.TYPE_MESSAGE:
                    if depth < 3:
                        fill(rng, v[k], depth + 1)
                else:
                    v[k] = rand_scalar(rng, vf, closed(vf))
        elif repeated(f):
            for _ in range(rng.choice([0, 1, 2, 5])):
                if f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
                    if depth < 3:
                        fill(rng, v.add(), depth + 1)
                else:
                    v.append(rand_scalar(rng, f, closed(f)))
        elif f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            if depth < 3:
                v.SetInParent()
                fill(rng, v, depth + 1)
        else:
            setattr(msg, f.name, rand_scalar(rng, f, closed(f)))


TYPES = ["corpus.Scalars", "corpus.Optionals", "corpus.Repeats", "corpus.Maps", "corpus.Tree", "corpus.Envelope",
         "corpus.Newer", "legacy.Legacy", "google.protobuf.Struct", "google.protobuf.Timestamp", "google.protobuf.Any"]


def cls_of(pool, name):
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def gen(pool, out, per_type=60):
    rng = random.Random(20261126)
    lines = []

    def add(name, msg, as_name=None):
        data = msg.SerializeToString(deterministic=True)
        target = cls_of(pool, as_name or name)
        parsed = target.FromString(data)
        lines.append("\t".join([as_name or name, data.hex(), dump(parsed),
                                parsed.SerializeToString(deterministic=True).hex()]))

    for name in TYPES:
        cls = cls_of(pool, name)
        if name != "legacy.Legacy":
            add(name, cls())
        for _ in range(per_type):
            m = cls()
            fill(rng, m, 0)
            add(name, m)
    # Unknown fields: a Newer read as an Older keeps what Older does not know.
    newer, tree = cls_of(pool, "corpus.Newer"), cls_of(pool, "corpus.Tree")
    for _ in range(per_type):
        m = newer()
        fill(rng, m, 0)
        add("corpus.Newer", m, as_name="corpus.Older")
    # Packed and unpacked: both spellings of a repeated field decode the same.
    rep = cls_of(pool, "corpus.Repeats")
    m = rep(i32=[1, -2, 300], unpacked=[5, 6], d=[1.0, float("nan")], unpacked_d=[-0.0, float("inf")])
    add("corpus.Repeats", m)
    # Deep but within the limit: 90 levels of Tree.left.
    m = tree(name="root")
    node = m
    for i in range(90):
        node = node.left
        node.name = "n%d" % i
    add("corpus.Tree", m)
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("diff.py: %d cases written" % len(lines))


def check(pool, path):
    failures = 0
    count = 0
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        count += 1
        name, hexdata, lua_dump = line.split("\t")[:3]
        data = bytes.fromhex(hexdata)
        msg = cls_of(pool, name).FromString(data)
        py_dump = dump(msg)
        again = msg.SerializeToString(deterministic=True)
        if py_dump != lua_dump:
            failures += 1
            print("VALUE %s %s\n  python:   %s\n  moonwire: %s" % (name, hexdata, py_dump, lua_dump))
        elif again != data:
            failures += 1
            print("BYTES %s\n  python:   %s\n  moonwire: %s" % (name, again.hex(), hexdata))
    print("diff.py: %d moonwire encodings read by Python, %d differ" % (count, failures))
    return failures


if __name__ == "__main__":
    pool = load_pool(sys.argv[2])
    if sys.argv[1] == "gen":
        gen(pool, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 60)
    else:
        sys.exit(1 if check(pool, sys.argv[3]) else 0)
