/**
 * Templates with logic, end to end: Liquid in /v1/send, templates, campaigns and an automation's
 * SEND_EMAIL step, as the recipient's SMTP server receives it; write-time errors; caps at send time;
 * previews; test sends; MJML.
 */
import { dbQuery } from '../setup/db';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };
const from = 'hi@liquid.test';

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, PUBLIC_URL: 'https://mail.postbox.test' });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'liquid.test');
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});
beforeEach(() => {
  smtp.received.length = 0;
});

const send = (body: Record<string, unknown>) => svc.api.post('/v1/send', { from, ...body }, key);
const to = (received: Received[], address: string) => received.find((m) => m.envelope.to[0] === address)!;
/** The HTML part's body element, as received. */
const bodyOf = (m: Received) =>
  (/<body>([\s\S]*)<\/body>/.exec(String(m.parsed.html))?.[1] ?? String(m.parsed.html)).replace(
    /<img src="https:\/\/mail\.postbox\.test\/t\/o\/[^"]*"[^>]*>/,
    '',
  );
/** The first message to `address`, once it arrives (others may arrive around it). */
const mailTo = (address: string) => until(async () => smtp.received.find((m) => m.envelope.to[0] === address));
const mailCount = async (projectId = acct.project.id) =>
  (await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM emails WHERE project_id = $1', [projectId]))[0].n as number;

const RECEIPT = {
  subject: '{% if plan == "pro" %}Your Pro receipt{% else %}Your receipt{% endif %}, {{ name | default: "friend" }}',
  body:
    '<html><body><h1>Thanks {{ name }}</h1><table>{% for line in order.lines %}' +
    '<tr><td>{{ line.name }}</td><td>{{ line.qty }} × {{ line.price | prepend: "$" }}</td></tr>{% endfor %}</table>' +
    '<p>Total: {{ order.total | times: 1.0 | round: 2 }}</p>{% if order.lines.size > 1 %}<p>{{ order.lines.size }} lines</p>{% endif %}</body></html>',
};

describe('Liquid in /v1/send', () => {
  test('conditions, loops and filters render per recipient; hostile data is escaped, in a loop too', async () => {
    const order = {
      lines: [
        { name: '<script>alert(1)</script>', qty: 1, price: 3 },
        { name: 'Tea & "cake"', qty: 2, price: 4.5 },
      ],
      total: 12,
    };
    const res = await send({
      to: 'buyer@example.org',
      subject: RECEIPT.subject,
      body: RECEIPT.body,
      data: { name: '<b>Ada</b>', plan: 'pro', order: { value: order, persistent: false } },
    });
    expect(res.status).toBe(200);
    const [m] = await smtp.waitFor(1);
    expect(m.parsed.subject).toBe('Your Pro receipt, <b>Ada</b>');
    expect(bodyOf(m)).toBe(
      '<h1>Thanks &lt;b&gt;Ada&lt;/b&gt;</h1><table><tr><td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>1 × $3</td></tr>' +
        '<tr><td>Tea &amp; &quot;cake&quot;</td><td>2 × $4.5</td></tr></table><p>Total: 12</p><p>2 lines</p>',
    );
    expect(m.parsed.text).toContain('<script>alert(1)</script> 1 × $3');
    // order was not persistent: the contact keeps name and plan only.
    const [contact] = await dbQuery(svc.databaseUrl, `SELECT data FROM contacts WHERE project_id = $1 AND email = 'buyer@example.org'`, [acct.project.id]);
    expect(contact.data).toEqual({ name: '<b>Ada</b>', plan: 'pro' });
  });

  test('| raw is the author’s opt-out; a contact’s data never is', async () => {
    await send({
      to: 'raw@example.org',
      subject: 's',
      body: '<p>{{ banner | raw }}</p><p>{{ name }}</p>',
      data: { banner: '<i>sale</i>', name: '{{ banner | raw }}' },
    });
    const [m] = await smtp.waitFor(1);
    expect(bodyOf(m)).toBe('<p><i>sale</i></p><p>{{ banner | raw }}</p>');
  });

  test('old placeholders render as they always did: fallbacks, data., arrays as list items', async () => {
    const t = (
      await svc.api.post(
        '/templates',
        {
          name: 'Old',
          subject: 'Hi {{name ?? "friend"}}',
          body: '<html><body><p>{{ data.plan ?? free }} / {{missing}}</p><ul>{{tags}}</ul></body></html>',
          from,
          type: 'TRANSACTIONAL',
        },
        key,
      )
    ).body;
    await send({ to: 'old1@example.org', template: t.id, data: { tags: ['a', 'b<c'] } });
    await send({ to: 'old2@example.org', template: t.id, data: { name: 'Zoë', plan: 'pro' } });
    const received = await smtp.waitFor(2);
    expect(to(received, 'old1@example.org').parsed.subject).toBe('Hi friend');
    expect(bodyOf(to(received, 'old1@example.org'))).toBe('<p>free / </p><ul><li>a</li><li>b&lt;c</li></ul>');
    expect(to(received, 'old2@example.org').parsed.subject).toBe('Hi Zoë');
    expect(bodyOf(to(received, 'old2@example.org'))).toBe('<p>pro / </p><ul></ul>');
  });

  test('an inline subject or body that does not parse is 422 with its line and column, and nothing is sent', async () => {
    const before = await mailCount();
    const bad = await send({ to: 'nobody@example.org', subject: 'ok', body: '<p>\n{{ name }}\n{% if plan %}pro' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.message).toBe('body: tag {% if plan %} not closed at line 3, column 1');
    expect(bad.body.error.errors).toEqual([{ field: 'body', message: 'body: tag {% if plan %} not closed at line 3, column 1', code: 'invalid_template' }]);
    const subject = await send({ to: 'nobody@example.org', subject: 'Hi {{ name | nope }}', body: '<p>x</p>' });
    expect(subject.status).toBe(422);
    expect(subject.body.error.message).toMatch(/^subject: undefined filter: nope at line 1, column 4/);
    const include = await send({ to: 'nobody@example.org', subject: 's', body: '{% include "/etc/passwd" %}' });
    expect(include.body.error.message).toBe('body: {% include %} is not allowed: templates cannot read files at line 1, column 1');
    // Parses, but passes the render cap: 422 naming it, nothing sent, and the service still answers.
    const runaway = await send({
      to: ['r1@example.org', 'r2@example.org', 'r3@example.org'],
      subject: 's',
      body: '{% for i in (1..10000) %}{% for j in (1..10000) %}{% endfor %}{% endfor %}',
    });
    expect(runaway.status).toBe(422);
    expect(runaway.body.error.message).toBe('body: could not be rendered: template render limit exceeded');
    expect((await svc.api.get('/health')).status).toBe(200);
    expect(await mailCount()).toBe(before);
    const [contacts] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM contacts WHERE email = 'nobody@example.org'`);
    expect(contacts.n).toBe(0);
  });
});

describe('write-time errors', () => {
  test('templates: POST and PATCH refuse what does not parse, and file tags, naming field, line and column', async () => {
    const base = { name: 'T', subject: 'Hi', body: '<p>ok</p>', from };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ body: '<p>\n\n{% for x in items %}{{ x }}' }, 'body: tag {% for x in items %} not closed at line 3, column 1'],
      [{ subject: 'Hi {{ name' }, 'subject: output "{{ name" not closed at line 1, column 4'],
      [{ body: '<p>{% render "header" %}</p>' }, 'body: {% render %} is not allowed: templates cannot read files at line 1, column 4'],
      [{ body: '{% layout "base" %}' }, 'body: {% layout %} is not allowed: templates cannot read files at line 1, column 1'],
      [{ body: '{% include "x" %}' }, 'body: {% include %} is not allowed: templates cannot read files at line 1, column 1'],
      [{ body: '<p>{% endif %}</p>' }, 'body: tag "endif" not found at line 1, column 4'],
    ];
    for (const [change, message] of cases) {
      const res = await svc.api.post('/templates', { ...base, ...change }, key);
      expect(res.status).toBe(422);
      expect(res.body.error.message.startsWith(message)).toBe(true);
    }
    const t = (await svc.api.post('/templates', base, key)).body;
    const patched = await svc.api.patch(`/templates/${t.id}`, { body: 'a\n{% if x %}' }, key);
    expect(patched.status).toBe(422);
    expect(patched.body.error.message).toBe('body: tag {% if x %} not closed at line 2, column 1');
    expect((await svc.api.get(`/templates/${t.id}`, key)).body.body).toBe('<p>ok</p>');
  });

  test('campaigns: POST and PUT refuse what does not parse', async () => {
    const base = { name: 'C', subject: 'Hi', body: '<p>ok</p>', from, audienceType: 'ALL' };
    const bad = await svc.api.post('/campaigns', { ...base, body: '<p>{% unless x %}</p>' }, key);
    expect(bad.status).toBe(422);
    expect(bad.body.error.message).toBe('body: tag {% unless x %} not closed at line 1, column 4');
    const c = (await svc.api.post('/campaigns', base, key)).body.data;
    const put = await svc.api.put(`/campaigns/${c.id}`, { ...base, subject: '{{ a | nope }}' }, key);
    expect(put.status).toBe(422);
    expect(put.body.error.errors[0].field).toBe('subject');
  });
});

async function contact(email: string, data: Record<string, unknown>) {
  const res = await svc.api.post('/contacts', { email, subscribed: true, data }, key);
  if (res.status >= 300) throw new Error(JSON.stringify(res.body));
  return res.body as { id: string };
}

describe('campaigns', () => {
  test('rendered per recipient; a runaway render fails only its email, naming the cap, while /health answers', async () => {
    const p = await createAccount(svc.api, 'Campaigner');
    const k = { key: p.project.secretKey };
    await verifiedDomain(svc.api, dns, p.project.secretKey, 'camp.test');
    const add = (email: string, data: Record<string, unknown>) => svc.api.post('/contacts', { email, subscribed: true, data }, k);
    await add('pro@camp.test', { plan: 'pro', name: 'Pat', n: 2, items: ['x<y', 'z'] });
    await add('free@camp.test', { plan: 'free', name: '<img src=x onerror=alert(1)>', n: 1, items: [] });
    // 10^8 iterations: stopped by the render cap, not run to the end.
    await add('runaway@camp.test', { plan: 'free', name: 'R', n: 10000, items: [] });
    const c = (
      await svc.api.post(
        '/campaigns',
        {
          name: 'Logic',
          subject: '{% case plan %}{% when "pro" %}Pro news{% else %}News{% endcase %} for {{ name }}',
          body:
            '<html><body><p>{{ name }}</p>{% for i in (1..n) %}{% for j in (1..n) %}{% endfor %}{% endfor %}' +
            '<ul>{% for item in items %}<li>{{ item | upcase }}</li>{% else %}<li>none</li>{% endfor %}</ul></body></html>',
          from: 'news@camp.test',
          audienceType: 'ALL',
          type: 'TRANSACTIONAL',
        },
        k,
      )
    ).body.data;
    expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, k)).status).toBe(200);
    await until(async () => ((await svc.api.get(`/campaigns/${c.id}`, k)).body.status === 'SENT' ? true : undefined));
    expect((await svc.api.get('/health')).status).toBe(200);
    const received = await smtp.waitFor(2);
    expect(received.map((m) => m.envelope.to[0]).sort()).toEqual(['free@camp.test', 'pro@camp.test']);
    expect(to(received, 'pro@camp.test').parsed.subject).toBe('Pro news for Pat');
    expect(bodyOf(to(received, 'pro@camp.test'))).toMatch(/^<p>Pat<\/p><ul><li>X&lt;Y<\/li><li>Z<\/li><\/ul>/);
    expect(to(received, 'free@camp.test').parsed.subject).toBe('News for <img src=x onerror=alert(1)>');
    expect(bodyOf(to(received, 'free@camp.test'))).toMatch(/^<p>&lt;img src=x onerror=alert\(1\)&gt;<\/p><ul><li>none<\/li><\/ul>/);
    const rows = await dbQuery(svc.databaseUrl, 'SELECT to_email, status, last_error, attempts FROM emails WHERE campaign_id = $1 ORDER BY to_email', [c.id]);
    const runaway = rows.find((r) => r.to_email === 'runaway@camp.test')!;
    expect(runaway.status).toBe('FAILED');
    expect(runaway.last_error).toMatch(/^could not render the template: body: (template render|memory alloc) limit exceeded$/);
    expect(runaway.attempts).toBe(1);
    expect(rows.filter((r) => r.status === 'SENT').length).toBe(2);
  });
});

describe('an automation SEND_EMAIL step', () => {
  test('renders the template’s Liquid with the contact’s data and the event’s', async () => {
    const t = (
      await svc.api.post(
        '/templates',
        {
          name: 'Order',
          subject: '{% if plan == "pro" %}Pro order{% else %}Order{% endif %} #{{ orderId }}',
          body: '<p>{% for line in lines %}{{ forloop.index }}. {{ line.name | capitalize }};{% endfor %}</p>',
          from,
          type: 'TRANSACTIONAL',
        },
        key,
      )
    ).body;
    const w = (await svc.api.post('/workflows', { name: 'On order', triggerConfig: { eventName: 'ordered' } }, key)).body;
    const step = (await svc.api.post(`/workflows/${w.id}/steps`, { name: 'mail', type: 'SEND_EMAIL', config: { templateId: t.id } }, key)).body;
    await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: step.id }, key);
    expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key)).status).toBe(200);
    await contact('flow@example.org', { plan: 'pro' });
    const tracked = await svc.api.post(
      '/v1/track',
      { email: 'flow@example.org', event: 'ordered', data: { orderId: 7, lines: [{ name: 'tea' }, { name: '<b>cake</b>' }] } },
      { key: acct.project.publicKey },
    );
    expect(tracked.status).toBe(200);
    const [m] = await smtp.waitFor(1);
    expect(m.parsed.subject).toBe('Pro order #7');
    expect(bodyOf(m)).toBe('<p>1. Tea;2. &lt;b&gt;cake&lt;/b&gt;;</p>');
  });
});

describe('an automation SEND_EMAIL step whose render passes a cap', () => {
  test('is skipped with the cap as its reason; the same step sends for the next contact', async () => {
    const t = (
      await svc.api.post(
        '/templates',
        { name: 'Loop', subject: 'Loop', body: '<p>{% for i in (1..n) %}{% for j in (1..n) %}{% endfor %}{% endfor %}done</p>', from, type: 'TRANSACTIONAL' },
        key,
      )
    ).body;
    const w = (await svc.api.post('/workflows', { name: 'On loop', triggerConfig: { eventName: 'looped' } }, key)).body;
    const step = (await svc.api.post(`/workflows/${w.id}/steps`, { name: 'mail', type: 'SEND_EMAIL', config: { templateId: t.id } }, key)).body;
    await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: step.id }, key);
    expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key)).status).toBe(200);
    const pub = { key: acct.project.publicKey };
    await svc.api.post('/v1/track', { email: 'loop-big@example.org', event: 'looped', data: { n: 10000 } }, pub);
    await svc.api.post('/v1/track', { email: 'loop-small@example.org', event: 'looped', data: { n: 2 } }, pub);
    const m = await mailTo('loop-small@example.org');
    expect(bodyOf(m)).toBe('<p>done</p>');
    const done = await until(async () => {
      const xs = (await svc.api.get(`/workflows/${w.id}/executions`, key)).body.data as Array<{ id: string; status: string }>;
      return xs.length === 2 && xs.every((x) => x.status === 'COMPLETED') ? xs : undefined;
    });
    const details = await Promise.all(done.map(async (x) => (await svc.api.get(`/workflows/${w.id}/executions/${x.id}`, key)).body));
    const skipped = details.flatMap((d) => d.steps).find((s: any) => s.type === 'SEND_EMAIL' && s.status === 'SKIPPED');
    expect(skipped.output).toEqual({
      sent: false,
      reason: expect.stringMatching(/^could not render the template: body: (template render|memory alloc) limit exceeded$/),
    });
    expect(smtp.received.some((r) => r.envelope.to[0] === 'loop-big@example.org')).toBe(false);
  });
});

describe('preview', () => {
  test('a template for a contact, for data, and another project’s id is 404', async () => {
    const t = (
      await svc.api.post(
        '/templates',
        {
          name: 'P',
          subject: 'Hi {{ name | default: "you" }}',
          body: '<p>{% if plan == "pro" %}Pro{% else %}Free{% endif %} {{ name }}</p>',
          from,
          type: 'TRANSACTIONAL',
        },
        key,
      )
    ).body;
    const c = await contact('preview@example.org', { name: 'Ann', plan: 'pro' });
    const before = await mailCount();
    const forContact = await svc.api.post(`/templates/${t.id}/preview`, { contactId: c.id }, key);
    expect(forContact.status).toBe(200);
    expect(forContact.body).toEqual({ subject: 'Hi Ann', html: '<p>Pro Ann</p>', text: 'Pro Ann' });
    const forData = await svc.api.post(`/templates/${t.id}/preview`, { data: { name: '<i>Bo</i>' } }, key);
    expect(forData.body).toEqual({ subject: 'Hi <i>Bo</i>', html: '<p>Free &lt;i&gt;Bo&lt;/i&gt;</p>', text: 'Free <i>Bo</i>' });
    const both = await svc.api.post(`/templates/${t.id}/preview`, { contactId: c.id, data: { plan: 'free' } }, key);
    expect(both.body.html).toBe('<p>Free Ann</p>');
    expect(await mailCount()).toBe(before);
    const [row] = await dbQuery(svc.databaseUrl, 'SELECT data FROM contacts WHERE id = $1', [c.id]);
    expect(row.data).toEqual({ name: 'Ann', plan: 'pro' });

    const other = await createAccount(svc.api, 'Other previewer');
    expect((await svc.api.post(`/templates/${t.id}/preview`, {}, { key: other.project.secretKey })).status).toBe(404);
    const otherContact = (await svc.api.post('/contacts', { email: 'o@example.org' }, { key: other.project.secretKey })).body;
    expect((await svc.api.post(`/templates/${t.id}/preview`, { contactId: otherContact.id }, key)).status).toBe(404);
  });

  test('a MARKETING campaign with the footer its recipients get; 404 for another project', async () => {
    const c = (
      await svc.api.post(
        '/campaigns',
        { name: 'Prev', subject: 'News for {{ name }}', body: '<html><body><p>{{ name | upcase }}</p></body></html>', from, audienceType: 'ALL' },
        key,
      )
    ).body.data;
    const contactRow = await contact('camp-preview@example.org', { name: 'Cy' });
    const res = await svc.api.post(`/campaigns/${c.id}/preview`, { contactId: contactRow.id }, key);
    expect(res.status).toBe(200);
    expect(res.body.subject).toBe('News for Cy');
    expect(res.body.html).toContain('<p>CY</p>');
    expect(res.body.html).toContain(`https://mail.postbox.test/unsubscribe/${contactRow.id}`);
    expect(res.body.text).toContain('CY');
    const other = await createAccount(svc.api, 'Other campaigner');
    expect((await svc.api.post(`/campaigns/${c.id}/preview`, {}, { key: other.project.secretKey })).status).toBe(404);
  });
});

describe('test sends', () => {
  test('one message per address, rendered for contactId; the campaign stays a DRAFT and counts nothing', async () => {
    const c = (
      await svc.api.post(
        '/campaigns',
        {
          name: 'Tested',
          subject: 'Hello {{ name | default: "reader" }}',
          body: '<p>{% if plan == "pro" %}Pro{% else %}Free{% endif %}</p>',
          from,
          audienceType: 'ALL',
        },
        key,
      )
    ).body.data;
    const pat = await contact('pat@example.org', { name: 'Pat', plan: 'pro' });
    await contact('own@example.org', { name: 'Own', plan: 'free' });
    const res = await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['me@example.org', 'you@example.org'], contactId: pat.id }, key);
    expect(res.status).toBe(200);
    expect(res.body.data.emails.map((e: any) => e.to)).toEqual(['me@example.org', 'you@example.org']);
    let received = await smtp.waitFor(2);
    for (const address of ['me@example.org', 'you@example.org']) {
      expect(to(received, address).parsed.subject).toBe('[Test] Hello Pat');
      expect(bodyOf(to(received, address))).toContain('<p>Pro</p>');
    }
    // No contact is created for a test address; what happens to its email moves only the email.
    const made = await dbQuery(svc.databaseUrl, `SELECT email FROM contacts WHERE email IN ('me@example.org', 'you@example.org')`);
    expect(made).toEqual([]);
    const pixel = /https:\/\/mail\.postbox\.test(\/t\/o\/[^"]+)"/.exec(String(to(received, 'me@example.org').parsed.html))![1];
    expect((await svc.api.get(pixel)).status).toBe(200);
    const meId = res.body.data.emails[0].email;
    await until(async () => ((await dbQuery(svc.databaseUrl, 'SELECT status FROM emails WHERE id = $1', [meId]))[0].status === 'OPENED' ? true : undefined));
    const [events] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM events WHERE data->>'emailId' = $1`, [meId]);
    expect(events.n).toBe(0);
    smtp.received.length = 0;
    // Without contactId: the address's own contact.
    await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['own@example.org'] }, key);
    received = await smtp.waitFor(1);
    expect(received[0].parsed.subject).toBe('[Test] Hello Own');
    // Without either: no data.
    await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['stranger@example.org'] }, key);
    expect((await mailTo('stranger@example.org')).parsed.subject).toBe('[Test] Hello reader');
    // A suppressed address gets no test either.
    expect((await svc.api.post('/suppressions', { emails: ['blocked@example.org'] }, key)).status).toBe(200);
    const blocked = await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['blocked@example.org', 'open@example.org'] }, key);
    expect(blocked.body.data.emails.map((e: any) => [e.to, e.status])).toEqual([
      ['blocked@example.org', 'SUPPRESSED'],
      ['open@example.org', 'QUEUED'],
    ]);
    await mailTo('open@example.org');
    expect(smtp.received.some((m) => m.envelope.to[0] === 'blocked@example.org')).toBe(false);
    const after = (await svc.api.get(`/campaigns/${c.id}`, key)).body;
    expect(after).toMatchObject({ status: 'DRAFT', totalRecipients: 0, sentCount: 0 });
    expect((await svc.api.get(`/campaigns/${c.id}/stats`, key)).body).toMatchObject({ total: 0, sent: 0 });
    expect((await svc.api.post(`/campaigns/${c.id}/test`, { emails: [] }, key)).status).toBe(422);
    expect((await svc.api.post(`/campaigns/${c.id}/test`, { emails: Array.from({ length: 51 }, (_, i) => `a${i}@example.org`) }, key)).status).toBe(422);
    const other = await createAccount(svc.api, 'Other tester');
    expect((await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['x@example.org'] }, { key: other.project.secretKey })).status).toBe(404);
  });

  test('rate-limited per project', async () => {
    const p = await createAccount(svc.api, 'Limited');
    const k = { key: p.project.secretKey };
    await verifiedDomain(svc.api, dns, p.project.secretKey, 'limited.test');
    const c = (await svc.api.post('/campaigns', { name: 'L', subject: 's', body: '<p>b</p>', from: 'a@limited.test', audienceType: 'ALL' }, k)).body.data;
    // The window is a clock minute: one that ends during the loop lets up to ten more through.
    const answers = [];
    for (let i = 0; i < 21; i++) {
      const res = await svc.api.post(`/campaigns/${c.id}/test`, { emails: ['me@limited.test'] }, k);
      answers.push(res);
      if (res.status === 429) break;
    }
    const refused = answers[answers.length - 1];
    expect(answers.length).toBeGreaterThanOrEqual(11);
    expect(answers.slice(0, -1).every((r) => r.status === 200)).toBe(true);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    // Another project is not held back.
    const c2 = (await svc.api.post('/campaigns', { name: 'L', subject: 's', body: '<p>b</p>', from, audienceType: 'ALL' }, key)).body.data;
    expect((await svc.api.post(`/campaigns/${c2.id}/test`, { emails: ['me@example.org'] }, key)).status).toBe(200);
  });
});

describe('MJML', () => {
  const source = [
    '<mjml>',
    '  <mj-body>',
    '    <mj-section>',
    '      <mj-column>',
    '        <mj-text>Hi {{ name ?? "friend" }}</mj-text>',
    '        {% for line in lines %}',
    '        <mj-text>{{ line.name }}</mj-text>',
    '        {% endfor %}',
    '        {% if plan == "pro" %}<mj-button href="{{ manageUrl }}">Manage</mj-button>{% endif %}',
    '      </mj-column>',
    '    </mj-section>',
    '  </mj-body>',
    '</mjml>',
  ].join('\n');

  test('compiled when written, Liquid kept; GET answers the source; the HTML is what is sent', async () => {
    const created = await svc.api.post('/templates', { name: 'M', subject: 'MJML {{ name }}', body: source, format: 'mjml', from, type: 'TRANSACTIONAL' }, key);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ body: source, format: 'mjml' });
    expect((await svc.api.get(`/templates/${created.body.id}`, key)).body.body).toBe(source);
    const res = await send({
      to: 'mjml@example.org',
      template: created.body.id,
      data: { name: '<Mo>', plan: 'pro', lines: { value: [{ name: 'one' }, { name: 'two&' }], persistent: false } },
    });
    expect(res.status).toBe(200);
    const m = await mailTo('mjml@example.org');
    const html = String(m.parsed.html);
    expect(html).toMatch(/<table/);
    expect(html).toContain('Hi &lt;Mo&gt;');
    expect(html).toContain('>one<');
    expect(html).toContain('>two&amp;<');
    expect(html).toMatch(/href="https:\/\/mail\.postbox\.test\/manage\/[^"]+"[^>]*>\s*Manage\s*</);
    expect(html).not.toContain('{%');
    expect(html).not.toContain('<mj-');
    expect(m.parsed.subject).toBe('MJML <Mo>');
  });

  test('a campaign in MJML; invalid MJML is refused with its line', async () => {
    const c = await svc.api.post('/campaigns', { name: 'MC', subject: 's', body: source, format: 'mjml', from, audienceType: 'ALL' }, key);
    expect(c.status).toBe(201);
    expect(c.body.data).toMatchObject({ body: source, format: 'mjml' });
    const preview = await svc.api.post(`/campaigns/${c.body.data.id}/preview`, { data: { lines: [{ name: 'L1' }] } }, key);
    expect(preview.body.html).toContain('>L1<');

    const invalid = source.replace('<mj-column>', '<mj-colum>').replace('</mj-column>', '</mj-colum>');
    const bad = await svc.api.post('/templates', { name: 'Bad', subject: 's', body: invalid, format: 'mjml', from }, key);
    expect(bad.status).toBe(422);
    expect(bad.body.error.message).toMatch(/^body: invalid MJML at line 4: Element mj-colum doesn't exist or is not registered/);
    const misplaced = await svc.api.post(
      '/campaigns',
      { name: 'Bad', subject: 's', body: '<mjml><mj-body>\n<mj-text>x</mj-text></mj-body></mjml>', format: 'mjml', from, audienceType: 'ALL' },
      key,
    );
    expect(misplaced.status).toBe(422);
    expect(misplaced.body.error.message).toMatch(/^body: invalid MJML at line 2: mj-text cannot be used inside mj-body/);
    // The same source as HTML is not compiled: it is HTML with odd tags.
    expect((await svc.api.post('/templates', { name: 'H', subject: 's', body: invalid, from }, key)).status).toBe(201);
  });
});
