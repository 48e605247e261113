import type { EntityManager } from '@mikro-orm/postgresql';
import type { Resolver } from '../../dns/resolver';
import { newId } from '../../db/ids';
import { holdUntilCommit, isUniqueViolation, readAfterCommit, transaction } from '../../db/orm';
import { AppError, conflict, notFound } from '../../errors';
import {
  type CheckedRecord,
  checkRecords,
  domainRecords,
  generateDkimKeyPair,
  newDkimSelector,
  newVerificationToken,
  type ReturnPathDns,
  returnPathVerified,
} from './domain-records';
import { Domain } from './domains.entity';
import { domainUsage } from './domains.queries';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * A domain as the API shows it. On creation each record is exactly `{type, name, value, required,
 * purpose}` (a contract external clients rely on); once checked, each also carries its `status` and
 * what DNS `found` there.
 */
export function toDomainDto(row: Domain, returnPath: ReturnPathDns, opts: { recordStatus: boolean } = { recordStatus: true }) {
  const records = recordsOf(row, returnPath).map((r) => {
    if (!opts.recordStatus) return r;
    const checked = row.recordStatus[r.purpose];
    return { ...r, status: checked?.status ?? 'pending', found: checked?.found ?? [], ...(checked?.error ? { error: checked.error } : {}) };
  });
  return {
    id: row.id,
    projectId: row.projectId,
    domain: row.domain,
    status: row.status,
    verified: row.status === 'verified',
    dkimSelector: row.dkimSelector,
    records,
    returnPath: { host: `${returnPath.prefix}.${row.domain}`, verified: returnPathVerified(row.recordStatus) },
    verifiedAt: iso(row.verifiedAt),
    lastCheckedAt: iso(row.lastCheckedAt),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

export type DomainDto = ReturnType<typeof toDomainDto>;

const recordsOf = (row: Domain, returnPath: ReturnPathDns) => domainRecords(row, returnPath);

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
  beforeCommit: (row: Domain) => Promise<void>,
): Promise<Domain> {
  const keys = generateDkimKeyPair();
  try {
    return await transaction(em, async (tx) => {
      const row = tx.create(Domain, {
        id: newId(),
        projectId,
        domain,
        verificationToken: newVerificationToken(),
        dkimSelector: newDkimSelector(),
        dkimPrivateKey: keys.privateKey,
        dkimPublicKey: keys.publicKey,
        spfValue,
      });
      // Flushed now rather than at COMMIT: a duplicate is refused before its workflow starts.
      await tx.persist(row).flush();
      await holdUntilCommit(tx, domainCommitKey(row.id));
      await beforeCommit(row);
      return row;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`${domain} is already added to this project`, 'DOMAIN_EXISTS');
    throw err;
  }
}

export function listDomains(em: EntityManager, projectId: string): Promise<Domain[]> {
  return em.find(Domain, { projectId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function getDomain(em: EntityManager, projectId: string, id: string): Promise<Domain> {
  const row = await em.findOne(Domain, { projectId, id });
  if (!row) throw notFound('Domain');
  return row;
}

/** Held by the transaction that adds a domain (and starts its verification workflow) until it commits. */
const domainCommitKey = (id: string) => `domain:${id}`;

/**
 * Checks every record now and stores the outcome. A domain is verified exactly when every required
 * record resolves with its value; a verified domain goes back to pending only when DNS answers that a
 * required record is gone, never because a lookup failed. Undefined when the domain no longer exists.
 */
export async function checkDomain(em: EntityManager, resolver: Resolver, id: string, returnPath: ReturnPathDns): Promise<Domain | undefined> {
  const row = await readAfterCommit(em, domainCommitKey(id), async () => (await em.findOne(Domain, { id })) ?? undefined);
  if (!row) return undefined;
  const checked: CheckedRecord[] = await checkRecords(resolver, recordsOf(row, returnPath));
  const required = checked.filter((r) => r.required);
  const allVerified = required.every((r) => r.status === 'verified');
  const definitelyMissing = required.some((r) => r.status === 'pending');
  const status = allVerified ? 'verified' : row.status === 'verified' && !definitelyMissing ? 'verified' : 'pending';
  const recordStatus = Object.fromEntries(checked.map((r) => [r.purpose, { status: r.status, found: r.found, ...(r.error ? { error: r.error } : {}) }]));
  const now = new Date();
  row.status = status;
  row.recordStatus = recordStatus;
  row.lastCheckedAt = now;
  row.verifiedAt = status === 'verified' ? (row.verifiedAt ?? now) : null;
  await em.flush();
  return row;
}

export async function deleteDomain(em: EntityManager, projectId: string, id: string): Promise<Domain> {
  const row = await getDomain(em, projectId, id);
  const usage = await domainUsage(em, projectId, row.domain);
  const inUse = usage.templates.length + usage.campaigns.length + usage.workflowSteps.length;
  if (inUse > 0) {
    throw conflict(`${row.domain} is used as a sender and cannot be removed`, 'DOMAIN_IN_USE', { details: usage });
  }
  await em.remove(row).flush();
  return row;
}

/** The exact domain of `from` must be registered to the project and verified (see refuseUnverifiedSender). */
export async function assertVerifiedSender(em: EntityManager, projectId: string, fromEmail: string): Promise<Domain> {
  const domain = senderDomainOf(fromEmail);
  const row = await em.findOne(Domain, { projectId, domain });
  refuseUnverifiedSender(domain, row);
  return row;
}

export const senderDomainOf = (fromEmail: string) => fromEmail.slice(fromEmail.lastIndexOf('@') + 1).toLowerCase();

/**
 * The 403 for a sender domain that is not the project's (`row` absent) or not verified yet. The spec's
 * sample for this refusal carries code INTERNAL_SERVER_ERROR with status 403; clients match on it, so it is kept.
 */
export function refuseUnverifiedSender<R extends Pick<Domain, 'id' | 'status'>>(domain: string, row: R | null | undefined): asserts row is R {
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
