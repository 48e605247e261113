import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { badRequest } from '../../http/errors';
import type { Mailer } from '../../mail/transport';
import type { TemporalClient } from '../../../temporal/client';
import { workflowIds } from '../../../temporal/workflow-ids';
import { accountEmailWorkflow } from '../../../temporal/workflows/account-email';
import { acceptInvites } from './members.service';
import { hashPassword } from './passwords';

export type TokenPurpose = 'verify_email' | 'reset_password';

/** What an `account-email` workflow mails: a link with a token, or news of a project invitation. */
export type AccountEmail = { userId: string; purpose: TokenPurpose } | { invite: { email: string; projectId: string; role: string } };

const LIFETIME_HOURS: Record<TokenPurpose, number> = { verify_email: 48, reset_password: 1 };

const hashToken = (token: string) => crypto.createHash('sha256').update(token).digest('hex');

/**
 * Mails a user a link with a new token, from a `account-email:<id>` workflow run by a worker (the
 * process that holds the SMTP transport), retried until the SMTP server accepts it. The token is made
 * by the activity, so it appears nowhere but in the mail: not in the request, not in workflow history.
 */
export async function queueAccountEmail(temporal: TemporalClient, email: AccountEmail): Promise<void> {
  await temporal.client.workflow.start(accountEmailWorkflow, {
    workflowId: workflowIds.accountEmail(newId()),
    taskQueue: temporal.taskQueue,
    args: [email],
  });
}

type MailDeps = { mailer: Mailer; publicUrl: string; from: string };

async function mail(deps: MailDeps, to: string, subject: string, text: string): Promise<{ sent: boolean }> {
  const outcome = await deps.mailer.send({ from: deps.from, to, subject, text });
  if (outcome.kind !== 'sent') throw new Error(`account email not accepted: ${outcome.error}`);
  return { sent: true };
}

/** The activity's work: an invitation, or a fresh token (its hash stored) and the mail that carries it. */
export async function sendAccountEmail(em: EntityManager, deps: MailDeps, input: AccountEmail): Promise<{ sent: boolean }> {
  if ('invite' in input) {
    const [project] = await sql<{ name: string }>(em, `SELECT name FROM projects WHERE id = ?`, [input.invite.projectId]);
    if (!project) return { sent: false };
    return mail(
      deps,
      input.invite.email,
      `You are invited to ${project.name}`,
      `You have been added to the project "${project.name}" as ${input.invite.role}.\n\nSign in at ${deps.publicUrl} with ${input.invite.email}` +
        ` (or sign up with it and verify the address) to see it.`,
    );
  }
  const [user] = await sql<{ email: string; email_verified: boolean }>(em, `SELECT email, email_verified FROM users WHERE id = ?`, [input.userId]);
  if (!user || (input.purpose === 'verify_email' && user.email_verified)) return { sent: false };
  const token = crypto.randomBytes(32).toString('base64url');
  await sql(em, `INSERT INTO auth_tokens (token_hash, user_id, purpose, expires_at) VALUES (?, ?, ?, now() + make_interval(hours => ?))`, [
    hashToken(token),
    input.userId,
    input.purpose,
    LIFETIME_HOURS[input.purpose],
  ]);
  const link = `${deps.publicUrl}/${input.purpose === 'verify_email' ? 'verify-email' : 'reset-password'}?token=${token}`;
  const [subject, text] =
    input.purpose === 'verify_email'
      ? [
          'Verify your email address',
          `Confirm that ${user.email} is yours by opening this link within 48 hours:\n\n${link}\n\nIf you did not sign up, ignore this message.`,
        ]
      : [
          'Reset your password',
          `Someone asked to reset the password of ${user.email}. To choose a new one, open this link within an hour:\n\n${link}\n\nIf it was not you, ignore this message; your password stays as it is.`,
        ];
  return mail(deps, user.email, subject, text);
}

/** Uses a token once: answers its user, or 400 when it is unknown, used, expired or for something else. */
async function useToken(em: EntityManager, token: string, purpose: TokenPurpose): Promise<string> {
  const [row] = await sql<{ user_id: string }>(
    em,
    `UPDATE auth_tokens SET used_at = now() WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > now() RETURNING user_id`,
    [hashToken(token), purpose],
  );
  if (!row) throw badRequest('This link is invalid, expired or already used', 'INVALID_TOKEN');
  return row.user_id;
}

export async function verifyEmail(em: EntityManager, token: string): Promise<string> {
  return transaction(em, async (tx) => {
    const userId = await useToken(tx, token, 'verify_email');
    await sql(tx, `UPDATE users SET email_verified = true, updated_at = now() WHERE id = ?`, [userId]);
    await acceptInvites(tx, userId);
    return userId;
  });
}

/** Sets the new password; every other reset link of the user stops working. */
export async function resetPassword(em: EntityManager, token: string, password: string): Promise<string> {
  const hash = await hashPassword(password);
  return transaction(em, async (tx) => {
    const userId = await useToken(tx, token, 'reset_password');
    await sql(tx, `UPDATE users SET password_hash = ?, updated_at = now() WHERE id = ?`, [hash, userId]);
    await sql(tx, `UPDATE auth_tokens SET used_at = now() WHERE user_id = ? AND purpose = 'reset_password' AND used_at IS NULL`, [userId]);
    return userId;
  });
}

export async function userIdByEmail(em: EntityManager, email: string): Promise<string | undefined> {
  const [row] = await sql<{ id: string }>(em, `SELECT id FROM users WHERE email = ?`, [email]);
  return row?.id;
}
