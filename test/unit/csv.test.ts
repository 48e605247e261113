import { inferValue, parseCsv } from '../../src/modules/contacts/csv';

test('quoted fields, escaped quotes, commas and line breaks inside quotes, CRLF and LF, blank lines', () => {
  const text = 'email,note\r\na@x.io,"one, two"\n\nb@x.io,"say ""hi""\nsecond line"\nc@x.io,plain\n';
  const { records, consumed, nextLine } = parseCsv(text, 1, true);
  expect(records).toEqual([
    { line: 1, fields: ['email', 'note'] },
    { line: 2, fields: ['a@x.io', 'one, two'] },
    { line: 4, fields: ['b@x.io', 'say "hi"\nsecond line'] },
    { line: 6, fields: ['c@x.io', 'plain'] },
  ]);
  expect(consumed).toBe(text.length);
  expect(nextLine).toBe(7);
});

test('split anywhere, the pieces parse to the same records as the whole', () => {
  const text = 'email,note\na@x.io,"q ""x"" y"\r\nb@x.io,"multi\nline"\nc@x.io,last';
  const whole = parseCsv(text, 1, true).records;
  for (let cut = 0; cut <= text.length; cut++) {
    const first = parseCsv(text.slice(0, cut), 1, false);
    const rest = parseCsv(text.slice(first.consumed), first.nextLine, true);
    expect([...first.records, ...rest.records]).toEqual(whole);
  }
});

test('an unterminated quote is reported on its record at the end of the file', () => {
  const { records } = parseCsv('a@x.io,ok\nb@x.io,"open\n', 1, true);
  expect(records[1]).toMatchObject({ line: 2, error: 'unterminated quoted field' });
});

test('inferred types: booleans, numbers, strings; empty is absent', () => {
  expect([inferValue('true'), inferValue('FALSE'), inferValue('42'), inferValue('-1.5'), inferValue('007'), inferValue(' x '), inferValue('')]).toEqual([
    true,
    false,
    42,
    -1.5,
    '007',
    'x',
    undefined,
  ]);
});
