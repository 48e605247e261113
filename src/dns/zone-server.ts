/* eslint-disable @typescript-eslint/no-explicit-any -- dns2's requests and records are untyped */
import { createServer, Packet } from 'dns2';

export interface ZoneRecords {
  A?: string[];
  AAAA?: string[];
  MX?: Array<{ exchange: string; priority: number }>;
  TXT?: string[];
  NS?: string[];
  CNAME?: string[];
}

/**
 * A real DNS server (dns2, UDP and TCP on loopback) serving a zone kept in memory and edited as it goes.
 * Names absent from the zone answer NXDOMAIN; present names without the asked type answer NOERROR
 * with no records. Point DNS_SERVERS at `server.address`. Used by tests, benchmarks and `npm run cli -- dns-server`.
 */
export class ZoneDnsServer {
  readonly zone = new Map<string, ZoneRecords>();
  private server?: ReturnType<typeof createServer>;
  port = 0;

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  set(name: string, records: ZoneRecords): void {
    this.zone.set(name.toLowerCase().replace(/\.$/, ''), records);
  }

  /** Adds records of one type to a name, keeping the others. */
  add(name: string, type: keyof ZoneRecords, ...values: any[]): void {
    const key = name.toLowerCase();
    const current = this.zone.get(key) ?? {};
    (current as any)[type] = [...((current as any)[type] ?? []), ...values];
    this.zone.set(key, current);
  }

  async start(): Promise<this> {
    this.server = createServer({
      udp: true,
      tcp: true,
      handle: (request: any, send: (r: any) => void) => {
        const response = Packet.createResponseFromRequest(request);
        const [question] = request.questions;
        const name = String(question.name).toLowerCase().replace(/\.$/, '');
        const records = this.zone.get(name);
        if (!records) {
          response.header.rcode = 3;
          return send(response);
        }
        const types = Packet.TYPE as Record<string, number>;
        const type = Object.keys(types).find((k) => types[k] === question.type) as keyof ZoneRecords;
        // dns2's typings want encoded Resource objects; plain records are what its encoder takes.
        const answers = response.answers as unknown[];
        const base = { name: question.name, type: question.type, class: Packet.CLASS.IN, ttl: 60 };
        for (const value of (records[type] ?? []) as any[]) {
          if (type === 'A' || type === 'AAAA') answers.push({ ...base, address: value });
          if (type === 'MX') answers.push({ ...base, exchange: value.exchange, priority: value.priority });
          // Long values are split into 255-byte strings, as real servers publish DKIM keys.
          if (type === 'TXT') answers.push({ ...base, data: String(value).match(/.{1,255}/g) ?? [''] });
          if (type === 'NS') answers.push({ ...base, ns: value });
          if (type === 'CNAME') answers.push({ ...base, domain: value });
        }
        send(response);
      },
    });
    const port = this.port || (await freeUdpTcpPort());
    await this.server.listen({ udp: { port, address: '127.0.0.1' }, tcp: { port, address: '127.0.0.1' } });
    this.port = port;
    return this;
  }

  async stop(): Promise<void> {
    await this.server?.close();
  }
}

async function freeUdpTcpPort(): Promise<number> {
  const net = await import('node:net');
  const dgram = await import('node:dgram');
  for (;;) {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const free = await new Promise<boolean>((resolve) => {
      const sock = dgram.createSocket('udp4');
      sock.once('error', () => resolve(false));
      sock.bind(port, '127.0.0.1', () => sock.close(() => resolve(true)));
    });
    if (free) return port;
  }
}
