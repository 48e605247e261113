// An HTTP CONNECT proxy for the suite's client/http_proxy* features (basic auth optional), printing one
// line per tunnel so a run shows how many connections each client opened.
const http = require('node:http');
const net = require('node:net');

const [port, credentials] = [Number(process.argv[2]), process.argv[3]];
const expected = credentials && 'Basic ' + Buffer.from(credentials).toString('base64');
let tunnels = 0;
const server = http.createServer((_req, res) => res.writeHead(405).end());
server.on('connect', (req, client, head) => {
  const given = req.headers['proxy-authorization'];
  if (given && given !== expected) {
    client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n');
    return;
  }
  const [host, targetPort] = req.url.split(':');
  const upstream = net.connect(Number(targetPort), host, () => {
    console.log(`tunnel ${++tunnels} to ${req.url}`);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    upstream.write(head);
    upstream.pipe(client).pipe(upstream);
  });
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
});
server.listen(port, '127.0.0.1');
