/**
 * A connection flood, run as a process of its own (dist/test/setup/flood.js) so its descriptors are not
 * the test's: opens `count` idle TCP connections to each target, spread over the loopback source
 * addresses 127.0.0.2 upwards (so per-address limits fill up and the totals too), and holds every one
 * the server keeps. Prints one JSON line when every attempt has ended: how many are held, and how many
 * the server closed or refused. Exits when its stdin closes.
 *
 *   node dist/test/setup/flood.js '[{"port": 8080, "count": 10240}]' 40
 */
import net from 'node:net';

interface Target {
  port: number;
  count: number;
}

const targets = JSON.parse(process.argv[2] ?? '[]') as Target[];
const sources = Number(process.argv[3] ?? 40);
/** Connection attempts in flight at once: enough to outrun the server's accept loop, few enough to keep our own descriptors. */
const IN_FLIGHT = 1500;

const held = new Set<net.Socket>();
let refused = 0;
let failed = 0;

function attempt(port: number, n: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: `127.0.0.${2 + (n % sources)}` });
    let connected = false;
    socket.on('connect', () => {
      connected = true;
      held.add(socket);
      // A server that refuses closes within a moment; one that keeps the connection says nothing (HTTP) or greets (SMTP).
      setTimeout(resolve, 50);
    });
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (held.delete(socket)) refused++;
      else if (!connected) failed++;
      resolve();
    });
  });
}

async function main(): Promise<void> {
  const jobs = targets.flatMap((t) => Array.from({ length: t.count }, (_, i) => () => attempt(t.port, i)));
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < jobs.length) await jobs[next++]();
    }),
  );
  // Refusals still on their way (a 421 being written) settle before the count: on a loaded machine the
  // server may take a while to close the last ones, so wait until the count has been still for a second.
  for (let last = -1, waited = 0; held.size !== last && waited < 15_000; waited += 1000) {
    last = held.size;
    await new Promise((r) => setTimeout(r, 1000));
  }
  process.stdout.write(`${JSON.stringify({ attempted: jobs.length, held: held.size, closedByServer: refused, failed })}\n`);
}

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
void main();
