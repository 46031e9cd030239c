// Echo peer for the interop tests, on Debian's node-ws.
// usage: node echo_node_ws.js [--tls CERT KEY [CLIENT_CA]]   (CLIENT_CA: require client certificates)
// Prints "READY <port>", then one "CLOSE <code> <reason>" line per client close.
// Echoes every message with its opcode; subprotocols chat.v2 and echo are accepted;
// "__headers__" replies with the request headers as JSON; "__close__ CODE REASON" makes
// the server close with that code. An upgrade to /refuse is refused: 403, body "no token given";
// one to /private needs HTTP Basic authentication as ann, password "s@cret 1", else 401.
module.paths.push('/usr/share/nodejs');
const fs = require('fs');
const http = require('http');
const https = require('https');
const { WebSocketServer } = require('ws');

const args = process.argv.slice(2);
const tls = args[0] === '--tls' ? { cert: fs.readFileSync(args[1]), key: fs.readFileSync(args[2]) } : null;
if (tls && args[3]) Object.assign(tls, { ca: fs.readFileSync(args[3]), requestCert: true, rejectUnauthorized: true });
const server = tls ? https.createServer(tls) : http.createServer();
const wss = new WebSocketServer({
  server,
  perMessageDeflate: true,
  maxPayload: 64 * 1024 * 1024,
  handleProtocols: (protocols) => ['chat.v2', 'echo'].find((p) => protocols.has(p)) || false,
  verifyClient: (info, done) => {
    if (info.req.url === '/refuse') return done(false, 403, 'no token given');
    const basic = 'Basic ' + Buffer.from('ann:s@cret 1').toString('base64');
    if (info.req.url === '/private' && info.req.headers.authorization !== basic) return done(false, 401);
    return done(true);
  },
});
wss.on('connection', (ws, req) => {
  ws.on('message', (data, isBinary) => {
    const text = isBinary ? null : data.toString();
    if (text === '__headers__') {
      ws.send(JSON.stringify(req.headers));
    } else if (text !== null && text.startsWith('__close__ ')) {
      const [, code, ...reason] = text.split(' ');
      ws.close(Number(code), reason.join(' '));
    } else {
      ws.send(data, { binary: isBinary });
    }
  });
  ws.on('close', (code, reason) => console.log(`CLOSE ${code} ${reason.toString()}`));
});
server.listen(0, '127.0.0.1', () => console.log(`READY ${server.address().port}`));
// Exit once the process that started this peer is gone (a test run that ended or was
// killed): a peer never outlives its run, holding its port and output open.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 1000).unref();
