import fs from 'node:fs';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, transaction } from '../../db/orm';
import { notFound } from '../../errors';
import type { WorkflowStarter } from '../workflow-starter';
import { emailSchema } from '../../validation';
import { ContactImport } from './contact-imports.entity';
import { appendImportContent, failImport, lockImportSlice, mergeImportedContacts, recordImportProgress } from './contacts.queries';
import { inferValue, parseCsv } from './csv';
import type { EventRecord } from '../events';
import { joinTopics, missingTopics, unknownTopics } from '../topics';

/** Bytes of the file read per activity (and per transaction): a few thousand rows. */
const SLICE_BYTES = 256 * 1024;
/** Row errors kept for the report; all are counted. */
const MAX_ERRORS = 1000;
const UPLOAD_PIECE = 1024 * 1024;

const commitKey = (jobId: string) => `contact-import:${jobId}`;

export function toImportDto(j: ContactImport) {
  return {
    jobId: j.id,
    topics: j.topicIds,
    doubleOptIn: j.doubleOptIn,
    status: j.status,
    filename: j.filename,
    sizeBytes: j.sizeBytes,
    processedBytes: j.offsetBytes,
    rows: j.rows,
    imported: j.created + j.updated,
    created: j.created,
    updated: j.updated,
    invalid: j.invalid,
    errors: j.errors,
    error: j.error,
    createdAt: j.createdAt.toISOString(),
    updatedAt: j.updatedAt.toISOString(),
    completedAt: j.completedAt ? j.completedAt.toISOString() : null,
  };
}

/**
 * Stores the uploaded file (read from disk a piece at a time) and starts its `contact-import:<jobId>`
 * workflow in one transaction; the workflow waits for the commit (holdUntilCommit).
 */
export async function createImport(
  em: EntityManager,
  temporal: WorkflowStarter,
  projectId: string,
  file: { path: string; name: string | null; size: number },
  topics: { topicIds: string[]; doubleOptIn: boolean } = { topicIds: [], doubleOptIn: false },
): Promise<ContactImport> {
  const missing = await missingTopics(em, projectId, topics.topicIds);
  if (missing.length) throw unknownTopics(missing, () => 'topics');
  return transaction(em, async (tx) => {
    // An empty file here, filled a piece at a time below.
    const job = tx.create(ContactImport, {
      id: newId(),
      projectId,
      filename: file.name,
      sizeBytes: file.size,
      content: Buffer.alloc(0),
      topicIds: topics.topicIds,
      doubleOptIn: topics.doubleOptIn,
    });
    await tx.persist(job).flush();
    for await (const piece of fs.createReadStream(file.path, { highWaterMark: UPLOAD_PIECE })) await appendImportContent(tx, job.id, piece as Buffer);
    await holdUntilCommit(tx, commitKey(job.id));
    await temporal.startContactImport({ id: job.id, projectId });
    return job;
  });
}

export async function getImport(em: EntityManager, projectId: string, id: string): Promise<ContactImport> {
  const job = await em.findOne(ContactImport, { projectId, id });
  if (!job) throw notFound('Import job');
  return job;
}

/** Where the address is: an `email` column of a header; else the first column, below a header unless line 1 is itself an address. */
function readHeader(fields: string[]): { columns: string[]; emailColumn: number; isHeader: boolean } {
  const names = fields.map((f) => f.trim());
  const named = names.findIndex((f) => f.toLowerCase() === 'email');
  if (named >= 0) return { columns: names, emailColumn: named, isHeader: true };
  if (emailSchema.safeParse(names[0]).success) return { columns: names.map((_, i) => (i === 0 ? 'email' : '')), emailColumn: 0, isHeader: false };
  return { columns: names, emailColumn: 0, isHeader: true };
}

/**
 * Imports the next slice of the file and records the position reached in the same transaction, so a
 * retried activity never imports a row twice. New contacts are subscribed; existing ones keep their
 * subscription and get the row's fields merged into their data. Every contact of the slice joins the
 * import's topics (one that already chose in a topic keeps its choice).
 */
export async function importNextSlice(
  em: EntityManager,
  jobId: string,
): Promise<{ done: boolean; projectId?: string; contactIds: string[]; events: EventRecord[]; pending: Map<string, string[]> }> {
  const nothing = { events: [] as EventRecord[], pending: new Map<string, string[]>() };
  const step = () =>
    transaction(em.fork(), async (tx) => {
      const slice = await lockImportSlice(tx, jobId, SLICE_BYTES);
      if (!slice) return undefined;
      const { job, piece } = slice;
      if (job.status === 'COMPLETED' || job.status === 'FAILED') return { done: true, projectId: job.projectId, contactIds: [], ...nothing };
      const final = job.offsetBytes + piece.length >= job.sizeBytes;
      const text = piece.toString('utf8');
      const parsed = parseCsv(text, job.nextLine, final);
      // A byte order mark is not part of the first field.
      if (job.offsetBytes === 0 && parsed.records[0]) parsed.records[0].fields[0] = parsed.records[0].fields[0].replace(/^\uFEFF/, '');
      if (!final && parsed.records.length === 0) {
        await failImport(tx, jobId, `line ${job.nextLine} is longer than ${SLICE_BYTES / 1024} KB`);
        return { done: true, projectId: job.projectId, contactIds: [], ...nothing };
      }
      let { columns, emailColumn } = job;
      let records = parsed.records;
      if (!columns) {
        const header = readHeader(records[0]?.fields ?? ['email']);
        columns = header.columns;
        emailColumn = header.emailColumn;
        if (header.isHeader) records = records.slice(1);
      }
      const errors: Array<{ line: number; error: string }> = [];
      const contacts = new Map<string, Record<string, unknown>>();
      for (const r of records) {
        if (r.error) errors.push({ line: r.line, error: r.error });
        else if (r.fields.length !== columns.length) errors.push({ line: r.line, error: `expected ${columns.length} fields, found ${r.fields.length}` });
        else {
          const email = emailSchema.safeParse(r.fields[emailColumn!]);
          if (!email.success) {
            errors.push({ line: r.line, error: `invalid email address: ${JSON.stringify(r.fields[emailColumn!].slice(0, 320))}` });
            continue;
          }
          // No prototype: a column named __proto__ is a field like any other.
          const data = contacts.get(email.data) ?? (Object.create(null) as Record<string, unknown>);
          columns.forEach((name, i) => {
            const value = i === emailColumn || !name ? undefined : inferValue(r.fields[i]);
            if (value !== undefined) data[name] = value;
          });
          contacts.set(email.data, data);
        }
      }
      const written = contacts.size ? await mergeImportedContacts(tx, job.projectId, contacts) : [];
      const created = written.filter((w) => w.created).length;
      // `pending`: the joins awaiting the contact's confirmation (double opt-in), for the caller to ask for.
      const joined = await joinTopics(
        tx,
        job.projectId,
        written.map((w) => w.id),
        job.topicIds,
        { source: 'import', askConfirmation: job.doubleOptIn, eventData: { importId: job.id } },
      );
      await recordImportProgress(tx, jobId, {
        consumedBytes: final ? piece.length : Buffer.byteLength(text.slice(0, parsed.consumed)),
        nextLine: parsed.nextLine,
        columns,
        emailColumn: emailColumn!,
        rows: records.length,
        created,
        updated: written.length - created,
        errors,
        keptErrors: Math.max(0, MAX_ERRORS - job.errors.length),
        final,
      });
      return { done: final, projectId: job.projectId, contactIds: written.map((w) => w.id), ...joined };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true, contactIds: [], ...nothing };
}
