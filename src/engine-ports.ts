import type { DeliveryPorts } from './delivery/delivery-ports';
import type { InboundPorts } from './inbound/inbound-ports';
import { projectSettings } from './modules/accounts';
import { returnPathVerified } from './modules/domains';
import { recordEmailActivity, suppressedError } from './modules/emails';
import { EVENT_RECORD_COLUMNS, insertEvents, insertEventsTogether, toEventRecord } from './modules/events';
import { inboundHostDomain, projectsReceivingAt, recordInboundEmail } from './modules/inbound-emails';
import type { SendingJudge } from './modules/security';
import { suppressionOf } from './modules/suppressions';

/**
 * The modules' side of the engines' ports: main.ts hands these to delivery/ and inbound/, which import no
 * module. Part of the composition root, as main.ts is; tests and benches that build an engine take them from here.
 */
export const deliveryPorts: DeliveryPorts = {
  suppressionSql: suppressionOf,
  suppressedError,
  eventColumns: EVENT_RECORD_COLUMNS,
  toEventRecord,
  // The column is the domains module's own jsonb, read back by delivery's batch statement.
  returnPathVerified: (recordStatus) => returnPathVerified(recordStatus as Parameters<typeof returnPathVerified>[0]),
  projectSettings,
  recordRefusal: async (tx, emailId, bounce, rules) =>
    (await recordEmailActivity(tx, emailId, { kind: 'bounce', refused: true, ...bounce }, rules))?.events ?? [],
};

/** Inbound's ports; `judge` is the process's one SendingJudge (SNS notifications share its judgements). */
export const inboundPorts = (judge: Pick<SendingJudge, 'judge'>): InboundPorts => ({
  recordEmailActivity,
  insertEvents,
  insertEventsTogether,
  judge: (projectId) => judge.judge(projectId),
  inboundHostDomain,
  projectsReceivingAt,
  recordInboundEmail,
});
