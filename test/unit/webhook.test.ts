import http from 'node:http';
import type net from 'node:net';
import { Resolver } from '../../src/dns/resolver';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { callWebhook, isPrivateAddress } from '../../src/modules/workflows/webhook';

test.each([
  ['127.0.0.1', true],
  ['10.1.2.3', true],
  ['172.16.0.1', true],
  ['172.31.255.255', true],
  ['192.168.1.1', true],
  ['169.254.169.254', true],
  ['100.64.0.1', true],
  ['0.0.0.0', true],
  ['::1', true],
  ['fd00::1', true],
  ['fe80::1', true],
  ['::ffff:127.0.0.1', true],
  ['fd00:ec2::254', true],
  ['8.8.8.8', false],
  ['172.32.0.1', false],
  ['93.184.216.34', false],
  ['2606:4700::1111', false],
])('%s private: %s', (ip, expected) => {
  expect(isPrivateAddress(ip)).toBe(expected);
});

describe('callWebhook', () => {
  let server: http.Server;
  let port = 0;
  let dns: ZoneDnsServer;
  const hits: string[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url!);
      if (req.url === '/redirect-private') {
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
        return res.end();
      }
      if (req.url === '/redirect-named') {
        res.writeHead(302, { location: `http://inside.test:${port}/final` });
        return res.end();
      }
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as net.AddressInfo).port;
    dns = await new ZoneDnsServer().start();
    dns.set('inside.test', { A: ['127.0.0.1'] });
    dns.set('public.test', { A: ['127.0.0.1'] });
  });
  afterAll(async () => {
    server.close();
    await dns.stop();
  });

  const resolver = () => new Resolver([dns.address], 1000);
  const call = (url: string, allowPrivate: boolean) => callWebhook({ url, method: 'GET', headers: {} }, { resolver: resolver(), allowPrivate });

  test('loopback, private and metadata addresses are refused, by IP or by name, unless allowed', async () => {
    await expect(call(`http://127.0.0.1:${port}/x`, false)).rejects.toThrow(/private, loopback or metadata/);
    await expect(call(`http://inside.test:${port}/x`, false)).rejects.toThrow(/inside\.test resolves to a private/);
    await expect(call('http://169.254.169.254/latest/meta-data/', false)).rejects.toThrow(/refused/);
    expect(hits).toEqual([]);
    expect((await call(`http://inside.test:${port}/allowed`, true)).body).toBe('ok');
  });

  test('every redirect hop is checked', async () => {
    hits.length = 0;
    // Loopback stands in for a public address here; the metadata address stays forbidden.
    const onlyLoopback = (ip: string) => ip === '127.0.0.1';
    const deps = { resolver: resolver(), allowPrivate: onlyLoopback };
    await expect(callWebhook({ url: `http://127.0.0.1:${port}/redirect-private`, method: 'GET', headers: {} }, deps)).rejects.toThrow(/169\.254\.169\.254/);
    const res = await callWebhook({ url: `http://public.test:${port}/redirect-named`, method: 'GET', headers: {} }, deps);
    expect(res.body).toBe('ok');
    expect(hits).toEqual(['/redirect-private', '/redirect-named', '/final']);
  });

  test('refusals are final, unreachable hosts are worth retrying', async () => {
    const refused = await call(`http://127.0.0.1:${port}/x`, false).catch((e) => e);
    expect(refused.retryable).toBe(false);
    const nowhere = await call('http://nowhere.test/x', false).catch((e) => e);
    expect(nowhere.retryable).toBe(true);
  });
});
