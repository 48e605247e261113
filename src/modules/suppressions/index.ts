/** The suppressions module's public surface: the only file other modules import. */
export { Suppression, SuppressionRule, SuppressionRuleSchema, SuppressionSchema } from './suppressions.entity';
export type { SuppressionReason } from './suppressions.entity';
export { notSuppressedWhere, suppressedAmong, suppressionOf } from './suppressions.queries';
export type { SuppressionVerdict } from './suppressions.queries';
export { suppressAutomatically } from './suppressions.service';
export { SuppressionImportSchema } from './suppression-imports.entity';
export { importNextSuppressionSlice } from './suppression-imports';
export { suppressionRoutes } from './suppressions.routes';
