import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, transaction } from '../../db/orm';
import { notFound } from '../../http/errors';
import type { TemporalClient } from '../../../temporal/client';
import { workflowIds } from '../../../temporal/workflow-ids';
import type { EventRecord } from '../events';
import { BulkJob } from './bulk-jobs.entity';
import { deleteContactsOf, setSubscriptionOf } from './contacts.service';
import { bulkJobWorkflow } from '../../../temporal/workflows/bulk-job';
import { startJobWorkflow } from './job-workflow';

export type BulkKind = 'subscribe' | 'unsubscribe' | 'delete';

/** Contacts handled per activity (and per transaction). */
const CHUNK = 100;

const commitKey = (jobId: string) => `bulk-job:${jobId}`;

export function toBulkJobDto(j: BulkJob) {
  return {
    jobId: j.id,
    type: j.kind,
    status: j.status,
    total: j.contactIds.length,
    processed: j.processed,
    changed: j.changed,
    unchanged: j.unchanged,
    notFound: j.notFound,
    createdAt: j.createdAt.toISOString(),
    updatedAt: j.updatedAt.toISOString(),
    completedAt: j.completedAt ? j.completedAt.toISOString() : null,
  };
}

/**
 * Records the job and starts its `bulk-job:<jobId>` workflow in one transaction: the workflow is
 * started before the commit (a failed start writes nothing) and waits for it (holdUntilCommit).
 */
export async function createBulkJob(em: EntityManager, temporal: TemporalClient, projectId: string, kind: BulkKind, contactIds: string[]): Promise<BulkJob> {
  const ids = [...new Set(contactIds.map((id) => id.toLowerCase()))];
  return transaction(em, async (tx) => {
    const job = tx.create(BulkJob, { id: newId(), projectId, kind, contactIds: ids });
    await tx.persist(job).flush();
    await holdUntilCommit(tx, commitKey(job.id));
    await startJobWorkflow(temporal, bulkJobWorkflow, workflowIds.bulkJob(job.id), { id: job.id, projectId });
    return job;
  });
}

export async function getBulkJob(em: EntityManager, projectId: string, id: string): Promise<BulkJob> {
  const job = await em.findOne(BulkJob, { projectId, id });
  if (!job) throw notFound('Bulk job');
  return job;
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
      const job = await tx.findOne(BulkJob, { id: jobId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (!job) return undefined;
      const chunk = job.contactIds.slice(job.processed, job.processed + CHUNK);
      let changed: string[];
      let unchanged: string[] = [];
      let missing: string[];
      let events: EventRecord[] = [];
      if (job.kind === 'delete') ({ deleted: changed, missing } = await deleteContactsOf(tx, job.projectId, chunk));
      else ({ changed, unchanged, missing, events } = await setSubscriptionOf(tx, job.projectId, chunk, job.kind === 'subscribe', { source: 'bulk', jobId }));
      // Written at the commit; the job stays locked until then.
      job.processed += chunk.length;
      job.changed += changed.length;
      job.unchanged += unchanged.length;
      job.notFound = [...job.notFound, ...missing];
      const done = job.processed >= job.contactIds.length;
      job.status = done ? 'COMPLETED' : 'RUNNING';
      job.completedAt = done ? new Date() : null;
      return { done, projectId: job.projectId, contactIds: changed, events };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true, contactIds: [], events: [] };
}
