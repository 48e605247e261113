import { render, templateVariables } from '../../src/mail/render';

const vars = templateVariables({
  contact: { id: 'c1', email: 'ada@example.com', data: { name: 'Ada <Lovelace>', plan: 'pro', tags: ['a', 'b&c'], address: { city: 'London' }, zero: 0 } },
  values: { order: 42 },
  links: { unsubscribeUrl: 'https://x/unsubscribe/c1?token=t&x=1', subscribeUrl: 'https://x/subscribe/c1', manageUrl: 'https://x/manage/c1' },
});

test('top-level and data. variables, escaped in HTML, raw in text', () => {
  expect(render('Hi {{name}} / {{ data.name }}', vars, 'html')).toBe('Hi Ada &lt;Lovelace&gt; / Ada &lt;Lovelace&gt;');
  expect(render('Hi {{name}}', vars, 'text')).toBe('Hi Ada <Lovelace>');
  expect(render('{{email}} {{id}} {{order}} {{zero}}', vars, 'text')).toBe('ada@example.com c1 42 0');
  expect(render('{{data.address.city}}', vars, 'html')).toBe('London');
});

test('missing values are empty, or the fallback after ??', () => {
  expect(render('[{{nope}}]', vars, 'html')).toBe('[]');
  expect(render('Hi {{first ?? friend}}!', vars, 'html')).toBe('Hi friend!');
  expect(render('Hi {{ first ?? "dear <friend>" }}!', vars, 'html')).toBe('Hi dear &lt;friend&gt;!');
  expect(render("{{first ?? 'x'}}", vars, 'text')).toBe('x');
  expect(render('{{plan ?? free}}', vars, 'text')).toBe('pro');
});

test('arrays render as <li> items in HTML and a list in text', () => {
  expect(render('<ul>{{tags}}</ul>', vars, 'html')).toBe('<ul><li>a</li><li>b&amp;c</li></ul>');
  expect(render('{{tags}}', vars, 'text')).toBe('a, b&c');
});

test('links are available, escaped as attribute values', () => {
  expect(render('<a href="{{unsubscribeUrl}}">x</a>', vars, 'html')).toBe('<a href="https://x/unsubscribe/c1?token=t&amp;x=1">x</a>');
  expect(render('{{manageUrl}} {{subscribeUrl}}', vars, 'text')).toBe('https://x/manage/c1 https://x/subscribe/c1');
});

test('prototype properties are not variables', () => {
  expect(render('{{constructor}}{{__proto__}}{{toString}}', vars, 'text')).toBe('');
});
