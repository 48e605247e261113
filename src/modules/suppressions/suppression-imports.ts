import fs from 'node:fs';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkflowStarter } from '../workflow-starter';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, transaction } from '../../db/orm';
import { notFound } from '../../errors';
import { emailSchema } from '../../validation';
import { parseCsv } from '../contacts';
import { SuppressionImport } from './suppression-imports.entity';
import { appendSuppressionImportContent, insertSuppressions, lockSuppressionImportSlice, recordSuppressionImportProgress } from './suppressions.queries';

/** Bytes of the file read per step (and per transaction): a few thousand rows. A file no larger is imported within its request. */
export const SLICE_BYTES = 256 * 1024;
/** Row errors kept for the report; all are counted. */
const MAX_ERRORS = 1000;
const UPLOAD_PIECE = 1024 * 1024;

const commitKey = (jobId: string) => `suppression-import:${jobId}`;

export function toSuppressionImportDto(j: SuppressionImport) {
  return {
    jobId: j.id,
    status: j.status,
    filename: j.filename,
    sizeBytes: j.sizeBytes,
    processedBytes: j.offsetBytes,
    rows: j.rows,
    added: j.added,
    alreadyListed: j.alreadyListed,
    invalid: j.invalid,
    errors: j.errors,
    error: j.error,
    createdAt: j.createdAt.toISOString(),
    updatedAt: j.updatedAt.toISOString(),
    completedAt: j.completedAt ? j.completedAt.toISOString() : null,
  };
}

/**
 * POST /suppressions/import. The file is stored (read from disk a piece at a time). One no larger than a
 * slice is imported at once and the answer has its counts; a larger one runs as a `suppression-import`
 * workflow, a slice per activity, started in the transaction that stores it (the workflow waits for the
 * commit), and the answer is the queued job to poll.
 */
export async function createSuppressionImport(
  em: EntityManager,
  temporal: WorkflowStarter,
  projectId: string,
  file: { path: string; name: string | null; size: number },
): Promise<{ job: SuppressionImport; queued: boolean }> {
  const queued = file.size > SLICE_BYTES;
  const id = await transaction(em, async (tx) => {
    // A client's file name may hold what PostgreSQL's text refuses.
    const filename = file.name?.replace(/\0/g, '').slice(0, 255) ?? null;
    const job = tx.create(SuppressionImport, { id: newId(), projectId, filename, sizeBytes: file.size, content: Buffer.alloc(0) });
    await tx.persist(job).flush();
    for await (const piece of fs.createReadStream(file.path, { highWaterMark: UPLOAD_PIECE })) {
      await appendSuppressionImportContent(tx, job.id, piece as Buffer);
    }
    if (queued) {
      await holdUntilCommit(tx, commitKey(job.id));
      await temporal.startSuppressionImport({ id: job.id, projectId });
    }
    return job.id;
  });
  if (!queued) while (!(await importNextSuppressionSlice(em, id)).done);
  return { job: await getSuppressionImport(em.fork(), projectId, id), queued };
}

export async function getSuppressionImport(em: EntityManager, projectId: string, id: string): Promise<SuppressionImport> {
  const job = await em.findOne(SuppressionImport, { projectId, id });
  if (!job) throw notFound('Import job');
  return job;
}

/** Where the address is: an `email` column of a header; else the first column, below a header unless line 1 is itself an address. */
function readHeader(fields: string[]): { emailColumn: number; isHeader: boolean } {
  const names = fields.map((f) => f.trim().toLowerCase());
  const named = names.indexOf('email');
  if (named >= 0) return { emailColumn: named, isHeader: true };
  return { emailColumn: 0, isHeader: !emailSchema.safeParse(names[0]).success };
}

/**
 * Imports the next slice of the file and records the position reached in the same transaction, so a
 * retried step never counts a row twice: each valid address is listed with reason MANUAL (one listed
 * already keeps its entry), each invalid row is counted and not listed.
 */
export async function importNextSuppressionSlice(em: EntityManager, jobId: string): Promise<{ done: boolean }> {
  const step = () =>
    transaction(em.fork(), async (tx) => {
      const job = await lockSuppressionImportSlice(tx, jobId, SLICE_BYTES);
      if (!job) return undefined;
      if (job.status === 'COMPLETED' || job.status === 'FAILED') return { done: true };
      const final = job.offset_bytes + job.piece.length >= job.size_bytes;
      const text = job.piece.toString('utf8');
      const parsed = parseCsv(text, job.next_line, final);
      // A byte order mark is not part of the first field.
      if (job.offset_bytes === 0 && parsed.records[0]) parsed.records[0].fields[0] = parsed.records[0].fields[0].replace(/^\uFEFF/, '');
      const progress = { consumedBytes: 0, nextLine: job.next_line, emailColumn: job.email_column ?? 0, rows: 0, added: 0, alreadyListed: 0, invalid: 0 };
      if (!final && parsed.records.length === 0) {
        await recordSuppressionImportProgress(tx, jobId, {
          ...progress,
          errors: [],
          final: true,
          failure: `line ${job.next_line} is longer than ${SLICE_BYTES / 1024} KB`,
        });
        return { done: true };
      }
      let records = parsed.records;
      let emailColumn = job.email_column;
      if (emailColumn === null) {
        const header = readHeader(records[0]?.fields ?? ['email']);
        emailColumn = header.emailColumn;
        if (header.isHeader) records = records.slice(1);
      }
      const errors: Array<{ line: number; error: string }> = [];
      const emails = new Set<string>();
      for (const r of records) {
        const field = r.fields[emailColumn];
        const email = r.error || field === undefined ? undefined : emailSchema.safeParse(field);
        if (r.error) errors.push({ line: r.line, error: r.error });
        else if (!email?.success) errors.push({ line: r.line, error: `invalid email address: ${JSON.stringify((field ?? '').slice(0, 320))}` });
        else emails.add(email.data);
      }
      const added = await insertSuppressions(
        tx,
        job.project_id,
        [...emails].map((email) => ({ email, reason: 'MANUAL' as const, detail: `import ${jobId}` })),
      );
      await recordSuppressionImportProgress(tx, jobId, {
        consumedBytes: final ? job.piece.length : Buffer.byteLength(text.slice(0, parsed.consumed)),
        nextLine: parsed.nextLine,
        emailColumn,
        rows: records.length,
        added: added.length,
        alreadyListed: emails.size - added.length,
        invalid: errors.length,
        errors: errors.slice(0, Math.max(0, MAX_ERRORS - job.errors_kept)),
        final,
      });
      return { done: final };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true };
}
