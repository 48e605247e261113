import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';

export const SUPPRESSION_REASONS = ['BOUNCE', 'COMPLAINT', 'MANUAL'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

export const RULE_KINDS = ['ADDRESS', 'DOMAIN', 'PREFIX', 'SUFFIX', 'WILDCARD'] as const;
export type RuleKind = (typeof RULE_KINDS)[number];

/**
 * An address the project sends nothing to, whatever its contact's subscription says: put there by a
 * hard bounce, the soft-bounce limit, a complaint, or by hand. Only `DELETE /suppressions/:email` lifts it.
 */
export class Suppression {
  [OptionalProps]?: 'emailId' | 'detail' | 'createdAt';
  projectId!: string;
  /** Lower case, as every address is stored. */
  email!: string;
  reason!: SuppressionReason;
  /** The email whose report put the address here. */
  emailId: string | null = null;
  /** What that report said (a diagnostic, the soft-bounce limit), or where a manual entry came from. */
  detail: string | null = null;
  createdAt!: Date;
}

/** A pattern of addresses the project sends nothing to, in Plunk v2's shape: no regular expressions. */
export class SuppressionRule {
  [OptionalProps]?: 'enabled' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  kind!: RuleKind;
  /** As the client wrote it, lower-cased. */
  pattern!: string;
  /** The same pattern as a LIKE pattern over the whole address, made once when the rule is written (`likePatternOf`). */
  likePattern!: string;
  enabled = true;
  createdAt!: Date;
  updatedAt!: Date;
}

export const SuppressionSchema = new EntitySchema<Suppression>({
  class: Suppression,
  tableName: 'suppressions',
  // The list page, newest first; a lookup by address uses the primary key.
  indexes: [{ name: 'suppressions_project_created_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    projectId: cascadingReference('suppressions', 'project_id', 'Project', { primary: true }),
    email: { type: 'text', primary: true },
    reason: { enum: true, items: [...SUPPRESSION_REASONS], type: 'text' },
    // No foreign key: the entry outlives the email that made it (purges, a deleted contact).
    emailId: { type: 'uuid', nullable: true },
    detail: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
  },
});

export const SuppressionRuleSchema = new EntitySchema<SuppressionRule>({
  class: SuppressionRule,
  tableName: 'suppression_rules',
  indexes: [{ name: 'suppression_rules_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('suppression_rules', 'project_id', 'Project'),
    name: { type: 'text' },
    kind: { enum: true, items: [...RULE_KINDS], type: 'text' },
    pattern: { type: 'text' },
    likePattern: { type: 'text' },
    enabled: { type: 'boolean', default: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
