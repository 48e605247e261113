import { ReturnPaths } from '../../src/mail/return-path';

const paths = new ReturnPaths('a secret of the service', 'bounces');
const emailId = '01a2178a-5cfa-75bc-8f72-18e0924822c3';

test('a return path names its email, on <prefix>.<domain>, and reads back whatever the case', () => {
  const address = paths.address(emailId, 'Acme.test');
  expect(address).toMatch(/^b01a2178a5cfa75bc8f7218e0924822c3[0-9a-f]{16}@bounces\.acme\.test$/);
  expect(paths.parse(address)).toEqual({ kind: 'email', emailId });
  expect(paths.parse(address.toUpperCase())).toEqual({ kind: 'email', emailId });
  expect(paths.parse('fbl@bounces.acme.test')).toEqual({ kind: 'feedback-loop', domain: 'acme.test' });
  expect(paths.parse('FBL@Bounces.News.Acme.test')).toEqual({ kind: 'feedback-loop', domain: 'news.acme.test' });
});

test('a forged, altered or foreign address is not ours', () => {
  const address = paths.address(emailId, 'acme.test');
  const [local, host] = address.split('@');
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === '0' ? '1' : '0') + s.slice(i + 1);
  expect(paths.parse(`${flip(local, 5)}@${host}`)).toBeUndefined(); // another email's id, the old MAC
  expect(paths.parse(`${flip(local, local.length - 1)}@${host}`)).toBeUndefined(); // a made-up MAC
  expect(paths.parse(`${local}@mail.acme.test`)).toBeUndefined(); // not a return-path host
  expect(paths.parse(`${local}@bounces.`)).toBeUndefined();
  expect(paths.parse('postmaster@bounces.acme.test')).toBeUndefined();
  expect(new ReturnPaths('another secret', 'bounces').parse(address)).toBeUndefined();
  expect(paths.parse('no at sign')).toBeUndefined();
});
