/** A report-reading thread (worker_threads): reads each message it is handed into an InboundReport. */
import { parentPort } from 'node:worker_threads';
import { parseInboundReport } from './bounce-report';
import type { ReportJob } from './report-threads';

parentPort!.on('message', (job: ReportJob) => {
  void parseInboundReport(Buffer.from(job.raw.buffer, job.raw.byteOffset, job.raw.byteLength)).then((report) =>
    parentPort!.postMessage({ id: job.id, report }),
  );
});
