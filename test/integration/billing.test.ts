import crypto from 'node:crypto';
import { STRIPE_API_VERSION } from '../../src/modules/billing/stripe';
import http from 'node:http';
import type net from 'node:net';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

/** A stand-in for the Stripe API (unreachable from here): records each call and answers like Stripe. */
class StripeFake {
  readonly calls: Array<{ method: string; path: string; auth?: string; form: URLSearchParams; version?: string; idempotencyKey?: string }> = [];
  url = '';
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        const u = new URL(req.url!, 'http://x');
        const form = new URLSearchParams(req.method === 'GET' ? u.search : raw);
        this.calls.push({
          method: req.method!,
          path: u.pathname,
          auth: req.headers.authorization,
          form,
          version: req.headers['stripe-version'] as string | undefined,
          idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        });
        res.setHeader('content-type', 'application/json');
        if (req.headers.authorization !== 'Bearer sk_test_fake') {
          res.statusCode = 401;
          return res.end(JSON.stringify({ error: { message: 'Invalid API Key provided' } }));
        }
        if (u.pathname === '/v1/checkout/sessions') return res.end(JSON.stringify({ id: 'cs_test_1', url: 'https://checkout.stripe.test/c/cs_test_1' }));
        if (u.pathname === '/v1/billing_portal/sessions') return res.end(JSON.stringify({ id: 'bps_1', url: 'https://billing.stripe.test/p/session_1' }));
        if (u.pathname === '/v1/invoices') {
          return res.end(
            JSON.stringify({
              has_more: false,
              data: [
                {
                  id: 'in_1',
                  number: 'A-0001',
                  status: 'paid',
                  currency: 'eur',
                  total: 1900,
                  amount_due: 1900,
                  amount_paid: 1900,
                  created: 1_790_000_000,
                  period_start: 1_787_000_000,
                  period_end: 1_790_000_000,
                  hosted_invoice_url: 'https://invoice.stripe.test/i/1',
                  invoice_pdf: 'https://invoice.stripe.test/i/1.pdf',
                },
              ],
            }),
          );
        }
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { message: 'Unrecognized request URL' } }));
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
    return this;
  }

  stop(): void {
    this.server?.close();
  }
}

const WEBHOOK_SECRET = 'whsec_test_secret';

/** A Stripe-Signature header as Stripe computes it. */
const stripeSignature = (body: string, secret = WEBHOOK_SECRET, t = Math.floor(Date.now() / 1000)) =>
  `t=${t},v1=${crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;

let dns: ZoneDnsServer;
let fake: StripeFake;
let plain: TestService;
let paying: TestService;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  fake = await new StripeFake().start();
  plain = await startTestService({ DNS_SERVERS: dns.address });
  paying = await startTestService({
    DNS_SERVERS: dns.address,
    STRIPE_SECRET_KEY: 'sk_test_fake',
    STRIPE_API_BASE: fake.url,
    STRIPE_PRICE_ID: 'price_pro',
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  });
});
afterAll(async () => {
  await plain.stop();
  await paying.stop();
  fake.stop();
  await dns.stop();
});

const billing = (acct: Account, what: string) => `/users/@me/projects/${acct.project.id}/${what}`;

describe('caps, without a payment provider', () => {
  let acct: Account;
  let key: { key: string };
  const send = (to: string | string[]) => plain.api.post('/v1/send', { to, from: 'hi@capped.test', subject: 's', body: 'b' }, key);

  beforeAll(async () => {
    acct = await createAccount(plain.api, 'Capped');
    key = { key: acct.project.secretKey };
    await verifiedDomain(plain.api, dns, acct.project.secretKey, 'capped.test');
  });

  test('billing is off: /config says so, and payment endpoints are 400 BILLING_NOT_ENABLED', async () => {
    expect((await plain.api.get('/config')).body.billing).toBe(false);
    for (const [method, path] of [
      ['POST', billing(acct, 'checkout')],
      ['POST', billing(acct, 'billing-portal')],
      ['GET', billing(acct, 'billing-invoices')],
      ['POST', '/webhooks/incoming/stripe'],
    ] as const) {
      const res = await plain.api.request(method, path, { cookie: acct.cookie, body: method === 'POST' ? {} : undefined });
      expect([path, res.status, res.body.error.code]).toEqual([path, 400, 'BILLING_NOT_ENABLED']);
    }
  });

  test('limits start uncapped; PUT replaces them; a MEMBER may read but not change them', async () => {
    const read = await plain.api.get(billing(acct, 'billing-limits'), { cookie: acct.cookie });
    expect(read.body).toEqual({ emails: null, contacts: null, period: { start: expect.stringMatching(/-01T00:00:00.000Z$/), end: expect.any(String) } });
    expect((await plain.api.put(billing(acct, 'billing-limits'), { emails: -1 }, { cookie: acct.cookie })).status).toBe(422);
    expect((await plain.api.put(billing(acct, 'billing-limits'), { emails: 3, extra: 1 }, { cookie: acct.cookie })).status).toBe(422);
    const put = await plain.api.put(billing(acct, 'billing-limits'), { emails: 3 }, { cookie: acct.cookie });
    expect(put.body).toMatchObject({ emails: 3, contacts: null });

    const member = await createAccount(plain.api, 'Member of Capped');
    await dbQuery(
      plain.databaseUrl,
      `INSERT INTO project_members (project_id, user_id, role) SELECT $1, user_id, 'MEMBER' FROM project_members WHERE project_id = $2`,
      [acct.project.id, member.project.id],
    );
    expect((await plain.api.get(billing(acct, 'billing-limits'), { cookie: member.cookie })).body.emails).toBe(3);
    const refused = await plain.api.put(billing(acct, 'billing-limits'), { emails: 100 }, { cookie: member.cookie });
    expect([refused.status, refused.body.error.code]).toEqual([403, 'INSUFFICIENT_ROLE']);
    const stranger = await createAccount(plain.api, 'Stranger');
    expect((await plain.api.get(billing(acct, 'billing-consumption'), { cookie: stranger.cookie })).status).toBe(404);
  });

  test('the email cap is enforced when mail is accepted: what would pass it is 403 and nothing is queued', async () => {
    expect((await send(['a@x.test', 'b@x.test'])).status).toBe(200);
    const over = await send(['c@x.test', 'd@x.test']);
    expect(over.status).toBe(403);
    expect(over.body.error).toMatchObject({ code: 'BILLING_LIMIT_REACHED', details: { category: 'emails', limit: 3, used: 2, requested: 2 } });
    expect(await dbQuery(plain.databaseUrl, `SELECT 1 FROM contacts WHERE email = 'c@x.test'`)).toEqual([]);
    expect((await send('c@x.test')).status).toBe(200);
    expect((await send('d@x.test')).status).toBe(403);

    const used = (await plain.api.get(billing(acct, 'billing-consumption'), { cookie: acct.cookie })).body;
    expect(used).toMatchObject({
      emails: { used: 3, limit: 3, remaining: 0, byType: { TRANSACTIONAL: 3, MARKETING: 0, HEADLESS: 0 } },
      contacts: { used: 3, limit: null, remaining: null },
    });

    // A campaign to more than what is left is refused when sent, and test sends count too.
    for (const email of ['s1@x.test', 's2@x.test', 's3@x.test']) await plain.api.post('/contacts', { email, subscribed: true }, key);
    const campaign = (
      await plain.api.post('/campaigns', { name: 'C', subject: 's', body: '<p>b</p>', from: 'hi@capped.test', audienceType: 'ALL', type: 'TRANSACTIONAL' }, key)
    ).body.data;
    await plain.api.put(billing(acct, 'billing-limits'), { emails: 5 }, { cookie: acct.cookie });
    const sendCampaign = await plain.api.post(`/campaigns/${campaign.id}/send`, {}, key);
    expect(sendCampaign.body.error).toMatchObject({ code: 'BILLING_LIMIT_REACHED', details: { requested: 3, used: 3, limit: 5 } });
    expect((await plain.api.get(`/campaigns/${campaign.id}`, key)).body.status).toBe('DRAFT');
    expect((await plain.api.post(`/campaigns/${campaign.id}/test`, { email: 't@x.test' }, key)).status).toBe(200);

    // Raising the cap (or removing it) lets mail through again.
    await plain.api.put(billing(acct, 'billing-limits'), { emails: null }, { cookie: acct.cookie });
    expect((await send('d@x.test')).status).toBe(200);
  });

  test('the contact cap: while the project holds more contacts than it allows, sending is refused', async () => {
    await plain.api.put(billing(acct, 'billing-limits'), { contacts: 2 }, { cookie: acct.cookie });
    const res = await send('a@x.test');
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'BILLING_LIMIT_REACHED', details: { category: 'contacts', limit: 2 } });
    await plain.api.put(billing(acct, 'billing-limits'), {}, { cookie: acct.cookie });
    expect((await send('a@x.test')).status).toBe(200);
  });

  test('a scheduled campaign that would pass the cap when its time comes is cancelled, and sends nothing', async () => {
    const campaign = (await plain.api.post('/campaigns', { name: 'Later', subject: 's', body: '<p>b</p>', from: 'hi@capped.test', audienceType: 'ALL' }, key))
      .body.data;
    const at = new Date(Date.now() + 1500).toISOString();
    expect((await plain.api.post(`/campaigns/${campaign.id}/send`, { scheduledFor: at }, key)).status).toBe(200);
    const used = (await plain.api.get(billing(acct, 'billing-consumption'), { cookie: acct.cookie })).body.emails.used;
    await plain.api.put(billing(acct, 'billing-limits'), { emails: used }, { cookie: acct.cookie });
    await until(async () => ((await plain.api.get(`/campaigns/${campaign.id}`, key)).body.status === 'CANCELLED' ? true : undefined));
    expect(await dbQuery(plain.databaseUrl, `SELECT 1 FROM emails WHERE campaign_id = $1`, [campaign.id])).toEqual([]);
    await plain.api.put(billing(acct, 'billing-limits'), {}, { cookie: acct.cookie });
  });
});

describe('payments through Stripe', () => {
  let acct: Account;

  beforeAll(async () => {
    acct = await createAccount(paying.api, 'Paying');
  });

  const webhook = (event: unknown, signature?: string) => {
    const raw = JSON.stringify(event);
    return paying.api.request('POST', '/webhooks/incoming/stripe', { raw, headers: { 'stripe-signature': signature ?? stripeSignature(raw) } });
  };

  test('checkout creates a subscription session for the project with the configured price', async () => {
    expect((await paying.api.get('/config')).body.billing).toBe(true);
    const res = await paying.api.post(billing(acct, 'checkout'), {}, { cookie: acct.cookie });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: 'cs_test_1', url: 'https://checkout.stripe.test/c/cs_test_1' });
    const call = fake.calls.at(-1)!;
    expect(call).toMatchObject({ method: 'POST', path: '/v1/checkout/sessions', auth: 'Bearer sk_test_fake', version: STRIPE_API_VERSION });
    // One key per request, the same on every retry of it, so Stripe creates one session.
    expect(call.idempotencyKey).toMatch(new RegExp(`^checkout:${acct.project.id}:`));
    expect(Object.fromEntries(call.form)).toMatchObject({
      mode: 'subscription',
      'line_items[0][price]': 'price_pro',
      'line_items[0][quantity]': '1',
      client_reference_id: acct.project.id,
      'metadata[projectId]': acct.project.id,
      customer_email: acct.user.email,
      success_url: `${paying.api.baseUrl}/?checkout=success`,
    });
    expect((await paying.api.post(billing(acct, 'checkout'), { successUrl: 'javascript:alert(1)' }, { cookie: acct.cookie })).status).toBe(422);
    // No billing account until Stripe reports the checkout done.
    expect((await paying.api.post(billing(acct, 'billing-portal'), {}, { cookie: acct.cookie })).body.error.code).toBe('NO_BILLING_ACCOUNT');
    expect((await paying.api.get(billing(acct, 'billing-invoices'), { cookie: acct.cookie })).body).toEqual({ data: [], subscriptionStatus: null });
  });

  test('the webhook: only a valid, fresh signature over the exact body is accepted; each event applies once', async () => {
    const now = Math.floor(Date.now() / 1000);
    // Stripe does not deliver in order: the subscription's creation may come before the checkout.
    const early = {
      id: 'evt_0',
      type: 'customer.subscription.created',
      created: now - 5,
      data: { object: { id: 'sub_1', customer: 'cus_1', status: 'trialing' } },
    };
    expect((await webhook(early)).body.error.code).toBe('UNKNOWN_CUSTOMER');
    const completed = {
      id: 'evt_1',
      type: 'checkout.session.completed',
      created: now - 10,
      data: { object: { id: 'cs_test_1', client_reference_id: acct.project.id, customer: 'cus_1', subscription: 'sub_1', payment_status: 'paid' } },
    };
    const raw = JSON.stringify(completed);
    expect((await webhook(completed, stripeSignature(raw, 'whsec_wrong'))).body.error.code).toBe('INVALID_SIGNATURE');
    expect((await webhook(completed, stripeSignature(raw, WEBHOOK_SECRET, Math.floor(Date.now() / 1000) - 3600))).status).toBe(400);
    expect((await webhook({ ...completed, id: 'evt_tampered' }, stripeSignature(raw))).status).toBe(400);
    expect((await paying.api.request('POST', '/webhooks/incoming/stripe', { raw })).status).toBe(400);

    expect((await webhook(completed)).body).toEqual({ received: true, result: 'applied' });
    expect((await webhook(completed)).body).toEqual({ received: true, result: 'duplicate' });
    // Stripe's retry of the early event now applies; it is newer than the checkout.
    expect((await webhook(early)).body).toEqual({ received: true, result: 'applied' });
    await webhook({
      id: 'evt_0b',
      type: 'customer.subscription.updated',
      created: now - 2,
      data: { object: { id: 'sub_1', customer: 'cus_1', status: 'active' } },
    });
    expect((await webhook({ id: 'evt_2', type: 'invoice.created', data: { object: {} } })).body.result).toBe('ignored');
    const [row] = await dbQuery(
      paying.databaseUrl,
      `SELECT stripe_customer_id, stripe_subscription_id, subscription_status FROM project_billing WHERE project_id = $1`,
      [acct.project.id],
    );
    expect(row).toEqual({ stripe_customer_id: 'cus_1', stripe_subscription_id: 'sub_1', subscription_status: 'active' });
  });

  test('with a billing account: the portal opens, invoices are listed, subscription changes are kept', async () => {
    const portal = await paying.api.post(billing(acct, 'billing-portal'), { returnUrl: 'https://app.example/billing' }, { cookie: acct.cookie });
    expect(portal.body).toEqual({ url: 'https://billing.stripe.test/p/session_1' });
    expect(Object.fromEntries(fake.calls.at(-1)!.form)).toEqual({ customer: 'cus_1', return_url: 'https://app.example/billing' });

    const invoices = await paying.api.get(billing(acct, 'billing-invoices'), { cookie: acct.cookie });
    expect(invoices.body).toEqual({
      subscriptionStatus: 'active',
      data: [
        {
          id: 'in_1',
          number: 'A-0001',
          status: 'paid',
          currency: 'eur',
          total: 1900,
          amountDue: 1900,
          amountPaid: 1900,
          createdAt: new Date(1_790_000_000_000).toISOString(),
          periodStart: new Date(1_787_000_000_000).toISOString(),
          periodEnd: new Date(1_790_000_000_000).toISOString(),
          url: 'https://invoice.stripe.test/i/1',
          pdf: 'https://invoice.stripe.test/i/1.pdf',
        },
      ],
    });
    expect(fake.calls.at(-1)!.path).toBe('/v1/invoices');
    expect(fake.calls.at(-1)!.form.get('customer')).toBe('cus_1');

    const now = Math.floor(Date.now() / 1000);
    await webhook({
      id: 'evt_3',
      type: 'customer.subscription.deleted',
      created: now,
      data: { object: { id: 'sub_1', customer: 'cus_1', status: 'canceled' } },
    });
    expect((await paying.api.get(billing(acct, 'billing-invoices'), { cookie: acct.cookie })).body.subscriptionStatus).toBe('canceled');
    // An older update arriving late changes nothing.
    const late = await webhook({
      id: 'evt_4',
      type: 'customer.subscription.updated',
      created: now - 60,
      data: { object: { id: 'sub_1', customer: 'cus_1', status: 'active' } },
    });
    expect(late.body).toEqual({ received: true, result: 'stale' });
    expect((await paying.api.get(billing(acct, 'billing-invoices'), { cookie: acct.cookie })).body.subscriptionStatus).toBe('canceled');
  });
});
