import type { EntitySchema } from '@mikro-orm/core';
import { accountEntities } from './accounts';
import { DomainSchema } from './domains';
import { TemplateSchema } from './templates';

/** Every module's entity schemas, as createOrm registers them with MikroORM. */
export const entities: EntitySchema[] = [...accountEntities, DomainSchema, TemplateSchema];
