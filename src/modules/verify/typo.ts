import { isListedMailProvider, POPULAR_MAIL_DOMAINS } from './domain-lists';

export type EditKind = 'substitution' | 'transposition' | 'insertion' | 'deletion';

/**
 * The one edit that turns `typed` into `target` (optimal string alignment distance 1), or undefined
 * when they are equal or further apart. `insertion` means `typed` has an extra character.
 */
export function singleEdit(typed: string, target: string): EditKind | undefined {
  if (typed === target) return undefined;
  if (typed.length === target.length) {
    const diff: number[] = [];
    for (let i = 0; i < typed.length && diff.length <= 2; i++) if (typed[i] !== target[i]) diff.push(i);
    if (diff.length === 1) return 'substitution';
    const [i, j] = diff;
    if (diff.length === 2 && j === i + 1 && typed[i] === target[j] && typed[j] === target[i]) return 'transposition';
    return undefined;
  }
  const [longer, shorter] = typed.length > target.length ? [typed, target] : [target, typed];
  if (longer.length - shorter.length !== 1) return undefined;
  let i = 0;
  while (i < shorter.length && longer[i] === shorter[i]) i++;
  if (longer.slice(i + 1) !== shorter.slice(i)) return undefined;
  return typed.length > target.length ? 'insertion' : 'deletion';
}

const nameOf = (domain: string) => domain.slice(0, domain.indexOf('.'));
const tldOf = (domain: string) => domain.slice(domain.lastIndexOf('.') + 1);

/**
 * The popular mailbox domain `domain` is probably a misspelling of, if any (gmial.com → gmail.com).
 *
 * One edit away only: two edits flag too many real domains. Short names (qq, aol, me, gmx) are
 * corrected in their suffix only, since one letter turns them into real companies (ge.com, att.com).
 * A substitution is no typo when the typed domain is itself a listed provider: ymail.com, email.com
 * and yahoo.cn are real, while the typo domains the lists carry (gmial.com, yaho.com, gmail.co) are
 * swaps, drops and additions. Country variants (yahoo.cn vs yahoo.ca) stay apart for the same reason.
 */
export function suggestDomain(domain: string): string | undefined {
  if (POPULAR_MAIL_DOMAINS.includes(domain)) return undefined;
  for (const target of POPULAR_MAIL_DOMAINS) {
    const edit = singleEdit(domain, target);
    if (!edit) continue;
    const sameName = nameOf(domain) === nameOf(target);
    if (!sameName && nameOf(target).length < 5) continue;
    if (edit === 'substitution' && isListedMailProvider(domain) && (!sameName || tldOf(domain).length === 2)) continue;
    return target;
  }
  return undefined;
}
