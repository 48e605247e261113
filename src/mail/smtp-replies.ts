/** What an SMTP server's refusal says, by the same rules as a returned report: delivery records its refusals with it. */
import {
  bounceTypeOf,
  type BounceReason,
  type BounceType,
  decideReason,
  findCommand,
  findEnhancedStatus,
  MAX_DIAGNOSTIC_SCAN,
  type ReasonEvidence,
  subTypeOf,
} from './bounce-reasons';

/** An SMTP-session rejection (the relay or receiving MX answered 5xx/4xx while we were sending): same classification by enhanced status and text. */
export function classifySmtpReply(
  replyCode: number,
  text: string,
  /** The command the reply answered, when the client knows it; else read from the text, as in a report. */
  command?: ReasonEvidence['command'],
): { reason: BounceReason; bounceType: BounceType; subType: string; status: string | null } {
  const scan = text.slice(0, MAX_DIAGNOSTIC_SCAN);
  const code = Number.isInteger(replyCode) && replyCode >= 200 && replyCode <= 599 ? String(replyCode) : null;
  const status = findEnhancedStatus(scan, code?.[0]);
  const reason = decideReason({ status, replyCode: code, text: scan, command: command ?? findCommand(scan), action: null, diagnosticType: 'smtp' });
  let bounceType = bounceTypeOf(reason, status, code, scan);
  // A 4xx answer is retried by the sender whatever the words say; only a 5xx can end an address.
  if (code?.startsWith('4') && bounceType === 'Permanent') bounceType = 'Transient';
  return { reason, bounceType, subType: subTypeOf(reason), status };
}
