import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

/**
 * A line-at-a-time SMTP client for reading exact replies: each command waits for its whole reply
 * (the last line is `NNN text`), so a test sees the code and enhanced code the server gave.
 */
export class SmtpDialog {
  private buffer = '';
  private waiting?: (reply: string) => void;
  private replies: string[] = [];
  closed = false;

  private constructor(private socket: net.Socket) {
    this.listen(socket);
  }

  private listen(socket: net.Socket): void {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buffer += d;
      let m: RegExpExecArray | null;
      while ((m = /^((?:\d{3}-[^\r\n]*\r\n)*\d{3}(?: [^\r\n]*)?\r\n)/.exec(this.buffer))) {
        this.buffer = this.buffer.slice(m[1].length);
        this.replies.push(m[1].trimEnd());
        this.flush();
      }
    });
    socket.on('close', () => {
      this.closed = true;
      this.replies.push('(closed)');
      this.flush();
    });
    socket.on('error', () => undefined);
  }

  private flush(): void {
    if (this.waiting && this.replies.length) {
      const w = this.waiting;
      this.waiting = undefined;
      w(this.replies.shift()!);
    }
  }

  /** The next reply, whole. */
  next(): Promise<string> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.flush();
    });
  }

  /** `localAddress`: the client's own address, e.g. 127.0.0.2 to be another loopback client. */
  static async open(port: number, host = '127.0.0.1', implicitTls = false, localAddress?: string): Promise<{ dialog: SmtpDialog; greeting: string }> {
    const socket = implicitTls ? tls.connect({ port, host, rejectUnauthorized: false }) : net.connect({ port, host, localAddress });
    const dialog = new SmtpDialog(socket);
    return { dialog, greeting: await dialog.next() };
  }

  async command(line: string): Promise<string> {
    this.socket.write(`${line}\r\n`);
    return this.next();
  }

  /** STARTTLS, then the same dialog over TLS. */
  async startTls(): Promise<string> {
    const reply = await this.command('STARTTLS');
    if (!reply.startsWith('220')) return reply;
    this.socket.removeAllListeners('data');
    this.socket.removeAllListeners('close');
    const secure = tls.connect({ socket: this.socket, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    this.socket = secure;
    this.listen(secure);
    return reply;
  }

  /** AUTH PLAIN with an empty authorisation identity. */
  authPlain(user: string, password: string): Promise<string> {
    return this.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${password}`).toString('base64')}`);
  }

  /** DATA, the message dot-stuffed, and the reply to the final dot. */
  async data(raw: string): Promise<string> {
    const go = await this.command('DATA');
    if (!go.startsWith('354')) return go;
    const body = raw.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
    return this.command(`${body}${body.endsWith('\r\n') ? '' : '\r\n'}.`);
  }

  /** As `data`, with every character of `raw` sent as one byte (latin1): a message may hold any byte, NUL or invalid UTF-8. */
  async dataBytes(raw: string): Promise<string> {
    const go = await this.command('DATA');
    if (!go.startsWith('354')) return go;
    const body = raw.replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
    this.socket.write(Buffer.from(`${body}${body.endsWith('\r\n') ? '' : '\r\n'}.\r\n`, 'latin1'));
    return this.next();
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A self-signed certificate and key for `name`, written to a new directory (openssl, as an operator would make one). */
export function testCertificate(
  name = 'smtp.postbox.test',
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-cert-')),
): { dir: string; cert: string; key: string; pem: string } {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=DNS:${name}`,
    ],
    { stdio: 'ignore' },
  );
  return { dir, cert, key, pem: fs.readFileSync(cert, 'utf8') };
}
