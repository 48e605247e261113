/** Providers that deliver `a.b.c@` to `abc@`, and the one domain each spelling of theirs is. */
const DOTLESS_PROVIDERS: Record<string, string> = { 'gmail.com': 'gmail.com', 'googlemail.com': 'gmail.com' };

/**
 * The mailbox an address delivers to, as far as limits care: lower-case, without a `+tag` (every major
 * provider delivers `name+anything@` to `name@`), and without dots where the provider ignores them.
 * Plain string scans: the address comes from an anonymous form.
 */
export function mailboxOf(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 1) return email.toLowerCase();
  let local = email.slice(0, at).toLowerCase();
  let domain = email.slice(at + 1).toLowerCase();
  const plus = local.indexOf('+');
  if (plus > 0) local = local.slice(0, plus);
  const dotless = DOTLESS_PROVIDERS[domain];
  if (dotless) {
    local = local.split('.').join('');
    domain = dotless;
  }
  return `${local}@${domain}`;
}
