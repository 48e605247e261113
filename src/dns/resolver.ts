import dns from 'node:dns';
import net from 'node:net';
import { TCPClient, UDPClient, Packet } from 'dns2';

export type RecordType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'NS' | 'CNAME';

export interface MxRecord {
  exchange: string;
  priority: number;
}

/** `found` has answers; `nxdomain` says the name does not exist; `nodata` exists without this type. */
export type LookupStatus = 'found' | 'nxdomain' | 'nodata';

export interface Lookup<T> {
  status: LookupStatus;
  answers: T[];
}

export class DnsError extends Error {}

interface Server {
  host: string;
  port: number;
}

const RCODE_NXDOMAIN = 3;
const RCODE_NOERROR = 0;

function parseServer(spec: string): Server {
  // `host[:port]`, or a bare IPv6 address.
  if (net.isIPv6(spec)) return { host: spec, port: 53 };
  const m = /^(.+?)(?::(\d+))?$/.exec(spec)!;
  return { host: m[1], port: m[2] ? Number(m[2]) : 53 };
}

/**
 * The one DNS resolver of the service: every lookup goes through dns2 to DNS_SERVERS (or, when unset,
 * the system's configured servers), in order, moving to the next server on a timeout or server failure.
 */
export class Resolver {
  private readonly servers: Server[];

  constructor(
    servers: string[] = [],
    private readonly timeoutMs = 3000,
  ) {
    const list = servers.length ? servers : dns.getServers();
    this.servers = list.map(parseServer);
    if (this.servers.length === 0) throw new DnsError('no DNS servers configured');
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- dns2's answers are typed per record type only at runtime
  private async ask(name: string, type: RecordType): Promise<{ rcode: number; answers: any[] }> {
    let lastError: unknown;
    for (const server of this.servers) {
      const options = { dns: server.host, port: server.port, timeout: this.timeoutMs, retryOverTCP: true };
      try {
        const packet = await withTimeout(UDPClient(options)(name, type), this.timeoutMs);
        const rcode = packet.header.rcode;
        if (rcode !== RCODE_NOERROR && rcode !== RCODE_NXDOMAIN) {
          lastError = new DnsError(`${server.host} answered rcode ${rcode} for ${name} ${type}`);
          continue;
        }
        // A truncated UDP answer is asked again over TCP.
        if (packet.header.tc) {
          const full = await withTimeout(TCPClient({ dns: server.host, port: server.port })(name, type), this.timeoutMs);
          return { rcode: full.header.rcode, answers: full.answers };
        }
        return { rcode, answers: packet.answers };
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError instanceof DnsError
      ? lastError
      : new DnsError(`DNS lookup of ${name} ${type} failed: ${String((lastError as Error)?.message ?? lastError)}`);
  }

  async lookup(name: string, type: 'MX'): Promise<Lookup<MxRecord>>;
  async lookup(name: string, type: Exclude<RecordType, 'MX'>): Promise<Lookup<string>>;
  async lookup(name: string, type: RecordType): Promise<Lookup<string | MxRecord>> {
    const { rcode, answers } = await this.ask(name.replace(/\.$/, ''), type);
    if (rcode === RCODE_NXDOMAIN) return { status: 'nxdomain', answers: [] };
    const wanted = answers.filter((a) => a.type === Packet.TYPE[type]);
    const values = wanted.map((a): string | MxRecord => {
      switch (type) {
        case 'A':
        case 'AAAA':
          return a.address;
        case 'MX':
          return { exchange: String(a.exchange).replace(/\.$/, ''), priority: a.priority };
        case 'TXT':
          // A TXT record may be split into several strings; its value is their concatenation (RFC 7208 §3.3).
          return (Array.isArray(a.data) ? a.data : [a.data]).join('');
        case 'NS':
          return String(a.ns).replace(/\.$/, '');
        case 'CNAME':
          return String(a.domain).replace(/\.$/, '');
      }
    });
    return { status: values.length ? 'found' : 'nodata', answers: values };
  }

  async txt(name: string): Promise<string[]> {
    return (await this.lookup(name, 'TXT')).answers;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new DnsError(`no DNS answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
