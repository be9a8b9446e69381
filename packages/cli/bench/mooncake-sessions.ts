/**
 * Multi-turn Mooncake traces in the form NVIDIA Dynamo's replay reads
 * (`session_id`; the first turn's `timestamp`; each later turn's `delay`, ms
 * after the previous turn completes), made two ways:
 *
 * - `generateMooncakeSessions`: seeded chat-like sessions. Sessions that draw
 *   the same system prompt share its blocks; every turn's prompt is the
 *   previous turn's prompt plus new tokens (the answer and the next message),
 *   so each turn's prompt is a token prefix of the next one's. The engine's
 *   own output tokens are synthetic in both replays, so a later prompt reuses
 *   the previous prompt, never the generated blocks.
 * - `groupConversations`: sessions recovered from a single-turn trace: a
 *   request continues the session of the earlier request it shares the most
 *   leading blocks with (at least `minSharedBlocks`), when that request is
 *   still its session's last turn. Later turns keep their `timestamp` and carry
 *   no `delay`, so a reader infers the delay from the timestamps as Dynamo's
 *   loader does.
 *
 * Lines come out in time order of their (nominal) arrivals, as JSON objects
 * ready for `mooncakeJsonl`; `parseMooncakeTrace` reads them back.
 */
import { seededRng } from '@vantage/selection';
import { MOONCAKE_CHUNK_TOKENS, sample, type Dist, type MooncakeRecord } from '@vantage/sim';

/** One line of a Mooncake trace as written to a file. */
interface MooncakeTraceLine {
  readonly session_id?: string;
  readonly timestamp?: number;
  readonly delay?: number;
  readonly input_length: number;
  readonly output_length: number;
  readonly hash_ids: readonly number[];
}

interface MooncakeSessionConfig {
  readonly sessions: number;
  readonly seed: number | string;
  /** Distinct system prompts, drawn uniformly per session. */
  readonly systemPrompts: number;
  /** System prompt length in 512-token blocks. */
  readonly systemPromptBlocks: Dist;
  /** The first user message, tokens after the system prompt. */
  readonly firstMessageTokens: Dist;
  /** Tokens each later turn adds (the previous answer and the next message or tool result). */
  readonly newTokensPerTurn: Dist;
  readonly outputTokens: Dist;
  readonly turnsPerSession: Dist;
  /** Wait after the previous turn completes (Dynamo's `delay`). */
  readonly delayMs: Dist;
  readonly sessionInterarrivalMs: Dist;
  /** A session ends once its next prompt would exceed this. Default 65,536. */
  readonly maxInputTokens?: number;
}

export const DEFAULT_MOONCAKE_SESSIONS: Omit<MooncakeSessionConfig, 'sessions' | 'seed'> = Object.freeze({
  systemPrompts: 4,
  systemPromptBlocks: { kind: 'uniform', min: 2, max: 8 },
  firstMessageTokens: { kind: 'lognormal', median: 800, sigma: 0.8, min: 16, max: 8000 },
  newTokensPerTurn: { kind: 'lognormal', median: 600, sigma: 0.9, min: 16, max: 8000 },
  outputTokens: { kind: 'lognormal', median: 200, sigma: 0.8, min: 1, max: 2000 },
  turnsPerSession: { kind: 'uniform', min: 1, max: 8 },
  delayMs: { kind: 'lognormal', median: 1500, sigma: 1.0, min: 0, max: 30_000 },
  sessionInterarrivalMs: { kind: 'exponential', mean: 400 },
  maxInputTokens: 65_536,
} satisfies Omit<MooncakeSessionConfig, 'sessions' | 'seed'>);

const CHUNK = MOONCAKE_CHUNK_TOKENS;

function whole(d: Dist, rng: ReturnType<typeof seededRng>, min: number): number {
  return Math.max(min, Math.round(sample(d, rng)));
}

/** Seeded multi-turn sessions in Dynamo's Mooncake form (see the file comment). */
export function generateMooncakeSessions(config: MooncakeSessionConfig): MooncakeTraceLine[] {
  const c = { ...DEFAULT_MOONCAKE_SESSIONS, ...config };
  if (!Number.isInteger(c.sessions) || c.sessions < 0) throw new RangeError(`sessions must be a non-negative integer, got ${c.sessions}`);
  if (!Number.isInteger(c.systemPrompts) || c.systemPrompts < 1) throw new RangeError(`systemPrompts must be a positive integer, got ${c.systemPrompts}`);
  const maxIn = c.maxInputTokens ?? 65_536;
  const shared = seededRng(`${c.seed}:system-prompts`);
  const systemBlocks: number[] = [];
  let nextId = 0;
  const systemIds: number[][] = [];
  for (let p = 0; p < c.systemPrompts; p++) {
    const n = whole(c.systemPromptBlocks, shared, 0);
    systemBlocks.push(n);
    systemIds.push(Array.from({ length: n }, () => nextId++));
  }
  const arrivals = seededRng(`${c.seed}:arrivals`);
  const out: { t: number; order: number; line: MooncakeTraceLine }[] = [];
  let start = 0;
  for (let s = 0; s < c.sessions; s++) {
    if (s > 0) start += Math.max(0, sample(c.sessionInterarrivalMs, arrivals));
    const rng = seededRng(`${c.seed}:session:${s}`);
    const sessionId = `s${s}`;
    const p = Math.min(c.systemPrompts - 1, Math.floor(rng.next() * c.systemPrompts));
    const ids = [...systemIds[p]!];
    let isl = systemBlocks[p]! * CHUNK + whole(c.firstMessageTokens, rng, 1);
    const turns = whole(c.turnsPerSession, rng, 1);
    // Nominal time only orders the lines; replays release later turns on completion.
    let t = Math.round(start);
    for (let k = 0; k < turns; k++) {
      if (k > 0) {
        const grow = whole(c.newTokensPerTurn, rng, 1);
        if (isl + grow > maxIn) break;
        isl += grow;
      }
      if (isl > maxIn) break;
      while (ids.length < Math.ceil(isl / CHUNK)) ids.push(nextId++);
      const osl = whole(c.outputTokens, rng, 1);
      const body = { input_length: isl, output_length: osl, hash_ids: [...ids] };
      if (k === 0) out.push({ t, order: out.length, line: { session_id: sessionId, timestamp: t, ...body } });
      else {
        const delay = Math.round(Math.max(0, sample(c.delayMs, rng)));
        t += delay;
        out.push({ t, order: out.length, line: { session_id: sessionId, delay, ...body } });
      }
    }
    if (nextId > 0xffff_ffff) throw new RangeError('hash ids exceed 32 bits');
  }
  return out.sort((a, b) => a.t - b.t || a.order - b.order).map((x) => x.line);
}

/**
 * Sessions recovered from a single-turn trace (see the file comment). Records
 * keep their order; each line gets `session_id` = `c<line of its first turn>`.
 */
export function groupConversations(records: readonly MooncakeRecord[], opts: { minSharedBlocks?: number } = {}): MooncakeTraceLine[] {
  const minShared = opts.minSharedBlocks ?? 2;
  if (!Number.isInteger(minShared) || minShared < 1) throw new RangeError(`minSharedBlocks must be a positive integer, got ${minShared}`);
  // A trie of leading-id runs: node → the earliest record holding that run.
  const child = new Map<string, number>();
  const holder: number[] = [];
  const session: string[] = [];
  const tail = new Map<string, number>();
  const out: MooncakeTraceLine[] = [];
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    if ((r.turn ?? 0) > 0 || r.timestampMs === null) throw new RangeError(`line ${r.line}: groupConversations takes a single-turn trace`);
    const ids = [...r.hashIds];
    const path: number[] = [];
    let node = -1;
    for (const id of ids) {
      const k = `${node},${id}`;
      let n = child.get(k);
      if (n === undefined) {
        n = holder.length;
        holder.push(i);
        child.set(k, n);
      }
      path.push(n);
      node = n;
    }
    // The deepest run some earlier record holds, at least minShared blocks long.
    let parent = -1;
    for (let k = path.length; k >= minShared; k--) {
      const h = holder[path[k - 1]!]!;
      if (h !== i) {
        parent = h;
        break;
      }
    }
    const sid = parent >= 0 && tail.get(session[parent]!) === parent ? session[parent]! : `c${r.line}`;
    session.push(sid);
    tail.set(sid, i);
    out.push({ session_id: sid, timestamp: r.timestampMs, input_length: r.inputLength, output_length: r.outputLength, hash_ids: ids });
  }
  return out;
}

/** JSON Lines text of a trace (one object per line, newline-terminated). */
export function mooncakeJsonl(lines: readonly MooncakeTraceLine[]): string {
  return lines.map((l) => JSON.stringify(l)).join('\n') + (lines.length > 0 ? '\n' : '');
}
