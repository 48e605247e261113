import crypto from 'node:crypto';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
const TOKEN = 'metrics-token-for-the-test';

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: smtp.url,
    METRICS_PORT: '0',
    METRICS_TOKEN: TOKEN,
    // Drains end (and are timed) soon after the queue empties.
    DISPATCH_IDLE_SECONDS: '1',
  });
  acct = await createAccount(svc.api);
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'metrics.test');
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});

async function scrape(url: string): Promise<{ contentType: string | null; text: string }> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  return { contentType: res.headers.get('content-type'), text: await res.text() };
}

/** The value of one series, e.g. `postbox_emails_queued` or `name{label="v"}` (labels in the order prom-client writes them). */
function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const metricsText = async () => (await scrape(`${svc.url}/metrics`)).text;
const eventually = (probe: (text: string) => boolean, what: string) =>
  until(
    async () => {
      const text = await metricsText();
      return probe(text) ? text : undefined;
    },
    30_000,
    what,
  );

test('/metrics on the API port answers only the METRICS_TOKEN bearer, and not at all without METRICS_TOKEN; METRICS_PORT asks for it too', async () => {
  expect((await fetch(`${svc.url}/metrics`)).status).toBe(401);
  expect((await fetch(`${svc.url}/metrics`, { headers: { authorization: 'Bearer metrics-token-for-the-tesX' } })).status).toBe(401);
  expect((await fetch(`http://127.0.0.1:${svc.metricsPort}/metrics`)).status).toBe(401);
  const untokened = await startTestService({ SMTP_URL: smtp.url, METRICS_PORT: '0' });
  try {
    const res = await untokened.api.get('/metrics');
    expect(res.status).toBe(404);
    expect(res.body.error.message).toMatch(/METRICS_PORT/);
    expect((await fetch(`http://127.0.0.1:${untokened.metricsPort}/metrics`)).status).toBe(200);
  } finally {
    await untokened.stop();
  }
});

test('GET /metrics answers the text format, with process and pool metrics', async () => {
  const { contentType, text } = await scrape(`${svc.url}/metrics`);
  expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
  expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds /m);
  expect(value(text, 'postbox_db_pool_max_connections')).toBe(5);
  expect(value(text, 'postbox_db_pool_connections{state="used"}')).toBeGreaterThanOrEqual(0);
  expect(value(text, 'postbox_db_pool_connections{state="free"}')).toBeGreaterThanOrEqual(0);
  expect(value(text, 'postbox_db_pool_pending_acquires')).toBe(0);
  expect(value(text, 'postbox_emails_queued')).toBe(0);
});

test('HTTP requests are counted and timed by route pattern, never by raw path', async () => {
  const id = crypto.randomUUID();
  expect((await svc.api.get(`/contacts/${id}`, { key: acct.project.secretKey })).status).toBe(404);
  expect((await svc.api.get(`/no/such/${id}`)).status).toBe(404);
  const text = await metricsText();
  expect(value(text, 'postbox_http_requests_total{method="GET",route="/contacts/:id",status="404"}')).toBe(1);
  expect(value(text, 'postbox_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1);
  expect(value(text, 'postbox_http_request_duration_seconds_count{method="GET",route="/contacts/:id",status="404"}')).toBe(1);
  expect(text).not.toContain(id);
});

test('delivery outcomes, email events, workflow starts and ends, activity durations and failures', async () => {
  const key = { key: acct.project.secretKey };
  smtp.reply = (rcpt) => (rcpt.some((r) => r.startsWith('refused')) ? { code: 550, message: 'no such user' } : 'accept');
  for (const to of ['ada@example.org', 'refused@example.org']) {
    const res = await svc.api.post('/v1/send', { to, from: 'hello@metrics.test', subject: 'Hi', body: '<p>Hi</p>' }, key);
    expect(res.status).toBe(200);
  }
  const text = await eventually(
    (t) => value(t, 'postbox_email_deliveries_total{outcome="sent"}') === 1 && value(t, 'postbox_email_deliveries_total{outcome="failed"}') === 1,
    'both outcomes',
  );
  expect(value(text, 'postbox_email_events_total{event="email.sent"}')).toBe(1);
  expect(value(text, 'postbox_http_requests_total{method="POST",route="/v1/send",status="200"}')).toBe(2);
  // Started when the domain was added; the maintenance schedule's first run (triggered at start-up) completed here.
  await eventually((t) => (value(t, 'postbox_workflow_outcomes_total{workflow_type="maintenancePurgeWorkflow",outcome="completed"}') ?? 0) >= 1, 'a purge run');
  expect(value(text, 'postbox_workflow_starts_total{workflow_type="domainVerificationWorkflow"}')).toBe(1);
  expect(value(text, 'postbox_activity_duration_seconds_count{activity_type="checkDomain"}')).toBeGreaterThanOrEqual(1);
  // The signup's verification mail: an account-email run that completed.
  await eventually((t) => (value(t, 'postbox_workflow_outcomes_total{workflow_type="accountEmailWorkflow",outcome="completed"}') ?? 0) >= 1, 'a completed run');
  await eventually((t) => (value(t, 'postbox_activity_duration_seconds_count{activity_type="drainEmailQueue"}') ?? 0) >= 1, 'a timed drain');

  // An activity that fails: the SMTP server refuses the password-reset mail for a while.
  smtp.reply = () => ({ code: 451, message: 'try later' });
  expect((await svc.api.post('/auth/request-password-reset', { email: acct.user.email })).status).toBe(202);
  await eventually((t) => (value(t, 'postbox_activity_failures_total{activity_type="sendAccountEmail"}') ?? 0) >= 1, 'a failed activity');
  smtp.reply = () => 'accept';
});

test('METRICS_PORT serves the same registry on a listener of its own; a worker process has only that one', async () => {
  const own = await scrape(`http://127.0.0.1:${svc.metricsPort}/metrics`);
  expect(own.text).toMatch(/^postbox_http_requests_total\{/m);
  expect((await fetch(`http://127.0.0.1:${svc.metricsPort}/contacts`)).status).toBe(404);

  const worker = await startTestService(
    { DATABASE_URL: svc.databaseUrl, TEMPORAL_ADDRESS: svc.temporal.address, SMTP_URL: smtp.url, METRICS_PORT: '0' },
    'worker',
  );
  try {
    expect(worker.url).toBeUndefined();
    const { text } = await scrape(`http://127.0.0.1:${worker.metricsPort}/metrics`);
    expect(text).toMatch(/^process_resident_memory_bytes \d/m);
    expect(value(text, 'postbox_db_pool_max_connections')).toBe(5);
    expect(text).toMatch(/^# TYPE postbox_activity_duration_seconds histogram$/m);
    // The container healthcheck: 200 only once Temporal lists this worker's polls on the task queue.
    const health = await until(
      async () => {
        const res = await fetch(`http://127.0.0.1:${worker.metricsPort}/health`);
        return res.status === 200 ? res.text() : undefined;
      },
      30_000,
      'the worker to poll',
    );
    expect(health).toBe('ok');
  } finally {
    await worker.stop();
  }
});
