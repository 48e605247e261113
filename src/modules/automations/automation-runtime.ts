import crypto from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Resolver } from '../../dns/resolver';
import { readAfterCommit, transaction } from '../../db/orm';
import type { Links } from '../../mail/links';
import { render, templateVariables } from '../../mail/render';
import { AppError } from '../../errors';
import { assertWithinBillingLimits } from '../billing';
import { resolveDataMap } from '../contacts';
import { ContactSchema, updateContact, upsertContact } from '../contacts';
import { EmailSchema, sendingContext } from '../emails';
import { composeMessage } from '../../mail/compose';
import { TemplateRenderError, TemplateSyntaxError } from '../../mail/liquid';
import { queueEmail } from '../emails';
import type { ActivityHub } from '../../bus/contact-activity';
import { evaluateCondition } from '../segments';
import { loadContactFacts, loadSegmentRefs } from '../segments';
import { eventNamesOf } from '../segments';
import { sendableBody, TemplateSchema } from '../templates';
import { topicStateOf } from '../topics';
import { executionCommitKey } from './executions.service';
import { callWebhook, WebhookError } from '../../net/guarded-http';
import { conditionFilter, type Definition } from './automations.service';
import { beginStepRun, closeWait, endExecution, mergeContext, recordTriggerRun, setResumeAt } from './automations.queries';
import { type ExecutionStatus, UNIT_SECONDS } from './automations.schemas';
import { AutomationExecution, AutomationExecutionStep, AutomationWait } from './executions.entity';

export interface RuntimeDeps {
  orm: MikroORM;
  hub: ActivityHub;
  links: Links;
  resolver: Resolver;
  allowPrivateWebhooks: boolean;
  log: Logger;
}

/** `next` follows the step's single transition; `yes`/`no` a CONDITION's branch; `exit` ends the execution. */
export type StepOutcome = 'next' | 'yes' | 'no' | 'exit';

/** What a step reads of its contact (the contacts module answers its own row type for an upsert). */
interface StepContact {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
}

export interface LoadedExecution {
  status: ExecutionStatus;
  definition: Definition;
}

/**
 * How a wait ended. The workflow does not record it with an activity of its own: it hands it to
 * the next activity, which records it before doing its own work (one activity per wake-up).
 */
export interface WaitEnd {
  seq: number;
  outcome: 'event' | 'timeout' | 'elapsed';
  event?: { id: string; name: string; data: Record<string, unknown> };
}

/** Ids derived from (execution, step sequence number): a retried activity repeats nothing. */
function derivedId(executionId: string, seq: number, what: string): string {
  const h = crypto.createHash('sha1').update(`${executionId}/${seq}/${what}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * What the steps of an automation do, for the activities of `automation:<executionId>`. Every method
 * is idempotent: step records and emails carry ids derived from the step's sequence number, waits
 * and status changes are upserts.
 */
export class AutomationRuntime {
  constructor(private readonly deps: RuntimeDeps) {}

  private em() {
    return this.deps.orm.em.fork();
  }

  /**
   * The execution, after recording the end of the wait it leaves (`closed`), in one statement. An
   * execution not there yet may belong to a transaction that has not committed: wait for it once.
   */
  private async execution(executionId: string, closed?: WaitEnd): Promise<AutomationExecution | undefined> {
    const read = async () =>
      closed
        ? closeWait(
            this.em(),
            executionId,
            derivedId(executionId, closed.seq, 'step'),
            { outcome: closed.outcome, ...(closed.event ? { eventId: closed.event.id } : {}) },
            closed.event ? { ...closed.event.data, lastEvent: { id: closed.event.id, name: closed.event.name } } : {},
          )
        : ((await this.em().findOne(AutomationExecution, executionId)) ?? undefined);
    return readAfterCommit(this.deps.orm.em, executionCommitKey(executionId), read);
  }

  /** The first activity of a run: the definition, and on a fresh start the TRIGGER step recorded (sequence 1). */
  async load(executionId: string, recordTrigger: boolean): Promise<LoadedExecution | undefined> {
    const x = await this.execution(executionId);
    if (!x) return undefined;
    const trigger = x.definition.steps.find((s) => s.type === 'TRIGGER');
    if (recordTrigger && trigger) await recordTriggerRun(this.em(), x.id, derivedId(x.id, 1, 'step'), trigger.id, { context: x.context });
    return { status: x.status, definition: x.definition };
  }

  private async beginStep(x: AutomationExecution, stepId: string, type: string, seq: number, status: 'RUNNING' | 'WAITING'): Promise<string> {
    const id = derivedId(x.id, seq, 'step');
    await beginStepRun(this.em(), { id, executionId: x.id, stepId, type, status });
    return id;
  }

  private async endStep(stepRunId: string, status: 'COMPLETED' | 'SKIPPED' | 'FAILED', output: object): Promise<void> {
    await this.em().nativeUpdate(AutomationExecutionStep, { id: stepRunId }, { status, output, error: null, completedAt: new Date() });
  }

  private async contact(em: EntityManager, x: AutomationExecution): Promise<StepContact | null> {
    return em.findOne(ContactSchema, { projectId: x.projectId, id: x.contactId });
  }

  private vars(x: AutomationExecution, c: StepContact) {
    return templateVariables({ contact: { id: c.id, email: c.email, data: c.data }, values: x.context, links: this.deps.links.contactLinks(c.id) });
  }

  /**
   * Runs one instantaneous step (CONDITION, SEND_EMAIL, UPDATE_CONTACT, EXIT), after recording the
   * wait it follows. With `last` (no step follows), or on EXIT, the execution's end is recorded too.
   */
  async runStep(executionId: string, stepId: string, seq: number, opts: { closed?: WaitEnd; last?: boolean } = {}): Promise<StepOutcome> {
    const x = await this.execution(executionId, opts.closed);
    if (!x) return 'exit';
    const outcome = await this.step(x, stepId, seq);
    if (outcome === 'exit') await this.finish(executionId, 'EXITED');
    else if (opts.last && outcome === 'next') await this.finish(executionId, 'COMPLETED');
    return outcome;
  }

  private async step(x: AutomationExecution, stepId: string, seq: number): Promise<StepOutcome> {
    const step = x.definition.steps.find((s) => s.id === stepId);
    if (!step) throw new Error(`step ${stepId} is not in the execution's definition`);
    const run = await this.beginStep(x, step.id, step.type, seq, 'RUNNING');
    switch (step.type) {
      case 'EXIT':
        await this.endStep(run, 'COMPLETED', { reason: step.config.reason ?? null });
        return 'exit';
      case 'CONDITION': {
        const result = await this.condition(x, step.config);
        await this.endStep(run, 'COMPLETED', { result });
        return result ? 'yes' : 'no';
      }
      case 'SEND_EMAIL': {
        const output = await this.sendEmail(x, step.config, seq);
        await this.endStep(run, output.sent ? 'COMPLETED' : 'SKIPPED', output);
        return 'next';
      }
      case 'UPDATE_CONTACT': {
        const output = await this.updateContact(x, step.config);
        await this.endStep(run, 'COMPLETED', output);
        return 'next';
      }
      default:
        throw new Error(`step type ${step.type} is not instantaneous`);
    }
  }

  private async condition(x: AutomationExecution, config: Record<string, unknown>): Promise<boolean> {
    const { filter, scope } = conditionFilter(config);
    const tree = { logic: 'AND' as const, groups: [{ filters: [filter] }] };
    const now = Date.now();
    if (scope === 'context') {
      const facts = {
        email: '',
        subscribed: false,
        createdAt: new Date(0),
        updatedAt: new Date(0),
        data: x.context,
        lastEventAt: new Map(),
        staticSegments: new Set<string>(),
        subscribedTopics: new Set<string>(),
      };
      return evaluateCondition(tree, facts, { now, segments: new Map() });
    }
    const em = this.em();
    const facts = (await loadContactFacts(em, x.projectId, [x.contactId], eventNamesOf(tree, now))).get(x.contactId);
    if (!facts) return false;
    return evaluateCondition(tree, facts, { now, segments: await loadSegmentRefs(em, x.projectId) });
  }

  /** Queues the template, rendered with the contact's data and the execution's context. MARKETING mail honours subscription. */
  private async sendEmail(x: AutomationExecution, config: Record<string, unknown>, seq: number) {
    const em = this.em();
    const template = await em.findOne(TemplateSchema, { projectId: x.projectId, id: config.templateId as string });
    if (!template) throw new Error('the template of this step no longer exists');
    const recipient = config.recipient as { type: 'CONTACT' | 'CUSTOM'; customEmail?: string } | undefined;
    const { settings, limits } = await sendingContext(em, x.projectId, template.fromEmail);
    const emailId = derivedId(x.id, seq, 'email');
    const out = await transaction(em, async (tx) => {
      // The billing lock first, as /v1/send takes it, before any contact row; a retried step whose
      // email is already queued is not counted twice.
      if (!(await tx.count(EmailSchema, { projectId: x.projectId, id: emailId }))) {
        const refusal = await assertWithinBillingLimits(tx, x.projectId, 1, limits).then(
          () => undefined,
          (err) => (err instanceof AppError && err.code === 'BILLING_LIMIT_REACHED' ? err.message : Promise.reject(err)),
        );
        if (refusal) return { sent: false, reason: refusal };
      }
      let contact = await this.contact(tx, x);
      if (!contact) return { sent: false, reason: 'the contact no longer exists' };
      if (recipient?.type === 'CUSTOM' && recipient.customEmail) {
        contact = (await upsertContact(tx, x.projectId, { email: recipient.customEmail, defaultSubscribed: false, data: { set: {}, unset: [] } })).contact;
      }
      if (template.type === 'MARKETING' && !contact.subscribed) return { sent: false, reason: 'the contact is not subscribed to marketing email' };
      // Transactional mail ignores topics.
      const topicId = template.type === 'MARKETING' ? ((config.topicId as string | null | undefined) ?? null) : null;
      if (topicId) {
        const state = await topicStateOf(tx, x.projectId, contact.id, topicId);
        if (state === undefined) return { sent: false, reason: 'the step’s topic no longer exists' };
        if (state !== 'subscribed') return { sent: false, reason: `the contact does not receive the topic (${state})` };
      }
      let message: ReturnType<typeof composeMessage>;
      try {
        message = composeMessage({
          emailId,
          type: template.type,
          subject: template.subject,
          body: sendableBody(template),
          contact: { id: contact.id, email: contact.email, data: contact.data },
          values: x.context,
          headers: {},
          settings,
          tracking: [template.tracking],
          topicId,
          links: this.deps.links,
        });
      } catch (err) {
        // A cap this contact's data passed (or a template stored before templates were checked): the
        // step ends without mail, saying why, rather than failing the activity again and again.
        if (!(err instanceof TemplateRenderError || err instanceof TemplateSyntaxError)) throw err;
        return { sent: false, reason: `could not render the template: ${err.field ? `${err.field}: ` : ''}${err.message}` };
      }
      await queueEmail(tx, {
        id: emailId,
        projectId: x.projectId,
        contactId: contact.id,
        templateId: template.id,
        type: template.type,
        from: { email: template.fromEmail, name: template.fromName },
        replyTo: template.replyTo ?? template.fromEmail,
        to: { email: contact.email, name: null },
        message,
      });
      return { sent: true, emailId, to: contact.email };
    });
    return out;
  }

  private async updateContact(x: AutomationExecution, config: Record<string, unknown>) {
    const action = config.subscriptionAction as 'none' | 'subscribe' | 'unsubscribe' | undefined;
    const updates = config.updates as Record<string, unknown> | undefined;
    const result = await updateContact(this.em(), x.projectId, x.contactId, {
      data: updates ? resolveDataMap(updates) : undefined,
      subscribed: action === 'subscribe' ? true : action === 'unsubscribe' ? false : undefined,
    });
    this.deps.hub.publish({ projectId: x.projectId, contactIds: [x.contactId], events: result.events });
    return { updated: result.isUpdate, data: result.contact.data, subscribed: result.contact.subscribed };
  }

  /** The execution waits (a DELAY, or a WAIT_FOR_EVENT registered under (project, contact, event name)). */
  async beginWait(executionId: string, stepId: string, seq: number, eventName?: string, closed?: WaitEnd): Promise<void> {
    const x = await this.execution(executionId, closed);
    if (!x) return;
    const step = x.definition.steps.find((s) => s.id === stepId)!;
    const run = await this.beginStep(x, stepId, step.type, seq, 'WAITING');
    const config = step.config as { amount?: number; unit?: keyof typeof UNIT_SECONDS; timeout?: number };
    const waitSeconds = step.type === 'DELAY' ? Number(config.amount) * UNIT_SECONDS[config.unit!] : config.timeout ? Number(config.timeout) : null;
    // From the step's first start, so a retried activity does not move it.
    await setResumeAt(this.em(), x.id, run, waitSeconds);
    if (eventName) {
      // A retried activity registers the same wait again.
      await this.em().upsert(AutomationWait, { executionId: x.id, projectId: x.projectId, contactId: x.contactId, eventName, createdAt: new Date() });
    }
  }

  /** Calls the step's webhook (url, headers and body rendered); its answer lands in the context as `webhook`. */
  async webhook(executionId: string, stepId: string, seq: number, attempt: number, closed?: WaitEnd): Promise<{ status: number }> {
    const x = await this.execution(executionId, closed);
    if (!x) return { status: 0 };
    const step = x.definition.steps.find((s) => s.id === stepId)!;
    const run = await this.beginStep(x, stepId, 'WEBHOOK', seq, 'RUNNING');
    const contact = await this.contact(this.em(), x);
    const vars = contact ? this.vars(x, contact) : { ...x.context };
    const config = step.config as { url: string; method?: string; headers?: Record<string, string>; body?: unknown };
    const renderJson = (v: unknown): unknown =>
      typeof v === 'string'
        ? render(v, vars, 'text')
        : Array.isArray(v)
          ? v.map(renderJson)
          : v && typeof v === 'object'
            ? Object.fromEntries(Object.entries(v).map(([k, val]) => [k, renderJson(val)]))
            : v;
    const method = (config.method ?? 'POST').toUpperCase();
    const body =
      config.body === undefined || method === 'GET'
        ? undefined
        : typeof config.body === 'string'
          ? render(config.body, vars, 'text')
          : JSON.stringify(renderJson(config.body));
    const headers = Object.fromEntries(Object.entries(config.headers ?? {}).map(([k, v]) => [k, render(v, vars, 'text')]));
    if (body !== undefined && typeof config.body !== 'string' && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json';
    }
    try {
      const res = await callWebhook(
        { url: render(config.url, vars, 'url'), method, headers, body },
        { resolver: this.deps.resolver, allowPrivate: this.deps.allowPrivateWebhooks },
      );
      let parsed: unknown = res.body;
      try {
        parsed = JSON.parse(res.body);
      } catch {
        /* text */
      }
      await mergeContext(this.em(), x.id, { webhook: { status: res.status, body: parsed } });
      await this.endStep(run, 'COMPLETED', { status: res.status, attempts: attempt });
      return { status: res.status };
    } catch (err) {
      const retryable = err instanceof WebhookError ? err.retryable : true;
      if (err instanceof WebhookError && err.detail) this.deps.log.warn({ executionId: x.id, detail: err.detail }, `WEBHOOK step refused: ${err.message}`);
      await this.em().nativeUpdate(AutomationExecutionStep, { id: run }, { error: (err as Error).message });
      throw Object.assign(new Error((err as Error).message), { retryable });
    }
  }

  /** Records the end: COMPLETED, EXITED, FAILED (with the reason) or CANCELLED. */
  async finish(executionId: string, status: 'COMPLETED' | 'EXITED' | 'FAILED' | 'CANCELLED', error?: string, closed?: WaitEnd): Promise<void> {
    if (closed) await this.execution(executionId, closed);
    const em = this.em();
    await endExecution(em, executionId, status, error ?? null);
    if (status === 'FAILED' || status === 'CANCELLED') {
      await em.nativeUpdate(AutomationExecutionStep, { executionId, status: { $in: ['RUNNING', 'WAITING'] } }, { status, completedAt: new Date() });
    }
  }
}
