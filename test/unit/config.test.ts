import path from 'node:path';
import os from 'node:os';
import { ConfigError, defaultMailThreads, defaultPoolMax, loadConfig } from '../../src/config';

test('defaults', () => {
  const c = loadConfig({});
  expect(c).toMatchObject({
    PORT: 8080,
    TEMPORAL_NAMESPACE: 'default',
    TEMPORAL_DEV_SERVER_PORT: 7233,
    IDEMPOTENCY_TTL_HOURS: 24,
    RATE_LIMIT_PER_MINUTE: 1000,
    DISABLE_SIGNUP: false,
    DNS_SERVERS: [],
    publicUrl: 'http://localhost:8080',
    dataDir: path.resolve('./.data'),
  });
});

test('PUBLIC_URL follows PORT unless set, and loses a trailing slash', () => {
  expect(loadConfig({ PORT: '9000' }).publicUrl).toBe('http://localhost:9000');
  expect(loadConfig({ PUBLIC_URL: 'https://mail.example.com/' }).publicUrl).toBe('https://mail.example.com');
});

test('SMTP_POOL_SIZE defaults to 16 and DELIVERY_IN_FLIGHT to 4 × SMTP_POOL_SIZE', () => {
  expect(loadConfig({}).SMTP_POOL_SIZE).toBe(16);
  expect(loadConfig({}).deliveryInFlight).toBe(64);
  expect(loadConfig({ SMTP_POOL_SIZE: '3' }).deliveryInFlight).toBe(12);
  expect(loadConfig({ SMTP_POOL_SIZE: '3', DELIVERY_IN_FLIGHT: '5' }).deliveryInFlight).toBe(5);
});

test('MAIL_THREADS defaults to one delivery thread per 4 cores, at least one; 0 stays 0', () => {
  expect([1, 2, 4, 7, 8, 16, 64].map(defaultMailThreads)).toEqual([1, 1, 1, 1, 2, 4, 16]);
  expect(loadConfig({}).mailThreads).toBe(defaultMailThreads(os.availableParallelism()));
  expect(loadConfig({ MAIL_THREADS: '3' }).mailThreads).toBe(3);
  expect(loadConfig({ MAIL_THREADS: '0' }).mailThreads).toBe(0);
});

test('DATABASE_POOL_MAX defaults to 3 connections per core, 6 to 20', () => {
  expect([1, 2, 3, 4, 6, 7, 64].map(defaultPoolMax)).toEqual([6, 6, 9, 12, 18, 20, 20]);
  expect(loadConfig({}).databasePoolMax).toBe(defaultPoolMax(os.availableParallelism()));
  expect(loadConfig({ DATABASE_POOL_MAX: '40' }).databasePoolMax).toBe(40);
});

test('DNS_SERVERS is a comma-separated host[:port] list', () => {
  expect(loadConfig({ DNS_SERVERS: '1.1.1.1, 127.0.0.1:5353' }).DNS_SERVERS).toEqual(['1.1.1.1', '127.0.0.1:5353']);
});

test('empty values count as unset', () => {
  expect(loadConfig({ PORT: '', DATABASE_URL: '' }).PORT).toBe(8080);
});

test.each([
  ['PORT', '70000'],
  ['SMTP_URL', 'http://nope'],
  ['DISABLE_SIGNUP', 'maybe'],
  ['JWT_SECRET', 'short'],
  ['IDEMPOTENCY_TTL_HOURS', '0'],
])('invalid %s names the variable', (name, value) => {
  expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
  expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^Invalid configuration: ${name}: `));
});

test('the Temporal Web UI port follows the dev server port (+1000) unless set; 0 or TEMPORAL_UI=off turns it off', () => {
  expect(loadConfig({}).temporalUiPort).toBe(8233);
  expect(loadConfig({ TEMPORAL_DEV_SERVER_PORT: '7300' }).temporalUiPort).toBe(8300);
  expect(loadConfig({ TEMPORAL_UI_PORT: '9999' }).temporalUiPort).toBe(9999);
  expect(loadConfig({ TEMPORAL_UI_PORT: '0' }).temporalUiPort).toBeUndefined();
  expect(loadConfig({ TEMPORAL_UI: 'off' }).temporalUiPort).toBeUndefined();
  expect(loadConfig({ TEMPORAL_DEV_SERVER_PORT: '0' }).temporalUiPort).toBeUndefined();
  expect(loadConfig({ TEMPORAL_DEV_SERVER_PORT: '0', TEMPORAL_UI_PORT: '9000' }).temporalUiPort).toBe(9000);
  expect(() => loadConfig({ TEMPORAL_DEV_SERVER_PORT: '65000' })).toThrow(/TEMPORAL_UI_PORT/);
  expect(() => loadConfig({ TEMPORAL_UI: 'maybe' })).toThrow(ConfigError);
});

test("the inbound MX: 2525 unless set (0 is off); return paths on bounces.<domain>, their MX at PUBLIC_URL's host unless set; five soft bounces", () => {
  const c = loadConfig({ PUBLIC_URL: 'https://Mail.Example.com' });
  expect(c.inbound).toEqual({ port: 2525, explicit: false, maxBytes: 10 * 2 ** 20, receivedMaxBytes: 10 * 2 ** 20 });
  expect(c.INBOUND_EMAIL_RETENTION_DAYS).toBe(30);
  // Received mail is capped by its own setting, and never above what the MX takes at all.
  expect(loadConfig({ INBOUND_EMAIL_MAX_MB: '0.5' }).inbound.receivedMaxBytes).toBe(2 ** 19);
  expect(loadConfig({ INBOUND_EMAIL_MAX_MB: '20', INBOUND_MAX_MB: '5' }).inbound.receivedMaxBytes).toBe(5 * 2 ** 20);
  expect(c.returnPath).toMatchObject({ prefix: 'bounces', mxHost: 'mail.example.com' });
  expect(c.SOFT_BOUNCE_LIMIT).toBe(5);
  expect(loadConfig({ INBOUND_SMTP_PORT: '0' }).inbound).toMatchObject({ port: 0, explicit: true });
  expect(loadConfig({ INBOUND_MX_HOST: 'mx.example.net', RETURN_PATH_PREFIX: 'RP' }).returnPath).toMatchObject({ prefix: 'rp', mxHost: 'mx.example.net' });
  expect(() => loadConfig({ RETURN_PATH_PREFIX: 'a.b' })).toThrow(/^Invalid configuration: RETURN_PATH_PREFIX: /);
  // inbound.<domain> is the inbound host's.
  expect(() => loadConfig({ RETURN_PATH_PREFIX: 'Inbound' })).toThrow(/^Invalid configuration: RETURN_PATH_PREFIX: /);
});

test('SMTP submission: 2587 unless set (0 is off); the certificate and key come together; the implicit-TLS port needs them', () => {
  expect(loadConfig({}).submission).toEqual({ port: 2587, explicit: false });
  expect(loadConfig({ SMTP_SUBMISSION_PORT: '0' }).submission).toEqual({ port: 0, explicit: true });
  expect(() => loadConfig({ SMTP_SUBMISSION_TLS_CERT: '/etc/cert.pem' })).toThrow(/^Invalid configuration: SMTP_SUBMISSION_TLS_KEY: /);
  expect(() => loadConfig({ SMTP_SUBMISSION_TLS_KEY: '/etc/key.pem' })).toThrow(/^Invalid configuration: SMTP_SUBMISSION_TLS_CERT: /);
  expect(() => loadConfig({ SMTP_SUBMISSION_TLS_PORT: '2465' })).toThrow(/^Invalid configuration: SMTP_SUBMISSION_TLS_PORT: /);
  expect(loadConfig({ SMTP_SUBMISSION_TLS_CERT: 'c.pem', SMTP_SUBMISSION_TLS_KEY: 'k.pem', SMTP_SUBMISSION_TLS_PORT: '2465' }).SMTP_SUBMISSION_TLS_PORT).toBe(
    2465,
  );
});
