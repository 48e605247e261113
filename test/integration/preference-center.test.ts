/**
 * The preference center in headless Chromium (puppeteer-core): opened from a real email's link, used
 * with the keyboard, saved by a plain form post; what it saved is what the API shows.
 */
import fs from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

// Types for the code puppeteer runs in the page.
declare const document: {
  activeElement: { id: string; checked?: boolean } | null;
  body: { innerText: string };
  querySelectorAll(s: string): ArrayLike<{ id: string; labels: ArrayLike<unknown> | null; type: string }>;
};
declare function getComputedStyle(e: unknown): { outlineStyle: string; outlineWidth: string };

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let dns: ZoneDnsServer;
let svc: TestService;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (see .ci/run) or set CHROMIUM_PATH`);
  dns = await new ZoneDnsServer().start();
  svc = await startTestService({ DNS_SERVERS: dns.address });
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  page = await browser.newPage();
  // No JavaScript at all: the page must work as a plain form.
  await page.setJavaScriptEnabled(false);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  await dns?.stop();
});

const bodyText = () => page.evaluate(() => document.body.innerText);

test('from the footer of a marketing email: change a topic with the keyboard, save, then unsubscribe from all; the API shows each', async () => {
  const acct = await createAccount(svc.api, 'Prefs');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'prefs.test');
  const topic = async (body: Record<string, unknown>) => (await svc.api.post('/topics', body, key)).body.id as string;
  const digest = await topic({ name: 'Digest', description: 'Once a week' });
  const offers = await topic({ name: 'Offers' });
  const internal = await topic({ name: 'Internal beta', public: false });

  const template = await svc.api.post(
    '/templates',
    {
      name: 'News',
      subject: 'News for you',
      body: '<html><body><p>News</p></body></html>',
      from: 'news@prefs.test',
      type: 'MARKETING',
    },
    key,
  );
  const sent = await svc.api.post('/v1/send', { to: 'reader@example.org', template: template.body.id, subscribed: true }, key);
  expect(sent.status).toBe(200);
  const contactId = sent.body.data.emails[0].contact.id;
  const mail = await until(async () => {
    const found = (await svc.api.get('/dev/mailbox?to=reader%40example.org')).body.data;
    return found.length ? (found[0] as { html: string }) : undefined;
  });
  // The footer every MARKETING email carries leads to the preference center.
  const href = /<a href="([^"]+)"[^>]*>Manage preferences<\/a>/.exec(mail.html)![1].replace(/&amp;/g, '&');

  await page.goto(href);
  expect(new URL(page.url()).pathname).toBe(`/manage/${contactId}`);
  let text = await bodyText();
  expect(text).toContain('Email preferences for reader@example.org');
  expect(text).toContain('Digest');
  expect(text).toContain('Once a week');
  expect(text).toContain('Offers');
  expect(text).not.toContain('Internal beta');
  // Every input a reader can change has its label.
  const unlabelled = await page.evaluate(() =>
    Array.from(document.querySelectorAll('input:not([type=hidden])'))
      .filter((i) => !i.labels || i.labels.length === 0)
      .map((i) => i.id),
  );
  expect(unlabelled).toEqual([]);
  expect(await page.$$eval('fieldset > legend', (ls) => ls.map((l) => (l as unknown as { textContent: string }).textContent))).toEqual([
    'Topics',
    'All marketing email',
  ]);

  // Keyboard: Tab to the Offers checkbox, which shows its focus, and Space unchecks it.
  for (let i = 0; i < 10; i++) {
    await page.keyboard.press('Tab');
    if ((await page.evaluate(() => document.activeElement?.id)) === `topic-${offers}`) break;
  }
  expect(await page.evaluate(() => document.activeElement?.id)).toBe(`topic-${offers}`);
  const outline = await page.evaluate(() => {
    const s = getComputedStyle(document.activeElement);
    return { style: s.outlineStyle, width: s.outlineWidth };
  });
  expect(outline.style).not.toBe('none');
  expect(outline.width).not.toBe('0px');
  expect(await page.evaluate(() => document.activeElement?.checked)).toBe(true);
  await page.keyboard.press('Space');
  expect(await page.evaluate(() => document.activeElement?.checked)).toBe(false);

  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  text = await bodyText();
  expect(text).toContain('Your preferences are saved.');
  let contact = (await svc.api.get(`/contacts/${contactId}`, key)).body;
  expect(contact.subscribed).toBe(true);
  expect(contact.topics).toEqual({ [digest]: 'subscribed', [offers]: 'unsubscribed', [internal]: 'subscribed' });
  expect(await page.$eval(`#topic-${offers}`, (e) => (e as unknown as { checked: boolean }).checked)).toBe(false);

  // Unsubscribe from all: the global flag; the topics keep their states.
  await page.click('#unsubscribe-all');
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  expect(await bodyText()).toContain('Your preferences are saved.');
  contact = (await svc.api.get(`/contacts/${contactId}`, key)).body;
  expect(contact.subscribed).toBe(false);
  expect(contact.topics[digest]).toBe('subscribed');
  expect(await page.$eval('#unsubscribe-all', (e) => (e as unknown as { checked: boolean }).checked)).toBe(true);

  // Both changes are events, as the activity feed and webhooks see them.
  const unsubscribed = (await svc.api.get('/events?name=contact.unsubscribed', key)).body.data.filter((e: { contactId: string }) => e.contactId === contactId);
  expect(unsubscribed.map((e: { data: unknown }) => e.data)).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ reason: 'preference_center' }),
      expect.objectContaining({ topicId: offers, source: 'preference_center' }),
    ]),
  );

  // A forged link shows no one's preferences.
  await page.goto(`${svc.api.baseUrl}/manage/${contactId}?token=AAAAAAAAAAAAAAAAAAAAAA`);
  expect(await bodyText()).toContain('This link is not valid');
}, 120_000);

test('the copyable subscribe form, pasted into a page and submitted in the browser, signs the address up', async () => {
  const acct = await createAccount(svc.api, 'Snippet');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'snippet.test');
  const news = (await svc.api.post('/topics', { name: 'News & notes', defaultSubscription: 'opt_out' }, key)).body.id as string;
  await svc.api.post('/topics', { name: 'Staff only', public: false }, key);

  const snippet = await svc.api.get('/subscribe-form', key);
  expect(snippet.status).toBe(200);
  expect(snippet.body.action).toBe(`${svc.api.baseUrl}/v1/subscribe?key=${acct.project.publicKey}`);
  expect(snippet.body.html).toContain('News &amp; notes');
  expect(snippet.body.html).not.toContain('Staff only');
  expect(snippet.body.html).toContain('name="_gotcha"');

  await page.setContent(`<!doctype html><html lang="en"><body>${snippet.body.html}</body></html>`);
  await page.type('#postbox-email', 'visitor@example.org');
  // Boxes start unchecked: consent is something the visitor does, not a default.
  expect(await page.$eval(`input[value="${news}"]`, (e) => (e as unknown as { checked: boolean }).checked)).toBe(false);
  await page.click(`input[value="${news}"]`);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  expect(await bodyText()).toContain('Thank you for subscribing');

  const found = (await svc.api.get('/contacts?search=visitor%40example.org', key)).body.data[0];
  const contact = (await svc.api.get(`/contacts/${found.id}`, key)).body;
  // No double opt-in in this project: subscribed at once, to the topic the form's box asked for.
  expect(contact).toMatchObject({ subscribed: true, topics: { [news]: 'subscribed' } });
}, 60_000);
