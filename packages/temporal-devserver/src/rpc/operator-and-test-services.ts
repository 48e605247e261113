/**
 * OperatorService (search-attribute registration, which the service does at start-up), the
 * TestService of time-skipping test servers, and gRPC health.
 */
import { msToTs, tsToMs, durToMs, type temporal } from '../proto';
import type { Engine } from '../engine/engine';
import { SYSTEM_SEARCH_ATTRIBUTES, type NamespaceRecord } from '../engine/namespaces';
import { sleepUntil, type TimerQueue } from '../engine/timer-queue';
import { failedPrecondition, invalidArgument } from './errors';
import type { Handlers } from './grpc-server';

export function operatorServiceHandlers(engine: Engine, saveNamespace: (ns: NamespaceRecord) => Promise<void>): Handlers {
  return {
    AddSearchAttributes: async (req: temporal.api.operatorservice.v1.IAddSearchAttributesRequest) => {
      const ns = engine.namespaces.get(req.namespace || 'default');
      const attrs = req.searchAttributes ?? {};
      for (const [name, type] of Object.entries(attrs)) {
        if (!name || !type) throw invalidArgument(`invalid search attribute ${name}`);
      }
      engine.namespaces.addSearchAttributes(ns, attrs);
      await saveNamespace(ns);
      return {};
    },
    RemoveSearchAttributes: async (req: temporal.api.operatorservice.v1.IRemoveSearchAttributesRequest) => {
      const ns = engine.namespaces.get(req.namespace || 'default');
      engine.namespaces.removeSearchAttributes(ns, req.searchAttributes ?? []);
      await saveNamespace(ns);
      return {};
    },
    ListSearchAttributes: (req: temporal.api.operatorservice.v1.IListSearchAttributesRequest) => {
      const ns = engine.namespaces.get(req.namespace || 'default');
      return {
        customAttributes: { ...ns.searchAttributes },
        systemAttributes: { ...SYSTEM_SEARCH_ATTRIBUTES },
        storageSchema: {},
      };
    },
    ListClusters: () => ({ clusters: [{ clusterName: 'active', clusterId: 'postbox-dev-server', isConnectionEnabled: true }] }),
  };
}

/** The time-skipping TestService, with the semantics of Temporal's Java test server. */
export function testServiceHandlers(timers: TimerQueue): Handlers {
  const wait = (at: number) => new Promise<void>((resolve) => sleepUntil(timers, at, resolve));
  return {
    LockTimeSkipping: () => {
      timers.lock();
      return {};
    },
    UnlockTimeSkipping: () => {
      try {
        timers.unlock();
      } catch (err) {
        throw failedPrecondition((err as Error).message);
      }
      return {};
    },
    Sleep: async (req: temporal.api.testservice.v1.ISleepRequest) => {
      await wait(timers.now() + durToMs(req.duration));
      return {};
    },
    SleepUntil: async (req: temporal.api.testservice.v1.ISleepUntilRequest) => {
      await wait(tsToMs(req.timestamp) ?? timers.now());
      return {};
    },
    // Unlocks, waits until the clock passed `duration` (which may be instant), locks again.
    UnlockTimeSkippingWithSleep: async (req: temporal.api.testservice.v1.ISleepRequest) => {
      const done = new Promise<void>((resolve) =>
        sleepUntil(timers, timers.now() + durToMs(req.duration), () => {
          timers.lock();
          resolve();
        }),
      );
      timers.unlock();
      await done;
      return {};
    },
    GetCurrentTime: () => ({ time: msToTs(timers.now()) }),
  };
}

export function healthHandlers(): Handlers {
  return { Check: () => ({ status: 1 /* SERVING */ }) };
}
