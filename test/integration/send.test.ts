import { dbQuery } from '../setup/db';
import { dkimStatus } from '../setup/dkim';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: smtp.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    EMAIL_RETRY_BASE_SECONDS: '1',
  });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test');
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});

beforeEach(() => {
  smtp.received.length = 0;
  smtp.reply = () => 'accept';
});

const send = (body: unknown, headers?: Record<string, string>) => svc.api.post('/v1/send', body, { ...key, headers });

const dkimResult = async (raw: Buffer, sender = 'hello@acme.test') => (await dkimStatus(raw, dns, sender)).result;

/** A header's raw value (mailparser folds List-* headers into one structured entry). */
function header(msg: { parsed: { headerLines: ReadonlyArray<{ key: string; line: string }> } }, name: string): string | undefined {
  const line = msg.parsed.headerLines.find((h) => h.key === name.toLowerCase())?.line;
  return line?.slice(line.indexOf(':') + 1).trim();
}

async function emailRow(id: string) {
  return (await dbQuery(svc.databaseUrl, 'SELECT * FROM emails WHERE id = $1', [id]))[0];
}

describe('a sent email', () => {
  test('a sender domain deleted and added again signs with its new key at once', async () => {
    const first = await verifiedDomain(svc.api, dns, acct.project.secretKey, 'rekey.test');
    expect((await send({ to: 'r1@example.org', from: 'hi@rekey.test', subject: 's', body: '<p>one</p>' })).status).toBe(200);
    expect(await dkimResult((await smtp.waitFor(1))[0].raw, 'hi@rekey.test')).toBe('pass');
    expect((await svc.api.delete(`/domains/${first.id}`, key)).status).toBe(200);
    // The records of the old key leave DNS; the new domain publishes its own.
    for (const r of first.records) dns.set(r.name, {});
    const second = await verifiedDomain(svc.api, dns, acct.project.secretKey, 'rekey.test');
    expect(second.records.find((r) => r.name.includes('_domainkey'))?.value).not.toBe(first.records.find((r) => r.name.includes('_domainkey'))?.value);
    expect((await send({ to: 'r2@example.org', from: 'hi@rekey.test', subject: 's', body: '<p>two</p>' })).status).toBe(200);
    expect(await dkimResult((await smtp.waitFor(2))[1].raw, 'hi@rekey.test')).toBe('pass');
  });

  test('is persisted before the response, delivered over SMTP, DKIM-signed, with a text part from the HTML', async () => {
    const res = await send({
      to: 'Reader@Example.org',
      from: { name: 'Acme', email: 'hello@acme.test' },
      subject: 'Hello {{name ?? there}}',
      body: '<html><body><p>Hi {{name}}, your plan is {{plan}}.</p><a href="https://acme.test/start">Start</a></body></html>',
      data: { name: 'Ada', plan: 'pro' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: {
        emails: [{ contact: { id: expect.any(String), email: 'reader@example.org' }, email: expect.any(String), status: 'QUEUED' }],
        timestamp: expect.any(String),
      },
    });
    const { contact, email } = res.body.data.emails[0];
    const row = await emailRow(email);
    expect(row).toMatchObject({
      project_id: acct.project.id,
      contact_id: contact.id,
      subject: 'Hello Ada',
      type: 'TRANSACTIONAL',
      to_email: 'reader@example.org',
    });
    expect(row.message_id).toBe(`<${email}@acme.test>`);

    const [msg] = await smtp.waitFor(1);
    expect(msg.envelope).toEqual({ from: 'hello@acme.test', to: ['reader@example.org'] });
    expect(msg.parsed.subject).toBe('Hello Ada');
    expect(msg.parsed.from?.value).toEqual([{ name: 'Acme', address: 'hello@acme.test' }]);
    expect(msg.parsed.replyTo?.value).toEqual([{ name: '', address: 'hello@acme.test' }]);
    expect(msg.parsed.messageId).toBe(`<${email}@acme.test>`);
    expect(msg.parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/alternative' });
    expect(msg.parsed.html).toContain('Hi Ada, your plan is pro.');
    expect(msg.parsed.text).toContain('Hi Ada, your plan is pro.');
    expect(msg.parsed.text).toMatch(/Start \[https:\/\/mail\.postbox\.test\/t\/c\/|Start \[https:\/\/acme\.test\/start\]/);
    expect(await dkimResult(msg.raw)).toBe('pass');

    const sent = await until(async () => ((await emailRow(email)).status === 'SENT' ? emailRow(email) : undefined));
    expect(sent.sent_at).toBeTruthy();
    const events = await dbQuery(svc.databaseUrl, `SELECT name, data FROM events WHERE contact_id = $1 AND name = 'email.sent'`, [contact.id]);
    expect(events).toEqual([{ name: 'email.sent', data: { emailId: email, messageId: `<${email}@acme.test>`, templateId: null, campaignId: null } }]);
  });

  test('a template supplies subject, body, sender and reply-to; explicit fields override it', async () => {
    const tpl = (
      await svc.api.post(
        '/templates',
        {
          name: 'Receipt',
          subject: 'Receipt {{order}}',
          body: '<p>Thanks {{name ?? friend}} for {{order}}</p>',
          from: 'billing@acme.test',
          fromName: 'Billing',
          replyTo: 'support@acme.test',
          type: 'TRANSACTIONAL',
        },
        key,
      )
    ).body;
    await send({ to: 'a@example.org', template: tpl.id, data: { order: '#1', name: { value: 'Temp', persistent: false } } });
    await send({ to: 'b@example.org', template: tpl.id, subject: 'Overridden', from: 'Other <other@acme.test>', reply: 'r@acme.test' });
    const [a, b] = (await smtp.waitFor(2)).sort((x, y) => x.envelope.to[0].localeCompare(y.envelope.to[0]));
    expect(a.parsed.subject).toBe('Receipt #1');
    expect(a.parsed.html).toContain('Thanks Temp for #1');
    expect(a.parsed.from?.value).toEqual([{ name: 'Billing', address: 'billing@acme.test' }]);
    expect(a.parsed.replyTo?.value[0].address).toBe('support@acme.test');
    expect(b.parsed.subject).toBe('Overridden');
    expect(b.parsed.html).toContain('Thanks friend for');
    expect(b.parsed.from?.value).toEqual([{ name: 'Other', address: 'other@acme.test' }]);
    expect(b.parsed.replyTo?.value[0].address).toBe('r@acme.test');
    // The non-persistent value was used, not stored; the persistent one was stored.
    const contactA = (await svc.api.post('/contacts/lookup', { emails: ['a@example.org'] }, key)).body.found[0];
    expect((await svc.api.get(`/contacts/${contactA.id}`, key)).body.data).toEqual({ order: '#1' });
  });

  test('to as an array of strings and objects: one contact and one email each; new contacts start unsubscribed', async () => {
    const res = await send({
      to: ['x1@example.org', { name: 'Second', email: 'x2@example.org' }, 'X1@example.org'],
      from: 'hello@acme.test',
      name: 'Deprecated Name',
      subject: 'Hi {{email}}',
      body: '<p>For {{email}}</p>',
    });
    expect(res.body.data.emails.map((e: any) => e.contact.email)).toEqual(['x1@example.org', 'x2@example.org']);
    const received = await smtp.waitFor(2);
    const byTo = new Map(received.map((m) => [m.envelope.to[0], m]));
    expect(byTo.get('x1@example.org')!.parsed.subject).toBe('Hi x1@example.org');
    expect((byTo.get('x2@example.org')!.parsed.to as any)?.value).toEqual([{ name: 'Second', address: 'x2@example.org' }]);
    expect(byTo.get('x1@example.org')!.parsed.from?.value).toEqual([{ name: 'Deprecated Name', address: 'hello@acme.test' }]);
    const c = (await svc.api.get(`/contacts/${res.body.data.emails[0].contact.id}`, key)).body;
    expect(c.subscribed).toBe(false);
  });

  test('attachments: regular ones, and inline images referenced by cid, in the right MIME nesting', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    await send({
      to: 'att@example.org',
      from: 'hello@acme.test',
      subject: 'Files',
      body: '<p>Logo: <img src="cid:logo1"></p>',
      attachments: [
        { filename: 'report.txt', content: Buffer.from('quarterly numbers').toString('base64'), contentType: 'text/plain' },
        { filename: 'logo.png', content: png.toString('base64'), contentType: 'image/png', contentId: 'logo1', disposition: 'inline' },
      ],
    });
    const [msg] = await smtp.waitFor(1);
    const raw = msg.raw.toString();
    expect(msg.parsed.headers.get('content-type')).toMatchObject({ value: 'multipart/mixed' });
    expect(raw).toMatch(/Content-Type: multipart\/related/);
    expect(raw).toMatch(/Content-Type: multipart\/alternative/);
    const report = msg.parsed.attachments.find((a) => a.filename === 'report.txt')!;
    expect(report.content.toString()).toBe('quarterly numbers');
    expect(report.contentDisposition).toBe('attachment');
    const logo = msg.parsed.attachments.find((a) => a.filename === 'logo.png')!;
    expect(logo.contentId).toBe('<logo1>');
    expect(logo.content.equals(png)).toBe(true);
    expect(await dkimResult(msg.raw)).toBe('pass');
  });

  test('custom headers travel; a MARKETING email carries the footer and the List-Unsubscribe pair', async () => {
    const tpl = (
      await svc.api.post(
        '/templates',
        { name: 'News', subject: 'News', body: '<html><body><p>Big news</p></body></html>', from: 'news@acme.test', type: 'MARKETING' },
        key,
      )
    ).body;
    await send({ to: 'fan@example.org', template: tpl.id, subscribed: true, headers: { 'X-Campaign': 'spring' } });
    const [msg] = await smtp.waitFor(1);
    const unsubscribe = header(msg, 'List-Unsubscribe');
    expect(unsubscribe).toMatch(/^<https:\/\/mail\.postbox\.test\/unsubscribe\/[0-9a-f-]{36}\?token=[\w-]{22}>$/);
    expect(header(msg, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    expect(header(msg, 'Precedence')).toBe('bulk');
    expect(header(msg, 'X-Campaign')).toBe('spring');
    expect(msg.parsed.html).toMatch(/Unsubscribe<\/a> · <a href="https:\/\/mail\.postbox\.test\/manage\/[^"]+">Manage preferences<\/a><\/div>.*<\/body>/s);
    expect(msg.parsed.text).toMatch(/Unsubscribe \[https:\/\/mail\.postbox\.test\/unsubscribe\//);
    expect(msg.parsed.text).toMatch(/Manage preferences \[https:\/\/mail\.postbox\.test\/manage\//);

    smtp.received.length = 0;
    await send({ to: 'fan@example.org', template: tpl.id, headers: { 'List-Unsubscribe': '<mailto:u@acme.test>' } });
    const [own] = await smtp.waitFor(1);
    expect(header(own, 'List-Unsubscribe')).toBe('<mailto:u@acme.test>');
    expect(header(own, 'List-Unsubscribe-Post')).toBeUndefined();
  });
});

describe('refusals write nothing', () => {
  async function counts() {
    const [r] = await dbQuery(svc.databaseUrl, 'SELECT (SELECT count(*) FROM emails)::int AS e, (SELECT count(*) FROM contacts)::int AS c');
    return r;
  }

  test.each([
    ['no recipient', { from: 'hello@acme.test', subject: 's', body: 'b' }, 'to'],
    ['bad recipient', { to: 'nope', from: 'hello@acme.test', subject: 's', body: 'b' }, 'to'],
    ['subject with a newline', { to: 'a@example.org', from: 'hello@acme.test', subject: 'a\nb', body: 'b' }, 'subject'],
    ['subject too long', { to: 'a@example.org', from: 'hello@acme.test', subject: 'x'.repeat(999), body: 'b' }, 'subject'],
    ['no subject nor template', { to: 'a@example.org', from: 'hello@acme.test', body: 'b' }, 'subject'],
    ['header name with CRLF', { to: 'a@example.org', from: 'hello@acme.test', subject: 's', body: 'b', headers: { 'X-A\r\nBcc': 'v' } }, 'headers.X-A\r\nBcc'],
    ['header value with CRLF', { to: 'a@example.org', from: 'hello@acme.test', subject: 's', body: 'b', headers: { 'X-A': 'v\r\nBcc: x@y.z' } }, 'headers.X-A'],
    ['header value over 998', { to: 'a@example.org', from: 'hello@acme.test', subject: 's', body: 'b', headers: { 'X-A': 'v'.repeat(999) } }, 'headers.X-A'],
    ['a structural header', { to: 'a@example.org', from: 'hello@acme.test', subject: 's', body: 'b', headers: { From: 'x@y.z' } }, 'headers.From'],
    [
      '11 attachments',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `f${i}.txt`, content: 'eA==', contentType: 'text/plain' })),
      },
      'attachments',
    ],
    [
      'attachment not base64',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [{ filename: 'f.txt', content: 'not base64!', contentType: 'text/plain' }],
      },
      'attachments.0.content',
    ],
    [
      'attachment filename with a quote',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [{ filename: 'f".txt', content: 'eA==', contentType: 'text/plain' }],
      },
      'attachments.0.filename',
    ],
    [
      'attachment filename with a single quote',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [
          { filename: 'ok.txt', content: 'eA==', contentType: 'text/plain' },
          { filename: "it's.txt", content: 'eA==', contentType: 'text/plain' },
        ],
      },
      'attachments.1.filename',
    ],
    [
      'attachment filename with a CR',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [
          { filename: 'ok.txt', content: 'eA==', contentType: 'text/plain' },
          { filename: 'f\r.txt', content: 'eA==', contentType: 'text/plain' },
        ],
      },
      'attachments.1.filename',
    ],
    [
      'attachment filename with an LF',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [
          { filename: 'ok.txt', content: 'eA==', contentType: 'text/plain' },
          { filename: 'f\n.txt', content: 'eA==', contentType: 'text/plain' },
        ],
      },
      'attachments.1.filename',
    ],
    [
      'attachment filename with a CRLF',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [
          { filename: 'ok.txt', content: 'eA==', contentType: 'text/plain' },
          { filename: 'f\r\nBcc: x@y.z.txt', content: 'eA==', contentType: 'text/plain' },
        ],
      },
      'attachments.1.filename',
    ],
    [
      'inline without contentId',
      {
        to: 'a@example.org',
        from: 'hello@acme.test',
        subject: 's',
        body: 'b',
        attachments: [{ filename: 'f.png', content: 'eA==', contentType: 'image/png', disposition: 'inline' }],
      },
      'attachments.0.contentId',
    ],
    ['template not a uuid', { to: 'a@example.org', template: 'welcome' }, 'template'],
  ])('%s: 422 naming %s', async (_name, body, field) => {
    const before = await counts();
    const res = await send(body);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors.map((e: any) => e.field)).toContain(field);
    expect(await counts()).toEqual(before);
  });

  test('more than 50 recipients is 422 too_big naming the cap; 50 are accepted', async () => {
    const before = await counts();
    const many = Array.from({ length: 51 }, (_, i) => `r${i}@example.org`);
    const res = await send({ to: many, from: 'hello@acme.test', subject: 's', body: 'b' });
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'to', code: 'too_big', message: expect.stringMatching(/at most 50 recipients/) })]);
    expect(await counts()).toEqual(before);
    const fifty = await send({ to: many.slice(0, 50), from: 'hello@acme.test', subject: 's', body: 'b' });
    expect(fifty.status).toBe(200);
    expect(fifty.body.data.emails).toHaveLength(50);
    await smtp.waitFor(50);
  });

  test('attachments over 10 MB in total are 422 too_big', async () => {
    const big = Buffer.alloc(6 * 1024 * 1024).toString('base64');
    const res = await send({
      to: 'a@example.org',
      from: 'hello@acme.test',
      subject: 's',
      body: 'b',
      attachments: [
        { filename: 'a.bin', content: big, contentType: 'application/octet-stream' },
        { filename: 'b.bin', content: big, contentType: 'application/octet-stream' },
      ],
    });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'attachments', code: 'too_big' });
  });

  test('a template of another project is 404, an unverified sender 403, a MARKETING template to an unsubscribed contact 400', async () => {
    const other = await createAccount(svc.api, 'Other');
    await verifiedDomain(svc.api, dns, other.project.secretKey, 'other.test');
    const theirs = (await svc.api.post('/templates', { name: 't', subject: 's', body: 'b', from: 'a@other.test' }, { key: other.project.secretKey })).body;
    const before = await counts();
    const notFound = await send({ to: 'a@example.org', template: theirs.id });
    expect(notFound.status).toBe(404);
    const unverified = await send({ to: 'a@example.org', from: 'a@other.test', subject: 's', body: 'b' });
    expect(unverified.status).toBe(403);
    expect(unverified.body.error).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      statusCode: 403,
      details: { reason: 'DOMAIN_NOT_REGISTERED', domain: 'other.test' },
    });
    expect((await svc.api.post('/domains', { domain: 'pending.test' }, key)).status).toBe(201);
    const pending = await send({ to: 'a@example.org', from: 'a@Pending.test', subject: 's', body: 'b' });
    expect(pending.status).toBe(403);
    expect(pending.body.error.details).toMatchObject({ reason: 'DOMAIN_NOT_VERIFIED', domain: 'pending.test' });

    const news = (await svc.api.post('/templates', { name: 'n', subject: 's', body: 'b', from: 'news@acme.test', type: 'MARKETING' }, key)).body;
    await svc.api.post('/contacts', { email: 'optout@example.org', subscribed: false }, key);
    const refused = await send({ to: ['fine@example.org', 'optout@example.org'], template: news.id });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'CONTACT_UNSUBSCRIBED', details: { emails: ['fine@example.org', 'optout@example.org'] } });
    const [after] = [await counts()];
    expect(after.e).toBe(before.e);
    // TRANSACTIONAL mail goes out regardless of subscription.
    expect((await send({ to: 'optout@example.org', from: 'hello@acme.test', subject: 's', body: 'b' })).status).toBe(200);
  });

  test('a reused Idempotency-Key is 409 and sends nothing twice', async () => {
    const body = { to: 'once@example.org', from: 'hello@acme.test', subject: 'Once', body: 'b' };
    const first = await send(body, { 'Idempotency-Key': 'send-1' });
    const again = await send(body, { 'Idempotency-Key': 'send-1' });
    expect(first.status).toBe(200);
    expect(again.status).toBe(409);
    expect(again.body.error.details).toMatchObject({ key: 'send-1', originalRequest: 'POST /v1/send', originalStatusCode: 200 });
    await smtp.waitFor(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(smtp.received.filter((m) => m.parsed.subject === 'Once')).toHaveLength(1);
  });

  test('a request that failed with nothing written lets its Idempotency-Key go: the retry runs at once', async () => {
    // What a database going away mid-request looks like to the handler: its transaction fails.
    await dbQuery(
      svc.databaseUrl,
      `
      CREATE OR REPLACE FUNCTION refuse_email() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'the database went away'; END $$;
      CREATE TRIGGER refuse_email BEFORE INSERT ON emails
        FOR EACH ROW WHEN (NEW.to_email = 'retry-now@example.org') EXECUTE FUNCTION refuse_email();`,
    );
    const body = { to: 'retry-now@example.org', from: 'hello@acme.test', subject: 'Retried', body: 'b' };
    try {
      expect((await send(body, { 'Idempotency-Key': 'send-failed' })).status).toBe(500);
    } finally {
      await dbQuery(svc.databaseUrl, `DROP TRIGGER refuse_email ON emails; DROP FUNCTION refuse_email()`);
    }
    const retried = await until(async () => {
      const res = await send(body, { 'Idempotency-Key': 'send-failed' });
      return res.status === 200 ? res : undefined;
    }, 5000);
    expect(retried.body.data.emails).toHaveLength(1);
    const again = await send(body, { 'Idempotency-Key': 'send-failed' });
    expect(again.status).toBe(409);
    expect(again.body.error.details.originalStatusCode).toBe(200);
  });

  test('the key says "done" exactly when the emails are committed, so a process dying between the two cannot make a retry send twice', async () => {
    // Widens the moment a kill -9 could hit: every write of this key's outcome waits a second and a half.
    await dbQuery(
      svc.databaseUrl,
      `
      CREATE OR REPLACE FUNCTION slow_key_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep(1.5); RETURN NEW; END $$;
      CREATE TRIGGER slow_key_outcome BEFORE UPDATE ON idempotency_keys
        FOR EACH ROW WHEN (NEW.key = 'send-window') EXECUTE FUNCTION slow_key_outcome();`,
    );
    try {
      const pending = send({ to: 'window@example.org', from: 'hello@acme.test', subject: 'Window', body: 'b' }, { 'Idempotency-Key': 'send-window' });
      // What a crash at any instant would leave: emails committed must never sit beside a key with no outcome.
      const seen: string[] = [];
      let done = false;
      void pending.finally(() => (done = true));
      while (!done) {
        const [row] = await dbQuery<{ emails: number; status: number | null }>(
          svc.databaseUrl,
          `SELECT (SELECT count(*)::int FROM emails WHERE to_email = 'window@example.org') AS emails,
                  (SELECT status_code FROM idempotency_keys WHERE key = 'send-window') AS status`,
        );
        seen.push(`${row.emails}/${row.status}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await pending).status).toBe(200);
      expect(seen.filter((s) => s === '1/null')).toEqual([]);
      expect(seen).toContain('0/null');
    } finally {
      await dbQuery(svc.databaseUrl, `DROP TRIGGER slow_key_outcome ON idempotency_keys; DROP FUNCTION slow_key_outcome()`);
    }
  });
});

describe('delivery failures', () => {
  test('an SMTP outage loses nothing: the mail goes out once the server is back', async () => {
    await smtp.stop();
    const res = await send({ to: 'outage@example.org', from: 'hello@acme.test', subject: 'During outage', body: '<p>b</p>' });
    expect(res.status).toBe(200);
    const id = res.body.data.emails[0].email;
    await new Promise((r) => setTimeout(r, 2500));
    expect((await emailRow(id)).status).toBe('QUEUED');
    await smtp.start();
    const [msg] = await smtp.waitFor(1, 60_000);
    expect(msg.parsed.subject).toBe('During outage');
    await until(async () => ((await emailRow(id)).status === 'SENT' ? true : undefined));
  });

  test('a 4xx reply is retried with backoff; a 5xx reply marks the email FAILED with the reason', async () => {
    let refusals = 0;
    smtp.reply = (to) => {
      if (to[0] === 'later@example.org' && refusals++ < 1) return { code: 451, message: 'Try again later' };
      // A refusal of the message, not of the address (that one is a hard bounce: bounces.test.ts).
      if (to[0] === 'never@example.org') return { code: 554, message: '5.7.1 Message refused by policy' };
      return 'accept';
    };
    const later = (await send({ to: 'later@example.org', from: 'hello@acme.test', subject: 'Later', body: 'b' })).body.data.emails[0].email;
    const never = (await send({ to: 'never@example.org', from: 'hello@acme.test', subject: 'Never', body: 'b' })).body.data.emails[0].email;
    const failed = await until(async () => {
      const row = await emailRow(never);
      return row.status === 'FAILED' ? row : undefined;
    });
    expect(failed.last_error).toMatch(/554 5\.7\.1 Message refused by policy/);
    expect(failed.failed_at).toBeTruthy();
    const sent = await until(async () => {
      const row = await emailRow(later);
      return row.status === 'SENT' ? row : undefined;
    });
    expect(sent.attempts).toBe(2);
    expect(smtp.received.map((m) => m.parsed.subject)).toEqual(['Later']);
  });
});

describe('dispatchers between drains', () => {
  let quiet: TestService;
  let quietKey: { key: string };
  beforeAll(async () => {
    quiet = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, EMAIL_RETRY_BASE_SECONDS: '4', DISPATCH_IDLE_SECONDS: '1' });
    quietKey = { key: (await createAccount(quiet.api)).project.secretKey };
    await verifiedDomain(quiet.api, dns, quietKey.key, 'quiet.test');
  });
  afterAll(() => quiet.stop());

  /** Both email dispatchers sleep in their workflow, with no drain activity in flight. */
  const asleep = () =>
    until(async () => {
      for (const id of quiet.emailDispatchers) {
        const d = await quiet.temporal.client.workflow.getHandle(id).describe();
        if (d.raw.pendingActivities?.length) return undefined;
      }
      return true;
    });
  const quietRow = async (id: string) => (await dbQuery(quiet.databaseUrl, 'SELECT * FROM emails WHERE id = $1', [id]))[0];

  test('mail queued while they sleep wakes them; a retry coming due wakes them by a durable timer', async () => {
    await asleep();
    let refusals = 0;
    smtp.reply = (to) => (to[0] === 'retry@example.org' && refusals++ < 1 ? { code: 451, message: 'Busy' } : 'accept');
    const res = await quiet.api.post('/v1/send', { to: 'retry@example.org', from: 'hello@quiet.test', subject: 'Woken', body: 'b' }, quietKey);
    const id = res.body.data.emails[0].email;
    // The first attempt is refused; the drains run dry and the dispatchers go back to sleep while the retry is not yet due.
    await until(async () => (refusals === 1 ? true : undefined));
    await asleep();
    expect((await quietRow(id)).status).toBe('QUEUED');
    const sent = await until(async () => ((await quietRow(id)).status === 'SENT' ? quietRow(id) : undefined));
    expect(sent.attempts).toBe(2);
    expect(smtp.received.map((m) => m.parsed.subject)).toEqual(['Woken']);
  });
});
