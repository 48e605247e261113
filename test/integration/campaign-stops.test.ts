/**
 * How a cancel reaches every worker's chunks of a campaign: a NOTIFY on `postbox_campaign_stopped` with the
 * campaign's id aborts that campaign's watched chunks in this process, and no other campaign's.
 */
import pino from 'pino';
import { CampaignStops } from '../../src/modules/campaigns';
import { createTestDatabase, dbQuery } from '../setup/db';
import { until } from '../setup/until';

let url: string;
let stops: CampaignStops;

beforeAll(async () => {
  url = await createTestDatabase();
  stops = new CampaignStops(url, pino({ level: 'silent' }));
  await stops.start();
});
afterAll(() => stops.stop());

test("a cancel's notification aborts every chunk of that campaign, and only of that one", async () => {
  const a1 = stops.watch('campaign-a');
  const a2 = stops.watch('campaign-a');
  const b = stops.watch('campaign-b');
  await dbQuery(url, `SELECT pg_notify('postbox_campaign_stopped', 'campaign-a')`);
  await until(async () => (a1.signal.aborted && a2.signal.aborted ? true : undefined), 5000, "campaign-a's chunks aborted");
  expect(b.signal.aborted).toBe(false);
  for (const w of [a1, a2, b]) w.release();
});

test('a chunk released before the cancel is not told; a chunk watching after it starts afresh', async () => {
  const done = stops.watch('campaign-c');
  done.release();
  await dbQuery(url, `SELECT pg_notify('postbox_campaign_stopped', 'campaign-c')`);
  const later = stops.watch('campaign-c');
  // A notification for another campaign proves the listener has read past campaign-c's.
  const marker = stops.watch('campaign-d');
  await dbQuery(url, `SELECT pg_notify('postbox_campaign_stopped', 'campaign-d')`);
  await until(async () => (marker.signal.aborted ? true : undefined), 5000, "campaign-d's chunk aborted");
  expect(done.signal.aborted).toBe(false);
  expect(later.signal.aborted).toBe(false);
  later.release();
  marker.release();
});
