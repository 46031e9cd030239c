#!/usr/bin/env node
// Peer client: node `ws` (Debian's node-ws). Workloads rtt, pipelined, fanout
// with the standard client CLI; prints one JSON line. Same definitions as
// peercli.py (percentiles, fanout ticks), see bench/README.md.
'use strict';
module.paths.push('/usr/share/nodejs'); // where Debian installs ws; no NODE_PATH needed
const WebSocket = require('ws');
const fs = require('fs');

const DEFAULTS = {url: 'ws://127.0.0.1:9101/', workload: 'rtt', n: 100000, size: 32, type: '',
                  window: 0, warmup: -1, conns: 1000, duration: 10, concurrency: 200, label: 'node-ws'};

function options(argv) {
  const o = Object.assign({}, DEFAULTS);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in DEFAULTS) || argv[i + 1] === undefined) {
      process.stderr.write(`usage: --url URL --workload rtt|pipelined|fanout --n N ... (bad '${argv[i]}')\n`);
      process.exit(2);
    }
    o[key] = typeof DEFAULTS[key] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  o.type = o.type || (o.workload === 'pipelined' ? 'binary' : 'text');
  o.window = o.window || Math.max(16, Math.min(1024, Math.floor(4 * 1048576 / Math.max(1, o.size))));
  if (o.warmup < 0) o.warmup = Math.min(1000, Math.floor(o.n / 10));
  return o;
}

const o = options(process.argv.slice(2));
const binary = o.type !== 'text';
const clock = () => process.hrtime.bigint();
const secondsSince = (t) => Number(clock() - t) / 1e9;

function ownVmHWM() {
  try {
    const m = /VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch (e) {
    return null;
  }
}

function pct(ordered, p) {
  return ordered.length ? ordered[Math.min(ordered.length - 1, Math.floor(p / 100 * ordered.length))] : null;
}

function report(fields) {
  const line = Object.assign({peer: o.label, workload: o.workload, n: o.n, size: o.size, type: o.type},
                             fields, {vmhwm_kb: ownVmHWM()});
  process.stdout.write(JSON.stringify(line) + '\n');
}

function dial() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(o.url, {perMessageDeflate: false, maxPayload: 256 * 1048576});
    ws.binaryType = 'nodebuffer';
    ws.once('error', reject);
    ws.once('open', () => {
      ws.removeListener('error', reject);
      ws.on('error', () => {});
      resolve(ws);
    });
  });
}

// Runs onEcho(ws) for every echo of the expected size until it returns true.
function untilDone(ws, start, onEcho) {
  return new Promise((resolve, reject) => {
    ws.on('close', () => reject(new Error('disconnected early')));
    ws.on('message', (data) => {
      if (data.length !== o.size) return reject(new Error('bad echo length ' + data.length));
      if (onEcho(ws)) resolve();
    });
    start(ws);
  }).finally(() => {
    ws.removeAllListeners('close');
    ws.terminate();
  });
}

async function rtt() {
  const payload = binary ? Buffer.alloc(o.size, 'a') : 'a'.repeat(o.size);
  const latencies = new Float64Array(o.n);
  let count = 0, sentAt = 0n, timedFrom = 0n;
  const send = (ws) => { sentAt = clock(); ws.send(payload, {binary}); };
  await untilDone(await dial(), (ws) => { timedFrom = clock(); send(ws); }, (ws) => {
    const now = clock();
    if (count >= o.warmup) latencies[count - o.warmup] = Number(now - sentAt) / 1000;
    count++;
    if (count === o.warmup) timedFrom = clock();
    if (count === o.warmup + o.n) return true;
    send(ws);
    return false;
  });
  const elapsed = secondsSince(timedFrom);
  const ordered = Array.from(latencies).sort((x, y) => x - y);
  report({ok: true, elapsed_s: elapsed, msgs_per_s: o.n / elapsed, p50_us: pct(ordered, 50),
          p99_us: pct(ordered, 99), max_us: ordered[ordered.length - 1],
          mean_us: ordered.reduce((s, x) => s + x, 0) / ordered.length});
}

async function pipelined() {
  const payload = binary ? Buffer.alloc(o.size, 'a') : 'a'.repeat(o.size);
  const refillAt = Math.max(1, o.window >> 2);
  let sent = 0, received = 0;
  const fill = (ws) => {
    for (; sent < o.n && sent - received < o.window; sent++) ws.send(payload, {binary});
  };
  const ws = await dial();
  const start = clock();
  await untilDone(ws, fill, (conn) => {
    received++;
    if (received === o.n) return true;
    if (o.window - (sent - received) >= refillAt) fill(conn);
    return false;
  });
  const elapsed = secondsSince(start);
  report({ok: true, elapsed_s: elapsed, window: o.window, msgs_per_s: o.n / elapsed,
          mib_per_s: o.n * o.size / elapsed / 1048576});
}

// The JSON echo bot: the 332-byte trade message (bench/json/trade.json) pipelined with
// `window` in flight; every echo is parsed, a field read, the object stringified and sent
// back until n echoes came.
async function json() {
  const template = JSON.parse(fs.readFileSync(require('path').join(__dirname, '../json/trade.json'), 'utf8'));
  let sent = 0, received = 0;
  const ws = await dial();
  const start = clock();
  await new Promise((resolve, reject) => {
    ws.on('close', () => reject(new Error('disconnected early')));
    ws.on('message', (data) => {
      const msg = JSON.parse(data);
      if (msg.seq === undefined) return reject(new Error('bad echo'));
      received++;
      if (received === o.n) return resolve();
      if (sent < o.n) { ws.send(JSON.stringify(msg)); sent++; }
    });
    for (; sent < o.n && sent < o.window; sent++) ws.send(JSON.stringify(template));
  }).finally(() => {
    ws.removeAllListeners('close');
    ws.terminate();
  });
  const elapsed = secondsSince(start);
  report({ok: true, elapsed_s: elapsed, window: o.window, msgs_per_s: o.n / elapsed,
          mib_per_s: o.n * o.size / elapsed / 1048576});
}

async function fanout() {
  const arrived = new Float64Array(o.conns).fill(NaN); // ms since the tick began
  let current = -1, tickStart = 0n, got = 0, late = 0, failures = 0;
  const conns = new Array(o.conns);
  let nextIndex = 0;
  const worker = async () => {
    while (nextIndex < o.conns) {
      const idx = nextIndex++;
      for (let attempt = 1; attempt <= 3; attempt++) {
        try {
          const ws = await dial();
          ws.on('message', (data) => {
            const now = clock();
            if (parseInt(data.toString('latin1', 0, 15), 10) === current && Number.isNaN(arrived[idx])) {
              arrived[idx] = Number(now - tickStart) / 1e6;
              got++;
            } else {
              late++;
            }
          });
          conns[idx] = ws;
          break;
        } catch (e) {
          if (attempt === 3) {
            failures++;
            process.stderr.write(`connect failed: ${e.message}\n`);
          }
        }
      }
    }
  };
  const dialStart = clock();
  await Promise.all(Array.from({length: Math.min(o.concurrency, o.conns)}, worker));
  const connectS = secondsSince(dialStart);
  const live = conns.filter(Boolean);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const pad = 'x'.repeat(Math.max(0, o.size - 16));
  const ticks = [];
  const base = clock();
  for (let tick = 0; tick < o.duration; tick++) {
    const due = base + BigInt(tick) * 1000000000n;
    const delayMs = Number(due - clock()) / 1e6;
    if (delayMs > 0) await sleep(delayMs);
    current = tick; got = 0; arrived.fill(NaN); tickStart = clock();
    const message = String(tick).padStart(15, '0') + ':' + pad;
    for (const ws of live) ws.send(message);
    const sendMs = Number(clock() - tickStart) / 1e6;
    while (got < live.length && clock() < due + 1000000000n) await sleep(2);
    const lat = Array.from(arrived).filter((x) => !Number.isNaN(x)).sort((x, y) => x - y);
    const spread = lat.map((x) => x - lat[0]);
    ticks.push({recv: lat.length, lat_p50_ms: pct(lat, 50), lat_p99_ms: pct(lat, 99),
                lat_max_ms: lat.length ? lat[lat.length - 1] : null, spread_p99_ms: pct(spread, 99),
                spread_max_ms: spread.length ? spread[spread.length - 1] : null,
                within200: spread.filter((x) => x <= 200).length, send_ms: sendMs});
    current = -2 - current;
  }
  const expected = ticks.length * live.length;
  const received = ticks.reduce((s, t) => s + t.recv, 0);
  const worst = (key) => Math.max(...ticks.map((t) => (t[key] === null ? Infinity : t[key])));
  const p50s = ticks.map((t) => t.lat_p50_ms).filter((x) => x !== null).sort((x, y) => x - y);
  report({ok: failures === 0 && received === expected, conns: o.conns, connected: live.length,
          connect_failures: failures, duration: o.duration, connect_s: connectS, ticks: ticks.length,
          expected, received, late, lat_p50_ms_med: pct(p50s, 50), lat_p99_ms_max: worst('lat_p99_ms'),
          lat_max_ms: worst('lat_max_ms'), spread_p99_ms_max: worst('spread_p99_ms'),
          spread_max_ms: worst('spread_max_ms'), send_ms_max: worst('send_ms'),
          within200_frac: expected ? ticks.reduce((s, t) => s + t.within200, 0) / expected : 0,
          pass_spread200_p99: live.length > 0 && ticks.every((t) => t.within200 >= 0.99 * live.length)});
}

const workloads = {rtt, pipelined, fanout, json};
if (!workloads[o.workload]) {
  process.stderr.write(`unknown workload '${o.workload}'\n`);
  process.exit(2);
}
workloads[o.workload]().then(
  () => process.exit(0), // do not wait for thousands of fanout sockets to close one by one
  (e) => { report({ok: false, error: String((e && e.message) || e)}); process.exit(1); });
