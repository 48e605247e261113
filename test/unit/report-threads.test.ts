import fs from 'node:fs';
import path from 'node:path';
import { ReportThreads } from '../../src/inbound/report-threads';

const sample = (file: string) => fs.readFileSync(path.join(__dirname, '../fixtures/bounces', file));

test('reports are read on the threads, each answered with its own report, however many arrive at once', async () => {
  const reader = new ReportThreads({ threads: 2, deadlineMs: 30_000 });
  try {
    const files = ['lhost-postfix-01.eml', 'arf-01.eml', 'rfc3834-01.eml', 'lhost-exim-01.eml'];
    const reports = await Promise.all(Array.from({ length: 20 }, (_, i) => reader.read(sample(files[i % files.length]))));
    expect(reports.map((r) => r.kind)).toEqual(Array.from({ length: 20 }, (_, i) => ['bounce', 'complaint', 'auto-reply', 'bounce'][i % 4]));
  } finally {
    await reader.close();
  }
});

test('once closed, reads in flight and later ones fail (the MX answers 451: the sender tries again), none is lost as unreadable', async () => {
  const reader = new ReportThreads({ threads: 1, deadlineMs: 30_000 });
  const pending = Promise.allSettled(Array.from({ length: 5 }, () => reader.read(sample('lhost-postfix-01.eml'))));
  await reader.close();
  const settled = await pending;
  // Each was either read before the close or refused; never answered "unreadable".
  for (const s of settled) {
    if (s.status === 'fulfilled') expect(s.value.kind).toBe('bounce');
    else expect(String(s.reason)).toMatch(/report reader/);
  }
  await expect(reader.read(sample('lhost-postfix-01.eml'))).rejects.toThrow(/closed/);
});

test('a message not read within the deadline is answered unreadable, and the threads that took it are replaced', async () => {
  const reader = new ReportThreads({ threads: 1, deadlineMs: 1 });
  try {
    // No thread starts and reads within a millisecond: each read ends its thread, and the next waits for a new one.
    for (let i = 0; i < 3; i++)
      expect(await reader.read(sample('lhost-postfix-01.eml'))).toEqual({ kind: 'unknown', why: 'unreadable: reading it took too long' });
  } finally {
    await reader.close();
  }
});
