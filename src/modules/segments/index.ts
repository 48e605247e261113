/** The segments module's public surface: the only file other modules import. */
export { Segment, SegmentMembershipSchema, SegmentSchema } from './segments.entity';
export { conditionInput, conditionTree } from './segments.schemas';
export { compileCondition } from './conditions/compile';
export { evaluateCondition } from './conditions/evaluate';
export { loadContactFacts, loadSegmentRefs } from './conditions/facts';
export { ConditionError, eventNamesOf, resolveFilter } from './conditions/tree';
export type { ConditionTree, Filter } from './conditions/tree';
export { LiveMembership } from './live-membership';
export { checkCondition, computeMembership, refreshCount } from './segments.service';
export { membersWhere } from './segments.queries';
export { segmentRoutes } from './segments.routes';
