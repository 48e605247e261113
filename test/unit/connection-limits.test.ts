import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/log';
import { clientPrefix } from '../../src/net/client-prefix';
import { ConnectionGate, fitToFileLimit, openFileLimit, RESERVED_DESCRIPTORS } from '../../src/net/connection-limits';
import { hostAllowed } from '@postbox/temporal-devserver';

test("the listeners' defaults fit under a file limit of 4096 as they are", () => {
  const { connectionLimits } = loadConfig({});
  expect(connectionLimits).toEqual({
    http: { max: 1024, perClient: 256 },
    submission: { max: 256, perClient: 32 },
    inbound: { max: 256, perClient: 16 },
    temporalGrpc: { max: 256, perClient: 64 },
    temporalUi: { max: 128, perClient: 64 },
    metrics: { max: 32, perClient: 8 },
    devSmtp: { max: 256, perClient: 256 },
  });
  expect(fitToFileLimit(connectionLimits, 4096)).toEqual({ limits: connectionLimits });
  // Behind a trusted proxy the proxy is the one client.
  expect(loadConfig({ TRUST_PROXY: 'true', HTTP_MAX_CONNECTIONS: '300' }).connectionLimits.http).toEqual({ max: 300, perClient: 300 });
});

test("under a low file limit every listener's limits are lowered together, leaving the reserve free", () => {
  const { connectionLimits } = loadConfig({});
  const { limits, scaled } = fitToFileLimit(connectionLimits, 1024);
  expect(scaled?.fileLimit).toBe(1024);
  const total = Object.values(limits).reduce((n, l) => n + l.max, 0);
  expect(total).toBeLessThanOrEqual(1024 - RESERVED_DESCRIPTORS);
  for (const l of Object.values(limits)) expect(l.perClient).toBeLessThanOrEqual(l.max);
  expect(limits.http.max).toBeGreaterThan(limits.metrics.max);
  // No limit known (not Linux): as configured.
  expect(fitToFileLimit(connectionLimits, undefined)).toEqual({ limits: connectionLimits });
});

test('the open-file limit is read from /proc/self/limits', () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'limits-')), 'limits');
  fs.writeFileSync(
    file,
    'Limit                     Soft Limit           Hard Limit           Units\nMax open files            4096                 8192                 files\n',
  );
  expect(openFileLimit(file)).toBe(4096);
  fs.writeFileSync(file, 'Max open files            unlimited            unlimited            files\n');
  expect(openFileLimit(file)).toBeUndefined();
  expect(openFileLimit(path.join(path.dirname(file), 'missing'))).toBeUndefined();
});

test('settings: new connection settings are validated with the rest', () => {
  expect(() => loadConfig({ HTTP_MAX_CONNECTIONS: '0' })).toThrow(/HTTP_MAX_CONNECTIONS/);
  expect(() => loadConfig({ ALLOWED_HOSTS: 'ok.test, not a host' })).toThrow(/ALLOWED_HOSTS/);
  expect(loadConfig({ ALLOWED_HOSTS: 'Mail.Dev.Test, ui.test:9000, [::1]:1' }).ALLOWED_HOSTS).toEqual(['mail.dev.test', 'ui.test:9000', '[::1]:1']);
  expect(loadConfig({}).SMTP_REVERSE_DNS).toBe(false);
});

test.each([
  ['127.0.0.1:8233', [], true],
  ['localhost:8233', [], true],
  ['[::1]:8233', [], true],
  ['localhost', [], false],
  ['127.0.0.1:8234', [], false],
  ['evil.test:8233', [], false],
  [undefined, [], false],
  ['temporal.internal:443', ['temporal.internal'], true],
  ['temporal.internal:443', ['temporal.internal:8443'], false],
  ['temporal.internal:8443', ['temporal.internal:8443'], true],
])('the Web UI answers Host %s (allowed %j): %s', (host, allowed, expected) => {
  expect(hostAllowed(host, 8233, allowed)).toBe(expected);
});

test('a client is its IPv4 address, or the /64 of its IPv6 address', () => {
  const gate = new ConnectionGate('inbound', { max: 100, perClient: 2 }, createLogger('silent'));
  const socket = (remoteAddress: string) => Object.assign(new EventEmitter(), { remoteAddress }) as unknown as net.Socket;
  // Three addresses of one /64: the third is past the limit of two.
  expect(gate.admit(socket('2001:db8:1:2::1'))).toBeUndefined();
  expect(gate.admit(socket('2001:db8:1:2:ffff::9'))).toBeUndefined();
  expect(gate.admit(socket('2001:db8:1:2::3'))).toBe('per_client');
  // Another /64 is another client; IPv4 addresses are each their own, however written.
  expect(gate.admit(socket('2001:db8:1:3::1'))).toBeUndefined();
  expect(gate.admit(socket('192.0.2.1'))).toBeUndefined();
  expect(gate.admit(socket('::ffff:192.0.2.1'))).toBeUndefined();
  expect(gate.admit(socket('192.0.2.1'))).toBe('per_client');
  expect(gate.admit(socket('192.0.2.2'))).toBeUndefined();
  expect(clientPrefix('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
  expect(clientPrefix('198.51.100.77', 24)).toBe('198.51.100.0/24');
});
