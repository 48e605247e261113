import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, transaction } from '../../db/orm';
import { AppError, notFound } from '../../errors';
import type { WorkflowStarter } from '../workflow-starter';
import type { EventRecord } from '../events';
import { setContactTopics, missingTopics, unknownTopics } from '../topics';
import { BulkJob } from './bulk-jobs.entity';
import { Contact } from './contacts.entity';
import { deleteContactsOf, setSubscriptionOf } from './contacts.service';

export type BulkKind = 'subscribe' | 'unsubscribe' | 'delete';

/** Contacts handled per activity (and per transaction). */
const CHUNK = 100;

const commitKey = (jobId: string) => `bulk-job:${jobId}`;

export function toBulkJobDto(j: BulkJob) {
  return {
    jobId: j.id,
    type: j.kind,
    topicId: j.topicId,
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
 * With a topic, subscribe and unsubscribe join or leave it (422 for a topic not the project's, or on delete).
 */
export async function createBulkJob(
  em: EntityManager,
  temporal: WorkflowStarter,
  projectId: string,
  kind: BulkKind,
  contactIds: string[],
  topicId?: string,
): Promise<BulkJob> {
  if (topicId && kind === 'delete') {
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
      errors: [{ field: 'topicId', message: 'A bulk delete deletes contacts: topicId applies to bulk-subscribe and bulk-unsubscribe', code: 'invalid_type' }],
    });
  }
  if (topicId && (await missingTopics(em, projectId, [topicId])).length) throw unknownTopics([topicId], () => 'topicId');
  const ids = [...new Set(contactIds.map((id) => id.toLowerCase()))];
  return transaction(em, async (tx) => {
    const job = tx.create(BulkJob, { id: newId(), projectId, kind, contactIds: ids, topicId: topicId?.toLowerCase() ?? null });
    await tx.persist(job).flush();
    await holdUntilCommit(tx, commitKey(job.id));
    await temporal.startBulkJob({ id: job.id, projectId });
    return job;
  });
}

export async function getBulkJob(em: EntityManager, projectId: string, id: string): Promise<BulkJob> {
  const job = await em.findOne(BulkJob, { projectId, id });
  if (!job) throw notFound('Bulk job');
  return job;
}

/**
 * Joins (pending where double opt-in applies) or leaves a topic for those of `ids` that are the
 * project's contacts, locking them in id order. A topic deleted since the job began changes nothing.
 */
async function setTopicOf(tx: EntityManager, projectId: string, ids: string[], topicId: string, join: boolean, jobId: string) {
  const rows = await tx.find(Contact, { projectId, id: { $in: ids } }, { fields: ['id'], orderBy: { id: 'asc' } });
  const found = new Set(rows.map((r) => r.id));
  const out = {
    changed: [] as string[],
    unchanged: [] as string[],
    missing: ids.filter((id) => !found.has(id)),
    events: [] as EventRecord[],
    pending: [] as string[],
  };
  const topicGone = (await missingTopics(tx, projectId, [topicId])).length > 0;
  for (const { id } of rows) {
    const result = topicGone ? undefined : await setContactTopics(tx, projectId, id, { [topicId]: join }, { source: 'bulk', eventData: { jobId } });
    (result?.changed.length ? out.changed : out.unchanged).push(id);
    out.events.push(...(result?.events ?? []));
    // A join awaiting the contact's confirmation (double opt-in): the caller mails it after the commit.
    if (result?.pending.length) out.pending.push(id);
  }
  return out;
}

/**
 * Handles the next chunk of the job and records its progress in the same transaction, so a retried
 * activity never handles a contact twice. Answers what changed, for the caller to publish.
 */
export async function runBulkJobChunk(
  em: EntityManager,
  jobId: string,
): Promise<{ done: boolean; projectId?: string; contactIds: string[]; events: EventRecord[]; pending: Map<string, string[]> }> {
  const step = () =>
    transaction(em.fork(), async (tx) => {
      const job = await tx.findOne(BulkJob, { id: jobId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (!job) return undefined;
      const chunk = job.contactIds.slice(job.processed, job.processed + CHUNK);
      let changed: string[];
      let unchanged: string[] = [];
      let missing: string[];
      let events: EventRecord[] = [];
      let pending: string[] = [];
      if (job.kind === 'delete') ({ deleted: changed, missing } = await deleteContactsOf(tx, job.projectId, chunk));
      else if (job.topicId)
        ({ changed, unchanged, missing, events, pending } = await setTopicOf(tx, job.projectId, chunk, job.topicId, job.kind === 'subscribe', jobId));
      else ({ changed, unchanged, missing, events } = await setSubscriptionOf(tx, job.projectId, chunk, job.kind === 'subscribe', { source: 'bulk', jobId }));
      // Written at the commit; the job stays locked until then.
      job.processed += chunk.length;
      job.changed += changed.length;
      job.unchanged += unchanged.length;
      job.notFound = [...job.notFound, ...missing];
      const done = job.processed >= job.contactIds.length;
      job.status = done ? 'COMPLETED' : 'RUNNING';
      job.completedAt = done ? new Date() : null;
      return { done, projectId: job.projectId, contactIds: changed, events, pending: new Map(pending.map((id) => [id, [job.topicId!]])) };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true, contactIds: [], events: [], pending: new Map() };
}
