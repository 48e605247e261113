/**
 * gRPC wiring: turns protobufjs service descriptors into grpc-js service definitions, so every
 * method of a service is routed by name to a handler (or answered UNIMPLEMENTED, and logged once).
 */
import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from 'pino';
import { root } from '../proto';
import { RpcError } from './errors';

/** What a handler sees of its call: cancellation (for long polls) and the client's deadline. */
export interface CallContext {
  readonly cancelled: boolean;
  onCancel(fn: () => void): void;
  /** Milliseconds left before the client gives up, or Infinity. */
  msUntilDeadline(): number;
}

/** A handler returns a plain message object, or the exact bytes of an already-encoded response. */
export type Handler = (request: any, ctx: CallContext) => Promise<object | Buffer> | object | Buffer; // eslint-disable-line @typescript-eslint/no-explicit-any
export type Handlers = Record<string, Handler>;

function callContext(call: grpc.ServerUnaryCall<unknown, unknown>): CallContext {
  return {
    get cancelled() {
      return call.cancelled;
    },
    onCancel(fn) {
      call.once('cancelled', fn);
    },
    msUntilDeadline() {
      // grpc-js reports the deadline as a Date, epoch milliseconds or Infinity depending on the caller.
      const d = call.getDeadline();
      const at = d instanceof Date ? d.getTime() : Number(d);
      return Number.isFinite(at) ? at - Date.now() : Infinity;
    },
  };
}

function toServiceError(err: unknown, log: Logger, method: string): Partial<grpc.StatusObject> {
  if (err instanceof RpcError) {
    return { code: err.code, details: err.message, metadata: err.metadata() };
  }
  log.error({ err, method }, 'internal error in handler');
  return { code: grpc.status.INTERNAL, details: err instanceof Error ? err.message : String(err) };
}

/** Registers every method of `serviceName` on `server`; methods without a handler answer UNIMPLEMENTED. */
export function addService(server: grpc.Server, serviceName: string, handlers: Handlers, log: Logger): void {
  const service = root.lookupService(serviceName);
  const definition: Record<string, grpc.MethodDefinition<object, object | Buffer>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  const warned = new Set<string>();
  for (const method of service.methodsArray) {
    if (method.requestStream || method.responseStream) continue;
    const reqType = method.resolvedRequestType as protobuf.Type;
    const resType = method.resolvedResponseType as protobuf.Type;
    definition[method.name] = {
      path: `/${serviceName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: object) => Buffer.from(reqType.encode(m).finish()),
      requestDeserialize: (b: Buffer) => reqType.decode(b),
      responseSerialize: (m: object | Buffer) => (Buffer.isBuffer(m) ? m : Buffer.from(resType.encode(m).finish())),
      responseDeserialize: (b: Buffer) => resType.decode(b),
    };
    const handler = handlers[method.name];
    implementation[method.name] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      if (!handler) {
        if (!warned.has(method.name)) {
          warned.add(method.name);
          log.warn({ method: method.name }, 'unimplemented method called');
        }
        callback({ code: grpc.status.UNIMPLEMENTED, details: `${method.name} is not implemented by the dev server` });
        return;
      }
      let result: ReturnType<Handler>;
      try {
        result = handler(call.request, callContext(call));
      } catch (err) {
        callback(toServiceError(err, log, method.name));
        return;
      }
      if (result instanceof Promise) {
        result.then(
          (res) => callback(null, res),
          (err) => callback(toServiceError(err, log, method.name)),
        );
      } else {
        callback(null, result);
      }
    };
  }
  server.addService(definition as grpc.ServiceDefinition, implementation);
}

/** How long a long poll may wait: at most `maxMs`, and always answered before the client's deadline. */
export function longPollWindow(ctx: CallContext, maxMs: number, marginMs = 1000): number {
  return Math.max(0, Math.min(maxMs, ctx.msUntilDeadline() - marginMs));
}
