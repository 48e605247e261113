/**
 * A delivery thread (worker_threads): encodes, DKIM-signs and sends over its own share of the SMTP
 * connections the messages its process hands it, and answers each with its outcome.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { encodeMessage } from './mime';
import { type DeliveryOutcome, Mailer } from './transport';
import type { DeliveryJob } from './delivery-threads';

const { smtpUrl, maxConnections } = workerData as { smtpUrl: string; maxConnections: number };
const mailer = new Mailer(smtpUrl, { maxConnections });

async function deliver(job: DeliveryJob): Promise<DeliveryOutcome> {
  // Buffers arrive as plain Uint8Arrays.
  const attachments = job.message.attachments.map((a) => ({ ...a, content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength) }));
  try {
    return await mailer.send(await encodeMessage({ ...job.message, attachments }, job.key));
  } catch (err) {
    // Encoding failed (never expected): that message's own fate, reported rather than lost.
    return { kind: 'failed', error: `could not encode the message: ${(err as Error).message}` };
  }
}

parentPort!.on('message', (job: DeliveryJob | 'close') => {
  if (job === 'close') {
    mailer.close();
    parentPort!.close();
    return;
  }
  void deliver(job).then((outcome) => parentPort!.postMessage({ id: job.id, outcome }));
});
