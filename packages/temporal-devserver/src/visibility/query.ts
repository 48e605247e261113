/**
 * Temporal's visibility query language, the subset a dev server needs: comparisons, IN, BETWEEN,
 * IS [NOT] NULL, STARTS_WITH, AND/OR/NOT, parentheses and ORDER BY. Parsing resolves every name
 * against the namespace's search attributes and converts literals to typed values, so both the
 * in-memory evaluator and the SQL compiler receive a checked tree.
 */
import { enums } from '../proto';
import { invalidArgument } from '../rpc/errors';

const IVT = enums.IndexedValueType;
const Status = enums.WorkflowExecutionStatus;

export type Value = string | number | boolean;
export type CmpOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

export interface Field {
  name: string;
  /** IndexedValueType of the attribute. */
  type: number;
  system: boolean;
}

export type Expr =
  | { kind: 'and'; items: Expr[] }
  | { kind: 'or'; items: Expr[] }
  | { kind: 'not'; expr: Expr }
  | { kind: 'cmp'; field: Field; op: CmpOp; value: Value }
  | { kind: 'in'; field: Field; values: Value[]; negate: boolean }
  | { kind: 'between'; field: Field; low: Value; high: Value }
  | { kind: 'null'; field: Field; negate: boolean }
  | { kind: 'startsWith'; field: Field; value: string };

export interface VisibilityQuery {
  where?: Expr;
  orderBy: { field: Field; desc: boolean }[];
  /** `GROUP BY ExecutionStatus`: only counts accept it, and only that attribute (as Temporal's server). */
  groupBy?: Field;
}

/** Status names as they appear in queries ("Running") to enum values. */
export const STATUS_BY_NAME: Record<string, number> = {
  Running: Status.WORKFLOW_EXECUTION_STATUS_RUNNING,
  Completed: Status.WORKFLOW_EXECUTION_STATUS_COMPLETED,
  Failed: Status.WORKFLOW_EXECUTION_STATUS_FAILED,
  Canceled: Status.WORKFLOW_EXECUTION_STATUS_CANCELED,
  Terminated: Status.WORKFLOW_EXECUTION_STATUS_TERMINATED,
  ContinuedAsNew: Status.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
  TimedOut: Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
  Paused: Status.WORKFLOW_EXECUTION_STATUS_PAUSED,
};

type Token =
  { t: 'ident'; v: string } | { t: 'str'; v: string } | { t: 'num'; v: number } | { t: 'op'; v: string } | { t: 'punct'; v: '(' | ')' | ',' } | { t: 'end' };

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(' || c === ')' || c === ',') {
      out.push({ t: 'punct', v: c });
      i++;
    } else if (c === "'" || c === '"') {
      let v = '';
      i++;
      for (;;) {
        if (i >= src.length) throw invalidArgument(`invalid query: unterminated string in "${src}"`);
        if (src[i] === '\\' && i + 1 < src.length) {
          v += src[i + 1];
          i += 2;
        } else if (src[i] === c) {
          // A doubled quote is an escaped quote, as in SQL.
          if (src[i + 1] === c) {
            v += c;
            i += 2;
          } else {
            i++;
            break;
          }
        } else {
          v += src[i++];
        }
      }
      out.push({ t: 'str', v });
    } else if (c === '`') {
      const end = src.indexOf('`', i + 1);
      if (end < 0) throw invalidArgument('invalid query: unterminated `');
      out.push({ t: 'ident', v: src.slice(i + 1, end) });
      i = end + 1;
    } else if ('=!<>'.includes(c)) {
      const two = src.slice(i, i + 2);
      if (['!=', '<>', '<=', '>='].includes(two)) {
        out.push({ t: 'op', v: two === '<>' ? '!=' : two });
        i += 2;
      } else if (c === '!') {
        throw invalidArgument(`invalid query: unexpected "!" in "${src}"`);
      } else {
        out.push({ t: 'op', v: c });
        i++;
      }
    } else if (/[0-9-]/.test(c)) {
      const m = /^-?\d+(\.\d+)?([eE][-+]?\d+)?/.exec(src.slice(i));
      if (!m) throw invalidArgument(`invalid query near "${src.slice(i)}"`);
      out.push({ t: 'num', v: Number(m[0]) });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(src.slice(i))!;
      out.push({ t: 'ident', v: m[0] });
      i += m[0].length;
    } else {
      throw invalidArgument(`invalid query: unexpected "${c}" in "${src}"`);
    }
  }
  out.push({ t: 'end' });
  return out;
}

/** Looks up the type of a search attribute by name; undefined when the namespace has no such attribute. */
export type AttributeResolver = (name: string) => { type: number; system: boolean } | undefined;

class Parser {
  private pos = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly resolve: AttributeResolver,
    private readonly src: string,
  ) {}

  private peek(): Token {
    return this.tokens[this.pos];
  }

  private next(): Token {
    return this.tokens[this.pos++];
  }

  private isKeyword(word: string, offset = 0): boolean {
    const t = this.tokens[this.pos + offset];
    return t.t === 'ident' && t.v.toUpperCase() === word;
  }

  private expectKeyword(word: string): void {
    if (!this.isKeyword(word)) this.fail(`expected ${word}`);
    this.pos++;
  }

  private expectPunct(p: '(' | ')' | ','): void {
    const t = this.next();
    if (t.t !== 'punct' || t.v !== p) this.fail(`expected "${p}"`);
  }

  private fail(message: string): never {
    throw invalidArgument(`invalid query "${this.src}": ${message}`);
  }

  parse(): VisibilityQuery {
    let where: Expr | undefined;
    if (this.peek().t !== 'end' && !this.isKeyword('ORDER') && !this.isKeyword('GROUP')) where = this.parseOr();
    let groupBy: Field | undefined;
    if (this.isKeyword('GROUP')) {
      this.pos++;
      this.expectKeyword('BY');
      groupBy = this.parseField();
      if (groupBy.name !== 'ExecutionStatus') this.fail(`GROUP BY ${groupBy.name} is not supported: only ExecutionStatus`);
      if (this.peek().t === 'punct') this.fail('GROUP BY takes a single attribute');
    }
    const orderBy: VisibilityQuery['orderBy'] = [];
    if (this.isKeyword('ORDER')) {
      this.pos++;
      this.expectKeyword('BY');
      for (;;) {
        const field = this.parseField();
        let desc = false;
        if (this.isKeyword('DESC')) {
          desc = true;
          this.pos++;
        } else if (this.isKeyword('ASC')) {
          this.pos++;
        }
        orderBy.push({ field, desc });
        const t = this.peek();
        if (t.t === 'punct' && t.v === ',') this.pos++;
        else break;
      }
    }
    if (this.peek().t !== 'end') this.fail('unexpected trailing input');
    if (groupBy && orderBy.length) this.fail('ORDER BY cannot be combined with GROUP BY');
    return { where, orderBy, groupBy };
  }

  private parseOr(): Expr {
    const items = [this.parseAnd()];
    while (this.isKeyword('OR')) {
      this.pos++;
      items.push(this.parseAnd());
    }
    return items.length === 1 ? items[0] : { kind: 'or', items };
  }

  private parseAnd(): Expr {
    const items = [this.parseUnary()];
    while (this.isKeyword('AND')) {
      this.pos++;
      items.push(this.parseUnary());
    }
    return items.length === 1 ? items[0] : { kind: 'and', items };
  }

  private parseUnary(): Expr {
    if (this.isKeyword('NOT')) {
      this.pos++;
      return { kind: 'not', expr: this.parseUnary() };
    }
    const t = this.peek();
    if (t.t === 'punct' && t.v === '(') {
      this.pos++;
      const e = this.parseOr();
      this.expectPunct(')');
      return e;
    }
    return this.parsePredicate();
  }

  private parseField(): Field {
    const t = this.next();
    if (t.t !== 'ident') this.fail('expected a search attribute name');
    const found = this.resolve(t.v);
    if (!found) throw invalidArgument(`invalid query: search attribute ${t.v} is not defined`);
    return { name: t.v, ...found };
  }

  private parseLiteral(field: Field): Value {
    const t = this.next();
    let raw: Value;
    if (t.t === 'str' || t.t === 'num') raw = t.v;
    else if (t.t === 'ident' && /^(true|false)$/i.test(t.v)) raw = t.v.toLowerCase() === 'true';
    else this.fail(`expected a value for ${field.name}`);
    return coerce(field, raw!, this.src);
  }

  private parsePredicate(): Expr {
    const field = this.parseField();
    const t = this.peek();
    if (t.t === 'op') {
      this.pos++;
      return { kind: 'cmp', field, op: t.v as CmpOp, value: this.parseLiteral(field) };
    }
    let negate = false;
    if (this.isKeyword('NOT') && (this.isKeyword('IN', 1) || this.isKeyword('BETWEEN', 1))) {
      negate = true;
      this.pos++;
    }
    if (this.isKeyword('IN')) {
      this.pos++;
      this.expectPunct('(');
      const values = [this.parseLiteral(field)];
      for (;;) {
        const p = this.next();
        if (p.t === 'punct' && p.v === ',') values.push(this.parseLiteral(field));
        else if (p.t === 'punct' && p.v === ')') break;
        else this.fail('expected "," or ")"');
      }
      return { kind: 'in', field, values, negate };
    }
    if (this.isKeyword('BETWEEN')) {
      this.pos++;
      const low = this.parseLiteral(field);
      this.expectKeyword('AND');
      const high = this.parseLiteral(field);
      const e: Expr = { kind: 'between', field, low, high };
      return negate ? { kind: 'not', expr: e } : e;
    }
    if (this.isKeyword('IS')) {
      this.pos++;
      let isNot = false;
      if (this.isKeyword('NOT')) {
        isNot = true;
        this.pos++;
      }
      this.expectKeyword('NULL');
      return { kind: 'null', field, negate: isNot };
    }
    if (this.isKeyword('STARTS_WITH')) {
      this.pos++;
      const v = this.parseLiteral(field);
      if (typeof v !== 'string') this.fail('STARTS_WITH needs a string');
      return { kind: 'startsWith', field, value: v };
    }
    this.fail(`expected an operator after ${field.name}`);
  }
}

/** Literal to the comparable value of its attribute: ms for datetimes, enum number for ExecutionStatus. */
function coerce(field: Field, raw: Value, src: string): Value {
  if (field.name === 'ExecutionStatus') {
    const status = typeof raw === 'string' ? STATUS_BY_NAME[raw] : undefined;
    if (status === undefined) throw invalidArgument(`invalid query "${src}": invalid ExecutionStatus value ${String(raw)}`);
    return status;
  }
  switch (field.type) {
    case IVT.INDEXED_VALUE_TYPE_DATETIME: {
      const ms = typeof raw === 'number' ? raw / 1e6 : Date.parse(String(raw));
      if (Number.isNaN(ms)) throw invalidArgument(`invalid query "${src}": invalid datetime ${String(raw)}`);
      return ms;
    }
    case IVT.INDEXED_VALUE_TYPE_INT:
    case IVT.INDEXED_VALUE_TYPE_DOUBLE: {
      const n = Number(raw);
      if (Number.isNaN(n)) throw invalidArgument(`invalid query "${src}": ${field.name} needs a number`);
      return n;
    }
    case IVT.INDEXED_VALUE_TYPE_BOOL:
      return raw === true || raw === 'true';
    default:
      return String(raw);
  }
}

export function parseVisibilityQuery(src: string | null | undefined, resolve: AttributeResolver): VisibilityQuery {
  const text = (src ?? '').trim();
  if (!text) return { orderBy: [] };
  return new Parser(tokenize(text), resolve, text).parse();
}
