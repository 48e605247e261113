import type { EntityManager } from '@mikro-orm/postgresql';
import type { Resolver } from '../../dns/resolver';
import { newId } from '../../db/ids';
import { holdUntilCommit, isUniqueViolation, readAfterCommit, sql, transaction } from '../../db/orm';
import { AppError, conflict, notFound } from '../../http/errors';
import {
  type CheckedRecord,
  checkRecords,
  domainRecords,
  generateDkimKeyPair,
  newDkimSelector,
  newVerificationToken,
  type RecordStatus,
  type ReturnPathDns,
  returnPathVerified,
} from './domain-records';

export interface DomainRow {
  id: string;
  project_id: string;
  domain: string;
  status: 'pending' | 'verified';
  verification_token: string;
  dkim_selector: string;
  dkim_private_key: string;
  dkim_public_key: string;
  spf_value: string;
  record_status: Record<string, { status: RecordStatus; found: string[]; error?: string }>;
  verified_at: Date | null;
  last_checked_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

/**
 * A domain as the API shows it. On creation each record is exactly `{type, name, value, required,
 * purpose}` (a contract external clients rely on); once checked, each also carries its `status` and
 * what DNS `found` there.
 */
export function toDomainDto(row: DomainRow, returnPath: ReturnPathDns, opts: { recordStatus: boolean } = { recordStatus: true }) {
  const records = recordsOf(row, returnPath).map((r) => {
    if (!opts.recordStatus) return r;
    const checked = row.record_status[r.purpose];
    return { ...r, status: checked?.status ?? 'pending', found: checked?.found ?? [], ...(checked?.error ? { error: checked.error } : {}) };
  });
  return {
    id: row.id,
    projectId: row.project_id,
    domain: row.domain,
    status: row.status,
    verified: row.status === 'verified',
    dkimSelector: row.dkim_selector,
    records,
    returnPath: { host: `${returnPath.prefix}.${row.domain}`, verified: returnPathVerified(row.record_status) },
    verifiedAt: iso(row.verified_at),
    lastCheckedAt: iso(row.last_checked_at),
    createdAt: iso(row.created_at)!,
    updatedAt: iso(row.updated_at)!,
  };
}

export type DomainDto = ReturnType<typeof toDomainDto>;

const recordsOf = (row: DomainRow, returnPath: ReturnPathDns) =>
  domainRecords(
    {
      domain: row.domain,
      verificationToken: row.verification_token,
      dkimSelector: row.dkim_selector,
      dkimPublicKey: row.dkim_public_key,
      spfValue: row.spf_value,
    },
    returnPath,
  );

/**
 * Creates a pending domain with a fresh DKIM key pair. `beforeCommit` starts its background
 * verification while the row is still uncommitted: if that fails nothing is written, and if the
 * commit fails the workflow finds no domain and ends.
 */
export async function createDomain(
  em: EntityManager,
  projectId: string,
  domain: string,
  spfValue: string,
  beforeCommit: (row: DomainRow) => Promise<void>,
): Promise<DomainRow> {
  const keys = generateDkimKeyPair();
  try {
    return await transaction(em, async (tx) => {
      const [row] = await sql<DomainRow>(
        tx,
        `INSERT INTO domains (id, project_id, domain, verification_token, dkim_selector, dkim_private_key, dkim_public_key, spf_value)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
        [newId(), projectId, domain, newVerificationToken(), newDkimSelector(), keys.privateKey, keys.publicKey, spfValue],
      );
      await holdUntilCommit(tx, domainCommitKey(row.id));
      await beforeCommit(row);
      return row;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`${domain} is already added to this project`, 'DOMAIN_EXISTS');
    throw err;
  }
}

export async function listDomains(em: EntityManager, projectId: string): Promise<DomainRow[]> {
  return sql<DomainRow>(em, `SELECT * FROM domains WHERE project_id = ? ORDER BY created_at, id`, [projectId]);
}

export async function getDomain(em: EntityManager, projectId: string, id: string): Promise<DomainRow> {
  const [row] = await sql<DomainRow>(em, `SELECT * FROM domains WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Domain');
  return row;
}

/**
 * Checks every record now and stores the outcome. A domain is verified exactly when every required
 * record resolves with its value; a verified domain goes back to pending only when DNS answers that a
 * required record is gone, never because a lookup failed. Undefined when the domain no longer exists.
 */
/** Held by the transaction that adds a domain (and starts its verification workflow) until it commits. */
const domainCommitKey = (id: string) => `domain:${id}`;

export async function checkDomain(em: EntityManager, resolver: Resolver, id: string, returnPath: ReturnPathDns): Promise<DomainRow | undefined> {
  const byId = () => sql<DomainRow>(em, `SELECT * FROM domains WHERE id = ?`, [id]);
  const row = await readAfterCommit(em, domainCommitKey(id), async () => (await byId())[0]);
  if (!row) return undefined;
  const checked: CheckedRecord[] = await checkRecords(resolver, recordsOf(row, returnPath));
  const required = checked.filter((r) => r.required);
  const allVerified = required.every((r) => r.status === 'verified');
  const definitelyMissing = required.some((r) => r.status === 'pending');
  const status = allVerified ? 'verified' : row.status === 'verified' && !definitelyMissing ? 'verified' : 'pending';
  const recordStatus = Object.fromEntries(checked.map((r) => [r.purpose, { status: r.status, found: r.found, ...(r.error ? { error: r.error } : {}) }]));
  const [updated] = await sql<DomainRow>(
    em,
    `UPDATE domains SET status = ?, record_status = ?::jsonb, last_checked_at = now(),
       verified_at = CASE WHEN ? = 'verified' THEN coalesce(verified_at, now()) ELSE NULL END, updated_at = now()
     WHERE id = ? RETURNING *`,
    [status, JSON.stringify(recordStatus), status, id],
  );
  return updated;
}

/** Where a sender domain is in use: templates, campaigns not yet finished, workflow steps sending from it. */
export async function domainUsage(em: EntityManager, projectId: string, domain: string) {
  const templates = await sql<{ id: string; name: string }>(
    em,
    `SELECT id, name FROM templates WHERE project_id = ? AND split_part(from_email, '@', 2) = ? ORDER BY name`,
    [projectId, domain],
  );
  const campaigns = await sql<{ id: string; name: string; status: string }>(
    em,
    `SELECT id, name, status FROM campaigns WHERE project_id = ? AND split_part(from_email, '@', 2) = ?
       AND status IN ('DRAFT', 'SCHEDULED', 'SENDING') ORDER BY name`,
    [projectId, domain],
  );
  const workflowSteps = await sql<{ id: string; workflowId: string }>(
    em,
    `SELECT s.id, s.workflow_id AS "workflowId" FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id
     JOIN templates t ON t.id::text = s.config->>'templateId'
     WHERE w.project_id = ? AND s.type = 'SEND_EMAIL' AND split_part(t.from_email, '@', 2) = ?`,
    [projectId, domain],
  );
  return { templates, campaigns, workflowSteps };
}

export async function deleteDomain(em: EntityManager, projectId: string, id: string): Promise<DomainRow> {
  const row = await getDomain(em, projectId, id);
  const usage = await domainUsage(em, projectId, row.domain);
  const inUse = usage.templates.length + usage.campaigns.length + usage.workflowSteps.length;
  if (inUse > 0) {
    throw conflict(`${row.domain} is used as a sender and cannot be removed`, 'DOMAIN_IN_USE', { details: usage });
  }
  await sql(em, `DELETE FROM domains WHERE id = ?`, [id]);
  return row;
}

/** The exact domain of `from` must be registered to the project and verified (see refuseUnverifiedSender). */
export async function assertVerifiedSender(em: EntityManager, projectId: string, fromEmail: string): Promise<DomainRow> {
  const domain = senderDomainOf(fromEmail);
  const [row] = await sql<DomainRow>(em, `SELECT * FROM domains WHERE project_id = ? AND domain = ?`, [projectId, domain]);
  refuseUnverifiedSender(domain, row);
  return row;
}

export const senderDomainOf = (fromEmail: string) => fromEmail.slice(fromEmail.lastIndexOf('@') + 1).toLowerCase();

/**
 * The 403 for a sender domain that is not the project's (`row` absent) or not verified yet. The spec's
 * sample for this refusal carries code INTERNAL_SERVER_ERROR with status 403; clients match on it, so it is kept.
 */
export function refuseUnverifiedSender<R extends Pick<DomainRow, 'id' | 'status'>>(domain: string, row: R | undefined): asserts row is R {
  if (row?.status === 'verified') return;
  throw new AppError(
    403,
    'INTERNAL_SERVER_ERROR',
    row
      ? `The sender domain ${domain} is not verified yet; publish its DNS records and check GET /domains/${row.id}/verify`
      : `The sender domain ${domain} is not registered to this project; add it with POST /domains`,
    { details: { reason: row ? 'DOMAIN_NOT_VERIFIED' : 'DOMAIN_NOT_REGISTERED', domain } },
  );
}
