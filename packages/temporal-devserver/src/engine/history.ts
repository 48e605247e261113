/**
 * History event vocabulary: which attribute field goes with which event type, which events wait in
 * the buffer while a workflow task is running, and the reordering applied when the buffer is
 * flushed (completions after everything else, as Temporal's history builder does).
 */
import { enums, root, type IHistoryEvent } from '../proto';

export const EventType = enums.EventType;
export type EventTypeValue = number;

const eventTypeEnum = root.lookupEnum('temporal.api.enums.v1.EventType');
const attrKeys = new Map<number, string>();
for (const [id, name] of Object.entries(eventTypeEnum.valuesById)) {
  const camel = name
    .replace(/^EVENT_TYPE_/, '')
    .toLowerCase()
    .replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  attrKeys.set(Number(id), `${camel}EventAttributes`);
}

/** The HistoryEvent field holding the attributes of `type`, e.g. `timerFiredEventAttributes`. */
export function attributesKey(type: EventTypeValue): string {
  const key = attrKeys.get(type);
  if (!key) throw new Error(`unknown event type ${type}`);
  return key;
}

/** The attributes object of a decoded event, whatever its type. */
export function attributesOf<T = Record<string, unknown>>(event: IHistoryEvent): T {
  return (event as Record<string, unknown>)[attributesKey(event.eventType as number)] as T;
}

/**
 * Events caused by the outside world (signals, results, fired timers...) while a workflow task is
 * running go to the buffer; events the workflow itself causes, workflow-task events and the
 * events that close the run never do.
 */
export function isBufferable(type: EventTypeValue): boolean {
  switch (type) {
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
    case EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
    case EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
    case EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
    case EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
    case EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
    case EventType.EVENT_TYPE_TIMER_STARTED:
    case EventType.EVENT_TYPE_TIMER_CANCELED:
    case EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
    case EventType.EVENT_TYPE_MARKER_RECORDED:
    case EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
    case EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
    case EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
    case EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
      return false;
    default:
      return true;
  }
}

/** Buffered events that go last on flush, after the Started events they refer to. */
export function isDeferredOnFlush(type: EventTypeValue): boolean {
  switch (type) {
    case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT:
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED:
    case EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED:
      return true;
    default:
      return false;
  }
}
