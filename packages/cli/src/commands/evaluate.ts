/**
 * `vantage evaluate`: analyse the outcome rows of a five-variant evaluation
 * (the JSON Lines `vantage replay --kind outcome --format jsonl` writes) and
 * write a self-contained HTML report, optionally the analysis as JSON. All
 * the arithmetic is in @vantage/evaluation; this file reads, reports
 * progress and writes.
 */
import { analyzeEvaluation, parseEvaluationRows, renderEvaluationHtml, type EvaluationAnalysis } from '@vantage/evaluation';
import { numOpt, parseOptions, readRows, required, writeOutput } from '../args';
import { EXIT, UsageError } from '../exit-codes';
import type { CliIo } from '../io';
import { differenceLines, variantFigures } from '../print';

export const name = 'evaluate';
export const summary = 'analyse a five-variant evaluation from outcome rows; write an HTML report (and JSON)';
export const help = `Usage: vantage evaluate --input FILE|- --out FILE.html [--json FILE]
                        [--bootstrap N] [--seed N] [--confidence C] [--baseline V] [--lenient]

Analyse a five-variant evaluation: per variant, TTFT (mean, p90), full-response
latency, session completion time, uncached input by model, routing overhead,
competing traffic's TTFT, and how often the rule could act, changed the choice
or fell back (by reason); differences from the Stage baseline with percentile
bootstrap intervals over whole sessions (paired when sessions are matched).
Progress on stderr, a summary on stdout.

Input: outcome rows as \`vantage replay --kind outcome --format jsonl\` writes
them. The variant is the decision's; background rows without a decision take
it from their session id (evalbg:<attempt>:<variant>:<stream>). Rows with no
variant (calibration, warm-ups) are skipped and counted.

Options:
  --input FILE        JSON Lines file, or - for standard input (required)
  --out FILE          HTML report to write (required)
  --json FILE         also write the analysis as JSON
  --bootstrap N       bootstrap replicates (default 2000)
  --seed N            bootstrap seed (default 1)
  --confidence C      interval level in (0, 1) (default 0.95)
  --baseline V        variant differences are taken against (default baseline)
  --lenient           leave bad rows out (listed on stderr) instead of refusing the file
  -h, --help          this help

Exit codes: 0 written, 64 bad arguments, 65 bad rows or no evaluation rows,
66 unreadable input, 1 output not writable.
`;

function summaryText(a: EvaluationAnalysis, out: string): string {
  const lines = [`report -> ${out}`];
  for (const v of a.variants) {
    lines.push(`${v.variant.padEnd(14)} sessions ${v.sessions.total} (${v.sessions.withFailures} with failures), requests ${v.requests.executed}/${v.requests.total} executed, ${variantFigures(v)}`);
  }
  lines.push(...differenceLines(a));
  for (const w of a.warnings) lines.push(`warning: ${w}`);
  return `${lines.join('\n')}\n`;
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(argv, ['input', 'out', 'json', 'bootstrap', 'seed', 'confidence', 'baseline'], ['lenient']);
  const input = required('input', values['input']);
  const out = required('out', values['out']);
  const json = values['json'];
  if (json !== undefined && (typeof json !== 'string' || json === '')) throw new UsageError('--json needs a file name');
  const iterations = numOpt('bootstrap', values['bootstrap'], 2000, { integer: true, min: 1 });
  const seed = numOpt('seed', values['seed'], 1, { integer: true });
  const confidence = numOpt('confidence', values['confidence'], 0.95);
  if (!(confidence > 0 && confidence < 1)) throw new UsageError('--confidence must be a number in (0, 1)');
  const baseline = values['baseline'] === undefined ? 'baseline' : required('baseline', values['baseline']);

  const parsed = await readRows(io, 'evaluate', input, 'evaluation rows', values['lenient'] === true, parseEvaluationRows);

  io.stderr(`evaluate: analysing (${iterations} bootstrap replicates, seed ${seed})\n`);
  const analysis = analyzeEvaluation(parsed, { seed, iterations, confidence, baseline, onProgress: (line) => io.stderr(`evaluate: ${line}\n`) });
  await writeOutput(out, renderEvaluationHtml(analysis));
  io.stderr(`evaluate: wrote report ${out}\n`);
  if (typeof json === 'string') {
    await writeOutput(json, `${JSON.stringify(analysis, null, 2)}\n`);
    io.stderr(`evaluate: wrote analysis ${json}\n`);
  }
  io.stdout(summaryText(analysis, out));
  return EXIT.OK;
}
