import fs from 'node:fs';
import type net from 'node:net';
import type { Logger } from 'pino';
import { clientPrefix } from './client-prefix';

/** How many connections a listener holds at once: in total, and from any one client address. */
export interface ConnectionLimits {
  max: number;
  perClient: number;
}

export type RefusalReason = 'total' | 'per_client';

/** `::ffff:127.0.0.2` and `127.0.0.2` are one client, as are all addresses of one IPv6 /64. */
const clientKey = (address: string | undefined): string => clientPrefix(address);

/**
 * Counts one listener's open connections, in total and per client address. `admit` answers whether a
 * new connection fits; an admitted one is counted until its socket closes. Refusals are counted and
 * logged at most once a minute per listener, so a flood does not flood the log too.
 */
export class ConnectionGate {
  private open = 0;
  private readonly byClient = new Map<string, number>();
  private refusedSinceLog = 0;
  private lastLog = 0;

  constructor(
    readonly name: string,
    readonly limits: ConnectionLimits,
    private readonly log: Logger,
    private readonly onRefused?: (listener: string, reason: RefusalReason) => void,
  ) {}

  get size(): number {
    return this.open;
  }

  /** Whether this socket may stay; when it may, it is counted until it closes. */
  admit(socket: net.Socket): RefusalReason | undefined {
    const key = clientKey(socket.remoteAddress);
    const fromClient = this.byClient.get(key) ?? 0;
    const refusal = this.open >= this.limits.max ? 'total' : fromClient >= this.limits.perClient ? 'per_client' : undefined;
    if (refusal) {
      this.refused(refusal, key);
      return refusal;
    }
    this.open++;
    this.byClient.set(key, fromClient + 1);
    socket.once('close', () => {
      this.open--;
      const left = (this.byClient.get(key) ?? 1) - 1;
      if (left > 0) this.byClient.set(key, left);
      else this.byClient.delete(key);
    });
    return undefined;
  }

  /** Counts (and now and then logs) a connection refused here or by the server's own `maxConnections`. */
  refused(reason: RefusalReason, client: string): void {
    this.onRefused?.(this.name, reason);
    this.refusedSinceLog++;
    const now = Date.now();
    if (now - this.lastLog < 60_000) return;
    this.log.warn(
      { listener: this.name, client, reason, refused: this.refusedSinceLog, limits: this.limits },
      reason === 'total' ? 'connection refused: the listener holds its most connections' : 'connection refused: this client holds its most connections',
    );
    this.refusedSinceLog = 0;
    this.lastLog = now;
  }
}

/**
 * Puts a gate in front of a server (net, http, tls, smtp-server's): a connection past the limits is
 * refused before the protocol's own `connection` handlers see it (by default destroyed; `refuse` may say
 * why first), and the server's `maxConnections` bounds the total in the accept path too.
 */
export function gateServer(server: net.Server, gate: ConnectionGate, refuse: (socket: net.Socket) => void = (s) => s.destroy()): void {
  // One over the gate's own total: the connection the gate refuses is counted by the server until it closes.
  server.maxConnections = gate.limits.max + 1;
  server.on('drop', (data?: { remoteAddress?: string }) => gate.refused('total', clientKey(data?.remoteAddress)));
  const handlers = server.listeners('connection') as Array<(socket: net.Socket) => void>;
  server.removeAllListeners('connection');
  server.on('connection', (socket: net.Socket) => {
    if (gate.admit(socket)) {
      // A refused client that resets its end must not raise an unhandled 'error'.
      socket.on('error', () => undefined);
      refuse(socket);
      return;
    }
    for (const handler of handlers) handler.call(server, socket);
  });
}

/**
 * Refuses with one line (an SMTP `421`): the descriptor is closed as soon as the line is in the kernel's
 * buffer, which still delivers it, so a flood of refused connections holds no descriptors.
 */
export function refuseWithLine(line: string): (socket: net.Socket) => void {
  return (socket) => {
    socket.end(`${line}\r\n`, () => socket.destroy());
    setTimeout(() => socket.destroy(), 1000).unref();
  };
}

/** The soft limit on this process's open files (Linux: /proc/self/limits), or undefined where it cannot be read. */
export function openFileLimit(limitsFile = '/proc/self/limits'): number | undefined {
  try {
    const line = fs
      .readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.split(/\s{2,}/)[1];
    return soft && /^\d+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Descriptors kept for everything that is not a client connection: database and Temporal connections,
 * SMTP delivery pools, worker threads and their event loops. A thread that cannot get one aborts the
 * whole process, so the listeners' totals are fitted under the file limit minus this.
 */
export const RESERVED_DESCRIPTORS = 768;

/**
 * The listeners' limits as configured, scaled down together when their totals do not fit under the
 * file limit with `RESERVED_DESCRIPTORS` to spare: the process then refuses connections, never aborts.
 */
export function fitToFileLimit<K extends string>(
  limits: Record<K, ConnectionLimits>,
  fileLimit: number | undefined,
): { limits: Record<K, ConnectionLimits>; scaled?: { fileLimit: number; factor: number } } {
  const total = Object.values<ConnectionLimits>(limits).reduce((n, l) => n + l.max, 0);
  if (fileLimit === undefined || total === 0) return { limits };
  const room = Math.max(fileLimit - RESERVED_DESCRIPTORS, Object.keys(limits).length * 8);
  if (total <= room) return { limits };
  const factor = room / total;
  const scaled = Object.fromEntries(
    Object.entries<ConnectionLimits>(limits).map(([name, l]) => {
      const max = Math.max(4, Math.floor(l.max * factor));
      return [name, { max, perClient: Math.max(1, Math.min(l.perClient, max)) }];
    }),
  ) as Record<K, ConnectionLimits>;
  return { limits: scaled, scaled: { fileLimit, factor } };
}
