import dgram from 'node:dgram';
import { Resolver } from '../../src/dns/resolver';
import { parse } from '../../src/validation';
import { isAliasDomain, isDisposableDomain, isListedMailProvider, POPULAR_MAIL_DOMAINS } from '../../src/modules/verify/domain-lists';
import { singleEdit, suggestDomain } from '../../src/modules/verify/typo';
import { verifySchema } from '../../src/modules/verify/verify.schemas';
import { assess, type DomainDns, DomainDnsCache, isPlusAddressed, lookupDomain } from '../../src/modules/verify/verify.service';
import { ZoneDnsServer } from '../../src/dns/zone-server';

const dnsOf = (over: Partial<DomainDns> = {}): DomainDns => ({
  NS: 'found',
  MX: 'found',
  A: 'found',
  AAAA: 'nodata',
  nullMx: false,
  ...over,
});

describe('typo detection', () => {
  test.each([
    ['gmial.com', 'gmail.com'],
    ['hotmial.com', 'hotmail.com'],
    ['yaho.com', 'yahoo.com'],
    ['gamil.com', 'gmail.com'],
    ['gmai.com', 'gmail.com'],
    ['gmaill.com', 'gmail.com'],
    ['gnail.com', 'gmail.com'],
    ['gmail.co', 'gmail.com'],
    ['gmail.con', 'gmail.com'],
    ['gmail.cmo', 'gmail.com'],
    ['gmailc.om', 'gmail.com'],
    ['hotmail.con', 'hotmail.com'],
    ['outlok.com', 'outlook.com'],
    ['iclod.com', 'icloud.com'],
    ['yahooo.com', 'yahoo.com'],
    ['aol.con', 'aol.com'],
  ])('%s is corrected to %s', (typed, meant) => {
    expect(suggestDomain(typed)).toBe(meant);
  });

  test.each([
    'gmail.com',
    'hotmail.com',
    'yahoo.com',
    'outlook.com',
    'icloud.com',
    'proton.me',
    'gmx.de',
    // real providers one letter from a popular one
    'ymail.com',
    'email.com',
    'yahoo.cn',
    'mac.com',
    'me.com',
    // real companies one or two letters from a short provider name
    'ibm.com',
    'att.com',
    'ge.com',
    'hp.com',
    'meta.com',
    'sap.com',
    'uber.com',
    'example.test',
    'acme.test',
    'company.io',
  ])('%s is not flagged', (domain) => {
    expect(suggestDomain(domain)).toBeUndefined();
  });

  test('singleEdit names the one edit between two strings, or nothing', () => {
    expect(singleEdit('gmial.com', 'gmail.com')).toBe('transposition');
    expect(singleEdit('gnail.com', 'gmail.com')).toBe('substitution');
    expect(singleEdit('gmaill.com', 'gmail.com')).toBe('insertion');
    expect(singleEdit('gmai.com', 'gmail.com')).toBe('deletion');
    expect(singleEdit('gmail.com', 'gmail.com')).toBeUndefined();
    expect(singleEdit('gmx.com', 'gmail.com')).toBeUndefined();
    expect(singleEdit('abcd', 'badc')).toBeUndefined();
  });
});

describe('domain lists', () => {
  test('disposable domains, including their subdomains', () => {
    expect(isDisposableDomain('mailinator.com')).toBe(true);
    expect(isDisposableDomain('yopmail.com')).toBe(true);
    expect(isDisposableDomain('inbox.mailinator.com')).toBe(true);
    expect(isDisposableDomain('gmail.com')).toBe(false);
    expect(isDisposableDomain('notmailinator-at-all.test')).toBe(false);
  });

  test('alias services, including per-user subdomains', () => {
    expect(isAliasDomain('mozmail.com')).toBe(true);
    expect(isAliasDomain('privaterelay.appleid.com')).toBe(true);
    expect(isAliasDomain('ada.anonaddy.com')).toBe(true);
    expect(isAliasDomain('appleid.com')).toBe(false);
    expect(isAliasDomain('gmail.com')).toBe(false);
  });

  test('mail providers match exactly; the popular list has no disposable or alias domain', () => {
    expect(isListedMailProvider('gmail.com')).toBe(true);
    expect(isListedMailProvider('mail.gmail.com')).toBe(false);
    expect(isListedMailProvider('example.test')).toBe(false);
    expect(POPULAR_MAIL_DOMAINS).toEqual(expect.arrayContaining(['gmail.com', 'yahoo.com', 'hotmail.com', 'outlook.com']));
    expect(POPULAR_MAIL_DOMAINS.filter((d) => isDisposableDomain(d) || isAliasDomain(d))).toEqual([]);
  });

  test('plus-addressing is a + anywhere in the local part', () => {
    expect(isPlusAddressed('ada+news')).toBe(true);
    expect(isPlusAddressed('+x')).toBe(true);
    expect(isPlusAddressed('ada.lovelace')).toBe(false);
  });
});

describe('the verdict', () => {
  test('a domain with MX records, not disposable, is valid', () => {
    const r = assess('ada@example.test', dnsOf());
    expect(r).toEqual({
      email: 'ada@example.test',
      valid: true,
      isDisposable: false,
      isAlias: false,
      isTypo: false,
      isPlusAddressed: false,
      isPersonalEmail: false,
      domainExists: true,
      hasWebsite: true,
      hasMxRecords: true,
      reasons: ['example.test has MX records, so it can receive mail'],
    });
    expect(r).not.toHaveProperty('suggestedEmail');
  });

  test('NXDOMAIN: the domain does not exist', () => {
    const r = assess('ada@gone.test', dnsOf({ NS: 'nxdomain', MX: 'nxdomain', A: 'nxdomain', AAAA: 'nxdomain' }));
    expect(r).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false });
    expect(r.reasons).toEqual(['Domain gone.test does not exist (DNS answered NXDOMAIN)']);
  });

  test('A/AAAA without MX is not valid (no RFC 5321 implicit-MX credit)', () => {
    const r = assess('ada@web-only.test', dnsOf({ MX: 'nodata' }));
    expect(r).toMatchObject({ valid: false, domainExists: true, hasWebsite: true, hasMxRecords: false });
    expect(r.reasons[0]).toMatch(/no MX records.*RFC 5321 §5\.1/);
  });

  test('neither MX nor A/AAAA', () => {
    const r = assess('ada@bare.test', dnsOf({ MX: 'nodata', A: 'nodata' }));
    expect(r).toMatchObject({ valid: false, domainExists: true, hasWebsite: false, hasMxRecords: false });
    expect(r.reasons).toEqual(['bare.test has no MX records and no A/AAAA records, so it cannot receive mail']);
  });

  test('a null MX (RFC 7505) means no mail', () => {
    const r = assess('ada@nomail.test', dnsOf({ nullMx: true }));
    expect(r).toMatchObject({ valid: false, hasMxRecords: false });
    expect(r.reasons).toEqual([expect.stringMatching(/null MX/)]);
  });

  test('a host name inside a zone exists through its MX or A records', () => {
    const r = assess('ada@mail.example.test', dnsOf({ NS: 'nodata' }));
    expect(r).toMatchObject({ valid: true, domainExists: true });
  });

  test('disposable makes an address invalid even with MX records', () => {
    const r = assess('x@mailinator.com', dnsOf());
    expect(r).toMatchObject({ valid: false, isDisposable: true, isPersonalEmail: false, hasMxRecords: true });
    expect(r.reasons).toContain('mailinator.com is listed as a disposable (temporary) email domain');
  });

  test('a typo is reported with a suggestion but does not decide validity', () => {
    const r = assess('ada+x@yaho.com', dnsOf());
    expect(r).toMatchObject({
      valid: true,
      isTypo: true,
      suggestedEmail: 'ada+x@yahoo.com',
      isPersonalEmail: false,
      isPlusAddressed: true,
    });
    expect(r.reasons).toContain('Possible typo: did you mean ada+x@yahoo.com?');
    // The disposable list carries some typo-squatting domains; both facts are reported.
    expect(assess('ada@gmial.com', dnsOf())).toMatchObject({
      valid: false,
      isTypo: true,
      isDisposable: true,
      suggestedEmail: 'ada@gmail.com',
    });
  });

  test('alias, personal provider and plus-addressing are reported, and stay valid', () => {
    expect(assess('a@duck.com', dnsOf())).toMatchObject({ valid: true, isAlias: true, isPersonalEmail: false });
    expect(assess('a@gmail.com', dnsOf())).toMatchObject({ valid: true, isAlias: false, isPersonalEmail: true, isTypo: false });
    const plus = assess('ada+news@example.test', dnsOf());
    expect(plus).toMatchObject({ valid: true, isPlusAddressed: true });
    expect(plus.reasons).toContain('The local part uses plus addressing (a +tag)');
  });

  test('DNS that did not answer is unknown, not "does not exist"', () => {
    const failure = 'no DNS answer within 3000 ms';
    const r = assess('ada@example.test', dnsOf({ NS: 'failed', MX: 'failed', A: 'failed', AAAA: 'failed', failure }));
    expect(r).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false });
    expect(r.reasons).toEqual([
      `DNS lookup failed for example.test (NS, MX, A, AAAA): ${failure}; ` +
        'domainExists, hasMxRecords, hasWebsite could not be checked and are reported as false',
    ]);
    expect(r.reasons.join(' ')).not.toMatch(/does not exist|no MX records/);
  });

  test('a partial DNS failure names only the fields it leaves unknown', () => {
    const r = assess('ada@example.test', dnsOf({ MX: 'failed', failure: 'timeout' }));
    expect(r).toMatchObject({ valid: false, domainExists: true, hasWebsite: true, hasMxRecords: false });
    expect(r.reasons).toEqual(['DNS lookup failed for example.test (MX): timeout; hasMxRecords could not be checked and is reported as false']);
  });
});

describe('input rules', () => {
  const accepts = (email: unknown) => parse(verifySchema, { email }).email;
  const rejects = (email: unknown) => expect(() => parse(verifySchema, { email })).toThrow('Request validation failed');

  test('trims and lower-cases', () => {
    expect(accepts('  Ada@Example.TEST ')).toBe('ada@example.test');
  });

  test('rejects what is not an address, or not one DNS can be asked about', () => {
    rejects(undefined);
    rejects(42);
    rejects('');
    rejects('not-an-email');
    rejects('ada@');
    rejects('ada@localhost');
    rejects('ada@exämple.test');
    rejects(`${'a'.repeat(65)}@example.test`);
    rejects(`ada@${'a'.repeat(64)}.test`);
    expect(accepts(`${'a'.repeat(64)}@${'b'.repeat(63)}.test`)).toHaveLength(64 + 1 + 63 + 5);
  });
});

describe('DNS lookups and their cache (real dns2 server)', () => {
  let dns: ZoneDnsServer;
  beforeAll(async () => {
    dns = await new ZoneDnsServer().start();
  });
  afterAll(() => dns.stop());

  test('four lookups, one per record type', async () => {
    dns.set('full.test', { NS: ['ns1.full.test'], MX: [{ exchange: 'mx.full.test', priority: 10 }], AAAA: ['2001:db8::1'] });
    const resolver = new Resolver([dns.address], 1000);
    expect(await lookupDomain(resolver, 'full.test')).toEqual({
      NS: 'found',
      MX: 'found',
      A: 'nodata',
      AAAA: 'found',
      nullMx: false,
      failure: undefined,
    });
    expect(await lookupDomain(resolver, 'absent.test')).toMatchObject({ NS: 'nxdomain', MX: 'nxdomain', A: 'nxdomain' });
  });

  test('a server that does not answer gives failed findings with the reason', async () => {
    const resolver = new Resolver([`127.0.0.1:${await deadPort()}`], 200);
    const found = await lookupDomain(resolver, 'full.test');
    expect(found).toMatchObject({ NS: 'failed', MX: 'failed', A: 'failed', AAAA: 'failed', nullMx: false });
    expect(found.failure).toMatch(/DNS|answer/);
  });

  test('the cache answers from memory within its lifetime, and keeps no failure', async () => {
    dns.set('cached.test', { MX: [{ exchange: 'mx.cached.test', priority: 10 }] });
    let resolver = new Resolver([`127.0.0.1:${await deadPort()}`], 200);
    const cache = new DomainDnsCache((d) => lookupDomain(resolver, d), 60_000);

    expect((await cache.get('cached.test')).MX).toBe('failed');
    resolver = new Resolver([dns.address], 1000);
    expect((await cache.get('cached.test')).MX).toBe('found');

    dns.set('cached.test', {});
    expect((await cache.get('cached.test')).MX).toBe('found');
    const fresh = new DomainDnsCache((d) => lookupDomain(resolver, d), 0);
    expect((await fresh.get('cached.test')).MX).toBe('nodata');
  });

  test('concurrent requests for one domain share its lookups; the oldest entry goes first', async () => {
    dns.set('shared.test', { MX: [{ exchange: 'mx.shared.test', priority: 10 }] });
    const resolver = new Resolver([dns.address], 1000);
    const asked: string[] = [];
    const cache = new DomainDnsCache((d) => (asked.push(d), lookupDomain(resolver, d)), 60_000, 2);
    const [a, b] = [cache.get('shared.test'), cache.get('shared.test')];
    expect(a).toBe(b);
    await a;
    await cache.get('absent-1.test');
    await cache.get('absent-2.test');
    await cache.get('shared.test');
    expect(asked).toEqual(['shared.test', 'absent-1.test', 'absent-2.test', 'shared.test']);
  });
});

/** A UDP port on loopback with nothing listening. */
function deadPort(): Promise<number> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket('udp4');
    sock.bind(0, '127.0.0.1', () => {
      const { port } = sock.address();
      sock.close(() => resolve(port));
    });
  });
}
