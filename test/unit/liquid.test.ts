import { checkTemplate, RenderDeadline, renderTemplate, TemplateRenderError, TemplateSyntaxError } from '../../src/mail/liquid';
import { compileMjml, wrapLiquidTags } from '../../src/mail/mjml';
import { composeMessage } from '../../src/mail/compose';
import { Links } from '../../src/mail/links';
import { DEFAULT_PROJECT_SETTINGS } from '../../src/modules/accounts/project-settings';
import { templateVariables } from '../../src/mail/render';

const vars = templateVariables({
  contact: { id: 'c1', email: 'ada@example.com', data: { name: 'Ada <Lovelace>', plan: 'pro', tags: ['a', 'b&c'], address: { city: 'London' }, zero: 0 } },
  values: {
    order: 42,
    items: [
      { name: '<b>Tea</b>', qty: 2 },
      { name: 'Cake & co', qty: 1 },
    ],
  },
  links: { unsubscribeUrl: 'https://x/unsubscribe/c1?token=t&x=1', subscribeUrl: 'https://x/subscribe/c1', manageUrl: 'https://x/manage/c1' },
});
const html = (t: string, v: Record<string, unknown> = vars) => renderTemplate(t, v, 'html');
const text = (t: string, v: Record<string, unknown> = vars) => renderTemplate(t, v, 'text');

describe('old placeholders render as they always did', () => {
  test('top-level and data. variables, escaped in HTML, raw in text', () => {
    expect(html('Hi {{name}} / {{ data.name }}')).toBe('Hi Ada &lt;Lovelace&gt; / Ada &lt;Lovelace&gt;');
    expect(text('Hi {{name}}')).toBe('Hi Ada <Lovelace>');
    expect(text('{{email}} {{id}} {{order}} {{zero}}')).toBe('ada@example.com c1 42 0');
    expect(html('{{data.address.city}}')).toBe('London');
    expect(text('{{address}}')).toBe('{"city":"London"}');
  });

  test('missing values are empty, or the fallback after ??', () => {
    expect(html('[{{nope}}]')).toBe('[]');
    expect(html('Hi {{first ?? friend}}!')).toBe('Hi friend!');
    expect(html('Hi {{ first ?? "dear <friend>" }}!')).toBe('Hi dear &lt;friend&gt;!');
    expect(text("{{first ?? 'x'}}")).toBe('x');
    expect(text('{{plan ?? free}}')).toBe('pro');
    expect(text('{{first name ?? "it\'s \\"you\\""}}')).toBe('it\'s \\"you\\"');
    expect(text('{{ empty ?? a }} {{5}} {{first name}}', { empty: 'E', 5: 'five', 'first name': 'F' })).toBe('E five F');
    expect(text('{{ x ?? y }}{{ blank ?? z }}', { x: '', blank: [] })).toBe('yz');
    expect(html('{{ plan ?? "free | basic" }} {{ nope ?? a|b }}', { plan: '' })).toBe('free | basic a|b');
  });

  test('arrays render as <li> items in HTML and a list in text', () => {
    expect(html('<ul>{{tags}}</ul>')).toBe('<ul><li>a</li><li>b&amp;c</li></ul>');
    expect(text('{{tags}}')).toBe('a, b&c');
  });

  test('links are available, escaped as attribute values', () => {
    expect(html('<a href="{{unsubscribeUrl}}">x</a>')).toBe('<a href="https://x/unsubscribe/c1?token=t&amp;x=1">x</a>');
    expect(text('{{manageUrl}} {{subscribeUrl}}')).toBe('https://x/manage/c1 https://x/subscribe/c1');
  });

  test('prototype properties are not variables', () => {
    expect(text('{{constructor}}{{__proto__}}{{toString}}{{ name.constructor }}')).toBe('');
  });
});

describe('Liquid', () => {
  test('conditions, loops and filters; every output escaped in HTML unless | raw', () => {
    const t =
      '{% if plan == "pro" %}Pro{% else %}Free{% endif %}: {% for i in items %}<li>{{ i.name }} × {{ i.qty | times: 2 }}</li>{% endfor %}{{ name | upcase }}';
    expect(html(t)).toBe('Pro: <li>&lt;b&gt;Tea&lt;/b&gt; × 4</li><li>Cake &amp; co × 2</li>ADA &lt;LOVELACE&gt;');
    expect(text(t)).toBe('Pro: <li><b>Tea</b> × 4</li><li>Cake & co × 2</li>ADA <LOVELACE>');
    expect(html('{{ name | raw }}')).toBe('Ada <Lovelace>');
    expect(html('{% for i in items %}{{ forloop.index }}{% endfor %}')).toBe('12');
  });

  test('a template that does not parse names its line and column as written', () => {
    const at = (t: string) => {
      try {
        checkTemplate(t, 'html');
      } catch (err) {
        return (err as TemplateSyntaxError).message;
      }
      return 'parsed';
    };
    expect(at('<p>\n{{ name ?? "friend" }}\n{{name}} {% if plan %}x')).toBe('tag {% if plan %} not closed at line 3, column 10');
    expect(at('{{ a | nope }}')).toMatch(/undefined filter: nope at line 1, column 1/);
    expect(at('x {% include "secrets" %}')).toBe('{% include %} is not allowed: templates cannot read files at line 1, column 3');
    expect(at('{% render "a" %}')).toMatch(/not allowed/);
    expect(at('{% layout "a" %}')).toMatch(/not allowed/);
    expect(at('{{ name ?? "x" }} {% for %}')).toMatch(/at line 1, column 19$/);
  });

  test('the examples of docs/api.md render as it says', () => {
    const receipt =
      '<p>Thanks {{ name | default: "there" }}!</p><table>{% for line in order.lines %}<tr><td>{{ line.name }}</td><td>{{ line.qty }} × ' +
      '{{ line.price | prepend: "$" }}</td></tr>{% endfor %}</table><p>Total: {{ order.total | prepend: "$" }}</p>';
    const order = { number: 1042, lines: [{ name: 'Tea', qty: 2, price: 4.5 }], total: 9 };
    expect(html(receipt, { name: 'Ada', order })).toBe('<p>Thanks Ada!</p><table><tr><td>Tea</td><td>2 × $4.5</td></tr></table><p>Total: $9</p>');
    const branch =
      '{% if plan == "pro" %}<p>Your Pro features are on, {{ name }}.</p>{% elsif locale == "fr" %}<p>Bienvenue, {{ name | default: "ami" }} !</p>' +
      '{% else %}<p>Welcome, {{ name ?? "friend" }}. <a href="{{ manageUrl }}">Choose what you receive</a>.</p>{% endif %}';
    expect(html(branch, { plan: 'pro', name: 'Li' })).toBe('<p>Your Pro features are on, Li.</p>');
    expect(html(branch, { locale: 'fr' })).toBe('<p>Bienvenue, ami !</p>');
    expect(html(branch, { manageUrl: 'https://x/m?a=1&b=2' })).toBe('<p>Welcome, friend. <a href="https://x/m?a=1&amp;b=2">Choose what you receive</a>.</p>');
  });

  test('a runaway template stops at a cap', () => {
    const capped = (t: string) => {
      try {
        html(t);
      } catch (err) {
        return err instanceof TemplateRenderError ? err.message : `other: ${String(err)}`;
      }
      return 'rendered';
    };
    expect(capped('{% for i in (1..100000000) %}x{% endfor %}')).toBe('memory alloc limit exceeded');
    expect(capped('{% for i in (1..10000) %}{% for j in (1..10000) %}{% endfor %}{% endfor %}')).toBe('template render limit exceeded');
    expect(capped('{% for i in (1..5000) %}{{ long }}{% endfor %}'.replace('{{ long }}', 'x'.repeat(5000)))).toBe('output size limit exceeded');
  });

  test('renders that share a deadline stop at it together', () => {
    const deadline = new RenderDeadline(300);
    const slow = '{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}';
    const failures: string[] = [];
    for (let i = 0; i < 10; i++) {
      try {
        renderTemplate(slow, {}, 'html', deadline);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    expect(failures.length).toBeGreaterThanOrEqual(9);
    expect(new Set(failures)).toEqual(new Set(['template render limit exceeded']));
  });
});

describe('MJML sources', () => {
  test('Liquid tags between components are wrapped in mj-raw; tags in text are left alone', () => {
    const source =
      '<mjml><mj-body>{% if a %}<mj-section><mj-column>{% for x in xs %}<mj-text>{% if b %}<p>{{ x }}</p>{% endif %}</mj-text>' +
      '<mj-image src="{{ x }}" />{% endfor %}</mj-column></mj-section>{% endif %}</mj-body></mjml>';
    expect(wrapLiquidTags(source)).toBe(
      '<mjml><mj-body><mj-raw>{% if a %}</mj-raw><mj-section><mj-column><mj-raw>{% for x in xs %}</mj-raw>' +
        '<mj-text>{% if b %}<p>{{ x }}</p>{% endif %}</mj-text>' +
        '<mj-image src="{{ x }}" /><mj-raw>{% endfor %}</mj-raw></mj-column></mj-section><mj-raw>{% endif %}</mj-raw></mj-body></mjml>',
    );
  });

  test('compiled: the loop survives and renders; invalid MJML names its line', async () => {
    const compiled = await compileMjml(
      '<mjml><mj-body><mj-section><mj-column>\n{% for x in xs %}<mj-text>{{ x }}</mj-text>{% endfor %}\n</mj-column></mj-section></mj-body></mjml>',
    );
    const out = html(compiled, { xs: ['<a>', 'b'] });
    expect(out).toContain('&lt;a&gt;</div>');
    expect(out).toContain('>b</div>');
    await expect(compileMjml('<mjml><mj-body>\n<mj-section>\n<mj-text>x</mj-text></mj-section></mj-body></mjml>')).rejects.toThrow(
      /^invalid MJML at line 3: mj-text cannot be used inside mj-section/,
    );
  });
});

describe('the text part', () => {
  const compose = (body: string, data: Record<string, unknown>) =>
    composeMessage({
      emailId: 'e1',
      type: 'TRANSACTIONAL',
      subject: 's',
      body,
      contact: { id: 'c1', email: 'a@example.org', data },
      headers: {},
      settings: { ...DEFAULT_PROJECT_SETTINGS, tracking: 'off' },
      links: new Links('https://x.example', 'secret'),
    });

  test('old placeholders are rendered into the text template, their values as written', () => {
    const m = compose('<h1>Hi {{ name }}</h1><p>{{ plan ?? "free" }}</p>', { name: 'Zoë <z>' });
    expect(m.html).toBe('<h1>Hi Zoë &lt;z&gt;</h1><p>free</p>');
    expect(m.text).toBe('HI Zoë <z>\n\nfree');
  });

  test('a body with Liquid logic is rendered once and its HTML converted', () => {
    const m = compose('<h1>Hi {{ name | default: "you" }}</h1><p>{% if vip %}<b>VIP</b> {% endif %}{% for i in items %}{{ i }}, {% endfor %}</p>', {
      name: 'Zoë <z>',
      vip: true,
      items: ['a', 'b'],
    });
    expect(m.html).toBe('<h1>Hi Zoë &lt;z&gt;</h1><p><b>VIP</b> a, b, </p>');
    expect(m.text).toBe('HI ZOË <Z>\n\nVIP a, b,');
  });

  test('HTML a template writes with | raw is text in the text part, not markup', () => {
    const m = compose('<p>{{ note | raw }}</p>', { note: '<b>Paid</b> <a href="https://x.example/r">receipt</a>' });
    expect(m.text).toBe('Paid receipt [https://x.example/r]');
  });
});
