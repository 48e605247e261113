import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import mailProviderList from 'email-providers/all.json';
import popularProviderList from 'email-providers/common.json';

/**
 * The domain lists address verification consults, loaded once per process.
 *
 * - Disposable: `disposable-email-domains-js`, the community disposable-email-domains blocklist (~8.9k).
 * - Mail providers: `email-providers` (all.json, ~8.8k free/personal mailbox domains, from HubSpot's
 *   free-domain list). Like every such list it also carries disposable domains and typo domains
 *   (gmial.com), so membership alone never decides `isPersonalEmail`; see verify.service.ts.
 * - Popular providers: `email-providers` common.json (~360 of them, by web rank), the typo targets.
 * - Forwarding/alias services: no maintained npm list exists, so the short one below.
 */
const disposable: ReadonlySet<string> = disposableEmailBlocklistSet();
const mailProviders: ReadonlySet<string> = new Set(mailProviderList);

/**
 * Services that hand out forwarding addresses in front of a real mailbox. Apple's Hide My Email
 * on icloud.com and Fastmail's masked addresses share their provider's domain and cannot be told apart.
 */
export const ALIAS_DOMAINS: readonly string[] = [
  'privaterelay.appleid.com', // Sign in with Apple
  'mozmail.com', // Firefox Relay (also <name>.mozmail.com)
  'relay.firefox.com', // Firefox Relay, early addresses
  'duck.com', // DuckDuckGo Email Protection
  'simplelogin.com', // SimpleLogin (Proton)
  'simplelogin.co',
  'simplelogin.fr',
  'simplelogin.io',
  'aleeas.com',
  'slmail.me',
  'slmails.com',
  'silomails.com',
  '8alias.com',
  '8shield.net',
  'dralias.com',
  'anonaddy.com', // addy.io (formerly AnonAddy), also <username>.anonaddy.com
  'anonaddy.me',
  'addy.io',
  'passmail.net', // Proton Pass
  'passmail.com',
  'passinbox.com',
  '33mail.com', // 33mail, <username>.33mail.com
];
const aliases: ReadonlySet<string> = new Set(ALIAS_DOMAINS);

/** `a.b.example.com` → `a.b.example.com`, `b.example.com`, `example.com` (never the bare TLD). */
function selfAndParents(domain: string): string[] {
  const labels = domain.split('.');
  const out: string[] = [];
  for (let i = 0; i < labels.length - 1; i++) out.push(labels.slice(i).join('.'));
  return out;
}

/** Throwaway services also hand out subdomains, so a listed parent counts. */
export function isDisposableDomain(domain: string): boolean {
  return selfAndParents(domain).some((d) => disposable.has(d));
}

/** Alias services give users their own subdomains (`me.anonaddy.com`), so a listed parent counts. */
export function isAliasDomain(domain: string): boolean {
  return selfAndParents(domain).some((d) => aliases.has(d));
}

/** Exactly a listed mail provider: a host under gmail.com is not a Gmail mailbox. */
export function isListedMailProvider(domain: string): boolean {
  return mailProviders.has(domain);
}

/** Popular mailbox domains, most popular first, that typo detection corrects towards. */
export const POPULAR_MAIL_DOMAINS: readonly string[] = popularProviderList.filter((d) => !isDisposableDomain(d) && !isAliasDomain(d));
