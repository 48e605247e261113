/**
 * The conformance suite with a worker that caches no workflow: every workflow task replays the
 * whole history, so any ordering mistake in the histories the server builds shows up live.
 */
import { conformanceSuite } from './conformance';

conformanceSuite('dev server, worker without a workflow cache', {
  worker: { maxCachedWorkflows: 0 },
  only: ['start', 'commands', 'activities', 'children', 'queries', 'updates', 'history'],
});
