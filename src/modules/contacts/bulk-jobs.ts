import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, sql, transaction } from '../../db/orm';
import { notFound } from '../../http/errors';
import type { TemporalClient } from '../../../temporal/client';
import { workflowIds } from '../../../temporal/workflow-ids';
import type { EventRecord } from '../events';
import { deleteContactsOf, setSubscriptionOf } from './contacts.service';
import { bulkJobWorkflow } from '../../../temporal/workflows/bulk-job';
import { startJobWorkflow } from './job-workflow';

export type BulkKind = 'subscribe' | 'unsubscribe' | 'delete';

interface BulkJobRow {
  id: string;
  project_id: string;
  kind: BulkKind;
  status: 'QUEUED' | 'RUNNING' | 'COMPLETED';
  contact_ids: string[];
  processed: number;
  changed: number;
  unchanged: number;
  not_found: string[];
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

/** Contacts handled per activity (and per transaction). */
const CHUNK = 100;

const commitKey = (jobId: string) => `bulk-job:${jobId}`;

export function toBulkJobDto(j: BulkJobRow) {
  return {
    jobId: j.id,
    type: j.kind,
    status: j.status,
    total: j.contact_ids.length,
    processed: j.processed,
    changed: j.changed,
    unchanged: j.unchanged,
    notFound: j.not_found,
    createdAt: new Date(j.created_at).toISOString(),
    updatedAt: new Date(j.updated_at).toISOString(),
    completedAt: j.completed_at ? new Date(j.completed_at).toISOString() : null,
  };
}

/**
 * Records the job and starts its `bulk-job:<jobId>` workflow in one transaction: the workflow is
 * started before the commit (a failed start writes nothing) and waits for it (holdUntilCommit).
 */
export async function createBulkJob(em: EntityManager, temporal: TemporalClient, projectId: string, kind: BulkKind, contactIds: string[]): Promise<BulkJobRow> {
  const ids = [...new Set(contactIds.map((id) => id.toLowerCase()))];
  return transaction(em, async (tx) => {
    const [row] = await sql<BulkJobRow>(tx, `INSERT INTO bulk_jobs (id, project_id, kind, contact_ids) VALUES (?, ?, ?, ?::uuid[]) RETURNING *`, [
      newId(),
      projectId,
      kind,
      ids,
    ]);
    await holdUntilCommit(tx, commitKey(row.id));
    await startJobWorkflow(temporal, bulkJobWorkflow, workflowIds.bulkJob(row.id), { id: row.id, projectId });
    return row;
  });
}

export async function getBulkJob(em: EntityManager, projectId: string, id: string): Promise<BulkJobRow> {
  const [row] = await sql<BulkJobRow>(em, `SELECT * FROM bulk_jobs WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Bulk job');
  return row;
}

/**
 * Handles the next chunk of the job and records its progress in the same transaction, so a retried
 * activity never handles a contact twice. Answers what changed, for the caller to publish.
 */
export async function runBulkJobChunk(
  em: EntityManager,
  jobId: string,
): Promise<{ done: boolean; projectId?: string; contactIds: string[]; events: EventRecord[] }> {
  const step = () =>
    transaction(em.fork(), async (tx) => {
      const [job] = await sql<BulkJobRow>(tx, `SELECT * FROM bulk_jobs WHERE id = ? FOR UPDATE`, [jobId]);
      if (!job) return undefined;
      const chunk = job.contact_ids.slice(job.processed, job.processed + CHUNK);
      let changed: string[];
      let unchanged: string[] = [];
      let missing: string[];
      let events: EventRecord[] = [];
      if (job.kind === 'delete') ({ deleted: changed, missing } = await deleteContactsOf(tx, job.project_id, chunk));
      else ({ changed, unchanged, missing, events } = await setSubscriptionOf(tx, job.project_id, chunk, job.kind === 'subscribe', { source: 'bulk', jobId }));
      const processed = job.processed + chunk.length;
      const done = processed >= job.contact_ids.length;
      await sql(
        tx,
        `UPDATE bulk_jobs SET processed = ?, changed = changed + ?, unchanged = unchanged + ?, not_found = not_found || ?::uuid[],
           status = ?, updated_at = now(), completed_at = CASE WHEN ? THEN now() END
         WHERE id = ?`,
        [processed, changed.length, unchanged.length, missing, done ? 'COMPLETED' : 'RUNNING', done, jobId],
      );
      return { done, projectId: job.project_id, contactIds: changed, events };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true, contactIds: [], events: [] };
}
