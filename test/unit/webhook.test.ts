import http from 'node:http';
import type net from 'node:net';
import { Resolver } from '../../src/dns/resolver';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { callWebhook, isPublicAddress, literalPrivateTarget, NOT_PUBLIC, type WebhookError } from '../../src/net/guarded-http';

// Every spelling of a non-public address a URL or a DNS answer can carry, as Node's URL parser
// leaves it (it writes [::ffff:127.0.0.1] as [::ffff:7f00:1] and 2130706433 as 127.0.0.1).
test.each([
  ['127.0.0.1', false],
  ['10.1.2.3', false],
  ['172.16.0.1', false],
  ['172.31.255.255', false],
  ['192.168.1.1', false],
  ['169.254.169.254', false],
  ['100.64.0.1', false],
  ['0.0.0.0', false],
  ['255.255.255.255', false],
  ['192.0.2.1', false],
  ['::', false],
  ['::1', false],
  ['fd00::1', false],
  ['fe80::1', false],
  ['fe80::1%eth0', false], // a zone id
  ['ff02::1', false],
  ['::ffff:127.0.0.1', false],
  ['::ffff:7f00:1', false], // mapped loopback, as the URL parser writes it
  ['::ffff:a9fe:a9fe', false], // mapped metadata address
  ['::7f00:1', false], // IPv4-compatible loopback
  ['::a9fe:a9fe', false],
  ['64:ff9b::7f00:1', false], // NAT64
  ['64:ff9b::a9fe:a9fe', false],
  ['2002:7f00:1::', false], // 6to4 of 127.0.0.1
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', false], // Teredo
  ['fd00:ec2::254', false],
  ['not an address', false],
  ['8.8.8.8', true],
  ['172.32.0.1', true],
  ['93.184.216.34', true],
  ['2606:4700::1111', true],
  ['::ffff:808:808', true], // mapped 8.8.8.8
])('%s public: %s', (ip, expected) => {
  expect(isPublicAddress(ip)).toBe(expected);
});

test.each(['http://2130706433:PORT/', 'http://0x7f000001:PORT/', 'http://127.1:PORT/', 'http://0177.0.0.1:PORT/', 'http://0:PORT/', 'http://[::]:PORT/'])(
  'the URL parser turns %s into a refused address',
  (url) => {
    const host = new URL(url.replace('PORT', '80')).hostname.replace(/^\[|\]$/g, '');
    expect(isPublicAddress(host)).toBe(false);
  },
);

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
      if (req.url === '/redirect-mapped') {
        res.writeHead(302, { location: 'http://[::ffff:169.254.169.254]/latest/meta-data/' });
        return res.end();
      }
      if (req.url === '/redirect-named') {
        res.writeHead(302, { location: `http://inside.test:${port}/final` });
        return res.end();
      }
      if (req.url === '/redirect-same-origin') {
        res.writeHead(307, { location: '/echo' });
        return res.end();
      }
      if (req.url === '/redirect-other-origin') {
        res.writeHead(307, { location: `http://inside.test:${port}/echo` });
        return res.end();
      }
      if (req.url === '/echo') return res.end(JSON.stringify(req.headers));
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as net.AddressInfo).port;
    dns = await new ZoneDnsServer().start();
    dns.set('inside.test', { A: ['127.0.0.1'] });
    dns.set('public.test', { A: ['127.0.0.1'] });
    dns.set('mapped.test', { AAAA: ['::ffff:127.0.0.1'] });
  });
  afterAll(async () => {
    server.close();
    await dns.stop();
  });

  const resolver = () => new Resolver([dns.address], 1000);
  const call = (url: string, allowPrivate: boolean) => callWebhook({ url, method: 'GET', headers: {} }, { resolver: resolver(), allowPrivate });

  /** The refusal's message (what a project sees) and its detail (what the service logs). */
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => ({ message: 'no refusal', detail: '' }),
      (e: WebhookError) => ({ message: e.message, detail: e.detail ?? '' }),
    );

  test('loopback, private and metadata addresses are refused, by IP or by name, unless allowed; the project is not told where a name leads', async () => {
    for (const url of [`http://127.0.0.1:${port}/x`, `http://inside.test:${port}/x`, 'http://169.254.169.254/latest/meta-data/']) {
      const { message } = await refusal(call(url, false));
      expect(message).toBe(NOT_PUBLIC);
      expect(message).not.toMatch(/127\.0\.0\.1|169\.254|inside/);
    }
    // The service's own log says what the name resolved to.
    expect((await refusal(call(`http://inside.test:${port}/x`, false))).detail).toBe('inside.test resolves to 127.0.0.1, loopback');
    expect(hits).toEqual([]);
    expect((await call(`http://inside.test:${port}/allowed`, true)).body).toBe('ok');
  });

  test('IPv4-mapped, NAT64 and 6to4 spellings of loopback never reach the server on 127.0.0.1', async () => {
    hits.length = 0;
    for (const host of [
      '[::ffff:127.0.0.1]',
      '[::ffff:7f00:1]',
      '[::127.0.0.1]',
      '[64:ff9b::7f00:1]',
      '[2002:7f00:1::]',
      '2130706433',
      '0x7f000001',
      '127.1',
      '[::]',
      '0.0.0.0',
    ]) {
      await expect(call(`http://${host}:${port}/x`, false)).rejects.toThrow(/refused/);
    }
    expect((await refusal(call(`http://mapped.test:${port}/x`, false))).detail).toMatch(/^mapped\.test resolves to /);
    await expect(call(`http://[fe80::1%25eth0]:${port}/x`, false)).rejects.toThrow(/not a valid URL/);
    expect(hits).toEqual([]);
  });

  test("a redirect to another origin drops credentials and the caller's own headers, as fetch does; one to the same origin keeps them", async () => {
    const deps = { resolver: resolver(), allowPrivate: (ip: string) => ip === '127.0.0.1' };
    const headers = { authorization: 'Bearer secret', cookie: 'session=1', 'x-api-key': 'k', 'content-type': 'application/json', 'webhook-id': 'msg_1' };
    const same = JSON.parse((await callWebhook({ url: `http://public.test:${port}/redirect-same-origin`, method: 'POST', headers, body: '{}' }, deps)).body);
    expect(same).toMatchObject({ authorization: 'Bearer secret', cookie: 'session=1', 'x-api-key': 'k' });
    const other = JSON.parse((await callWebhook({ url: `http://public.test:${port}/redirect-other-origin`, method: 'POST', headers, body: '{}' }, deps)).body);
    expect(other.host).toBe(`inside.test:${port}`);
    expect(other.authorization).toBeUndefined();
    expect(other.cookie).toBeUndefined();
    expect(other['x-api-key']).toBeUndefined();
    expect(other).toMatchObject({ 'content-type': 'application/json', 'webhook-id': 'msg_1' });
  });

  test.each([
    ['http://127.0.0.1/hook', true],
    ['http://localhost:8080/hook', true],
    ['http://api.localhost/hook', true],
    ['http://[::1]/hook', true],
    ['http://169.254.169.254/latest', true],
    ['http://10.0.0.1/hook', true],
    ['http://2130706433/hook', true],
    ['https://hooks.example.com/x', false],
    ['https://93.184.216.34/x', false],
    ['not a url', false],
  ])('%s is written as a private target: %s', (url, expected) => {
    expect(literalPrivateTarget(url)).toBe(expected);
  });

  test('every redirect hop is checked', async () => {
    hits.length = 0;
    // Loopback stands in for a public address here; the metadata address stays forbidden.
    const onlyLoopback = (ip: string) => ip === '127.0.0.1';
    const deps = { resolver: resolver(), allowPrivate: onlyLoopback };
    expect((await refusal(callWebhook({ url: `http://127.0.0.1:${port}/redirect-private`, method: 'GET', headers: {} }, deps))).detail).toMatch(
      /169\.254\.169\.254/,
    );
    const res = await callWebhook({ url: `http://public.test:${port}/redirect-named`, method: 'GET', headers: {} }, deps);
    expect(res.body).toBe('ok');
    expect((await refusal(callWebhook({ url: `http://127.0.0.1:${port}/redirect-mapped`, method: 'GET', headers: {} }, deps))).detail).toMatch(
      /169\.254\.169\.254/,
    );
    expect(hits).toEqual(['/redirect-private', '/redirect-named', '/final', '/redirect-mapped']);
  });

  test('refusals are final, unreachable hosts are worth retrying', async () => {
    const refused = await call(`http://127.0.0.1:${port}/x`, false).catch((e) => e);
    expect(refused.retryable).toBe(false);
    const nowhere = await call('http://nowhere.test/x', false).catch((e) => e);
    expect(nowhere.retryable).toBe(true);
  });
});
