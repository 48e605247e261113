import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { transaction } from '../../db/orm';
import { badRequest } from '../../errors';
import type { Mailer } from '../../mail/transport';
import type { WorkflowStarter } from '../workflow-starter';
import { AuthToken, Project, type Role, User } from './accounts.entity';
import { useToken } from './accounts.queries';
import { getUser, signup } from './accounts.service';
import { acceptInvites, inviteMember, type MemberDto } from './members.service';
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
export async function queueAccountEmail(temporal: WorkflowStarter, email: AccountEmail): Promise<void> {
  await temporal.queueAccountEmail(email);
}

/** `POST /auth/signup`: the account created, then its verification mail queued; signing up never depends on the mail. */
export async function signupAndVerify(em: EntityManager, temporal: WorkflowStarter, log: Logger, email: string, password: string): Promise<User> {
  const user = await signup(em, email, password);
  await queueAccountEmail(temporal, { userId: user.id, purpose: 'verify_email' }).catch((err) =>
    log.warn({ err, userId: user.id }, 'could not queue the verification email'),
  );
  return user;
}

/** `POST /auth/request-verification`: the verification mail queued again, or 400 ALREADY_VERIFIED. */
export async function requestVerification(em: EntityManager, temporal: WorkflowStarter, userId: string): Promise<void> {
  const user = await getUser(em, userId);
  if (user.emailVerified) throw badRequest('This email address is already verified', 'ALREADY_VERIFIED');
  await queueAccountEmail(temporal, { userId: user.id, purpose: 'verify_email' });
}

/** `POST /auth/request-password-reset`: a reset mail queued when the address has an account; nothing otherwise. */
export async function requestPasswordReset(em: EntityManager, temporal: WorkflowStarter, email: string): Promise<void> {
  const userId = await userIdByEmail(em, email);
  if (userId) await queueAccountEmail(temporal, { userId, purpose: 'reset_password' });
}

/**
 * `POST /projects/:id/members`: adds or invites the address (`inviteMember`), then queues the mail that
 * tells them. The member stays added when the mail cannot be queued; that is logged, not answered.
 */
export async function inviteMemberByEmail(
  em: EntityManager,
  temporal: WorkflowStarter,
  log: Logger,
  projectId: string,
  actor: { userId: string; role: Role },
  invite: { email: string; role: Role },
): Promise<MemberDto> {
  const member = await inviteMember(em, projectId, actor.role, actor.userId, invite.email, invite.role);
  await queueAccountEmail(temporal, { invite: { email: invite.email, projectId, role: invite.role } }).catch((err) =>
    log.warn({ err, projectId }, 'could not queue the invitation email'),
  );
  return member;
}

type MailDeps = { mailer: Mailer; publicUrl: string; from: string };

/** Straight to the account mailer, past every project's suppression list: the service's own mail to its users (docs/api.md#suppressions). */
async function mail(deps: MailDeps, to: string, subject: string, text: string): Promise<{ sent: boolean }> {
  const outcome = await deps.mailer.send({ from: deps.from, to, subject, text });
  if (outcome.kind !== 'sent') throw new Error(`account email not accepted: ${outcome.error}`);
  return { sent: true };
}

/** The activity's work: an invitation, or a fresh token (its hash stored) and the mail that carries it. */
export async function sendAccountEmail(em: EntityManager, deps: MailDeps, input: AccountEmail): Promise<{ sent: boolean }> {
  if ('invite' in input) {
    const project = await em.findOne(Project, { id: input.invite.projectId });
    if (!project) return { sent: false };
    return mail(
      deps,
      input.invite.email,
      `You are invited to ${project.name}`,
      `You have been added to the project "${project.name}" as ${input.invite.role}.\n\nSign in at ${deps.publicUrl} with ${input.invite.email}` +
        ` (or sign up with it and verify the address) to see it.`,
    );
  }
  const user = await em.findOne(User, { id: input.userId });
  if (!user || (input.purpose === 'verify_email' && user.emailVerified)) return { sent: false };
  const token = crypto.randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + LIFETIME_HOURS[input.purpose] * 3600_000);
  em.create(AuthToken, { tokenHash: hashToken(token), userId: input.userId, purpose: input.purpose, expiresAt });
  await em.flush();
  const link = `${deps.publicUrl}/${input.purpose === 'verify_email' ? 'verify-email' : 'reset-password'}?token=${token}`;
  const [subject, text] =
    input.purpose === 'verify_email'
      ? [
          'Verify your email address',
          `Confirm that ${user.email} is yours by opening this link within 48 hours:\n\n${link}\n\nIf you did not sign up, ignore this message.`,
        ]
      : [
          'Reset your password',
          `Someone asked to reset the password of ${user.email}. ` +
            `To choose a new one, open this link within an hour:\n\n${link}` +
            `\n\nIf it was not you, ignore this message; your password stays as it is.`,
        ];
  return mail(deps, user.email, subject, text);
}

/** Uses a token once: answers its user, or 400 when it is unknown, used, expired or for something else. */
async function usedToken(tx: EntityManager, token: string, purpose: TokenPurpose): Promise<User> {
  const userId = await useToken(tx, hashToken(token), purpose);
  if (!userId) throw badRequest('This link is invalid, expired or already used', 'INVALID_TOKEN');
  return tx.findOneOrFail(User, { id: userId });
}

export async function verifyEmail(em: EntityManager, token: string): Promise<string> {
  return transaction(em, async (tx) => {
    const user = await usedToken(tx, token, 'verify_email');
    user.emailVerified = true;
    await acceptInvites(tx, user);
    return user.id;
  });
}

/** Sets the new password; every other reset link of the user stops working. */
export async function resetPassword(em: EntityManager, token: string, password: string): Promise<string> {
  const hash = await hashPassword(password);
  return transaction(em, async (tx) => {
    const user = await usedToken(tx, token, 'reset_password');
    user.passwordHash = hash;
    await tx.nativeUpdate(AuthToken, { userId: user.id, purpose: 'reset_password', usedAt: null }, { usedAt: new Date() });
    return user.id;
  });
}

async function userIdByEmail(em: EntityManager, email: string): Promise<string | undefined> {
  const user = await em.findOne(User, { email });
  return user?.id;
}
