"""paho-mqtt's side of bench/mqtt/run.sh: one subscriber and one publisher connection
to the broker; N messages of SIZE bytes published at QOS as fast as paho takes them
(its own in-flight window, 20 by default, bounds QoS 1), timed from the first publish
to the last message received. Prints one JSON line."""
import argparse, json, sys, threading, time

import paho.mqtt.client as mqtt

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--qos", type=int, default=0)
p.add_argument("--n", type=int, default=100000)
p.add_argument("--size", type=int, default=64)
p.add_argument("--timeout", type=float, default=120)
a = p.parse_args()

topic = "bench/paho/%d" % time.time_ns()
done = threading.Event()
subscribed = threading.Event()
received = 0


def on_message(client, userdata, msg):
    global received
    received += 1
    if received == a.n:
        done.set()


def client(name):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name, protocol=mqtt.MQTTv311)
    c.max_queued_messages_set(0)
    return c


sub = client("paho-sub-%d" % time.time_ns())
sub.on_message = on_message
sub.on_subscribe = lambda *args: subscribed.set()
sub.connect("127.0.0.1", a.port, keepalive=60)
sub.loop_start()
sub.subscribe(topic, qos=a.qos)
if not subscribed.wait(10):
    sys.exit("no SUBACK")

pub = client("paho-pub-%d" % time.time_ns())
connected = threading.Event()
pub.on_connect = lambda *args: connected.set()
pub.connect("127.0.0.1", a.port, keepalive=60)
pub.loop_start()
if not connected.wait(10):
    sys.exit("no CONNACK")

payload = b"x" * a.size
start = time.perf_counter()
for _ in range(a.n):
    pub.publish(topic, payload, qos=a.qos)
ok = done.wait(a.timeout)
elapsed = time.perf_counter() - start
print(json.dumps({"client": "paho-mqtt", "qos": a.qos, "n": a.n, "size": a.size, "received": received,
                  "ok": ok, "seconds": round(elapsed, 4), "msgs_per_s": round(received / elapsed)}))
pub.loop_stop()
sub.loop_stop()
