import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { containsPattern } from '../../db/like-pattern';
import { transaction } from '../../db/orm';
import { AppError, badRequest, conflict, notFound } from '../../errors';
import type { WorkflowStarter } from '../workflow-starter';
import { assertWithinBillingLimits, billingPeriod } from '../billing';
import { assertVerifiedSender } from '../domains';
import { EmailSchema } from '../emails';
import { checkCondition, Segment, type ConditionTree } from '../segments';
import { checkedContent, copiedMessage } from '../templates';
import { Topic, unknownTopics } from '../topics';
import { Campaign } from './campaigns.entity';
import {
  audienceSize,
  emailCounts,
  markSentWhenDone,
  type MessageFields,
  notifyCampaignStopped,
  queueAbAudience,
  queueAudience,
  queueLocalAudience,
  releaseHeld,
  variantCounts,
  waitingZones,
} from './campaigns.queries';
import { ACTIVE_CAMPAIGN_STATUSES, type AbTest, type CampaignInput, type CampaignStatus, VARIANT_IDS } from './campaigns.schemas';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

type VariantCounts = { sent: number; opened: number; clicked: number };
type WaitingZone = { timezone: string; sendAt: string; recipients: number };

/** What GET /campaigns/:id adds: each A/B variant's counts, and a local-time campaign's zones still to come. */
export interface CampaignDetail {
  variants?: Map<string, VariantCounts>;
  waiting?: WaitingZone[];
}

/** An A/B test as answered: the variants with their ids (and counts, on GET /campaigns/:id), the winner and phase. */
const abTestDto = (c: Campaign, counts?: Map<string, VariantCounts>) =>
  c.abTest && {
    ...c.abTest,
    variants: c.abTest.variants.map(({ bodyHtml: _, ...v }) => ({ ...v, ...(counts ? (counts.get(v.id) ?? { sent: 0, opened: 0, clicked: 0 }) : {}) })),
    winnerVariantId: c.abWinnerVariantId,
    phase: c.abPhase,
  };

export const toCampaignDto = (c: Campaign, detail: CampaignDetail = {}) => ({
  id: c.id,
  name: c.name,
  description: c.description,
  subject: c.subject,
  body: c.body,
  format: c.format,
  from: c.fromEmail,
  fromName: c.fromName,
  replyTo: c.replyTo,
  type: c.type,
  tracking: c.tracking,
  status: c.status,
  audienceType: c.audienceType,
  ...(c.audienceType === 'SEGMENT' ? { segmentId: c.segmentId } : {}),
  ...(c.audienceType === 'FILTERED' ? { audienceCondition: c.audienceCondition } : {}),
  topicId: c.topicId,
  scheduledFor: iso(c.scheduledFor),
  totalRecipients: c.totalRecipients,
  sentCount: c.sentCount,
  deliveredCount: c.deliveredCount,
  openedCount: c.openedCount,
  clickedCount: c.clickedCount,
  bouncedCount: c.bouncedCount,
  projectId: c.projectId,
  sentAt: iso(c.sentAt),
  abTest: abTestDto(c, detail.variants),
  localTime: c.localTime && { ...c.localTime, ...(detail.waiting ? { waiting: detail.waiting } : {}) },
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

/** `lock`: inside a transaction, the row is locked and read as committed (SELECT ... FOR UPDATE). */
export async function getCampaign(em: EntityManager, projectId: string, id: string, lock = false): Promise<Campaign> {
  const campaign = await em.findOne(Campaign, { projectId, id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true } : {});
  if (!campaign) throw notFound('Campaign');
  return campaign;
}

/** The columns create and PUT set from the body. */
function campaignFields(input: CampaignInput, audience: Audience, bodyHtml: string | null, abTest: AbTest | null) {
  return {
    name: input.name,
    description: input.description ?? null,
    subject: input.subject,
    body: input.body,
    format: input.format,
    bodyHtml,
    fromEmail: input.from,
    fromName: input.fromName ?? null,
    replyTo: input.replyTo ?? null,
    type: input.type,
    audienceType: input.audienceType,
    segmentId: audience.segmentId,
    audienceCondition: audience.condition,
    topicId: audience.topicId,
    tracking: input.tracking ?? null,
    abTest,
    localTime: input.localTime ?? null,
  };
}

/** Each variant's subject and body checked as the campaign's are, an MJML body compiled: the variant keeps the HTML it is sent from. */
async function checkedAbTest(input: CampaignInput): Promise<AbTest | null> {
  if (!input.abTest) return null;
  const variants: AbTest['variants'] = [];
  for (const [i, v] of input.abTest.variants.entries()) {
    const { bodyHtml } = await checkedContent({ subject: v.subject, body: v.body, format: input.format }, `abTest.variants.${i}.`);
    variants.push({ id: VARIANT_IDS[i], ...v, ...(bodyHtml === null ? {} : { bodyHtml }) });
  }
  return { ...input.abTest, variants };
}

const invalidField = (field: string, message: string) =>
  new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', { errors: [{ field, message, code: 'invalid_value' }] });

/** An A/B test and a local time do not combine (422); every sender a variant names must be verified (403). */
async function checkWaits(em: EntityManager, projectId: string, input: CampaignInput): Promise<void> {
  if (input.abTest && input.localTime) throw invalidField('localTime', 'A campaign cannot combine abTest and localTime');
  await assertVariantSenders(em, projectId, input.abTest?.variants);
}

async function assertVariantSenders(em: EntityManager, projectId: string, variants: Array<{ from?: string }> | undefined): Promise<void> {
  for (const from of new Set((variants ?? []).flatMap((v) => (v.from ? [v.from] : [])))) await assertVerifiedSender(em, projectId, from);
}

/** A variant's message: its own fields where it gives them, the campaign's otherwise. */
function variantMessage(c: Campaign, v: AbTest['variants'][number]): MessageFields & { id: string } {
  const fromEmail = v.from ?? c.fromEmail;
  return {
    id: v.id,
    fromEmail,
    fromName: v.fromName !== undefined ? v.fromName : c.fromName,
    replyTo: c.replyTo ?? fromEmail,
    subject: v.subject ?? c.subject,
  };
}

interface Audience {
  segmentId: string | null;
  condition: ConditionTree | null;
  topicId: string | null;
}

/** A campaign's topic must be the project's, and only marketing mail is sent for a topic (422 naming topicId). */
async function checkTopic(em: EntityManager, projectId: string, input: CampaignInput): Promise<string | null> {
  if (!input.topicId) return null;
  if (input.type !== 'MARKETING') {
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
      errors: [{ field: 'topicId', message: 'Only a MARKETING campaign is sent for a topic: transactional mail ignores topics', code: 'invalid_topic' }],
    });
  }
  if (!(await em.count(Topic, { projectId, id: input.topicId }))) throw unknownTopics([input.topicId], () => 'topicId');
  return input.topicId;
}

/** The audience rules of create and PUT: 400 for a missing segment or condition, 403 for the sender. */
async function checkAudience(em: EntityManager, projectId: string, input: CampaignInput): Promise<Audience> {
  const topicId = await checkTopic(em, projectId, input);
  if (input.audienceType === 'SEGMENT') {
    if (!input.segmentId) throw badRequest('segmentId is required when audienceType is SEGMENT', 'SEGMENT_REQUIRED');
    if (!(await em.count(Segment, { projectId, id: input.segmentId }))) {
      throw badRequest(`Segment ${input.segmentId} does not exist in this project`, 'SEGMENT_NOT_FOUND');
    }
    return { segmentId: input.segmentId, condition: null, topicId };
  }
  if (input.audienceType === 'FILTERED') {
    if (input.audienceCondition === undefined || input.audienceCondition === null) {
      throw badRequest('audienceCondition is required when audienceType is FILTERED', 'CONDITION_REQUIRED');
    }
    const condition = await checkCondition(em, projectId, input.audienceCondition).catch((err: AppError) => {
      throw badRequest(err.message, 'INVALID_CONDITION');
    });
    return { segmentId: null, condition, topicId };
  }
  return { segmentId: null, condition: null, topicId };
}

export async function createCampaign(em: EntityManager, projectId: string, input: CampaignInput): Promise<Campaign> {
  const { bodyHtml } = await checkedContent(input);
  const abTest = await checkedAbTest(input);
  const audience = await checkAudience(em, projectId, input);
  await assertVerifiedSender(em, projectId, input.from);
  await checkWaits(em, projectId, input);
  const campaign = em.create(Campaign, { id: newId(), projectId, ...campaignFields(input, audience, bodyHtml, abTest) });
  await em.persist(campaign).flush();
  // Read back: jsonb orders the condition's keys its own way, and the answer shows them as every later read does.
  return (await em.refresh(campaign))!;
}

/** PUT: replaces every field; only a DRAFT or SCHEDULED campaign can still change. */
export async function replaceCampaign(em: EntityManager, projectId: string, id: string, input: CampaignInput): Promise<Campaign> {
  const current = await getCampaign(em, projectId, id);
  if (current.status !== 'DRAFT' && current.status !== 'SCHEDULED') {
    throw badRequest(`A ${current.status} campaign cannot be changed`, 'CAMPAIGN_NOT_EDITABLE');
  }
  const { bodyHtml } = await checkedContent(input);
  const abTest = await checkedAbTest(input);
  const audience = await checkAudience(em, projectId, input);
  await assertVerifiedSender(em, projectId, input.from);
  await checkWaits(em, projectId, input);
  if (input.localTime && current.scheduledFor) throw invalidField('localTime', 'A scheduled campaign cannot have a local time: send it without scheduledFor');
  // Conditional: sending may have begun since the check above, and then the campaign stays as it is.
  const changed = await em.nativeUpdate(
    Campaign,
    { projectId, id, status: { $in: ['DRAFT', 'SCHEDULED'] }, ...(input.localTime ? { scheduledFor: null } : {}) },
    { ...campaignFields(input, audience, bodyHtml, abTest), updatedAt: new Date() },
  );
  if (!changed) throw badRequest('The campaign is no longer editable', 'CAMPAIGN_NOT_EDITABLE');
  return (await em.refresh(current))!;
}

/** Only a draft can be deleted; a scheduled or sending campaign has an active execution (409). */
export async function deleteCampaign(em: EntityManager, projectId: string, id: string): Promise<void> {
  const c = await getCampaign(em, projectId, id);
  if ((ACTIVE_CAMPAIGN_STATUSES as readonly string[]).includes(c.status)) {
    throw conflict(`The campaign is ${c.status}: cancel it first`, 'CAMPAIGN_ACTIVE');
  }
  if (c.status !== 'DRAFT') throw badRequest(`A ${c.status} campaign is kept for its statistics; only drafts can be deleted`, 'CAMPAIGN_NOT_DELETABLE');
  // Conditional: a draft sent in the meantime is kept.
  await em.nativeDelete(Campaign, { projectId, id, status: 'DRAFT' });
}

/** A new DRAFT with the same message and audience; its counts and schedule start afresh. */
export async function duplicateCampaign(em: EntityManager, projectId: string, id: string): Promise<Campaign> {
  const c = await getCampaign(em, projectId, id);
  const copy = em.create(Campaign, {
    id: newId(),
    projectId,
    ...copiedMessage(c),
    audienceType: c.audienceType,
    segmentId: c.segmentId,
    audienceCondition: structuredClone(c.audienceCondition),
    topicId: c.topicId,
    tracking: structuredClone(c.tracking),
    abTest: structuredClone(c.abTest),
    localTime: structuredClone(c.localTime),
  });
  await em.persist(copy).flush();
  return copy;
}

/** Any value a JavaScript Date can parse, in the future; undefined means "now". */
export function parseSchedule(value: string | number | null | undefined): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw badRequest('scheduledFor is not a date', 'INVALID_SCHEDULE');
  if (at.getTime() <= Date.now()) throw badRequest('scheduledFor must be in the future', 'INVALID_SCHEDULE');
  return at;
}

export async function listCampaigns(
  em: EntityManager,
  projectId: string,
  q: { page: number; pageSize: number; status?: CampaignStatus; search?: string; sort: 'name' | 'createdAt' | 'updatedAt'; dir: 'ASC' | 'DESC' },
) {
  const like = q.search && containsPattern(q.search);
  const [rows, n] = await em.findAndCount(
    Campaign,
    {
      projectId,
      ...(q.status ? { status: q.status } : {}),
      ...(like ? { $or: [{ name: { $ilike: like } }, { subject: { $ilike: like } }, { fromEmail: { $ilike: like } }] } : {}),
    },
    { orderBy: { [q.sort]: q.dir, id: q.dir }, limit: q.pageSize, offset: (q.page - 1) * q.pageSize },
  );
  return { data: rows.map((c) => toCampaignDto(c)), page: q.page, pageSize: q.pageSize, total: n, totalPages: Math.ceil(n / q.pageSize) };
}

/** Current counts, from the recipients' emails themselves. */
export async function campaignStats(em: EntityManager, c: Campaign) {
  const s = await emailCounts(em, c.id);
  const rate = (n: number) => (s.sent ? Math.round((n / s.sent) * 10_000) / 100 : 0);
  return {
    campaignId: c.id,
    status: c.status,
    totalRecipients: c.totalRecipients,
    ...s,
    openRate: rate(s.opened),
    clickRate: rate(s.clicked),
    bounceRate: rate(s.bounced),
    complaintRate: rate(s.complained),
  };
}

/**
 * The moment sending starts: SCHEDULED becomes SENDING, and the audience is fixed by queueing one
 * unrendered email per recipient (contacts who join later are not added). Idempotent: a second run
 * finds the audience fixed. Answers whether delivery should go on.
 */
export async function startCampaignSend(em: EntityManager, campaignId: string): Promise<{ proceed: boolean; recipients: number; abWaitMinutes?: number }> {
  return transaction(em, async (tx) => {
    const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!c || (c.status !== 'SCHEDULED' && c.status !== 'SENDING')) return { proceed: false, recipients: 0 };
    const abWaitMinutes = c.abTest ? { abWaitMinutes: c.abTest.waitMinutes } : {};
    if (c.audienceFixedAt) return { proceed: true, recipients: c.totalRecipients, ...abWaitMinutes };
    // Checked when it was sent or scheduled; a scheduled one may find the month's emails used up since.
    const overLimit = await assertWithinBillingLimits(tx, c.projectId, () => audienceSize(tx, c)).then(
      () => false,
      (err) => (err instanceof AppError && err.code === 'BILLING_LIMIT_REACHED' ? true : Promise.reject(err)),
    );
    // The row is locked: what is assigned here is written at commit.
    if (overLimit) {
      c.status = 'CANCELLED';
      return { proceed: false, recipients: 0 };
    }
    const recipients = c.abTest
      ? await queueAbAudience(
          tx,
          c,
          c.abTest.variants.map((v) => variantMessage(c, v)),
          c.abTest.testPercent,
        )
      : c.localTime
        ? await queueLocalAudience(tx, c, c.localTime)
        : await queueAudience(tx, c);
    tx.assign(c, { status: 'SENDING', audienceFixedAt: new Date(), totalRecipients: recipients, ...(c.abTest ? { abPhase: 'testing' as const } : {}) });
    return { proceed: true, recipients, ...abWaitMinutes };
  });
}

/** SENT once every recipient is accounted for (sent, failed or cancelled). */
export async function completeCampaign(em: EntityManager, campaignId: string): Promise<boolean> {
  return markSentWhenDone(em, campaignId);
}

/** After a cancel: whatever has not left is never sent. */
export async function cancelCampaignDelivery(em: EntityManager, campaignId: string): Promise<number> {
  return transaction(em, async (tx) => {
    const now = new Date();
    await tx.nativeUpdate(Campaign, { id: campaignId, status: { $in: [...ACTIVE_CAMPAIGN_STATUSES] } }, { status: 'CANCELLED', updatedAt: now });
    return tx.nativeUpdate(
      EmailSchema,
      { campaignId, status: 'QUEUED' },
      { status: 'CANCELLED', claimedUntil: null, lastError: 'campaign cancelled', updatedAt: now },
    );
  });
}

/**
 * Sends a DRAFT campaign now or at `scheduledFor`, or moves a SCHEDULED one: checked (status, sender,
 * audience, billing), updated and started (or rescheduled) while the row is locked, so the workflow and
 * the row never disagree.
 */
export async function sendCampaign(
  em: EntityManager,
  temporal: WorkflowStarter,
  projectId: string,
  id: string,
  scheduledFor: Parameters<typeof parseSchedule>[0],
): Promise<Campaign> {
  return transaction(em, async (tx) => {
    const c = await getCampaign(tx, projectId, id, true);
    const wasDraft = c.status === 'DRAFT';
    if (!wasDraft && c.status !== 'SCHEDULED') {
      throw badRequest(`A ${c.status} campaign cannot be sent; only DRAFT or SCHEDULED campaigns can`, 'CAMPAIGN_NOT_SENDABLE');
    }
    const at = parseSchedule(scheduledFor);
    if (at && c.localTime) throw invalidField('scheduledFor', 'A campaign with a local time cannot be scheduled: it is sent at its local time');
    await assertVerifiedSender(tx, projectId, c.fromEmail);
    await assertVariantSenders(tx, projectId, c.abTest?.variants);
    const recipients = await audienceSize(tx, c);
    if (recipients === 0) throw badRequest('The campaign’s audience has no subscribed contacts', 'NO_RECIPIENTS');
    // A send in a later billing period is checked when its time comes (startCampaignSend).
    if (!at || billingPeriod(at).start.getTime() === billingPeriod().start.getTime()) await assertWithinBillingLimits(tx, projectId, recipients);
    tx.assign(c, { status: at ? 'SCHEDULED' : 'SENDING', scheduledFor: at ?? null, updatedAt: new Date() });
    await tx.flush();
    if (wasDraft) await temporal.startCampaignWorkflow({ id, projectId, scheduledFor: at ?? null });
    else {
      // The workflow's `reschedule` update refuses once sending has begun (the time came while this request waited for the row).
      const answer = await temporal.rescheduleCampaignWorkflow(id, at ?? null);
      if (answer) throw badRequest(`The campaign cannot be moved: ${answer.refused}`, 'CAMPAIGN_NOT_SENDABLE');
    }
    return c;
  });
}

/** Cancels a SCHEDULED, SENDING or TESTING campaign and its workflow, with the row locked. */
export async function cancelCampaign(em: EntityManager, temporal: WorkflowStarter, projectId: string, id: string): Promise<Campaign> {
  return transaction(em, async (tx) => {
    const c = await getCampaign(tx, projectId, id, true);
    if (!(ACTIVE_CAMPAIGN_STATUSES as readonly string[]).includes(c.status)) {
      throw badRequest(`A ${c.status} campaign cannot be cancelled`, 'CAMPAIGN_NOT_CANCELLABLE');
    }
    c.status = 'CANCELLED';
    await tx.flush();
    // The workers' chunks stop at the commit; the workflow then cancels what is still queued.
    await notifyCampaignStopped(tx, id);
    await temporal.cancelCampaignWorkflow(id);
    return c;
  });
}

/** GET /campaigns/:id: the campaign with each A/B variant's counts and, while sending, a local-time campaign's zones still to come. */
export async function campaignDetail(em: EntityManager, c: Campaign) {
  const detail: CampaignDetail = {};
  if (c.abTest) detail.variants = new Map((await variantCounts(em, c.id)).map((r) => [r.variant_id, { sent: r.sent, opened: r.opened, clicked: r.clicked }]));
  if (c.localTime && c.status === 'SENDING') {
    detail.waiting = (await waitingZones(em, c.id)).map((z) => ({ timezone: z.timezone, sendAt: new Date(z.send_at).toISOString(), recipients: z.recipients }));
  }
  return toCampaignDto(c, detail);
}

/** The A/B test's sample is sent: the campaign is TESTING until its winner is decided. */
export async function holdAbTest(em: EntityManager, campaignId: string): Promise<void> {
  await em.nativeUpdate(
    Campaign,
    { id: campaignId, status: 'SENDING', abWinnerVariantId: null },
    { status: 'TESTING', abPhase: 'waiting', updatedAt: new Date() },
  );
}

/**
 * The wait is over (or a winner was chosen): the winner is the one chosen by POST /campaigns/:id/winner,
 * else, unless the test is manual, the variant with the highest unique open or click rate among its
 * sample (a tie goes to the lowest id). The held rest then gets the winner. Idempotent; answers no
 * winner while a manual test waits, and `stopped` when the campaign was cancelled.
 */
export async function decideAbWinner(em: EntityManager, campaignId: string): Promise<{ winner: string | null; stopped: boolean }> {
  return transaction(em, async (tx) => {
    const c = await tx.findOne(Campaign, { id: campaignId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!c?.abTest || (c.status !== 'SENDING' && c.status !== 'TESTING')) return { winner: null, stopped: true };
    let winner = c.abWinnerVariantId;
    if (!winner) {
      if (c.abTest.winnerCriteria === 'manual') return { winner: null, stopped: false };
      const counts = new Map((await variantCounts(tx, campaignId)).map((r) => [r.variant_id, r]));
      const score = (id: string) => {
        const r = counts.get(id);
        return { hits: (c.abTest!.winnerCriteria === 'opens' ? r?.opened : r?.clicked) ?? 0, sent: r?.sent ?? 0 };
      };
      // Rates compared as cross products: exact, and a variant with nothing sent rates 0.
      for (const v of c.abTest.variants) {
        if (winner === null) winner = v.id;
        const a = score(v.id);
        const best = score(winner);
        if (a.sent && (!best.sent || a.hits * best.sent > best.hits * a.sent)) winner = v.id;
      }
    }
    await releaseHeld(
      tx,
      campaignId,
      variantMessage(
        c,
        c.abTest.variants.find((v) => v.id === winner)!,
      ),
    );
    tx.assign(c, { abWinnerVariantId: winner, abPhase: 'winner', status: 'SENDING', updatedAt: new Date() });
    return { winner, stopped: false };
  });
}

/**
 * POST /campaigns/:id/winner: an A/B test's winner, chosen once (409 after that, or once it was
 * decided), while its campaign is SENDING or TESTING; the workflow, signalled with the row locked,
 * reads it when the lock is released.
 */
export async function chooseAbWinner(em: EntityManager, temporal: WorkflowStarter, projectId: string, id: string, variantId: string): Promise<Campaign> {
  return transaction(em, async (tx) => {
    const c = await getCampaign(tx, projectId, id, true);
    if (!c.abTest) throw badRequest('The campaign has no A/B test', 'CAMPAIGN_NOT_AB_TEST');
    if (c.abWinnerVariantId) throw conflict(`The winner is already ${c.abWinnerVariantId}`, 'WINNER_ALREADY_CHOSEN');
    if (c.status !== 'SENDING' && c.status !== 'TESTING') throw badRequest(`A ${c.status} campaign’s winner cannot be chosen`, 'CAMPAIGN_NOT_TESTING');
    if (!c.abTest.variants.some((v) => v.id === variantId)) throw invalidField('variantId', `The campaign has no variant ${variantId}`);
    c.abWinnerVariantId = variantId;
    await tx.flush();
    await temporal.signalAbWinner(id);
    return c;
  });
}
