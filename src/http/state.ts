import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
// Brings koa-body's `ctx.request.body` / `files` typings.
import type {} from 'koa-body';
import type { Role } from '../modules/accounts';
import type { IdempotencyClaim } from '../db/idempotency-keys';

export interface AuthedProject {
  id: string;
  keyKind: 'public' | 'secret';
}

export interface AuthedUser {
  id: string;
  email: string;
}

/** Per-request facts, set by middleware and read by routes. */
declare module 'koa' {
  interface DefaultState {
    requestId: string;
    log: Logger;
    em: EntityManager;
    project?: AuthedProject;
    user?: AuthedUser;
    role?: Role;
    /** The Idempotency-Key this request claimed, for handlers that record their outcome with their writes. */
    idempotency?: IdempotencyClaim;
  }
}
