/**
 * An operator in the Temporal Web UI of the embedded dev server, in headless Chromium (Debian's
 * `chromium`, driven by puppeteer-core): the list shows the maintenance runs and a count, the
 * Schedules page the service's schedules, a ProjectId search finds a project's contact-snooze workflow, its page shows its history
 * and call stack (a query, answered by the worker), and cancelling it from the page cancels it. The page may ask no host but its own.
 *
 * `npm ci` builds packages/temporal-devserver/webui/; where it could not, the service builds it on start (about a minute on two cores).
 */
import fs from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { freePort } from '../../src/db/embedded-postgres';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

// Browser globals of the functions run in the page (this project compiles without the DOM library).
declare const document: {
  body: { innerText: string };
  querySelectorAll(selector: string): ArrayLike<{ checkVisibility(): boolean; disabled?: boolean }>;
};
declare const location: { pathname: string };

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const BUILD_TIMEOUT_MS = 9 * 60_000;

describe('Temporal Web UI', () => {
  let svc: TestService;
  let browser: Browser;
  let page: Page;
  let ui: string;
  const foreignRequests: string[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium (see .ci/run) or set CHROMIUM_PATH`);
    // Embedded defaults (durable dev server in the service's PostgreSQL), the UI on a free port.
    svc = await startTestService({ TEMPORAL_DEV_SERVER_PERSISTENCE: 'postgres', TEMPORAL_UI_PORT: String(await freePort()) });
    ui = svc.temporalUiUrl!;
    expect(ui).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await until(async () => ((await fetch(`${ui}/`)).status === 200 ? true : undefined), BUILD_TIMEOUT_MS, 'the Web UI app to be served');
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('request', (req) => {
      const url = req.url();
      if (!url.startsWith(`${ui}/`) && !url.startsWith('data:') && !url.startsWith('blob:')) foreignRequests.push(url);
    });
  }, BUILD_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
  });

  const bodyText = () => page.evaluate(() => document.body.innerText);
  /** Waits until the page shows `text`; on timeout the error carries what the page showed instead. */
  const waitForText = async (text: string | RegExp, timeout = 20_000) => {
    try {
      await page.waitForFunction(
        (source: string, flags: string | null) =>
          flags === null ? document.body.innerText.includes(source) : new RegExp(source, flags).test(document.body.innerText),
        { timeout },
        typeof text === 'string' ? text : text.source,
        typeof text === 'string' ? null : text.flags,
      );
    } catch (err) {
      throw new Error(`page ${page.url()} never showed ${String(text)}; it shows:\n${(await bodyText()).slice(0, 2000)}`, { cause: err });
    }
  };

  test('the workflow list shows the maintenance runs and a count', async () => {
    await page.goto(`${ui}/`, { waitUntil: 'load' });
    await page.waitForFunction(() => location.pathname === '/namespaces/default/workflows');
    await waitForText('maintenance');
    await waitForText(/[1-9]\d*\s+Workflows/);
    const count = Number(/(\d+)\s+Workflows/.exec(await bodyText())![1]);
    expect(count).toBeGreaterThan(0);
    // The status chips come from CountWorkflowExecutions … GROUP BY ExecutionStatus.
    await waitForText(/\d+ Running/);
  });

  test("the Schedules page lists the service's schedules, and a schedule's page shows its spec and recent runs", async () => {
    await page.goto(`${ui}/namespaces/default/schedules`, { waitUntil: 'load' });
    await waitForText('activity-counts');
    await waitForText('maintenance');
    await waitForText(/\b2 Schedules\b/);
    await page.goto(`${ui}/namespaces/default/schedules/maintenance`, { waitUntil: 'load' });
    await waitForText('maintenancePurgeWorkflow');
    await waitForText(/maintenance-\d{4}-\d{2}-\d{2}T/);
  });

  test('a ProjectId search finds the contact-snooze workflow; its page shows the history and call stack; cancelling it cancels it', async () => {
    const { project } = await createAccount(svc.api);
    const key = { key: project.secretKey };
    const contact = (await svc.api.post('/contacts', { email: 'napping@example.com' }, key)).body;
    const snoozedUntil = new Date(Date.now() + 86_400_000).toISOString();
    expect((await svc.api.patch(`/contacts/${contact.id}`, { snoozedUntil }, key)).status).toBe(200);
    const workflowId = `contact-snooze:${contact.id}`;
    const handle = svc.temporal.client.workflow.getHandle(workflowId);
    await until(async () => ((await handle.describe().catch(() => undefined))?.status.name === 'RUNNING' ? true : undefined), 20_000, 'the snooze workflow');

    // The list's search, as the UI writes it into the address.
    const query = `ProjectId = "${project.id}"`;
    await page.goto(`${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`, { waitUntil: 'load' });
    await waitForText(workflowId);
    await waitForText(/\b1\s+Workflow\b/);
    await page.locator(`a::-p-text(${workflowId})`).setTimeout(20_000).click();

    await page.waitForFunction(() => /\/history/.test(location.pathname), { timeout: 20_000 });
    await waitForText('Event History');
    await waitForText('contactSnoozeWorkflow');
    await waitForText(/Workflow Execution Started|WorkflowExecutionStarted/i);
    await waitForText(/Timer Started|TimerStarted/i);

    // Queries go to the worker through the dev server: the call stack of the sleeping workflow.
    const runPath = new URL(page.url()).pathname.replace(/\/history$/, '');
    await page.goto(`${ui}${runPath}/call-stack`, { waitUntil: 'load' });
    await waitForText('Call Stack at');
    await waitForText(/at contactSnoozeWorkflow \(/);

    // The header renders its actions twice (narrow and wide layouts); the operator clicks the one on screen.
    const clickVisible = async (selector: string) => {
      await page.waitForFunction(
        (sel: string) => Array.from(document.querySelectorAll(sel)).some((b) => b.checkVisibility() && !b.disabled),
        { timeout: 20_000 },
        selector,
      );
      for (const element of await page.$$(selector)) {
        if (await element.isVisible()) return element.click();
      }
    };
    await clickVisible('#workflow-actions-primary-button');
    await waitForText('Are you sure you want to cancel this workflow?');
    await clickVisible('[data-testid="cancel-confirmation-modal"] [data-testid="confirm-modal-button"]');

    await until(async () => ((await handle.describe()).status.name === 'CANCELLED' ? true : undefined), 20_000, 'the workflow to be cancelled');
    await page.reload({ waitUntil: 'load' });
    await waitForText('Canceled');
    const history = await handle.fetchHistory();
    expect(history.events!.some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);
  });

  test('the page asked no host but its own', () => {
    expect(foreignRequests).toEqual([]);
  });
});
