import { render } from '../../src/mail/render';
import { htmlToText, htmlToTextTemplate } from '../../src/mail/text';

test('links as text [url], images skipped, tables as blocks, no word wrap', () => {
  const long = 'word '.repeat(40).trim();
  const text = htmlToText(
    `<html><body><p>Hi <a href="https://x.example/a">there</a></p><img src="a.png" alt="logo">` +
      `<table><tr><td>a</td><td>b</td></tr><tr><th>c</th><td>d</td></tr></table>` +
      `<p>${long}</p><a href="https://z.example">https://z.example</a></body></html>`,
  );
  expect(text).toBe(`Hi there [https://x.example/a]\n\na b\n\nc d\n\n${long}\n\nhttps://z.example`);
});

test('nothing left means no text part', () => {
  expect(htmlToText('<img src="x.png"><div> </div>')).toBeUndefined();
});

describe('text templates', () => {
  const vars = { name: 'Zoë & co', url: 'https://x.example/u?a=1&b=2' };

  test('convert once, keep placeholders whole (headings upper-case only the template’s own words), render in text mode', () => {
    const template = htmlToTextTemplate('<h1>Hello {{ name ?? "friend" }}</h1><p>Open <a href="{{url}}">your page</a>, {{name}}.</p>')!;
    expect(template).toBe('HELLO {{ name ?? "friend" }}\n\nOpen your page [{{url}}], {{name}}.');
    expect(render(template, vars, 'text')).toBe('HELLO Zoë & co\n\nOpen your page [https://x.example/u?a=1&b=2], Zoë & co.');
    expect(render(template, {}, 'text')).toBe('HELLO friend\n\nOpen your page [], .');
  });

  test('the same text as converting the rendered HTML, for what headings do not change', () => {
    const body = '<p>Dear {{name}},</p><p>See <a href="https://x.example/{{id}}">this</a>.</p>';
    const data = { name: 'Ana <3', id: 'a1' };
    expect(render(htmlToTextTemplate(body)!, data, 'text')).toBe(htmlToText(render(body, data, 'html')));
  });

  test('a template with no text has none', () => {
    expect(htmlToTextTemplate('<img src="{{logo}}">')).toBeUndefined();
  });
});
