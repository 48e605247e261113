import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { stringToSign, type SnsMessage } from '../../src/modules/webhooks-in/sns-signature';

/** A stand-in for the SNS endpoints: serves a real signing certificate, signs messages with its key, records subscription confirmations. */
export class SnsStandIn {
  readonly confirmations: string[] = [];
  base = '';
  private server?: http.Server;
  private privateKey = '';

  async start(): Promise<this> {
    // A real X.509 certificate, as SNS publishes, made with openssl.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sns-'));
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${dir}/key.pem`, '-out', `${dir}/cert.pem`, '-days', '2', '-subj', '/CN=sns.test'],
      {
        stdio: 'ignore',
      },
    );
    this.privateKey = fs.readFileSync(`${dir}/key.pem`, 'utf8');
    const cert = fs.readFileSync(`${dir}/cert.pem`, 'utf8');
    this.server = http.createServer((req, res) => {
      if (req.url === '/cert.pem') return res.end(cert);
      if (req.url?.startsWith('/confirm')) {
        this.confirmations.push(req.url);
        return res.end('<ConfirmSubscriptionResponse/>');
      }
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.base = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
    return this;
  }

  /** The value of SNS_CERT_HOSTS that trusts this stand-in. */
  get host(): string {
    return new URL(this.base).host;
  }

  signed(fields: Partial<SnsMessage> & Pick<SnsMessage, 'Type' | 'Message'>, version: '1' | '2' = '2'): SnsMessage {
    const m = {
      MessageId: crypto.randomUUID(),
      TopicArn: 'arn:aws:sns:eu-west-1:123456789012:ses-events',
      Timestamp: new Date().toISOString(),
      SignatureVersion: version,
      SigningCertURL: `${this.base}/cert.pem`,
      Signature: '',
      ...fields,
    } as SnsMessage;
    m.Signature = crypto
      .createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256')
      .update(stringToSign(m))
      .sign(this.privateKey, 'base64');
    return m;
  }

  stop(): void {
    this.server?.close();
  }
}

/** An SES event notification body for the email SES knows as `sesId`. */
export const sesEvent = (type: string, sesId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ eventType: type, mail: { messageId: sesId, commonHeaders: {} }, ...extra });

/** SMTP acceptance text in SES's form, so the provider message id is recorded. */
export const sesAcceptText = () =>
  `Ok 0100018c${crypto.randomBytes(4).toString('hex')}-1a2b3c4d-5e6f-4a5b-8c9d-${crypto.randomBytes(6).toString('hex')}-000000`;
