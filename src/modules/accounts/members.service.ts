import { LockMode, UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { transaction } from '../../db/orm';
import { conflict, forbidden, notFound } from '../../errors';
import { ProjectInvite, ProjectMember, type Role, User } from './accounts.entity';

export interface MemberDto {
  /** The user's id, or the invitation's while it waits for the address to be verified. */
  id: string;
  userId: string | null;
  email: string;
  role: Role;
  status: 'ACTIVE' | 'INVITED';
  createdAt: string;
}

const activeDto = (m: ProjectMember, email: string): MemberDto => ({
  id: m.userId,
  userId: m.userId,
  email,
  role: m.role,
  status: 'ACTIVE',
  createdAt: m.createdAt.toISOString(),
});

const invitedDto = (i: ProjectInvite): MemberDto => ({
  id: i.id,
  userId: null,
  email: i.email,
  role: i.role,
  status: 'INVITED',
  createdAt: i.createdAt.toISOString(),
});

/** Members and invitations together, oldest first (then by address). */
export async function listMembers(em: EntityManager, projectId: string): Promise<MemberDto[]> {
  const members = await em.find(ProjectMember, { projectId });
  const invites = await em.find(ProjectInvite, { projectId });
  const users = await em.find(User, { id: { $in: members.map((m) => m.userId) } });
  const emails = new Map(users.map((u) => [u.id, u.email]));
  const all = [...members.filter((m) => emails.has(m.userId)).map((m) => activeDto(m, emails.get(m.userId)!)), ...invites.map(invitedDto)];
  return all.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || (a.email < b.email ? -1 : a.email > b.email ? 1 : 0));
}

/** Only an OWNER gives or takes the OWNER role; OWNER and ADMIN manage everyone else. */
function mayManage(actor: Role, targetRole: Role, newRole?: Role): void {
  if (actor === 'MEMBER') throw forbidden('Your role (MEMBER) cannot manage members', 'INSUFFICIENT_ROLE');
  if (actor !== 'OWNER' && (targetRole === 'OWNER' || newRole === 'OWNER')) {
    throw forbidden(`Your role (${actor}) cannot give or take the OWNER role`, 'INSUFFICIENT_ROLE');
  }
}

/**
 * Adds a verified account at once; otherwise records an invitation that becomes a membership when
 * that address is verified (so nobody joins by signing up with someone else's address).
 */
export async function inviteMember(em: EntityManager, projectId: string, actor: Role, invitedBy: string, email: string, role: Role): Promise<MemberDto> {
  mayManage(actor, role, role);
  return transaction(em, async (tx) => {
    const user = await tx.findOne(User, { email });
    if (user && (await tx.count(ProjectMember, { projectId, userId: user.id }))) {
      throw conflict('This user is already a member of the project', 'ALREADY_MEMBER');
    }
    if (user?.emailVerified) {
      const member = tx.create(ProjectMember, { projectId, userId: user.id, role });
      await tx.flush();
      return activeDto(member, email);
    }
    const invite = tx.create(ProjectInvite, { id: newId(), projectId, email, role, invitedBy });
    try {
      await tx.flush();
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw conflict('This address is already invited to the project', 'ALREADY_INVITED');
      throw err;
    }
    return invitedDto(invite);
  });
}

/**
 * The project's members, each row locked until the transaction ends, so two demotions or removals
 * cannot both see another OWNER left.
 */
const lockMembers = (tx: EntityManager, projectId: string) => tx.find(ProjectMember, { projectId }, { lockMode: LockMode.PESSIMISTIC_WRITE });

const isLastOwner = (members: ProjectMember[], member: ProjectMember) => member.role === 'OWNER' && members.filter((m) => m.role === 'OWNER').length === 1;

/** Changes a member's (or an invitation's) role; a project always keeps an OWNER. */
export async function changeRole(em: EntityManager, projectId: string, actor: Role, id: string, role: Role): Promise<void> {
  await transaction(em, async (tx) => {
    const members = await lockMembers(tx, projectId);
    const member = members.find((m) => m.userId === id);
    if (member) {
      mayManage(actor, member.role, role);
      if (role !== 'OWNER' && isLastOwner(members, member)) {
        throw conflict('The last OWNER of a project keeps that role; make someone else OWNER first', 'LAST_OWNER');
      }
      member.role = role;
      return;
    }
    const invite = await tx.findOne(ProjectInvite, { projectId, id });
    if (!invite) throw notFound('Member');
    mayManage(actor, invite.role, role);
    invite.role = role;
  });
}

/** Removes a member or withdraws an invitation; anyone may leave, except the last OWNER. */
export async function removeMember(em: EntityManager, projectId: string, actor: { userId: string; role: Role }, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    const members = await lockMembers(tx, projectId);
    const member = members.find((m) => m.userId === id);
    if (member) {
      if (id !== actor.userId) mayManage(actor.role, member.role);
      if (isLastOwner(members, member)) {
        throw conflict('The last OWNER of a project cannot be removed; make someone else OWNER first', 'LAST_OWNER');
      }
      tx.remove(member);
      return;
    }
    const invite = await tx.findOne(ProjectInvite, { projectId, id });
    if (!invite) throw notFound('Member');
    mayManage(actor.role, invite.role);
    tx.remove(invite);
  });
}

/** Called when an address is verified: its invitations become memberships (a membership already there stays as it is). */
export async function acceptInvites(tx: EntityManager, user: User): Promise<void> {
  const invites = await tx.find(ProjectInvite, { email: user.email });
  if (!invites.length) return;
  await tx
    .createQueryBuilder(ProjectMember)
    .insert(invites.map((i) => ({ projectId: i.projectId, userId: user.id, role: i.role })))
    .onConflict()
    .ignore();
  // By id: an invitation made meanwhile waits for the next verification rather than vanishing.
  await tx.nativeDelete(ProjectInvite, { id: { $in: invites.map((i) => i.id) } });
}
