import { applyData, resolveDataMap } from '../../src/modules/contacts/data-map';

test('resolveDataMap sorts values into stored, removed and request-only', () => {
  const r = resolveDataMap({
    plan: 'pro',
    seats: 3,
    vip: false,
    tags: ['a', 'b'],
    address: { city: 'Oslo' },
    gone: null,
    ignored: '',
    once: { value: 'x', persistent: false },
    kept: { value: 7, persistent: true },
    id: 'reserved',
    manageUrl: 'reserved',
  });
  expect(r.set).toEqual({ plan: 'pro', seats: 3, vip: false, tags: ['a', 'b'], address: { city: 'Oslo' }, kept: 7 });
  expect(r.unset).toEqual(['gone']);
  expect(r.values).toEqual({ plan: 'pro', seats: 3, vip: false, tags: ['a', 'b'], address: { city: 'Oslo' }, once: 'x', kept: 7 });
});

test('an object with extra keys beside value/persistent is stored as a plain object', () => {
  expect(resolveDataMap({ o: { value: 1, persistent: false, other: 2 } }).set).toEqual({ o: { value: 1, persistent: false, other: 2 } });
});

test('applyData merges and removes without touching the input', () => {
  const current = { a: 1, b: 2 };
  expect(applyData(current, { set: { c: 3 }, unset: ['a'] })).toEqual({ b: 2, c: 3 });
  expect(current).toEqual({ a: 1, b: 2 });
});
