/** The events module's public surface: the only file other modules import. */
export { ContactEventSchema } from './events.entity';
export { SEGMENT_MEMBERSHIP, SYSTEM_EVENTS, isReservedEventName } from './event-names';
export { eventNameSchema } from './events.schemas';
export { insertEvents, insertEventsTogether } from './events.store';
export type { EventRecord, NewEvent } from './events.store';
export { EVENT_RECORD_COLUMNS, eventPageFilter, toEventRecord } from './events.queries';
export type { ReturnedEvent } from './events.queries';
export { TrackBatcher } from './track-batcher';
export { eventRoutes } from './events.routes';
