/**
 * History paging shared by workflow task polls and GetWorkflowExecutionHistory: a page token names
 * the run and the next event id, so a follow-up request always reads the same run.
 */
import { invalidArgument } from '../rpc/errors';

export const HISTORY_PAGE_SIZE = 1000;

export interface PageToken {
  /** Run the token belongs to. */
  rid: string;
  /** First event id of the next page. */
  next: number;
}

export function encodePageToken(t: PageToken): Buffer {
  return Buffer.from(JSON.stringify(t));
}

export function decodePageToken(bytes: Uint8Array | null | undefined): PageToken | undefined {
  if (!bytes || !bytes.length) return undefined;
  try {
    const t = JSON.parse(Buffer.from(bytes).toString()) as PageToken;
    if (typeof t.rid === 'string' && typeof t.next === 'number') return t;
  } catch {
    // fall through
  }
  throw invalidArgument('invalid next page token');
}
