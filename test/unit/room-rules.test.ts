import { execFileSync } from 'node:child_process';
import path from 'node:path';

/**
 * The rooms' arrows (docs/architecture.md) hold because ESLint refuses an import against them: each case
 * here is an import a file of that room must never write, linted as if it were in the tree.
 */
const root = path.resolve(__dirname, '../..');

// eslint.config.mjs loads by dynamic import, which jest's module sandbox cannot do: ESLint runs in a child process, once for every case.
const LINT = `
const { ESLint } = require('eslint');
const cases = JSON.parse(process.argv[1]);
(async () => {
  const eslint = new ESLint({ cwd: process.cwd() });
  const out = [];
  for (const [file, source] of cases) {
    const [result] = await eslint.lintText(source + '\\n', { filePath: file });
    out.push(result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message));
  }
  process.stdout.write(JSON.stringify(out));
})();
`;

const refused: Array<[string, string]> = [
  ['src/delivery/permits.ts', "import { suppressionOf } from '../modules/suppressions';"],
  ['src/delivery/permits.ts', "import type { ReturnPaths } from '../inbound/return-paths';"],
  ['src/delivery/permits.ts', "import { AppError } from '../http/error-envelope';"],
  ['src/inbound/inbound.queries.ts', "import { recordEmailActivity } from '../modules/emails';"],
  ['src/inbound/inbound.queries.ts', "import { DeliveryEngine } from '../delivery';"],
  ['src/inbound/inbound.queries.ts', "import type { TemporalClient } from '../../temporal/client';"],
  ['src/mail/links.ts', "import { notFound } from '../modules/topics';"],
  ['src/net/guarded-http.ts', "import { errorEnvelope } from '../http/error-envelope';"],
  ['src/db/orm.ts', "import { DeliveryEngine } from '../delivery';"],
  ['src/config.ts', "import { SendingJudge } from './modules/security';"],
  ['src/modules/topics/topics.service.ts', "import { errorEnvelope } from '../../http/error-envelope';"],
];
const allowed: Array<[string, string]> = [
  ['src/delivery/permits.ts', "import { newId } from '../db/ids';"],
  ['src/inbound/inbound.queries.ts', "import { SmtpReply } from '../mail/smtp-listener';"],
  ['src/modules/topics/topics.service.ts', "import { notFound } from '../../errors';"],
  ['src/modules/topics/topics.routes.ts', "import { endpoint } from '../../http/endpoint';"],
  ['src/modules/topics/topics.schemas.ts', "import { dateTime } from '../../http/responses';"],
  ['src/main.ts', "import { suppressionOf } from './modules/suppressions';"],
];
const messages: string[][] = JSON.parse(
  execFileSync(process.execPath, ['-e', LINT, JSON.stringify([...refused, ...allowed])], { cwd: root, encoding: 'utf8' }),
);

test.each(refused.map((c, i) => [...c, messages[i]] as const))('%s may not write %s', (_file, _source, found) => {
  expect(found).toHaveLength(1);
});

test.each(allowed.map((c, i) => [...c, messages[refused.length + i]] as const))('%s may write %s', (_file, _source, found) => {
  expect(found).toEqual([]);
});
