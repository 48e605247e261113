import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { conflict, forbidden, notFound } from '../../http/errors';
import type { Role } from './accounts.entity';

export interface MemberDto {
  /** The user's id, or the invitation's while it waits for the address to be verified. */
  id: string;
  userId: string | null;
  email: string;
  role: Role;
  status: 'ACTIVE' | 'INVITED';
  createdAt: string;
}

export async function listMembers(em: EntityManager, projectId: string): Promise<MemberDto[]> {
  const rows = await sql<{ id: string; user_id: string | null; email: string; role: Role; status: 'ACTIVE' | 'INVITED'; created_at: Date }>(
    em,
    `SELECT u.id, u.id AS user_id, u.email, m.role, 'ACTIVE' AS status, m.created_at FROM project_members m JOIN users u ON u.id = m.user_id WHERE m.project_id = ?
     UNION ALL
     SELECT i.id, NULL, i.email, i.role, 'INVITED', i.created_at FROM project_invites i WHERE i.project_id = ?
     ORDER BY created_at, email`,
    [projectId, projectId],
  );
  return rows.map((r) => ({ id: r.id, userId: r.user_id, email: r.email, role: r.role, status: r.status, createdAt: new Date(r.created_at).toISOString() }));
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
    const [user] = await sql<{ id: string; email_verified: boolean }>(tx, `SELECT id, email_verified FROM users WHERE email = ?`, [email]);
    if (user) {
      const [existing] = await sql(tx, `SELECT 1 FROM project_members WHERE project_id = ? AND user_id = ?`, [projectId, user.id]);
      if (existing) throw conflict('This user is already a member of the project', 'ALREADY_MEMBER');
    }
    if (user?.email_verified) {
      const [m] = await sql<{ created_at: Date }>(tx, `INSERT INTO project_members (project_id, user_id, role) VALUES (?, ?, ?) RETURNING created_at`, [
        projectId,
        user.id,
        role,
      ]);
      return { id: user.id, userId: user.id, email, role, status: 'ACTIVE', createdAt: new Date(m.created_at).toISOString() };
    }
    const [invite] = await sql<{ id: string; created_at: Date }>(
      tx,
      `INSERT INTO project_invites (id, project_id, email, role, invited_by) VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, email) DO NOTHING RETURNING id, created_at`,
      [newId(), projectId, email, role, invitedBy],
    );
    if (!invite) throw conflict('This address is already invited to the project', 'ALREADY_INVITED');
    return { id: invite.id, userId: null, email, role, status: 'INVITED', createdAt: new Date(invite.created_at).toISOString() };
  });
}

async function ownersOf(tx: EntityManager, projectId: string): Promise<number> {
  const [{ n }] = await sql<{ n: number }>(tx, `SELECT count(*)::int AS n FROM project_members WHERE project_id = ? AND role = 'OWNER'`, [projectId]);
  return n;
}

/** Changes a member's (or an invitation's) role; a project always keeps an OWNER. */
export async function changeRole(em: EntityManager, projectId: string, actor: Role, id: string, role: Role): Promise<void> {
  await transaction(em, async (tx) => {
    // Members are locked first so two demotions cannot both see another OWNER left.
    await sql(tx, `SELECT 1 FROM project_members WHERE project_id = ? FOR UPDATE`, [projectId]);
    const [member] = await sql<{ role: Role }>(tx, `SELECT role FROM project_members WHERE project_id = ? AND user_id = ?`, [projectId, id]);
    if (member) {
      mayManage(actor, member.role, role);
      if (member.role === 'OWNER' && role !== 'OWNER' && (await ownersOf(tx, projectId)) === 1) {
        throw conflict('The last OWNER of a project keeps that role; make someone else OWNER first', 'LAST_OWNER');
      }
      await sql(tx, `UPDATE project_members SET role = ? WHERE project_id = ? AND user_id = ?`, [role, projectId, id]);
      return;
    }
    const [invite] = await sql<{ role: Role }>(tx, `SELECT role FROM project_invites WHERE project_id = ? AND id = ?`, [projectId, id]);
    if (!invite) throw notFound('Member');
    mayManage(actor, invite.role, role);
    await sql(tx, `UPDATE project_invites SET role = ? WHERE id = ?`, [role, id]);
  });
}

/** Removes a member or withdraws an invitation; anyone may leave, except the last OWNER. */
export async function removeMember(em: EntityManager, projectId: string, actor: { userId: string; role: Role }, id: string): Promise<void> {
  await transaction(em, async (tx) => {
    await sql(tx, `SELECT 1 FROM project_members WHERE project_id = ? FOR UPDATE`, [projectId]);
    const [member] = await sql<{ role: Role }>(tx, `SELECT role FROM project_members WHERE project_id = ? AND user_id = ?`, [projectId, id]);
    if (member) {
      if (id !== actor.userId) mayManage(actor.role, member.role);
      if (member.role === 'OWNER' && (await ownersOf(tx, projectId)) === 1) {
        throw conflict('The last OWNER of a project cannot be removed; make someone else OWNER first', 'LAST_OWNER');
      }
      await sql(tx, `DELETE FROM project_members WHERE project_id = ? AND user_id = ?`, [projectId, id]);
      return;
    }
    const [invite] = await sql<{ role: Role }>(tx, `SELECT role FROM project_invites WHERE project_id = ? AND id = ?`, [projectId, id]);
    if (!invite) throw notFound('Member');
    mayManage(actor.role, invite.role);
    await sql(tx, `DELETE FROM project_invites WHERE id = ?`, [id]);
  });
}

/** Called when an address is verified: its invitations become memberships. */
export async function acceptInvites(tx: EntityManager, userId: string): Promise<void> {
  await sql(
    tx,
    `WITH i AS (DELETE FROM project_invites WHERE email = (SELECT email FROM users WHERE id = ?) RETURNING project_id, role)
     INSERT INTO project_members (project_id, user_id, role) SELECT project_id, ?, role FROM i ON CONFLICT DO NOTHING`,
    [userId, userId],
  );
}
