import fs from 'node:fs';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { holdUntilCommit, readAfterCommit, sql, transaction } from '../../db/orm';
import { notFound } from '../../http/errors';
import type { TemporalClient } from '../../../temporal/client';
import { workflowIds } from '../../../temporal/workflow-ids';
import { emailSchema } from '../../http/validate';
import { inferValue, parseCsv } from './csv';
import { contactImportWorkflow } from '../../../temporal/workflows/contact-import';
import { startJobWorkflow } from './job-workflow';

interface ImportRow {
  id: string;
  project_id: string;
  filename: string | null;
  size_bytes: number;
  status: 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED';
  offset_bytes: number;
  next_line: number;
  columns: string[] | null;
  email_column: number | null;
  rows: number;
  created: number;
  updated: number;
  invalid: number;
  errors: Array<{ line: number; error: string }>;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

/** Bytes of the file read per activity (and per transaction): a few thousand rows. */
const SLICE_BYTES = 256 * 1024;
/** Row errors kept for the report; all are counted. */
const MAX_ERRORS = 1000;
const UPLOAD_PIECE = 1024 * 1024;

const commitKey = (jobId: string) => `contact-import:${jobId}`;
const ROW_COLUMNS = `id, project_id, filename, size_bytes, status, offset_bytes, next_line, columns, email_column, rows, created, updated, invalid, errors, error, created_at, updated_at, completed_at`;

export function toImportDto(j: ImportRow) {
  return {
    jobId: j.id,
    status: j.status,
    filename: j.filename,
    sizeBytes: j.size_bytes,
    processedBytes: j.offset_bytes,
    rows: j.rows,
    imported: j.created + j.updated,
    created: j.created,
    updated: j.updated,
    invalid: j.invalid,
    errors: j.errors,
    error: j.error,
    createdAt: new Date(j.created_at).toISOString(),
    updatedAt: new Date(j.updated_at).toISOString(),
    completedAt: j.completed_at ? new Date(j.completed_at).toISOString() : null,
  };
}

/**
 * Stores the uploaded file (read from disk a piece at a time) and starts its `contact-import:<jobId>`
 * workflow in one transaction; the workflow waits for the commit (holdUntilCommit).
 */
export async function createImport(
  em: EntityManager,
  temporal: TemporalClient,
  projectId: string,
  file: { path: string; name: string | null; size: number },
): Promise<ImportRow> {
  return transaction(em, async (tx) => {
    const id = newId();
    await sql(tx, `INSERT INTO contact_imports (id, project_id, filename, size_bytes, content) VALUES (?, ?, ?, ?, '')`, [id, projectId, file.name, file.size]);
    for await (const piece of fs.createReadStream(file.path, { highWaterMark: UPLOAD_PIECE })) {
      await sql(tx, `UPDATE contact_imports SET content = content || ? WHERE id = ?`, [piece, id]);
    }
    await holdUntilCommit(tx, commitKey(id));
    await startJobWorkflow(temporal, contactImportWorkflow, workflowIds.contactImport(id), { id, projectId });
    const [row] = await sql<ImportRow>(tx, `SELECT ${ROW_COLUMNS} FROM contact_imports WHERE id = ?`, [id]);
    return row;
  });
}

export async function getImport(em: EntityManager, projectId: string, id: string): Promise<ImportRow> {
  const [row] = await sql<ImportRow>(em, `SELECT ${ROW_COLUMNS} FROM contact_imports WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Import job');
  return row;
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
 * subscription and get the row's fields merged into their data.
 */
export async function importNextSlice(em: EntityManager, jobId: string): Promise<{ done: boolean; projectId?: string; contactIds: string[] }> {
  const step = () =>
    transaction(em.fork(), async (tx) => {
      const [job] = await sql<ImportRow & { piece: Buffer }>(
        tx,
        `SELECT ${ROW_COLUMNS}, substring(content FROM offset_bytes + 1 FOR ?) AS piece FROM contact_imports WHERE id = ? FOR UPDATE`,
        [SLICE_BYTES, jobId],
      );
      if (!job) return undefined;
      if (job.status === 'COMPLETED' || job.status === 'FAILED') return { done: true, projectId: job.project_id, contactIds: [] };
      const final = job.offset_bytes + job.piece.length >= job.size_bytes;
      const text = job.piece.toString('utf8');
      const parsed = parseCsv(text, job.next_line, final);
      // A byte order mark is not part of the first field.
      if (job.offset_bytes === 0 && parsed.records[0]) parsed.records[0].fields[0] = parsed.records[0].fields[0].replace(/^\uFEFF/, '');
      if (!final && parsed.records.length === 0) {
        await sql(tx, `UPDATE contact_imports SET status = 'FAILED', error = ?, content = NULL, updated_at = now(), completed_at = now() WHERE id = ?`, [
          `line ${job.next_line} is longer than ${SLICE_BYTES / 1024} KB`,
          jobId,
        ]);
        return { done: true, projectId: job.project_id, contactIds: [] };
      }
      let { columns, email_column: emailColumn } = job;
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
      const written = contacts.size
        ? await sql<{ id: string; created: boolean }>(
            tx,
            `INSERT INTO contacts AS t (id, project_id, email, subscribed, data, created_at, updated_at)
             SELECT x.id, ?, x.email, true, x.data, now(), now()
             FROM jsonb_to_recordset(?::jsonb) AS x(id uuid, email text, data jsonb) ORDER BY x.email
             ON CONFLICT (project_id, email) DO UPDATE
               SET data = t.data || EXCLUDED.data,
                   updated_at = CASE WHEN t.data || EXCLUDED.data = t.data THEN t.updated_at ELSE now() END
             RETURNING t.id, (xmax = 0) AS created`,
            [job.project_id, JSON.stringify([...contacts].map(([email, data]) => ({ id: newId(), email, data })))],
          )
        : [];
      const created = written.filter((w) => w.created).length;
      await sql(
        tx,
        `UPDATE contact_imports SET
           offset_bytes = offset_bytes + ?, next_line = ?, columns = ?::text[], email_column = ?,
           rows = rows + ?, created = created + ?, updated = updated + ?, invalid = invalid + ?,
           errors = errors || ?::jsonb,
           status = ?, content = CASE WHEN ? THEN NULL ELSE content END,
           updated_at = now(), completed_at = CASE WHEN ? THEN now() END
         WHERE id = ?`,
        [
          final ? job.piece.length : Buffer.byteLength(text.slice(0, parsed.consumed)),
          parsed.nextLine,
          columns,
          emailColumn,
          records.length,
          created,
          written.length - created,
          errors.length,
          JSON.stringify(errors.slice(0, Math.max(0, MAX_ERRORS - job.errors.length))),
          final ? 'COMPLETED' : 'RUNNING',
          final,
          final,
          jobId,
        ],
      );
      return { done: final, projectId: job.project_id, contactIds: written.map((w) => w.id) };
    });
  // Not there after the creating transaction ended means it rolled back.
  return (await readAfterCommit(em, commitKey(jobId), step)) ?? { done: true, contactIds: [] };
}
