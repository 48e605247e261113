import { htmlToText } from '../../src/mail/text';

test('links as text [url], images skipped, tables as blocks, no word wrap', () => {
  const long = 'word '.repeat(40).trim();
  const text = htmlToText(
    `<html><body><p>Hi <a href="https://x.example/a">there</a></p><img src="a.png" alt="logo"><table><tr><td>a</td><td>b</td></tr><tr><th>c</th><td>d</td></tr></table><p>${long}</p><a href="https://z.example">https://z.example</a></body></html>`,
  );
  expect(text).toBe(`Hi there [https://x.example/a]\n\na b\n\nc d\n\n${long}\n\nhttps://z.example`);
});

test('nothing left means no text part', () => {
  expect(htmlToText('<img src="x.png"><div> </div>')).toBeUndefined();
});
