/**
 * Task tokens: opaque to workers, JSON to us. A workflow-task token names the exact dispatch
 * (sequence, attempt and request id) so a late answer to an older dispatch is refused; an activity
 * token names the attempt, so after a server restart the worker still running it may still report.
 */
import { notFound } from '../rpc/errors';

export type TaskToken =
  | { k: 'w'; ns: string; wid: string; rid: string; seq: number; att: number; req: string }
  | { k: 'a'; ns: string; wid: string; rid: string; sched: number; att: number }
  | { k: 'q'; ns: string; id: string };

export function encodeToken(token: TaskToken): Buffer {
  return Buffer.from(JSON.stringify(token));
}

export function decodeToken(bytes: Uint8Array | null | undefined): TaskToken {
  try {
    const t = JSON.parse(Buffer.from(bytes ?? []).toString()) as TaskToken;
    if (t && (t.k === 'w' || t.k === 'a' || t.k === 'q')) return t;
  } catch {
    // fall through: a token we did not issue
  }
  throw notFound('invalid task token');
}
