/**
 * Why a message bounced: sisimai's reason vocabulary, decided from an enhanced status code, an SMTP reply code and the
 * remote server's words. Pure functions over bounded strings; inbound/bounce-report.ts feeds them from returned mail,
 * smtp-replies.ts from an SMTP session's answer.
 */

export type BounceType = 'Permanent' | 'Transient' | 'Undetermined';

export const BOUNCE_REASONS = [
  'userunknown',
  'hostunknown',
  'hasmoved',
  'notaccept',
  'mailboxfull',
  'mesgtoobig',
  'exceedlimit',
  'filtered',
  'blocked',
  'rejected',
  'policyviolation',
  'spamdetected',
  'virusdetected',
  'securityerror',
  'authfailure',
  'requireptr',
  'badreputation',
  'speeding',
  'toomanyconn',
  'expired',
  'suspend',
  'systemerror',
  'systemfull',
  'networkerror',
  'mailererror',
  'contenterror',
  'notcompliantrfc',
  'norelaying',
  'syntaxerror',
  'onhold',
  'delivered',
  'undefined',
] as const;
export type BounceReason = (typeof BOUNCE_REASONS)[number];

/** What a report says about one recipient, as far as the reason is concerned. */
export interface ReasonEvidence {
  status: string | null;
  replyCode: string | null;
  /** The remote server's words (or the MTA's own explanation when there are none). */
  text: string;
  /** The SMTP command the failure answered, when the report names it. */
  command: 'CONN' | 'HELO' | 'EHLO' | 'MAIL' | 'RCPT' | 'DATA' | null;
  action: string | null;
  /** The Diagnostic-Code type ('smtp', 'x-unix', ...), lower-cased, when there is one. */
  diagnosticType: string | null;
  /** The reporting MTA already named the reason in its own words (e.g. Exim's "retry timeout exceeded"). */
  mtaVerdict?: BounceReason | null;
}

/** Literal phrases to a case-insensitive alternation; phrases are fixed strings, so matching is linear. */
const phrases = (list: string[]) => new RegExp(list.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'));

/** The words remote servers and MTAs use for each reason, lower-case, matched against lower-cased text. */
const WORDS: Partial<Record<BounceReason, RegExp[]>> = {
  mailboxfull: [
    phrases([
      'mailbox full',
      'mailbox is full',
      'full mailbox',
      'mailfolder is full',
      'mailbox quota usage exceeded',
      'mailbox over quota',
      'over quota',
      'over the quota',
      'over the allowed quota',
      'quota exceeded',
      'exceeded storage allocation',
      'exceeding its mailbox quota',
      'exceeding their quota',
      'disk quota',
      'diskspace quota',
      'quota violation',
      'insufficient disk space',
      'not enough storage space',
      'not sufficient disk space',
      'does not have enough space',
      'no space left on device',
      'mailbox size limit exceeded',
      'mailbox has exceeded its disk space limit',
      'mailbox exceeded the local limit',
      "the user's space has been used up",
      'user has too many messages on the server',
      'too much mail data',
      'boite du destinataire pleine',
      'would exceed maximum allowed storage',
      'exceeding receiving limits',
      'mail file size exceeds the maximum size allowed',
      'userdisk quota',
      'domaindisk quota',
      'mailbox is over its limit',
    ]),
  ],
  mesgtoobig: [
    phrases([
      'message too big',
      'message file too big',
      'message too large for this',
      'max message size exceeded',
      'exceeded maximum inbound message size',
      'message size exceeds',
      'message length exceeds administrative limit',
      'size limit',
      'line limit exceeded',
      'taille limite du message',
      'message is too large',
      'message exceeds the maximum size',
      'size of the message exceeds',
    ]),
  ],
  exceedlimit: [phrases(['message header size exceeds limit', 'message too large'])],
  suspend: [
    phrases([
      ' is currently suspended',
      'has been suspended',
      'mailbox currently suspended',
      'user suspended',
      'temporarily suspended',
      ' temporary locked',
      'inactive account',
      'invalid/inactive user',
      'is a deactivated mailbox',
      'mailbox disabled',
      'mailbox is frozen',
      'this mailbox is disabled',
      'account has been disabled',
      'account is disabled',
      'user or domain is disabled',
      'email account that you tried to reach is disabled',
      'temporarily inactive',
      'user is terminated',
      'archived recipient',
      'boite du destinataire archivee',
      'recipient suspend the service',
      'account is locked',
      'mailbox unavailable or access denied',
      'this address no longer accepts mail',
    ]),
  ],
  hasmoved: [phrases([' has been replaced by '])],
  norelaying: [
    phrases([
      'relay access denied',
      'relaying denied',
      'relay denied',
      'relay not permitted',
      'relaying mail to ',
      'unable to relay',
      'no relaying',
      'as a relay',
      'not allowed to relay',
      'not permitted to relay',
      'open relay',
      'insecure mail relay',
      'not a gateway',
      'not local host',
      "we don't handle mail for",
      'not configured to relay',
      "that domain isn't in my list of allowed rcpthost",
      'specified domain is not allowed',
      'authentication when attempting to send to a non-local e-mail address',
      'email address is not verified.',
    ]),
  ],
  authfailure: [
    phrases([
      'sender policy framework',
      'spf check: fail',
      'bad spf records',
      'please inspect your spf settings',
      'dmarc policy',
      '//spf.pobox.com',
      'spf (sender policy framework)',
      'spf record',
      'dkim signature',
      'unauthenticated email from',
      'is not allowed to send mail.',
      'failed the dmarc',
      'dmarc check',
      'authentication-results',
      'spf fail',
      'does not pass dmarc',
    ]),
  ],
  userunknown: [
    phrases([
      'user unknown',
      'unknown user',
      'unknown recipient',
      'recipient unknown',
      'address unknown',
      'unknown mailbox',
      'no such user',
      'no such mailbox',
      'no such recipient',
      'no such address',
      'no such person',
      'user not found',
      'user not known',
      'user does not exist',
      'user not exist',
      'recipient not found',
      'recipient does not exist',
      'recipient not exist',
      'mailbox not found',
      'mailbox does not exist',
      'mailbox not present',
      'mailbox invalid',
      'mailbox is inactive',
      'mailbox is unavailable',
      'mailbox unavaiable',
      'invalid mailbox',
      'invalid recipient',
      'invalid address',
      'address does not exist',
      'email address does not exist',
      'email address could not be found',
      'address not present in directory',
      'not a valid mailbox',
      'not a valid recipient',
      'not a valid user',
      'is not a known user',
      'not a local address',
      'recipient is not local',
      'recipient is not accepted',
      'recipient not ok',
      'no mailbox',
      'no account by that name',
      'no mail box available',
      "can't accept user",
      'does not exist.',
      'destination addresses were unknown',
      'destination server rejected recipients',
      // Outlook.com's answer to RCPT for a mailbox it does not have.
      '550 requested action not taken: mailbox unavailable',
      'resolver.adr.recipientnotfound',
      'resolver.adr.recipient notfound',
      'recipient address rejected: invalid',
      'recipient address rejected: unknown user',
      'recipient address rejected: user unknown',
      'recipient address rejected: userunknown',
      'recipient address rejected: access denied',
      'sorry, badrcptto',
      'badrecipientto',
      'validrcptto',
      'not an active address',
      'there is no one at this address',
      'the email account that you tried to reach does not exist',
      "the user's email name is not found",
      'this email address is wrong or no longer valid',
      'no valid recipients, bye',
      'your envelope recipient has been denied',
      'recipient refuses to accept your mail',
      'utilisateur inconnu',
      'no existe dicha persona',
      'no existe ese usuario',
      'nessun utente simile',
      'vdeliver: invalid or unknown virtual user',
      'user missing home directory',
      'user not active',
      '#5.1.1 bad address',
      '550 address invalid',
      'address rejected.',
      "isn't in my list of allowed rcpthosts",
      'the following recipients was undeliverable',
      'this spectator does not exist',
      'account unavailable',
      'not email addresses',
      'unknown e-mail address',
      'unknown email address',
      'unknown local part',
      'unknown local-part',
      'nonexistent user',
      'non-existent user',
      'non existent user',
      'bad recipient',
      'bad destination mailbox address',
      'invalid-recipient',
      'address rejected (in reply to rcpt',
      'no such local user',
      'recipient address rejected. (in reply to rcpt to command)',
      "doesn't have a ",
      'mailbox unavailable',
    ]),
    /\b(?:user|recipient|account|mailbox|rcpt) [^\n]{0,80}? (?:was not found|does not exist|not found in|unknown)\b/,
  ],
  filtered: [
    phrases([
      'user reject',
      'user refuses to receive this mail',
      'you have been blocked by the recipient',
      'refused due to recipient preferences',
      'message rejected due to user rules',
      'is not accepting any mail',
      'only accepting mail from specific email addresses',
      'this account is protected by',
      'resolver.rst.notauthorized',
      'not found recipient account',
      'has restricted sms e-mail',
      'recipient id refuse to receive mail',
      'extended inactivity new mail is not currently being accepted',
      'bounced address',
    ]),
  ],
  requireptr: [
    phrases([
      'ptr record',
      'reverse dns',
      'reverse lookup',
      'cannot find your hostname',
      'ip name lookup failed',
      'no ptr',
      'bad dns ptr',
      'unresolvable relay host name',
      'dynamic ip or generic dns',
      'mismatches client ip',
      'forward dns entry does not point to the sending ip',
      'unverifyable sending ips',
      'invalid rdns',
      'rdns',
      'ptr-record',
      'ptr resource record',
      'does not resolve to your ip',
      'not resolve your ip',
      'client host rejected: cannot find',
      'is not a valid hostname',
      'hostname does not match',
      'no reverse',
    ]),
  ],
  notcompliantrfc: [phrases(['not rfc 5322 compliant', 'not rfc5322 compliant', 'rfcmessagenoncompliant', 'multiple addresses in from'])],
  badreputation: [
    phrases([
      'poor email reputation',
      'poor reputation',
      'reputation problems',
      'very low reputation',
      'none/bad reputation',
      'rate limited due to ip reputation',
      'unexpected volume or user complaints',
    ]),
  ],
  rejected: [
    phrases([
      'sender rejected',
      'sender was rejected',
      'sender address rejected',
      'sender email address rejected',
      'sender verify failed',
      'invalid sender',
      'sender is spammer',
      'sender is in my black list',
      'sender address has been blacklisted',
      'sender not pre-approved',
      'unroutable sender address',
      'domain of sender address',
      'sender domain is empty',
      'bogus mail from',
      'null sender is not allowed',
      'empty envelope senders not allowed',
      'syntax error: empty email address',
      'returned mail not accepted here',
      'no third-party dsns',
      'unsigned dsn',
      'batv',
      'backscatter protection',
      'administrative prohibition',
      'envelope blocked',
      'mail from not owned by user',
      'this server does not accept mail from',
      'you are not allowed to post to this mailing list',
      'your email address has been blacklisted',
      'an address that has been blacklisted',
      "isn't on the recipient's list of senders",
      'fully qualified email address required',
      'access denied (in reply to mail from command)',
      'access denied (sender blacklisted)',
      'emetteur invalide',
      'is not a registered gateway user',
      'mailbox access for',
      'spam reporting address',
      'from: domain is invalid',
      'delivery not authorized, message refused',
      'does not exist e2110',
      'rfc 1035 violation',
      'denied [bouncedeny]',
      'valid-address-filter',
      'senderfilterconfig',
      "can't determine purported responsible address",
      'without a valid sender domain',
      'recipient addresses rejected : access denied',
      'message rejected: email address is not verified',
      'sending this from a different address or alias',
      'invalid domain, see <url:',
      'mx records for ',
      'address rejected',
    ]),
  ],
  hostunknown: [
    phrases([
      'host unknown',
      'unknown host',
      'host or domain name not found',
      'no such domain',
      'domain does not exist',
      'domain is not reachable',
      'domain must exist',
      'unrouteable address',
      'unroutable address',
      'name or service not known',
      'host unreachable',
      'unknown domain',
      'mail domain mentioned in email address is unknown',
      'the account or domain may not exist',
      'all relevant mx records point to non-existent hosts',
      'domain name not found',
      'no mx or a record',
    ]),
    /\b553 [^\n]{0,80}? does not exist/,
  ],
  spamdetected: [
    /\bspam\b/,
    phrases([
      'unsolicited',
      'bulk e-mail',
      'bulk email',
      'reject bulk.advertising',
      'content filter rejection',
      'message filtered',
      'message content rejected',
      'mail content denied',
      'rejecting banned content',
      'rejecting mail content',
      'unacceptable content',
      'blacklisted url in message',
      'sender domain listed at ',
      'our system has detected that this message is',
      'appears to be unsolicited',
      'may consider spam',
      'probable spam',
      'high probability of',
      'message rejected for policy reasons',
      'dsbl.org/help/help_spam',
      '554 5.7.0 reject, id=',
      'identified this email as a bulk email',
      'blocked for abuse. see http://att.net/blocks',
      'listed in work.drbl',
    ]),
  ],
  speeding: [phrases(['please try again slower', 'temporarily rate limited', 'at a rate that prevents additional messages'])],
  toomanyconn: [
    phrases([
      'too many connections',
      'too many concurrent smtp connections',
      'connection rate limit exceeded',
      'connection limit',
      'too many smtp sessions',
      'too many errors from your ip',
      'too many recipients',
      'max emails per hour',
      'daily message quota exceeded',
      'maximum sending rate exceeded',
      'trop de connexions',
      'already made numerous attempts to deliver',
      'maximum connection limit',
    ]),
  ],
  blocked: [
    phrases([
      'blocked using ',
      'blacklisted by',
      'is in a black list',
      'black list',
      'blacklist',
      'block list',
      'blocklist',
      'spamhaus',
      'spamcop',
      'dnsbl',
      ' rbl',
      'banned sending ip',
      'bad sender ip address',
      'sender ip address rejected',
      'extreme bad ip profile',
      'dynamic ip',
      'dynamic/zombied',
      'dial-up',
      'dialup',
      'helo command rejected',
      'client host rejected',
      'connection refused by',
      'connection reset by peer',
      'connection dropped',
      'connection was dropped by remote host',
      'go away',
      'please use the smtp server of your isp',
      'smtp error from remote mail server after initial connection',
      'service not available, closing transmission channel',
      'not currently accepting mail from your ip',
      'no access from mail server',
      'host network not allowed',
      'you are not allowed to connect',
      'your ip address is listed',
      'too many spams from your ip',
      'too many unwanted messages',
      'confirm this mail server',
      'your server requires confirmation',
      'invalid ip for sending mail',
      'is not allowed to send mail from',
      'rejecting open proxy',
      'refused - see http',
      'blocked - see http',
      'was blocked by ',
      'esmtp not accepting connections',
      'access denied',
      'not allowed to send',
      'sending mta or the sender has not passed validation',
      'your remotehost looks suspiciously like spammer',
      'no matches to nameserver query',
      'domain does not exist:',
      'we do not accept mail from',
      'access from ip address',
      'blocked by ',
      'your network is temporary blacklisted',
      'has been temporarily blocked',
      'ip address has been blocked',
      'ip is blocked',
      'ip blocked',
      'rejected because the ip',
    ]),
    /said: 550 blocked/,
  ],
  virusdetected: [
    phrases([
      'virus detected',
      'infected with a virus',
      'potentially executable attachment',
      'used by recent viruses',
      'malicious_url detected',
      'prohibited virus or spam content',
      'contains a virus',
      'virus found',
    ]),
  ],
  policyviolation: [
    phrases([
      'denied by policy',
      'local policy violation',
      'policy violation',
      'not accepted for policy reasons',
      'rejected for policy reasons',
      'rejected due to local policy',
      'rejected by organization policy',
      'rejected due to security policies',
      'organizational settings',
      'members-only list',
      'closed mailing list',
      'not subscribed to this group',
      'illegal attachment',
      'do not accept messages containing images',
      'header are not accepted',
      'header error',
      'message given low priority',
      'messages with multiple addresses',
      'protocol violation',
      'content presents a potential',
      "you're using a mass mailer",
      'without solving a captcha',
      'recipient is not accepting mail with ',
    ]),
  ],
  systemerror: [
    phrases([
      'local configuration error',
      'mail system configuration error',
      'server configuration error',
      'system config error',
      'remote server is misconfigured',
      'local error in processing',
      'temporary local problem',
      'queue file write error',
      'interrupted system call',
      'internal error reading data',
      'operation now in progress',
      'encountered an error while being processed',
      'service currently unavailable',
      'timeout waiting for input',
      'transaction failed ',
      'mail loop',
      'loops back to myself',
      'loop was found in the mail exchanger',
      'aliasing/forwarding loop broken',
      "can't create user output file",
      'could not load drd',
      'no mdb',
      'server error',
      'system error',
      'internal error',
    ]),
  ],
  networkerror: [
    phrases([
      'no route to host',
      'host is unreachable',
      'host name lookup failure',
      'host not found, try again',
      'name server reply',
      'unable to resolve route',
      'unrouteable mail domain',
      'could not connect and send the mail',
      'dns records for the destination computer',
      'too many hops',
      'hop count exceeded',
      'forwarding loop',
      'message looping',
      'routing loop',
      'dns lookup failure',
    ]),
  ],
  contenterror: [
    phrases([
      'duplicate header',
      'header size exceeds',
      '8-bit data in message header',
      'mime complexity',
      'invalid mime headers',
      'improperly-formatted binary content',
      'unnecessary base64 encoding',
      'too many received: headers',
      'header size, or recipient list',
    ]),
  ],
  systemfull: [phrases(['mail system full', 'requested mail action aborted: exceeded storage allocation'])],
  notaccept: [
    phrases([
      'does not accept mail',
      'mail receiving disabled',
      'no mx record found for domain',
      'name server: .: host not found',
      'no route for current request',
      'smtp protocol returned a permanent error',
      'nullmx',
      'null mx',
    ]),
  ],
  expired: [
    phrases([
      'retry timeout exceeded',
      'retry time not reached for any host after a long failure period',
      'delivery expired',
      'delivery time expired',
      'message expired',
      'message timed out',
      'giving up on',
      'have been failing for a long time',
      'has been delayed',
      'in the queue too long',
      'after multiple retries',
      'within the allowed queue period',
      'could not be delivered for more than',
      'it has not been collected after',
      'delivery attempts will continue to be',
      'server did not respond',
      'connection timed out',
      'failed to deliver to domain ',
      'could not find a gateway for',
      'time limit exceeded',
      'has not been delivered',
      'delay warning',
      'been unable to deliver',
      'could not be delivered within',
    ]),
    /could not be delivered for [^\n]{0,20}? days/,
  ],
  securityerror: [
    phrases([
      'authentication required',
      'authentication failure',
      'authentication credentials invalid',
      'unauthenticated senders not allowed',
      'starttls is required',
      'tls required',
      'must issue a starttls',
      'verification failure',
      'account not subscribed to ses',
      'authentication turned on in your email client',
      'authentication is required',
      'executable files are not allowed',
      "you don't authenticate",
      'is not authorized to perform ses:',
      'is a dead domain',
      'authentification requise',
      'authentification invalide',
    ]),
  ],
  mailererror: [
    phrases([
      'x-unix; ',
      'procmail: ',
      'bin/procmail',
      'bin/maildrop',
      'command failed: ',
      'command died with status',
      'command output:',
      'mailer error',
      'pipe to |/',
      ' || exit ',
      'local delivery failed',
      'unknown mailer error',
    ]),
  ],
  syntaxerror: [phrases(['syntax error', 'command unrecognized', 'unrecognized command', 'bad sequence of commands', 'command not recognized'])],
};

/**
 * Reasons the words decide before the status code is consulted, in the order they win. The earlier a reason, the more
 * specific its words: "mailbox full" beats a generic 5.1.1, "relay access denied" beats "access denied".
 */
const WORDS_FIRST: BounceReason[] = [
  'mailboxfull',
  'mesgtoobig',
  'exceedlimit',
  'suspend',
  'hasmoved',
  'norelaying',
  'authfailure',
  'userunknown',
  'filtered',
  'requireptr',
  'notcompliantrfc',
  'badreputation',
  'rejected',
  'hostunknown',
  'spamdetected',
  'speeding',
  'toomanyconn',
  'blocked',
];
/** Reasons whose words are only trusted once the status code has had its say. */
const WORDS_AFTER_STATUS: BounceReason[] = [
  'mailboxfull',
  'authfailure',
  'badreputation',
  'speeding',
  'spamdetected',
  'virusdetected',
  'policyviolation',
  'norelaying',
  'systemerror',
  'networkerror',
  'suspend',
  'contenterror',
  'systemfull',
  'notaccept',
  'expired',
  'securityerror',
  'mailererror',
];
/** Reasons a status code alone can suggest but words should confirm (a 5.1.1 may still say "mailbox full"). */
const WEAK_STATUS_REASONS = new Set<BounceReason>([
  'undefined',
  'onhold',
  'systemerror',
  'securityerror',
  'expired',
  'suspend',
  'networkerror',
  'hostunknown',
  'userunknown',
]);

/** RFC 3463 / IANA enhanced status codes to the reason they usually mean. */
const STATUS_REASON: Record<string, BounceReason> = {
  '2.1.5': 'delivered',
  '2.0.0': 'delivered',
  '4.1.6': 'hasmoved',
  '4.1.7': 'rejected',
  '4.1.8': 'rejected',
  '4.1.9': 'systemerror',
  '4.2.1': 'suspend',
  '4.2.2': 'mailboxfull',
  '4.2.3': 'exceedlimit',
  '4.2.4': 'filtered',
  '4.3.1': 'systemfull',
  '4.3.2': 'notaccept',
  '4.3.3': 'systemerror',
  '4.3.5': 'systemerror',
  '4.4.1': 'expired',
  '4.4.2': 'networkerror',
  '4.4.3': 'systemerror',
  '4.4.4': 'networkerror',
  '4.4.5': 'systemfull',
  '4.4.6': 'networkerror',
  '4.4.7': 'expired',
  '4.4.8': 'networkerror',
  '4.5.0': 'networkerror',
  '4.5.3': 'systemerror',
  '4.5.5': 'systemerror',
  '4.6.0': 'contenterror',
  '4.6.2': 'contenterror',
  '4.6.5': 'contenterror',
  '4.7.1': 'blocked',
  '4.7.2': 'blocked',
  '4.7.5': 'securityerror',
  '4.7.6': 'securityerror',
  '4.7.7': 'securityerror',
  '4.7.12': 'securityerror',
  '4.7.15': 'securityerror',
  '4.7.16': 'mesgtoobig',
  '4.7.25': 'requireptr',
  '5.1.0': 'userunknown',
  '5.1.1': 'userunknown',
  '5.1.2': 'hostunknown',
  '5.1.3': 'userunknown',
  '5.1.4': 'filtered',
  '5.1.6': 'hasmoved',
  '5.1.7': 'rejected',
  '5.1.8': 'rejected',
  '5.1.9': 'systemerror',
  '5.1.10': 'notaccept',
  '5.2.0': 'filtered',
  '5.2.1': 'filtered',
  '5.2.2': 'mailboxfull',
  '5.2.3': 'exceedlimit',
  '5.2.4': 'filtered',
  '5.3.0': 'systemerror',
  '5.3.1': 'systemfull',
  '5.3.2': 'notaccept',
  '5.3.3': 'systemerror',
  '5.3.4': 'mesgtoobig',
  '5.3.5': 'systemerror',
  '5.4.0': 'networkerror',
  '5.4.3': 'systemerror',
  '5.4.4': 'hostunknown',
  '5.5.2': 'syntaxerror',
  '5.5.3': 'toomanyconn',
  '5.5.4': 'systemerror',
  '5.5.5': 'systemerror',
  '5.5.6': 'syntaxerror',
  '5.7.13': 'suspend',
  '5.7.16': 'mesgtoobig',
  '5.7.17': 'hasmoved',
  '5.7.18': 'hasmoved',
  '5.7.20': 'authfailure',
  '5.7.21': 'authfailure',
  '5.7.22': 'authfailure',
  '5.7.23': 'authfailure',
  '5.7.24': 'authfailure',
  '5.7.25': 'requireptr',
  '5.7.26': 'authfailure',
  '5.7.27': 'notaccept',
  '5.7.28': 'spamdetected',
  '5.7.29': 'authfailure',
};
for (const detail of [0, 1, 2, 3, 5, 6, 7, 8, 9]) STATUS_REASON[`5.6.${detail}`] = 'contenterror';
for (const detail of [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 15, 19, 30]) STATUS_REASON[`5.7.${detail}`] = 'securityerror';

const matches = (reason: BounceReason, text: string) => (WORDS[reason] ?? []).some((re) => re.test(text));

/** Words that, next to a 5.1.1, mean the mailbox exists but something else went wrong. */
const NOT_REALLY_UNKNOWN: BounceReason[] = ['norelaying', 'blocked', 'mailboxfull', 'hasmoved', 'notaccept', 'filtered', 'toomanyconn', 'speeding'];
/** A 5.1.x that speaks of the sender, not the recipient. */
const NOT_THE_RECIPIENT = /sender rejected|sender address rejected/;
/** Sentences a recipient-directory lookup writes: an unknown user whatever SMTP step the report names or leaves out. */
const RECIPIENT_LOOKUP = new RegExp(
  [
    'the recipient name is not recognized',
    'resolver\\.adr\\.recipientnotfound',
    'recipient not found by smtp address lookup',
    'wasn.t found at the destination domain',
    'delivery error: dd this user doesn.t have a',
    'no such user here',
    'because the address couldn.t be found',
    'invalid final delivery userid',
    'adresse destinataire invalide',
    // Outlook.com's answer to RCPT for a mailbox it does not have.
    '550 requested action not taken: mailbox unavailable',
    'mail.local: unknown user',
    // A server naming the address it does not know (au's filter answers "550 : User unknown", leaving it out).
    '\\b550:? <[^<>\\s]{1,254}>: user unknown',
  ].join('|'),
);

/**
 * Sentences an MTA writes itself (not a remote server's reply) that name the reason outright; checked before anything else.
 * Order matters: qmail's "in the queue too long" closes many reports whose first sentence is the real cause.
 */
const MTA_VERDICTS: [RegExp, BounceReason][] = [
  // au (KDDI) answers "550 : User unknown", with the address left out, when the recipient's own filter refused the sender.
  [/(?:550 ?: ?: ?|-> 550 : )user unknown/, 'filtered'],
  [/but my name was rejected/, 'blocked'],
  [/unable to contact ldap server|ldap lookup failed/, 'systemerror'],
  [/wasn't able to establish an smtp connection|unable to connect to a mail exchanger/, 'networkerror'],
  [/couldn't find a mail exchanger or ip address/, 'notaccept'],
  [/couldn't find any host named|couldn't find any host by that name/, 'hostunknown'],
  [/not listed in (?:domino directory|public name & address book)|user not listed in|no such user in this domain|is not a valid address/, 'userunknown'],
  [/no valid recipients for this mm/, 'userunknown'],
  // Exchange's own resolver codes, and Gmail's sentences about servers it could not reach.
  [/resolver\.rst\.recipsizelimit|resolver\.rst\.sendsizelimit/, 'mesgtoobig'],
  [/did not accept our requests to connect|dns (?:error|lookup) (?:for|of) the recipient domain|could not connect to the recipient server/, 'expired'],
];

interface Context {
  text: string;
  byStatus: BounceReason | undefined;
  hasStatus: boolean;
  replyCode: string | null;
  command: ReasonEvidence['command'];
  /** The status is a 5.7.x (security or policy). */
  policyStatus: boolean;
}

/** Whether one reason is proven before the status code is consulted: its words, or its status, within the right SMTP step. */
function proven(reason: BounceReason, c: Context): boolean {
  const words = matches(reason, c.text);
  switch (reason) {
    case 'mailboxfull':
    case 'exceedlimit':
      return c.hasStatus && (c.byStatus === reason || words);
    case 'mesgtoobig':
      return c.byStatus === reason || (c.byStatus !== 'exceedlimit' && words);
    case 'suspend':
      return c.hasStatus && (c.replyCode === '525' || words);
    case 'userunknown':
      if (c.byStatus === 'suspend') return false;
      if (c.byStatus === 'userunknown') return !NOT_REALLY_UNKNOWN.some((other) => matches(other, c.text)) && !NOT_THE_RECIPIENT.test(c.text);
      // Words alone say "unknown user" only in a reply to RCPT, or in the sentences only a directory lookup writes.
      // Elsewhere (after DATA, or where the report does not name the step) a filter may be speaking: filtered, soft,
      // since a false hard bounce unsubscribes a person for good.
      // A 5.7.x is a policy speaking, whatever words come with it.
      if (c.policyStatus) return false;
      if (c.command === 'RCPT') return words;
      return c.command === null && RECIPIENT_LOOKUP.test(c.text);
    case 'filtered': {
      // "User unknown" in answer to DATA means a filter spoke: the mailbox took RCPT TO.
      if (c.byStatus === 'suspend') return false;
      const unknown = matches('userunknown', c.text);
      if (c.byStatus === 'filtered') return words || unknown;
      if (c.command && c.command !== 'DATA') return false;
      // A status that says the address is gone is believed over unknown-user words when no step is named.
      if (c.command === null && c.byStatus && ADDRESS_GONE.has(c.byStatus)) return words;
      return words || unknown;
    }
    case 'rejected': {
      if (c.byStatus === 'rejected') return true;
      if (c.byStatus === 'userunknown' && NOT_THE_RECIPIENT.test(c.text)) return true;
      if (c.command === 'MAIL') return words;
      if (c.command === 'DATA') return c.byStatus !== 'userunknown' && words;
      return (!c.byStatus || c.byStatus === 'securityerror' || c.byStatus === 'systemerror') && words;
    }
    case 'hostunknown':
      return c.byStatus === 'hostunknown' ? !matches('networkerror', c.text) : words;
    default:
      return c.byStatus === reason || words;
  }
}

/** Reasons that say the recipient's address is gone for good. */
const ADDRESS_GONE = new Set<BounceReason>(['userunknown', 'hostunknown', 'hasmoved', 'notaccept']);

/**
 * The reason for one recipient. A refusal of MAIL FROM speaks of the envelope sender (ours), whatever its words: it is
 * `rejected`, never an unknown recipient, or a relay that refuses our sender would unsubscribe everyone we mail.
 */
export function decideReason(e: ReasonEvidence): BounceReason {
  const reason = judge(e);
  return e.command === 'MAIL' && ADDRESS_GONE.has(reason) ? 'rejected' : reason;
}

/** sisimai's order of judgement, in our own terms: the MTA's verdict, then specific words, the status code, general words, the status class. */
function judge(e: ReasonEvidence): BounceReason {
  const text = e.text.toLowerCase().slice(0, MAX_DIAGNOSTIC_SCAN);
  if (e.status?.startsWith('2.')) return 'delivered';
  if (e.mtaVerdict) return e.mtaVerdict;
  for (const [pattern, reason] of MTA_VERDICTS) if (pattern.test(text)) return reason;
  // Exchange Online's own 5.1.NNN codes (5.1.351, ...) all say the recipient's address could not be used.
  const byStatus = e.status ? (STATUS_REASON[e.status] ?? (/^5\.1\.\d{3}$/.test(e.status) ? 'userunknown' : undefined)) : undefined;
  const smtpLike = e.diagnosticType === null || e.diagnosticType === 'smtp';
  const context: Context = { text, byStatus, hasStatus: !!e.status, replyCode: e.replyCode, command: e.command, policyStatus: !!e.status?.startsWith('5.7.') };

  if (smtpLike) for (const reason of WORDS_FIRST) if (proven(reason, context)) return reason;
  if (byStatus && !WEAK_STATUS_REASONS.has(byStatus) && smtpLike) return byStatus;
  for (const reason of WORDS_AFTER_STATUS) if (matches(reason, text)) return reason;
  if (byStatus && byStatus !== 'undefined') return byStatus;
  const klass = e.status?.slice(0, 3);
  if (klass === '5.6' || klass === '4.6') return 'contenterror';
  if (klass === '5.7' || klass === '4.7') return 'securityerror';
  if (e.diagnosticType?.startsWith('x-unix')) return 'mailererror';
  if (matches('syntaxerror', text) || /^5\.5\./.test(e.status ?? '') || /^50[0-4]$/.test(e.replyCode ?? '')) return 'syntaxerror';
  if (e.action === 'delayed' || e.action === 'expired') return 'expired';
  if (e.command === 'HELO' || e.command === 'EHLO') return 'blocked';
  return text.trim() ? 'onhold' : 'undefined';
}

const HARD = new Set<BounceReason>(['userunknown', 'hostunknown', 'hasmoved']);

/**
 * sisimai's hardbounce: a recipient or domain that does not exist (or moved) is Permanent; a domain that accepts no mail
 * is Permanent unless the server said it was temporary; onhold and undefined are Undetermined; everything else Transient.
 */
export function bounceTypeOf(reason: BounceReason, status: string | null, replyCode: string | null, text: string): BounceType {
  if (reason === 'onhold' || reason === 'undefined' || reason === 'delivered') return 'Undetermined';
  // A 4.x.x status (or a bare 4xx reply) says the server may take it later: never a reason to drop the address.
  if ((status ?? replyCode ?? '').startsWith('4')) return 'Transient';
  if (HARD.has(reason)) return 'Permanent';
  if (reason !== 'notaccept') return 'Transient';
  const klass = (status ?? replyCode ?? '').charAt(0);
  if (klass === '5') return 'Permanent';
  return klass === '4' || / temporar| persistent/i.test(text) ? 'Transient' : 'Permanent';
}

/**
 * The one place reasons map to Amazon SES's bounceSubType vocabulary, so a webhook consumer written for SES reads ours:
 * a recipient that does not exist → NoEmail; a full mailbox → MailboxFull; size limits → MessageTooLarge; spam, policy and
 * filtering verdicts on the content → ContentRejected; a virus or banned attachment → AttachmentRejected; the rest General.
 */
const SUBTYPE: Partial<Record<BounceReason, string>> = {
  userunknown: 'NoEmail',
  hostunknown: 'NoEmail',
  hasmoved: 'NoEmail',
  notaccept: 'NoEmail',
  mailboxfull: 'MailboxFull',
  mesgtoobig: 'MessageTooLarge',
  exceedlimit: 'MessageTooLarge',
  spamdetected: 'ContentRejected',
  policyviolation: 'ContentRejected',
  contenterror: 'ContentRejected',
  notcompliantrfc: 'ContentRejected',
  filtered: 'ContentRejected',
  virusdetected: 'AttachmentRejected',
};
export const subTypeOf = (reason: BounceReason): string => SUBTYPE[reason] ?? 'General';

/** Text is capped before any pattern runs, so hostile input cannot make matching slow. */
export const MAX_DIAGNOSTIC_SCAN = 16 * 1024;

/** An enhanced status code (RFC 3463) in free text, preferring a specific one over X.0.0; IPv4 addresses are masked first. */
export function findEnhancedStatus(text: string, klass?: string, except?: string): string | null {
  const masked = text.slice(0, MAX_DIAGNOSTIC_SCAN).replace(/\d{1,3}(?:\.\d{1,3}){3}/g, '#');
  const found = masked.matchAll(/(?<![\w.-])([245])\.([0-7])\.(\d{1,3})(?![\d]|\.\d)/g);
  let generic: string | null = null;
  for (const m of found) {
    if (klass && m[1] !== klass) continue;
    const code = `${m[1]}.${m[2]}.${m[3]}`;
    if (code === except) continue;
    if (m[2] === '0' && m[3] === '0') generic ??= code;
    else return code;
  }
  return generic;
}

/** A three-digit SMTP reply code in free text: the one beside the status code if there is one, else the first standing alone. */
export function findReplyCode(text: string, status: string | null): string | null {
  const scan = text.slice(0, MAX_DIAGNOSTIC_SCAN);
  const beside = /(?<![\d.])([245]\d\d)[ -](?:#?)([245]\.\d{1,3}\.\d{1,3})/.exec(scan);
  if (beside && (!status || beside[1][0] === status[0])) return beside[1];
  for (const m of scan.matchAll(/(?:^|[\s:;("'<>=[])([245][0-5]\d)(?=[\s\-,.:;)\]]|$)/g)) {
    if (status && m[1][0] !== status[0]) continue;
    return m[1];
  }
  return null;
}

const COMMAND_PHRASE = new RegExp(
  '(?:after|in reply to|in response to|>>>|while (?:sending|talking)[^\\n]{0,40}?>>>|for|during)\\s+(?:the\\s+)?' +
    '(rcpt|mail|data|helo|ehlo|end of data|initial connection|connect|end of message)\\b',
  'i',
);

/** The SMTP command a failure answered, from the phrasings MTAs use ("after RCPT TO", "in reply to end of DATA command", ">>> MAIL FROM"). */
export function findCommand(text: string): ReasonEvidence['command'] {
  if (/does not like recipient|rcpt to response|recipient address rejected|smtp:rcpt |\[rcpt_to\]/i.test(text.slice(0, MAX_DIAGNOSTIC_SCAN))) return 'RCPT';
  const m = COMMAND_PHRASE.exec(text.slice(0, MAX_DIAGNOSTIC_SCAN));
  if (!m) return null;
  const word = m[1].toLowerCase();
  if (word === 'end of data' || word === 'end of message') return 'DATA';
  if (word === 'initial connection' || word === 'connect') return 'CONN';
  return word.toUpperCase() as ReasonEvidence['command'];
}
