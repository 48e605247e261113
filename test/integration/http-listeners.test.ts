import net from 'node:net';
import { startTestService, type TestService } from '../setup/service';

// The HTTP listeners (API and METRICS_PORT) close a connection that has not sent a whole request head
// within HTTP_HEADERS_TIMEOUT_SECONDS, so idle or trickling clients cannot hold their places.
let svc: TestService;

beforeAll(async () => {
  svc = await startTestService({ HTTP_HEADERS_TIMEOUT_SECONDS: '1', METRICS_PORT: '0' });
});
afterAll(() => svc?.stop());

/** Connects, writes `head` (maybe nothing, maybe a part), and resolves with what came back and when the server closed. */
function hold(port: number, head: string): Promise<{ reply: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let reply = '';
    const socket = net.connect({ port, host: '127.0.0.1' }, () => socket.write(head));
    socket.on('data', (d) => (reply += d));
    socket.on('error', reject);
    socket.on('close', () => resolve({ reply, closedAfterMs: Date.now() - started }));
    // Past this the connection was held, which is what the test refuses.
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection to ${port} was still open after 8 s; it had ${JSON.stringify(reply)}`));
    }, 8_000).unref();
  });
}

test('a connection that sends nothing, or half a request head, is answered 408 and closed on the API and metrics listeners', async () => {
  const ports = [svc.port!, svc.metricsPort!];
  const held = await Promise.all(ports.flatMap((port) => [hold(port, ''), hold(port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n')]));
  for (const { reply, closedAfterMs } of held) {
    expect(reply).toMatch(/^HTTP\/1\.1 408 /);
    expect(closedAfterMs).toBeGreaterThanOrEqual(900);
    expect(closedAfterMs).toBeLessThan(4_000);
  }
  // A whole request head in time is answered as usual.
  expect((await svc.api.get('/health')).status).toBe(200);
});
