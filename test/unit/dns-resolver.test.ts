import { Resolver } from '../../src/dns/resolver';
import { ZoneDnsServer } from '../../src/dns/zone-server';

let dns: ZoneDnsServer;
let resolver: Resolver;
beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  resolver = new Resolver([dns.address], 1000);
});
afterAll(() => dns.stop());

test('answers each record type from the configured server', async () => {
  dns.set('example.test', {
    A: ['192.0.2.1'],
    AAAA: ['2001:db8::1'],
    MX: [{ exchange: 'mx1.example.test', priority: 10 }],
    NS: ['ns1.example.test'],
    TXT: ['v=spf1 -all', 'k'.repeat(400)],
  });
  expect(await resolver.lookup('example.test', 'A')).toEqual({ status: 'found', answers: ['192.0.2.1'] });
  expect((await resolver.lookup('example.test', 'AAAA')).answers).toEqual(['2001:db8::1']);
  expect((await resolver.lookup('example.test', 'MX')).answers).toEqual([{ exchange: 'mx1.example.test', priority: 10 }]);
  expect((await resolver.lookup('example.test', 'NS')).answers).toEqual(['ns1.example.test']);
  expect(await resolver.txt('example.test')).toEqual(['v=spf1 -all', 'k'.repeat(400)]);
});

test('tells a missing name from a name without that type', async () => {
  dns.set('only-a.test', { A: ['192.0.2.2'] });
  expect(await resolver.lookup('missing.test', 'A')).toEqual({ status: 'nxdomain', answers: [] });
  expect(await resolver.lookup('only-a.test', 'MX')).toEqual({ status: 'nodata', answers: [] });
});

test('moves to the next server when one does not answer', async () => {
  dns.set('fallback.test', { A: ['192.0.2.3'] });
  const r = new Resolver(['127.0.0.1:9', dns.address], 300);
  expect((await r.lookup('fallback.test', 'A')).answers).toEqual(['192.0.2.3']);
});

test('fails clearly when no server answers', async () => {
  await expect(new Resolver(['127.0.0.1:9'], 200).lookup('x.test', 'A')).rejects.toThrow(/DNS|answer/);
});
