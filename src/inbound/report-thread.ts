/** A report-reading thread (worker_threads): reads each message it is handed into an InboundReport (and received mail). */
import { parentPort } from 'node:worker_threads';
import { parseInboundReport, MAX_MESSAGE_BYTES } from './bounce-report';
import { readReceivedMessage } from './received-message';
import type { ReceivedReading, ReportJob } from './report-threads';

async function readJob(job: ReportJob): Promise<ReceivedReading> {
  const raw = Buffer.from(job.raw.buffer, job.raw.byteOffset, job.raw.byteLength);
  const report = await parseInboundReport(job.kind === 'received' ? raw.subarray(0, MAX_MESSAGE_BYTES) : raw);
  if (job.kind === 'report' || report.kind !== 'unknown') return { report };
  // Not a report: mail from a person, read whole. One mailparser cannot read is answered without `mail`, saying why.
  try {
    return { report, mail: await readReceivedMessage(raw) };
  } catch (err) {
    return { report: { kind: 'unknown', why: `unreadable: ${err instanceof Error ? err.message.slice(0, 200) : 'error'}` } };
  }
}

parentPort!.on('message', (job: ReportJob) => {
  void readJob(job).then((reading) => parentPort!.postMessage({ id: job.id, reading }));
});
