import crypto from 'node:crypto';
import { UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { transaction } from '../../db/orm';
import { AppError, conflict, forbidden, notFound, unauthorized } from '../../errors';
import { Project, ProjectMember, type Role, User } from './accounts.entity';
import { DUMMY_HASH, hashPassword, needsRehash, verifyPassword } from './passwords';
import { type ProjectSettings, withDefaults } from './project-settings';

/** `pk_` / `sk_` followed by 48 hex characters (24 random bytes). */
export const generateKey = (prefix: 'pk_' | 'sk_') => prefix + crypto.randomBytes(24).toString('hex');

export const toUserDto = (u: User) => ({
  id: u.id,
  email: u.email,
  emailVerified: u.emailVerified,
  createdAt: u.createdAt.toISOString(),
  updatedAt: u.updatedAt.toISOString(),
});

export const toProjectDto = (p: Project, role?: Role) => ({
  id: p.id,
  name: p.name,
  publicKey: p.publicKey,
  secretKey: p.secretKey,
  disabled: p.disabled,
  disabledReason: p.disabledReason,
  settings: withDefaults(p.settings),
  tracking: { opens: withDefaults(p.settings).trackOpens, clicks: withDefaults(p.settings).trackClicks },
  createdAt: p.createdAt.toISOString(),
  updatedAt: p.updatedAt.toISOString(),
  ...(role ? { role } : {}),
});

export async function signup(em: EntityManager, email: string, password: string): Promise<User> {
  const user = em.create(User, { id: newId(), email, passwordHash: await hashPassword(password) });
  try {
    await em.persistAndFlush(user);
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) {
      throw conflict('An account with this email already exists', 'EMAIL_TAKEN');
    }
    throw err;
  }
  return user;
}

export async function login(em: EntityManager, email: string, password: string): Promise<User> {
  const user = await em.findOne(User, { email });
  // Verify against a dummy hash when the user is unknown so both paths take the same time.
  const ok = await verifyPassword(password, user?.passwordHash ?? DUMMY_HASH);
  if (!user || !ok) throw unauthorized('Email or password is incorrect', 'INVALID_CREDENTIALS');
  // The password is at hand only now: a hash made with older, weaker parameters is replaced.
  if (needsRehash(user.passwordHash)) {
    user.passwordHash = await hashPassword(password);
    await em.flush();
  }
  return user;
}

export async function getUser(em: EntityManager, id: string): Promise<User> {
  const user = await em.findOne(User, { id });
  if (!user) throw notFound('User');
  return user;
}

/** Who a session's token names, while that account exists. */
export async function sessionUser(em: EntityManager, id: string): Promise<{ id: string; email: string } | undefined> {
  const user = await em.findOne(User, { id });
  return user ? { id: user.id, email: user.email } : undefined;
}

export async function listProjects(em: EntityManager, userId: string) {
  const memberships = await em.find(ProjectMember, { userId }, { orderBy: { createdAt: 'asc' } });
  const projects = await em.find(Project, { id: { $in: memberships.map((m) => m.projectId) } });
  const byId = new Map(projects.map((p) => [p.id, p]));
  return memberships.filter((m) => byId.has(m.projectId)).map((m) => toProjectDto(byId.get(m.projectId)!, m.role));
}

export async function createProject(em: EntityManager, userId: string, name: string) {
  const project = em.create(Project, {
    id: newId(),
    name,
    publicKey: generateKey('pk_'),
    secretKey: generateKey('sk_'),
  });
  // Members reference projects by a plain column, so the project row must exist first.
  await transaction(em, async (tx) => {
    tx.persist(project);
    await tx.flush();
    tx.persist(tx.create(ProjectMember, { projectId: project.id, userId, role: 'OWNER' }));
  });
  return toProjectDto(project, 'OWNER');
}

/** The caller's membership of a project; 404 when there is none, so other projects stay invisible. */
export async function membership(em: EntityManager, userId: string, projectId: string): Promise<Role> {
  const member = await em.findOne(ProjectMember, { userId, projectId });
  if (!member) throw notFound('Project');
  return member.role;
}

export function requireRole(role: Role, allowed: Role[], action: string): void {
  if (!allowed.includes(role)) throw forbidden(`Your role (${role}) cannot ${action}`, 'INSUFFICIENT_ROLE');
}

export async function updateProject(
  em: EntityManager,
  projectId: string,
  patch: { name?: string; settings?: Partial<ProjectSettings>; tracking?: { opens?: boolean; clicks?: boolean } },
  role: Role,
) {
  const project = await em.findOneOrFail(Project, { id: projectId });
  const templateId = patch.settings?.confirmationTemplateId;
  // By the entity's name: the templates module imports this one.
  if (templateId && (await em.count('Template', { projectId, id: templateId })) === 0) {
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
      errors: [{ field: 'settings.confirmationTemplateId', message: 'No such template in the project', code: 'not_found' }],
    });
  }
  if (patch.name !== undefined) project.name = patch.name;
  const tracking = patch.tracking ? { trackOpens: patch.tracking.opens, trackClicks: patch.tracking.clicks } : {};
  const changes = Object.fromEntries(Object.entries({ ...patch.settings, ...tracking }).filter(([, v]) => v !== undefined));
  if (Object.keys(changes).length) project.settings = { ...withDefaults(project.settings), ...changes };
  await em.flush();
  return toProjectDto(project, role);
}

/** Both keys at once; every API process drops the old ones when this commits (projects trigger). */
export async function regenerateKeys(em: EntityManager, projectId: string, role: Role) {
  const project = await em.findOneOrFail(Project, { id: projectId });
  project.publicKey = generateKey('pk_');
  project.secretKey = generateKey('sk_');
  await em.flush();
  return toProjectDto(project, role);
}
