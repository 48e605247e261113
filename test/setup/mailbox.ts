import type { TestService } from './service';
import { until } from './until';

export interface CaughtMail {
  subject: string;
  text: string;
  from: Array<{ address: string }>;
}

/** Waits for the dev mailbox (the real SMTP path) to hold more than `after` mails to `to` with this subject; answers the newest. */
export async function caughtMail(svc: TestService, to: string, subject: string, after = 0): Promise<CaughtMail> {
  return until(
    async () => {
      const mail = (await svc.api.get(`/dev/mailbox?to=${encodeURIComponent(to)}`)).body.data.filter((m: CaughtMail) => m.subject === subject);
      return mail.length > after ? (mail[0] as CaughtMail) : undefined;
    },
    20_000,
    `a "${subject}" mail to ${to}`,
  );
}

/** The token of the link in such a mail. */
export async function mailedToken(svc: TestService, to: string, subject: string, after = 0): Promise<string> {
  const mail = await caughtMail(svc, to, subject, after);
  const link = /\/[a-z-]+\?token=([A-Za-z0-9_-]+)/.exec(mail.text);
  if (!link) throw new Error(`no token link in "${subject}"`);
  return link[1];
}
