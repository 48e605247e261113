/**
 * Retry decisions shared by activities and workflows, with the server's defaults and rules:
 * exponential backoff capped by the maximum interval, a maximum attempt count, non-retryable
 * error types, an application-chosen next delay, and an expiration (schedule-to-close).
 */
import { durToMs, enums, type IFailure, type IRetryPolicy, type Loose, msToDur } from '../proto';

const RetryState = enums.RetryState;

export interface RetryPolicyRecord {
  initialMs: number;
  coefficient: number;
  /** 0 = no cap. */
  maxMs: number;
  /** 0 = unlimited. */
  maxAttempts: number;
  nonRetryable: string[];
}

/** Fills the server defaults: 1 s initial, x2, capped at 100x initial, unlimited attempts. */
export function normalizeRetryPolicy(p: IRetryPolicy | null | undefined): RetryPolicyRecord {
  const initialMs = durToMs(p?.initialInterval) || 1000;
  return {
    initialMs,
    coefficient: p?.backoffCoefficient && p.backoffCoefficient >= 1 ? p.backoffCoefficient : 2,
    maxMs: durToMs(p?.maximumInterval) || 100 * initialMs,
    maxAttempts: p?.maximumAttempts ?? 0,
    nonRetryable: [...(p?.nonRetryableErrorTypes ?? [])],
  };
}

export function retryPolicyProto(r: RetryPolicyRecord): Loose<IRetryPolicy> {
  return {
    initialInterval: msToDur(r.initialMs),
    backoffCoefficient: r.coefficient,
    maximumInterval: msToDur(r.maxMs),
    maximumAttempts: r.maxAttempts,
    nonRetryableErrorTypes: r.nonRetryable,
  };
}

/** Whether a failure may be retried at all, independent of attempts and time. */
export function isRetryableFailure(failure: IFailure | null | undefined, nonRetryable: string[]): boolean {
  if (!failure) return true;
  if (failure.terminatedFailureInfo || failure.canceledFailureInfo) return false;
  if (failure.timeoutFailureInfo) {
    const t = failure.timeoutFailureInfo.timeoutType;
    // Only start-to-close and heartbeat timeouts are worth another attempt.
    return t === enums.TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE || t === enums.TimeoutType.TIMEOUT_TYPE_HEARTBEAT;
  }
  if (failure.serverFailureInfo) return !failure.serverFailureInfo.nonRetryable;
  const app = failure.applicationFailureInfo;
  if (app) {
    if (app.nonRetryable) return false;
    if (app.type && nonRetryable.includes(app.type)) return false;
  }
  return true;
}

export type RetryDecision = { retry: true; backoffMs: number } | { retry: false; state: number };

/**
 * What to do after attempt `attempt` failed with `failure`. `expiresAt` is the absolute time after
 * which no new attempt may start (schedule-to-close), if any.
 */
export function decideRetry(
  policy: RetryPolicyRecord | undefined,
  attempt: number,
  failure: IFailure | null | undefined,
  now: number,
  expiresAt?: number,
): RetryDecision {
  if (!policy) return { retry: false, state: RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET };
  if (!isRetryableFailure(failure, policy.nonRetryable)) {
    const t = failure?.timeoutFailureInfo?.timeoutType;
    const serverDeadline = t === enums.TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START || t === enums.TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE;
    return { retry: false, state: serverDeadline ? RetryState.RETRY_STATE_TIMEOUT : RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE };
  }
  if (policy.maxAttempts > 0 && attempt >= policy.maxAttempts) {
    return { retry: false, state: RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED };
  }
  const explicit = durToMs(failure?.applicationFailureInfo?.nextRetryDelay);
  let backoffMs: number;
  if (explicit > 0) {
    backoffMs = explicit;
  } else {
    backoffMs = policy.initialMs * Math.pow(policy.coefficient, Math.max(0, attempt - 1));
    if (policy.maxMs > 0 && (!Number.isFinite(backoffMs) || backoffMs > policy.maxMs)) backoffMs = policy.maxMs;
  }
  backoffMs = Math.round(backoffMs);
  if (expiresAt !== undefined && now + backoffMs > expiresAt) {
    return { retry: false, state: RetryState.RETRY_STATE_TIMEOUT };
  }
  return { retry: true, backoffMs };
}
