// The echo bot (bench/echo_bot/run.sh) in node: Debian's `ws` and the same message as
// JSON text: every message is JSON.parse'd, gets hops + 1, and is JSON.stringify'd back.
//   node bench/echo_bot/bot_node.js URL
'use strict';
module.paths.push('/usr/share/nodejs'); // where Debian installs ws
const WebSocket = require('ws');

const ws = new WebSocket(process.argv[2], { perMessageDeflate: false, maxPayload: 1 << 20 });
ws.on('message', (data) => {
  const env = JSON.parse(data);
  env.hops += 1;
  ws.send(JSON.stringify(env));
});
ws.on('error', (err) => { console.error('echo bot:', err.message); process.exit(1); });
