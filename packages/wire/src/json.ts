/** JSON in with exact 64-bit integers: why it is written by hand, and how, is the package README's "Written by hand, and why". */
import { WireReject } from './result';
import { defineData, JsonFloat } from './values';

// 2^64 has 20 digits; a sign and a few leading zeros fit well inside 40.
const MAX_INT_LITERAL = 40;

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

class Reader {
  pos = 0;
  constructor(
    private readonly s: string,
    private readonly maxDepth: number,
  ) {}

  fail(code: 'malformed' | 'truncated', what: string): never {
    throw new WireReject(code, `json at offset ${this.pos}: ${what}`);
  }

  ws(): void {
    const s = this.s;
    while (this.pos < s.length) {
      const c = s.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.pos++;
      else break;
    }
  }

  value(depth: number): unknown {
    this.ws();
    if (this.pos >= this.s.length) this.fail('truncated', 'unexpected end of input');
    const c = this.s[this.pos]!;
    if (c === '{') return this.object(depth + 1);
    if (c === '[') return this.array(depth + 1);
    if (c === '"') return this.string();
    if (c === 't') return this.literal('true', true);
    if (c === 'f') return this.literal('false', false);
    if (c === 'n') return this.literal('null', null);
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    return this.fail('malformed', `unexpected character ${JSON.stringify(c)}`);
  }

  literal<T>(word: string, v: T): T {
    const got = this.s.slice(this.pos, this.pos + word.length);
    if (got !== word) {
      if (word.startsWith(got) && this.pos + got.length >= this.s.length) this.fail('truncated', 'unexpected end of input');
      this.fail('malformed', `expected ${word}`);
    }
    this.pos += word.length;
    return v;
  }

  /** Skips a run of digits; `what` names it in the error when there is none. */
  digits(what: string): void {
    const s = this.s;
    const start = this.pos;
    while (this.pos < s.length && s[this.pos]! >= '0' && s[this.pos]! <= '9') this.pos++;
    if (this.pos === start) this.pos >= s.length ? this.fail('truncated', 'number cut off') : this.fail('malformed', `${what} expected`);
  }

  number(): bigint | JsonFloat {
    const s = this.s;
    const start = this.pos;
    if (s[this.pos] === '-') this.pos++;
    const intStart = this.pos;
    this.digits('digit');
    if (this.pos - intStart > 1 && s[intStart] === '0') this.fail('malformed', 'leading zero');
    let isFloat = false;
    if (s[this.pos] === '.') {
      isFloat = true;
      this.pos++;
      this.digits('fraction digit');
    }
    if (s[this.pos] === 'e' || s[this.pos] === 'E') {
      isFloat = true;
      this.pos++;
      if (s[this.pos] === '+' || s[this.pos] === '-') this.pos++;
      this.digits('exponent digit');
    }
    const text = s.slice(start, this.pos);
    if (isFloat) return new JsonFloat(Number(text), text);
    // Bound the literal before BigInt() sees it: parsing a megabyte of digits is quadratic.
    if (text.length > MAX_INT_LITERAL) {
      throw new WireReject('out_of_range', `json at offset ${start}: integer literal of ${text.length} characters`);
    }
    return BigInt(text);
  }

  string(): string {
    const s = this.s;
    const start = this.pos++;
    let escaped = false;
    for (;;) {
      if (this.pos >= s.length) this.fail('truncated', 'unterminated string');
      const c = s.charCodeAt(this.pos);
      if (c === 0x22) break;
      if (c < 0x20) this.fail('malformed', 'control character in string');
      if (c === 0x5c) {
        escaped = true;
        const e = s[++this.pos];
        if (e === undefined) this.fail('truncated', 'unterminated escape');
        if (e === 'u') {
          const hex = s.slice(this.pos + 1, this.pos + 5);
          if (hex.length < 4) this.fail('truncated', 'unterminated \\u escape');
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('malformed', 'bad \\u escape');
          this.pos += 4;
        } else if (!'"\\/bfnrt'.includes(e)) this.fail('malformed', `bad escape \\${e}`);
      }
      this.pos++;
    }
    this.pos++;
    // Every escape is checked above and a string literal holds no numbers: JSON.parse decodes it losing nothing.
    return escaped ? (JSON.parse(s.slice(start, this.pos)) as string) : s.slice(start + 1, this.pos - 1);
  }

  /** Steps into an array or object at `depth`; true when it is empty (`close` follows at once). */
  open(depth: number, close: string): boolean {
    if (depth > this.maxDepth) throw new WireReject('too_large', `json: nested deeper than ${this.maxDepth}`);
    this.pos++;
    this.ws();
    if (this.s[this.pos] !== close) return false;
    this.pos++;
    return true;
  }

  /** After an entry: true at the closing `close`, false after a `,`. */
  more(close: string, what: string): boolean {
    this.ws();
    const c = this.s[this.pos];
    if (c === undefined) this.fail('truncated', `unterminated ${what}`);
    this.pos++;
    if (c === close) return true;
    if (c !== ',') this.fail('malformed', `expected ',' or '${close}'`);
    return false;
  }

  array(depth: number): unknown[] {
    const out: unknown[] = [];
    if (this.open(depth, ']')) return out;
    do out.push(this.value(depth));
    while (!this.more(']', 'array'));
    return out;
  }

  object(depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (this.open(depth, '}')) return out;
    do {
      this.ws();
      if (this.pos >= this.s.length) this.fail('truncated', 'unterminated object');
      if (this.s[this.pos] !== '"') this.fail('malformed', 'object key expected');
      const key = this.string();
      if (Object.prototype.hasOwnProperty.call(out, key)) this.fail('malformed', `duplicate key ${JSON.stringify(key)}`);
      this.ws();
      if (this.pos >= this.s.length) this.fail('truncated', 'unterminated object');
      if (this.s[this.pos] !== ':') this.fail('malformed', "expected ':'");
      this.pos++;
      defineData(out, key, this.value(depth));
    } while (!this.more('}', 'object'));
    return out;
  }
}

/** Parse one JSON document; integers become bigint. Throws WireReject. */
export function readJson(input: Uint8Array | string, maxBytes: number, maxDepth: number): unknown {
  let text: string;
  if (typeof input === 'string') {
    text = input;
  } else if (input instanceof Uint8Array) {
    if (input.length > maxBytes) throw new WireReject('too_large', `input: ${input.length} bytes exceed the limit of ${maxBytes}`);
    try {
      text = fatalUtf8.decode(input);
    } catch {
      throw new WireReject('malformed', 'input: not valid UTF-8');
    }
  } else {
    throw new WireReject('wrong_type', 'input: expected bytes or a string');
  }
  // Length in UTF-16 units bounds work too; compare generously for strings.
  if (text.length > maxBytes) throw new WireReject('too_large', `input: ${text.length} characters exceed the limit of ${maxBytes}`);
  const r = new Reader(text, maxDepth);
  r.ws();
  if (r.pos >= text.length) throw new WireReject('truncated', 'input: empty document');
  const v = r.value(0);
  r.ws();
  if (r.pos !== text.length) r.fail('malformed', 'trailing characters after the document');
  return v;
}
