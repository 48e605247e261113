import crypto from 'node:crypto';

/** Where a message to the inbound MX is meant to go. */
export type ReturnPathTarget =
  | { kind: 'email'; emailId: string }
  /** `domain`: the sender domain whose return-path host it is (only that domain's mail is matched there). */
  | { kind: 'feedback-loop'; domain: string };

/** The fixed address on every return-path host that providers' feedback loops are registered with. */
export const FEEDBACK_LOOP_LOCAL_PART = 'fbl';

const TOKEN = /^b([0-9a-f]{32})([0-9a-f]{16})$/;

/**
 * Per-message return paths (VERP): `b<email id><mac>@<prefix>.<sender domain>`. The token names the
 * email and carries 64 bits of an HMAC, so an altered or made-up address is refused at RCPT. Lower-case
 * hex only, since some MTAs change the case of what they send back.
 */
export class ReturnPaths {
  constructor(
    private readonly secret: string,
    readonly prefix: string,
  ) {}

  host(domain: string): string {
    return `${this.prefix}.${domain.toLowerCase()}`;
  }

  private mac(hex: string): string {
    return crypto.createHmac('sha256', this.secret).update(`return-path:${hex}`).digest('hex').slice(0, 16);
  }

  /** The envelope sender of one email sent from `domain`. */
  address(emailId: string, domain: string): string {
    const hex = emailId.replace(/-/g, '').toLowerCase();
    return `b${hex}${this.mac(hex)}@${this.host(domain)}`;
  }

  feedbackLoop(domain: string): string {
    return `${FEEDBACK_LOOP_LOCAL_PART}@${this.host(domain)}`;
  }

  /** What an address on a return-path host stands for, or undefined: not ours, forged or altered. */
  parse(address: string): ReturnPathTarget | undefined {
    const at = address.lastIndexOf('@');
    if (at < 1) return undefined;
    const local = address.slice(0, at).toLowerCase();
    const host = address.slice(at + 1).toLowerCase();
    if (!host.startsWith(`${this.prefix}.`) || host.length <= this.prefix.length + 1) return undefined;
    if (local === FEEDBACK_LOOP_LOCAL_PART) return { kind: 'feedback-loop', domain: host.slice(this.prefix.length + 1) };
    const m = TOKEN.exec(local);
    if (!m) return undefined;
    const [, hex, mac] = m;
    if (!crypto.timingSafeEqual(Buffer.from(mac), Buffer.from(this.mac(hex)))) return undefined;
    return { kind: 'email', emailId: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}` };
  }
}
