import http from 'node:http';
import net from 'node:net';
import Koa from 'koa';
import pg from 'pg';
import { createLogger, type Logger } from '../../src/log';
import { requestId } from '../../src/http/request-id';
import { createTestDatabase, dbQuery } from '../setup/db';
import { Api, createAccount, startTestService } from '../setup/service';
import { until } from '../setup/until';

interface Line {
  level: number;
  msg: string;
  requestId?: string;
  [key: string]: unknown;
}

/** A logger whose JSON lines are kept for the test to read. */
function capturingLogger(level = 'info'): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const log = createLogger(level, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}

test('every line logged during a request carries its id, from the route or from a service holding the process logger', async () => {
  const { log, lines } = capturingLogger();
  // Connections opened before any request: their callbacks belong to no request.
  const pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 2 });
  await Promise.all([pool.query('SELECT 1'), pool.query('SELECT 1')]);
  const service = async (n: number) => {
    await pool.query('SELECT pg_sleep(0.02)');
    log.info({ n }, 'service line');
  };
  const app = new Koa();
  app.use(requestId(log));
  app.use(async (ctx) => {
    const n = Number(ctx.query.n);
    ctx.state.log.info({ n }, 'route line');
    await service(n);
    // Work that outlives the request logs without its id.
    setTimeout(() => log.info({ n }, 'after the response'), 50);
    ctx.body = 'ok';
  });
  const server = http.createServer(app.callback());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  try {
    const ids = Array.from({ length: 20 }, (_, n) => `load-${n}`);
    await Promise.all(ids.map((id, n) => fetch(`${base}/?n=${n}`, { headers: { 'x-request-id': id } }).then((r) => r.text())));
    await until(async () => (lines.filter((l) => l.msg === 'after the response').length === ids.length ? true : undefined), 5000);

    ids.forEach((id, n) => {
      const own = lines.filter((l) => l.n === n && l.msg !== 'after the response');
      expect(own.map((l) => l.msg).sort()).toEqual(['route line', 'service line']);
      for (const l of own) expect(l.requestId).toBe(id);
      expect(lines.filter((l) => l.msg === 'request' && l.requestId === id)).toHaveLength(1);
    });
    for (const l of lines.filter((l) => l.msg === 'after the response')) expect(l).not.toHaveProperty('requestId');
  } finally {
    server.close();
    await pool.end();
  }
});

test('the service: access lines and a failing request’s error line carry the request id; nothing else borrows it', async () => {
  const { log, lines } = capturingLogger();
  const svc = await startTestService({ LOG_LEVEL: 'info' }, 'api', log);
  try {
    const api = new Api(svc.url!);
    const acct = await createAccount(api);
    const sent = ['ok-health', 'not-found', 'failing'];
    expect((await api.get('/health', { headers: { 'x-request-id': 'ok-health' } })).status).toBe(200);
    expect((await api.get('/no-such-route', { headers: { 'x-request-id': 'not-found' } })).status).toBe(404);
    // The table behind GET /events goes away: a 500, logged with the request's id.
    await dbQuery(svc.databaseUrl, 'ALTER TABLE events RENAME TO events_moved');
    try {
      const failed = await api.get('/events', { key: acct.project.secretKey, headers: { 'x-request-id': 'failing' } });
      expect(failed.status).toBe(500);
      expect(failed.body.error.requestId).toBe('failing');
    } finally {
      await dbQuery(svc.databaseUrl, 'ALTER TABLE events_moved RENAME TO events');
    }

    for (const id of sent) expect(lines.filter((l) => l.msg === 'request' && l.requestId === id)).toHaveLength(1);
    const error = lines.find((l) => l.msg === 'request failed');
    expect(error).toMatchObject({ requestId: 'failing', level: 50 });
    // Lines with a request id belong to requests that were made: the fixed ones or createAccount's.
    const generated = /^req_[0-9a-f]{12}[0-9a-z]{6,}$/;
    for (const l of lines.filter((l) => l.requestId !== undefined)) {
      expect(sent.includes(l.requestId!) || generated.test(l.requestId!)).toBe(true);
    }
    // Every line of the service is one JSON object with the service's name and an ISO time.
    for (const l of lines) expect(l).toMatchObject({ service: 'postbox', time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
  } finally {
    await svc.stop();
  }
});
