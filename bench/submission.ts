/**
 * SMTP submission beside POST /v1/send, in the same run, on the same service: messages/s accepted
 * (the client got its `250`, or its 200) and delivered to Postfix's smtp-sink, with 8 connections each
 * (8 pooled SMTP connections; 8 concurrent keep-alive HTTP requests). The same message both ways:
 * 2.8 KB of HTML and its text part, one recipient, from a verified domain, DKIM-signed by the service.
 *
 *   npm run bench:submission                 # 3 runs of 2,000 messages each way
 *   BENCH_RUNS=5 BENCH_EMAILS=3000 BENCH_CONNECTIONS=16 npm run bench:submission
 *
 * Ceilings measured alone in the same run: nodemailer's pooled SMTP client sending the message
 * straight to smtp-sink (what the client side costs), and mailparser parsing one submitted message
 * (the one step SMTP adds to what /v1/send does).
 */
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';
import { freePort } from '../src/db/embedded-postgres';
import { machine, median, request, startSendingBench } from './service-process';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const EMAILS = Number(process.env.BENCH_EMAILS ?? 2000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 8);
const HTML = `<html><body><h1>Hello there</h1><p>${'Your weekly summary. '.repeat(130)}</p><a href="https://example.com/x">Open</a></body></html>`;
const TEXT = `Hello there\n\n${'Your weekly summary. '.repeat(130)}\n\nOpen: https://example.com/x`;
const message = (to: string) => ({ from: 'Bench <hello@bench.test>', to, subject: 'Weekly summary', html: HTML, text: TEXT });

/** `count` messages through `send`, `CONNECTIONS` at a time: seconds until every one was answered. */
async function drive(count: number, send: (i: number) => Promise<unknown>): Promise<number> {
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < count) await send(next++);
    }),
  );
  return (Date.now() - t0) / 1000;
}

async function main(): Promise<void> {
  const submissionPort = await freePort();
  const { sink, service, project, agent, auth, stop } = await startSendingBench({ SMTP_SUBMISSION_PORT: String(submissionPort) }, CONNECTIONS);
  try {
    console.log(`SMTP submission and POST /v1/send, ${EMAILS} single-recipient messages each per run, ${CONNECTIONS} connections, ${RUNS} runs`);
    console.log(`machine: ${machine()}`);
    const raw = await new Promise<Buffer>((resolve, reject) =>
      new MailComposer(message('one@example.org')).compile().build((err, m) => (err ? reject(err) : resolve(m))),
    );
    const parseStart = process.hrtime.bigint();
    for (let i = 0; i < 500; i++)
      await simpleParser(raw, { keepCidLinks: true, skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true });
    const parseUs = Number(process.hrtime.bigint() - parseStart) / 1000 / 500;
    console.log(`ceiling: mailparser parses the ${raw.length}-byte message in ${parseUs.toFixed(0)} µs (${(1e6 / parseUs).toFixed(0)}/s on one core)`);

    const rows: Array<{ httpAccepted: number; httpDelivered: number; smtpAccepted: number; smtpDelivered: number; client: number }> = [];
    for (let run = 1; run <= RUNS; run++) {
      // The client alone: nodemailer's pool straight to the sink, no service in between.
      const direct = createTransport({ pool: true, host: '127.0.0.1', port: sink.port, maxConnections: CONNECTIONS, maxMessages: Infinity });
      let start = await sink.count();
      const clientSeconds = await drive(EMAILS, (i) => direct.sendMail(message(`direct${run}-${i}@example.org`)));
      await sink.waitFor(start + EMAILS, 600_000);
      direct.close();

      start = await sink.count();
      const t1 = Date.now();
      const httpSeconds = await drive(EMAILS, async (i) => {
        const res = await request(
          agent,
          service.port,
          'POST',
          '/v1/send',
          { ...message(`http${run}-${i}@example.org`), body: HTML, html: undefined, text: undefined },
          auth,
        );
        if (res.status !== 200) throw new Error(`/v1/send answered ${res.status}: ${res.body}`);
      });
      await sink.waitFor(start + EMAILS, 600_000);
      const httpDeliveredSeconds = (Date.now() - t1) / 1000;

      const pool = createTransport({
        pool: true,
        host: '127.0.0.1',
        port: submissionPort,
        maxConnections: CONNECTIONS,
        maxMessages: Infinity,
        ignoreTLS: true,
        auth: { user: 'bench', pass: project.secretKey },
      });
      start = await sink.count();
      const t2 = Date.now();
      const smtpSeconds = await drive(EMAILS, (i) => pool.sendMail(message(`smtp${run}-${i}@example.org`)));
      await sink.waitFor(start + EMAILS, 600_000);
      const smtpDeliveredSeconds = (Date.now() - t2) / 1000;
      pool.close();

      const row = {
        httpAccepted: EMAILS / httpSeconds,
        httpDelivered: EMAILS / httpDeliveredSeconds,
        smtpAccepted: EMAILS / smtpSeconds,
        smtpDelivered: EMAILS / smtpDeliveredSeconds,
        client: EMAILS / clientSeconds,
      };
      rows.push(row);
      console.log(
        `run ${run}: SMTP accepted ${row.smtpAccepted.toFixed(0)}/s, delivered ${row.smtpDelivered.toFixed(0)}/s | ` +
          `/v1/send accepted ${row.httpAccepted.toFixed(0)}/s, delivered ${row.httpDelivered.toFixed(0)}/s | ` +
          `SMTP/HTTP accepted ${(row.smtpAccepted / row.httpAccepted).toFixed(2)}x | nodemailer pool alone to the sink ${row.client.toFixed(0)}/s`,
      );
    }
    const m = (f: (r: (typeof rows)[number]) => number) => median(rows.map(f));
    console.log(
      `median: SMTP accepted ${m((r) => r.smtpAccepted).toFixed(0)}/s, delivered ${m((r) => r.smtpDelivered).toFixed(0)}/s; ` +
        `/v1/send accepted ${m((r) => r.httpAccepted).toFixed(0)}/s, delivered ${m((r) => r.httpDelivered).toFixed(0)}/s; ` +
        `SMTP accepted ${m((r) => r.smtpAccepted / r.httpAccepted).toFixed(2)}x /v1/send's (median of the runs' ratios); ` +
        `client alone ${m((r) => r.client).toFixed(0)}/s`,
    );
  } finally {
    await stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
