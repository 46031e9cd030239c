#!/usr/bin/env python3
"""The echo bot benchmark's messages (bench/echo_bot/run.sh), written with Python's
protobuf (upb) from the descriptor set protoc made of echo.proto:

    messages.py DESCRIPTORS OUTDIR

writes OUTDIR/msg.pb and reply.pb (the Envelope the load generator sends, and the
reply every bot must send back: the same with hops + 1), msg.json and reply.json
(the same two in protobuf's JSON mapping, as compact JSON: 64-bit integers as
strings, bytes as base64), and OUTDIR/layout.sh with where the sequence number
sits in each (PB_SEQ_AT, JSON_SEQ_AT; sourced by run.sh).

`envelope_class(DESCRIPTORS)` is the message class the picows bot uses."""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

SEQ = 1000000000  # the load generator's first sequence number: 5 varint bytes, 10 digits


def envelope_class(descriptors):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(descriptors, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("echo.Envelope"))


def sample(cls):
    m = cls()
    m.seq = SEQ
    m.hops = 1
    m.ts_ns = 1795000000123456789           # beyond 2^53: exact only as a 64-bit integer
    m.channel = "desk.eu.rates"
    m.sender = "pricer-07@ldn"
    t = m.trade
    t.sym = "EURUSD"
    t.px_e8 = 108_425_000_00
    t.qty_e8 = 2_500_000_000_000_000
    t.side = "buy"
    # floats written the same by Python's repr and JavaScript's JSON.stringify
    for px, qty, orders in ((1.08425, 1000000.5, 3), (1.0842, 1250000.25, 4), (1.08415, 1500000.75, 5),
                            (1.0841, 1750000.5, 6)):
        b = t.bids.add()
        b.px, b.qty, b.orders = px, qty, orders
    for px, qty, orders in ((1.0843, 750000.5, 2), (1.08435, 1250000.25, 3), (1.0844, 1750000.75, 4),
                            (1.08445, 2250000.5, 5)):
        a = t.asks.add()
        a.px, a.qty, a.orders = px, qty, orders
    m.tags.extend(["fx", "spot", "g10", "stream"])
    m.sig = bytes((i * 37 + 11) % 256 for i in range(32))
    m.text = "quote refresh: tighten 0.2 pips on the bid side"
    return m


def main():
    descriptors, out = sys.argv[1], sys.argv[2]
    cls = envelope_class(descriptors)
    msg = sample(cls)
    reply = cls()
    reply.CopyFrom(msg)
    reply.hops += 1
    layout = []
    for name, m in (("msg", msg), ("reply", reply)):
        pb = m.SerializeToString()
        text = json.dumps(json_format.MessageToDict(m, preserving_proto_field_name=True),
                          separators=(",", ":"))
        # JSON.stringify(JSON.parse(text)) in node must give back the same text
        assert text.isascii()
        with open(f"{out}/{name}.pb", "wb") as f:
            f.write(pb)
        with open(f"{out}/{name}.json", "w") as f:
            f.write(text)
        if name == "msg":
            assert pb[0] == 0x08 and len(pb) > 6   # field 1, varint, first
            layout += ["PB_SEQ_AT=1", f"JSON_SEQ_AT={text.index(str(SEQ))}",
                       f"PB_BYTES={len(pb)}", f"JSON_BYTES={len(text)}"]
    with open(f"{out}/layout.sh", "w") as f:
        f.write("\n".join(layout) + "\n")


if __name__ == "__main__":
    main()
