import dgram from 'node:dgram';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

const RESULT_FIELDS = [
  'email',
  'valid',
  'isDisposable',
  'isAlias',
  'isTypo',
  'isPlusAddressed',
  'isPersonalEmail',
  'domainExists',
  'hasWebsite',
  'hasMxRecords',
  'reasons',
];

/** A domain that is delegated, receives mail and serves a website. */
const mailDomain = (mx: string) => ({ NS: [`ns1.${mx}`], MX: [{ exchange: `mx.${mx}`, priority: 10 }], A: ['192.0.2.10'] });

let dns: ZoneDnsServer;
let svc: TestService;
let acct: Account;
beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  for (const domain of ['good.test', 'mailinator.com', 'mozmail.com', 'gmail.com']) dns.set(domain, mailDomain(domain));
  dns.set('nomx.test', { NS: ['ns1.nomx.test'], A: ['192.0.2.11'] });
  dns.set('nullmx.test', { NS: ['ns1.nullmx.test'], MX: [{ exchange: '.', priority: 0 }], A: ['192.0.2.12'] });
  svc = await startTestService({ DNS_SERVERS: dns.address });
  acct = await createAccount(svc.api);
});
afterAll(async () => {
  await svc?.stop();
  await dns?.stop();
});

const verify = (body: unknown, key = acct.project.secretKey) => svc.api.post('/v1/verify', body, { key });

describe('POST /v1/verify', () => {
  test('a good address: NS, MX and A present; every field of the result, no suggestion', async () => {
    const res = await verify({ email: ' Ada@Good.TEST ' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: {
        email: 'ada@good.test',
        valid: true,
        isDisposable: false,
        isAlias: false,
        isTypo: false,
        isPlusAddressed: false,
        isPersonalEmail: false,
        domainExists: true,
        hasWebsite: true,
        hasMxRecords: true,
        reasons: ['good.test has MX records, so it can receive mail'],
      },
    });
    expect(Object.keys(res.body.data).sort()).toEqual([...RESULT_FIELDS].sort());
  });

  test('a domain that does not exist (NXDOMAIN)', async () => {
    const { status, body } = await verify({ email: 'ada@missing.test' });
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false });
    expect(body.data.reasons).toEqual(['Domain missing.test does not exist (DNS answered NXDOMAIN)']);
  });

  test('a domain with a website but no MX records is not valid', async () => {
    const { body } = await verify({ email: 'ada@nomx.test' });
    expect(body.data).toMatchObject({ valid: false, domainExists: true, hasWebsite: true, hasMxRecords: false });
    expect(body.data.reasons).toEqual([expect.stringMatching(/^nomx\.test has no MX records;.*RFC 5321/)]);
  });

  test('a domain publishing a null MX accepts no mail', async () => {
    const { body } = await verify({ email: 'ada@nullmx.test' });
    expect(body.data).toMatchObject({ valid: false, domainExists: true, hasMxRecords: false });
    expect(body.data.reasons).toEqual(['nullmx.test publishes a null MX record (RFC 7505): it accepts no mail']);
  });

  test('a disposable domain is not valid even though it receives mail', async () => {
    const { body } = await verify({ email: 'throwaway@mailinator.com' });
    expect(body.data).toMatchObject({ valid: false, isDisposable: true, isPersonalEmail: false, hasMxRecords: true });
    expect(body.data.reasons).toContain('mailinator.com is listed as a disposable (temporary) email domain');
  });

  test('a forwarding (alias) service is reported and stays valid', async () => {
    const { body } = await verify({ email: 'k3x9@mozmail.com' });
    expect(body.data).toMatchObject({ valid: true, isAlias: true, isDisposable: false, isPersonalEmail: false });
    expect(body.data.reasons).toContain('mozmail.com is an email forwarding (alias) service');
  });

  test('a personal mailbox provider, with plus-addressing', async () => {
    const { body } = await verify({ email: 'ada+newsletter@gmail.com' });
    expect(body.data).toMatchObject({
      email: 'ada+newsletter@gmail.com',
      valid: true,
      isPersonalEmail: true,
      isPlusAddressed: true,
      isTypo: false,
    });
    expect(body.data).not.toHaveProperty('suggestedEmail');
    expect(body.data.reasons).toEqual([
      'gmail.com has MX records, so it can receive mail',
      'gmail.com is a free personal mailbox provider',
      'The local part uses plus addressing (a +tag)',
    ]);
  });

  test.each([
    ['ada@gmial.com', 'ada@gmail.com'],
    ['ada@hotmial.com', 'ada@hotmail.com'],
    ['ada@yaho.com', 'ada@yahoo.com'],
  ])('a typo: %s suggests %s', async (email, suggestedEmail) => {
    const { body } = await verify({ email });
    expect(body.data).toMatchObject({ email, isTypo: true, suggestedEmail, valid: false, domainExists: false });
    expect(body.data.reasons).toContain(`Possible typo: did you mean ${suggestedEmail}?`);
  });

  test.each([
    ['no email', {}, 'invalid_type'],
    ['not a string', { email: 42 }, 'invalid_type'],
    ['not an address', { email: 'ada.example.test' }, 'invalid_string'],
    ['no domain', { email: 'ada@' }, 'invalid_string'],
    ['a label DNS cannot carry', { email: `ada@${'x'.repeat(64)}.test` }, 'invalid_string'],
  ])('422 VALIDATION_ERROR for %s', async (_what, body, code) => {
    const res = await verify(body);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', statusCode: 422 } });
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'email', code })]);
  });

  test('401 for a public key, and for no key', async () => {
    const wrongKey = await verify({ email: 'ada@good.test' }, acct.project.publicKey);
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.body.error.code).toBe('INVALID_API_KEY');
    const noKey = await svc.api.post('/v1/verify', { email: 'ada@good.test' });
    expect(noKey.status).toBe(401);
    expect(noKey.body.success).toBe(false);
  });
});

describe('POST /v1/verify when no DNS server answers', () => {
  let offline: TestService;
  let key: string;
  beforeAll(async () => {
    offline = await startTestService({ DNS_SERVERS: `127.0.0.1:${await deadUdpPort()}` });
    key = (await createAccount(offline.api)).project.secretKey;
  });
  afterAll(() => offline?.stop());

  test('says the checks could not be made instead of claiming the domain does not exist', async () => {
    const started = Date.now();
    const res = await offline.api.post('/v1/verify', { email: 'ada@good.test' }, { key });
    // The four lookups run side by side: one resolver timeout (3 s), not four.
    expect(Date.now() - started).toBeLessThan(8000);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ valid: false, domainExists: false, hasMxRecords: false, hasWebsite: false });
    expect(res.body.data.reasons).toEqual([
      expect.stringMatching(
        /^DNS lookup failed for good\.test \(NS, MX, A, AAAA\): .+; domainExists, hasMxRecords, hasWebsite could not be checked and are reported as false$/,
      ),
    ]);
    expect(res.body.data.reasons.join(' ')).not.toMatch(/does not exist|no MX records/);
  });

  test('the facts that need no DNS are still reported', async () => {
    const res = await offline.api.post('/v1/verify', { email: 'ada+x@gmial.com' }, { key });
    expect(res.body.data).toMatchObject({ isTypo: true, suggestedEmail: 'ada+x@gmail.com', isPlusAddressed: true });
  });
});

/** A UDP port on loopback with nothing listening. */
function deadUdpPort(): Promise<number> {
  return new Promise((resolve) => {
    const sock = dgram.createSocket('udp4');
    sock.bind(0, '127.0.0.1', () => {
      const { port } = sock.address();
      sock.close(() => resolve(port));
    });
  });
}
