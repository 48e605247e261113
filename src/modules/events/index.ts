/** The events module's public surface: the only file other modules import. */
export { ContactEventSchema } from './events.entity';
export { SEGMENT_MEMBERSHIP, SYSTEM_EVENTS, isReservedEventName } from './event-names';
export { eventNameSchema } from './events.schemas';
export { insertEvents, insertEventsTogether, toEventRecord } from './events.store';
export type { EventRecord, EventRow, NewEvent } from './events.store';
export { TrackBatcher } from './track-batcher';
export { eventPageFilter } from './events.service';
export { eventRoutes } from './events.routes';
