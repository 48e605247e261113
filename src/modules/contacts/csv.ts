export interface CsvRecord {
  /** Line of the file the record starts on (1-based). */
  line: number;
  fields: string[];
  /** Set when the record cannot be read (an unterminated quoted field). */
  error?: string;
}

/**
 * Reads the complete CSV records (RFC 4180: commas, double-quoted fields with `""` for a quote,
 * CRLF or LF line ends, line breaks allowed inside quotes) at the start of `text`, which begins on
 * line `startLine`. Unless `final`, a last record that no line break has ended yet is left for the
 * next call with more text: `consumed` says how many characters were used, `nextLine` where the rest
 * begins. Blank lines are skipped. A quote inside an unquoted field is kept as text.
 */
export function parseCsv(text: string, startLine: number, final: boolean): { records: CsvRecord[]; consumed: number; nextLine: number } {
  const n = text.length;
  const records: CsvRecord[] = [];
  let i = 0;
  let line = startLine;
  let recordLine = line;
  let fields: string[] = [];
  let field = '';
  let consumed = 0;
  let nextLine = startLine;
  const endRecord = (end: number) => {
    fields.push(field);
    if (fields.length > 1 || fields[0] !== '') records.push({ line: recordLine, fields });
    fields = [];
    field = '';
    consumed = end;
    line++;
    recordLine = line;
    nextLine = line;
  };
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 44 /* , */) {
      fields.push(field);
      field = '';
      i++;
    } else if (c === 10 /* \n */ || c === 13 /* \r */) {
      if (c === 13 && i + 1 >= n && !final) break; // a \n may follow in the next piece
      i += c === 13 && text.charCodeAt(i + 1) === 10 ? 2 : 1;
      endRecord(i);
    } else if (c === 34 /* " */ && field === '') {
      // A quoted field: up to the closing quote, `""` standing for one quote.
      let j = i + 1;
      let value = '';
      for (;;) {
        const q = text.indexOf('"', j);
        if (q < 0 || (q + 1 >= n && !final)) {
          if (!final) return { records, consumed, nextLine };
          records.push({ line: recordLine, fields: [...fields, value + text.slice(j)], error: 'unterminated quoted field' });
          return { records, consumed: n, nextLine: line };
        }
        const part = text.slice(j, q);
        for (let k = part.indexOf('\n'); k >= 0; k = part.indexOf('\n', k + 1)) line++;
        value += part;
        if (text.charCodeAt(q + 1) === 34) {
          value += '"';
          j = q + 2;
        } else {
          j = q + 1;
          break;
        }
      }
      field = value;
      i = j;
    } else {
      let j = i;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 44 || d === 10 || d === 13) break;
        j++;
      }
      field += text.slice(i, j);
      i = j;
    }
  }
  if (final && (fields.length > 0 || field !== '')) endRecord(n);
  else if (final) consumed = n;
  return { records, consumed, nextLine };
}

/** A CSV value as a data field: booleans and numbers by their text, everything else a string; empty is absent. */
export function inferValue(raw: string): unknown {
  const v = raw.trim();
  if (v === '') return undefined;
  const lower = v.toLowerCase();
  if (lower === 'true' || lower === 'false') return lower === 'true';
  if (/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(v) && v.length <= 17) return Number(v);
  return v;
}
