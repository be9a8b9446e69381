/**
 * Reading back the JSON Lines `vantage replay --format jsonl` writes (one flattened record per line,
 * `toJsonRow`): the one line reader of the offline tools (fitting's calibration rows, evaluation's
 * outcome rows). It never throws: every non-blank line becomes an object with its 1-based line
 * number, or a problem with that line and why.
 */

/** A line the tools could not use, and why. */
export interface RowProblem {
  /** 1-based line of the source; 0 for rows built in code. */
  readonly line: number;
  readonly message: string;
}

/** One JSON object read from a line. */
interface LineObject {
  readonly line: number;
  readonly row: Record<string, unknown>;
}

interface JsonRowsRead {
  readonly objects: LineObject[];
  /** Lines that were not JSON, or not a JSON object. */
  readonly problems: RowProblem[];
  /** Non-blank lines (blank ones are not counted). */
  readonly lines: number;
}

/** `value` as a row object, or why it is not one. */
export function asRowObject(value: unknown): Record<string, unknown> | string {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : 'not a JSON object';
}

/** Every non-blank line of `text` parsed as one JSON object. */
export function readJsonRows(text: string): JsonRowsRead {
  const objects: LineObject[] = [];
  const problems: RowProblem[] = [];
  let lines = 0;
  text.split(/\r?\n/).forEach((raw, i) => {
    if (raw.trim() === '') return;
    const line = i + 1;
    lines++;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      problems.push({ line, message: `not JSON: ${err instanceof Error ? err.message : String(err)}` });
      return;
    }
    const row = asRowObject(value);
    if (typeof row === 'string') problems.push({ line, message: row });
    else objects.push({ line, row });
  });
  return { objects, problems, lines };
}
