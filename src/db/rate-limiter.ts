/** Per-project rate limits shared by every process through PostgreSQL: the HTTP API and SMTP submission use them. */
import type { EntityManager, Orm } from './orm';
import { RateLimitWindowSchema } from './rate-limit-windows.entity';
import { RateLimitKeyWindowSchema } from './rate-limit-key-windows.entity';
import { countInKeyWindow, reserveInKeyWindow, reserveInWindow } from './rate-limiter.queries';

const WINDOW_MS = 60_000;
const MAX_BLOCK = 256;

interface Allowance {
  window: number;
  /** Requests this process may still admit in this window without asking the database. */
  tokens: number;
  /** How many we ask for next time; grows while traffic is steady so the database sees few writes. */
  block: number;
  /** The shared counter after our last reservation. */
  counted: number;
  exhausted: boolean;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/**
 * A fixed one-minute window per project, shared by every API process through one counter row in
 * PostgreSQL. Each process reserves tokens in blocks (1, 2, 4 ... at most 1% of the limit), so a busy
 * project costs one write per block rather than per request; a block is never larger than what is
 * left, so all processes together never admit more than the limit. Tokens a process reserved but
 * did not use expire with the window, which can only make the limit stricter, never looser.
 */
export class RateLimiter {
  private readonly allowances = new Map<string, Allowance>();
  private readonly inflight = new Map<string, Promise<void>>();

  constructor(
    private readonly orm: Orm,
    readonly limit: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * One request of a project, or of one `key` of it (a budget of its own: the public key's, one client
   * address's), each counted apart from the others and from the project's own.
   */
  async take(projectId: string, key?: string): Promise<RateDecision> {
    const window = Math.floor(this.now() / WINDOW_MS);
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - this.now()) / 1000));
    const id = key === undefined ? projectId : `${projectId} ${key}`;
    let a = this.allowances.get(id);
    if (!a || a.window !== window) {
      if (!a) this.forgetEnded(window);
      a = { window, tokens: 0, block: 1, counted: 0, exhausted: false };
      this.allowances.set(id, a);
    }
    while (a.tokens === 0 && !a.exhausted) {
      // One reservation at a time per budget; concurrent requests wait for it and share its block.
      const pending = this.inflight.get(id) ?? this.reserve(projectId, key, a);
      this.inflight.set(id, pending);
      await pending.finally(() => this.inflight.delete(id));
    }
    const remaining = (n: number) => Math.max(0, this.limit - a.counted) + n;
    if (a.tokens > 0) {
      a.tokens -= 1;
      return { allowed: true, limit: this.limit, remaining: remaining(a.tokens), resetSeconds };
    }
    return { allowed: false, limit: this.limit, remaining: 0, resetSeconds };
  }

  /** Budgets keyed by client come and go: those of ended windows are dropped once there are many. */
  private forgetEnded(window: number): void {
    if (this.allowances.size < 4096) return;
    for (const [id, a] of this.allowances) if (a.window < window && !this.inflight.has(id)) this.allowances.delete(id);
  }

  private async reserve(projectId: string, key: string | undefined, a: Allowance): Promise<void> {
    const want = Math.max(1, Math.min(a.block, MAX_BLOCK, Math.floor(this.limit / 100)));
    const start = (a.window * WINDOW_MS) / 1000;
    const em = this.orm.em.fork();
    const after = key === undefined ? await reserveInWindow(em, projectId, start, want) : await reserveInKeyWindow(em, projectId, key, start, want);
    const before = after - want;
    const granted = Math.max(0, Math.min(want, this.limit - before));
    a.counted = Math.min(after, this.limit);
    a.tokens += granted;
    if (granted < want) a.exhausted = true;
    a.block = Math.min(a.block * 2, MAX_BLOCK);
  }
}

/** Drops windows that ended; any process may run it. */
export async function purgeRateLimitWindows(em: EntityManager): Promise<number> {
  return em.nativeDelete(RateLimitWindowSchema, { windowStart: { $lt: new Date(Date.now() - 2 * 60_000) } });
}

/** A limit of `limit` requests per `windowSeconds` for one key of a project (an IP address, an email address). */
export interface KeyLimit {
  limit: number;
  windowSeconds: number;
}

/**
 * Counts one request for `key` in its current fixed window, shared by every process through PostgreSQL;
 * answers whether it is within the limit and when the window ends. For low-volume unauthenticated forms,
 * so one write per request (no blocks reserved as the project limiter does).
 */
export async function takeKeyed(em: EntityManager, projectId: string, key: string, l: KeyLimit, now = Date.now()): Promise<RateDecision> {
  const windowMs = l.windowSeconds * 1000;
  const window = Math.floor(now / windowMs);
  const count = await countInKeyWindow(em, projectId, key, (window * windowMs) / 1000);
  const resetSeconds = Math.max(1, Math.ceil(((window + 1) * windowMs - now) / 1000));
  return { allowed: count <= l.limit, limit: l.limit, remaining: Math.max(0, l.limit - count), resetSeconds };
}

/** Drops keyed windows that started more than a day ago (no keyed limit has a longer window). */
export async function purgeRateLimitKeyWindows(em: EntityManager): Promise<number> {
  return em.nativeDelete(RateLimitKeyWindowSchema, { windowStart: { $lt: new Date(Date.now() - 24 * 3600_000) } });
}
