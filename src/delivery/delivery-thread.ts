/**
 * A delivery thread (worker_threads): encodes, DKIM-signs and sends over its own share of the SMTP
 * connections the messages its process hands it, and answers each with its outcome.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type Delivery, type DeliveryJob, type DeliveryThreadData, InProcessSender } from './delivery-threads';
import type { DkimKey } from '../mail/dkim';
import { Links } from '../mail/links';

const { smtpUrl, maxConnections, publicUrl, linksKey } = workerData as DeliveryThreadData;
const sender = new InProcessSender(smtpUrl, maxConnections, new Links(publicUrl, linksKey));
const keys = new Map<number, DkimKey>();

async function deliver(job: DeliveryJob): Promise<Delivery> {
  // Buffers arrive as plain Uint8Arrays.
  const attachments = job.message.attachments.map((a) => ({ ...a, content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength) }));
  if (job.key) keys.set(job.keyId!, job.key);
  try {
    return await sender.send({ ...job.message, attachments }, job.keyId === undefined ? undefined : keys.get(job.keyId));
  } catch (err) {
    // Encoding failed (never expected): that message's own fate, reported rather than lost.
    return { outcome: { kind: 'failed', error: `could not encode the message: ${(err as Error).message}` }, subject: '' };
  }
}

parentPort!.on('message', (job: DeliveryJob | 'close') => {
  if (job === 'close') {
    void sender.close().then(() => parentPort!.close());
    return;
  }
  void deliver(job).then((delivery) => parentPort!.postMessage({ id: job.id, ...delivery }));
});
