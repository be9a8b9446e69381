/**
 * `vantage decode`: pretty-print a captured Dynamo message (event-plane
 * envelope, RouterEvent in msgpack or legacy JSON, a 1.6.1 batch of
 * RouterEvents, ActiveLoad, ForwardPassMetrics, active-sequence event or
 * batch), u64 values as exact decimal strings.
 */
import {
  decodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEnvelope,
  decodeForwardPassMetrics,
  decodeRouterEventsMsgpack,
  decodeEventPlaneMessage,
  decodeRouterEventJson,
  decodeRouterEventMsgpack,
  sniffMessage,
  type Result,
} from '@vantage/wire';
import { choice, parseOptions, readInput } from '../args';
import { EXIT, InputError } from '../exit-codes';
import type { CliIo } from '../io';
import { printJson } from '../print';

const FORMATS = ['auto', 'envelope', 'msgpack-router-event', 'msgpack-router-event-batch', 'json-router-event', 'active-load', 'forward-pass-metrics', 'active-sequence'] as const;
type Format = (typeof FORMATS)[number];
const ENCODINGS = ['auto', 'raw', 'hex', 'base64'] as const;
type Encoding = (typeof ENCODINGS)[number];

export const name = 'decode';
export const summary = 'Pretty-print a captured Dynamo message (msgpack or JSON)';
export const help = `Usage: vantage decode [--format FORMAT] [--input-encoding ENC] [--topic TOPIC] [FILE|-]

Decode one captured Dynamo message from FILE (or standard input: - or no FILE)
and print it as JSON. 64-bit hashes and ids print as exact decimal strings.

Options:
  --format FORMAT        auto (default), envelope, msgpack-router-event,
                         msgpack-router-event-batch (Dynamo 1.6.1's kv-events payload: an array),
                         json-router-event, active-load, forward-pass-metrics,
                         active-sequence (one event or a batch)
  --input-encoding ENC   how the file holds the bytes: auto (default), raw, hex, base64
                         (auto: hex if it is only hex digits and whitespace, base64 if it is
                         only base64 characters, otherwise raw)
  --topic TOPIC          for envelopes: dispatch the payload on this topic or subject
                         instead of the envelope's own topic field (kv-events, kv_metrics,
                         forward-pass-metrics, active_sequences_events, or a full
                         subject such as namespace.dynamo.component.backend.endpoint.generate.kv-events)
  -h, --help             this help

Exit codes: 0 decoded, 2 rejected by the decoder (code and reason on stderr),
64 bad arguments, 65 bad hex/base64 or unrecognised message, 66 file unreadable.
`;

/** The message bytes from file content in the given (or detected) text encoding. */
function unwrapInput(raw: Uint8Array, encoding: Encoding): Uint8Array {
  if (encoding === 'raw') return raw;
  const text = Buffer.from(raw).toString('latin1');
  const compact = text.replace(/\s+/g, '');
  const isHex = compact.length > 0 && compact.length % 2 === 0 && /^[0-9a-fA-F]+$/.test(compact);
  const isB64 = compact.length > 0 && compact.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(compact);
  if (encoding === 'hex' || (encoding === 'auto' && isHex)) {
    if (!isHex) throw new InputError('input is not hex (even count of 0-9a-f digits)', EXIT.DATA);
    return new Uint8Array(Buffer.from(compact, 'hex'));
  }
  if (encoding === 'base64' || (encoding === 'auto' && isB64)) {
    if (!isB64) throw new InputError('input is not base64', EXIT.DATA);
    return new Uint8Array(Buffer.from(compact, 'base64'));
  }
  return raw;
}

/** `sniffMessage`'s answer as a --format name. */
const SNIFFED: Record<NonNullable<ReturnType<typeof sniffMessage>>, Exclude<Format, 'auto'>> = {
  envelope: 'envelope',
  router_event_json: 'json-router-event',
  router_event_msgpack: 'msgpack-router-event',
  router_event_batch: 'msgpack-router-event-batch',
  forward_pass: 'forward-pass-metrics',
  active_load: 'active-load',
  active_sequence: 'active-sequence',
};

/** The decoder of each format but the envelope, and the name of what it decodes. */
const DECODERS: Record<Exclude<Format, 'auto' | 'envelope'>, { readonly kind: string; readonly decode: (bytes: Uint8Array) => Result<unknown> }> = {
  'msgpack-router-event': { kind: 'router_event', decode: decodeRouterEventMsgpack },
  'msgpack-router-event-batch': { kind: 'router_events', decode: decodeRouterEventsMsgpack },
  'forward-pass-metrics': { kind: 'forward_pass_metrics', decode: decodeForwardPassMetrics },
  'json-router-event': { kind: 'router_event', decode: decodeRouterEventJson },
  'active-load': { kind: 'active_load', decode: decodeActiveLoad },
  'active-sequence': { kind: 'active_sequence_events', decode: decodeActiveSequenceEvents },
};

function detect(bytes: Uint8Array): Exclude<Format, 'auto'> {
  const sniffed = sniffMessage(bytes);
  if (sniffed === undefined) throw new InputError('could not recognise the message; give --format', EXIT.DATA);
  return SNIFFED[sniffed];
}

function decode(format: Exclude<Format, 'auto'>, bytes: Uint8Array, topic: string | undefined): { kind: string; result: Result<unknown> } {
  if (format !== 'envelope') return { kind: DECODERS[format].kind, result: DECODERS[format].decode(bytes) };
  const full = decodeEventPlaneMessage(bytes, topic === undefined ? undefined : { topic });
  if (full.ok) return { kind: 'event_plane_message', result: full };
  // Show the envelope itself when only its payload is unusable, but still exit as rejected.
  const env = decodeEnvelope(bytes);
  if (env.ok) return { kind: 'event_plane_message', result: { ...full, reason: `${full.reason} (envelope topic ${JSON.stringify(env.value.topic)}, publisher ${env.value.publisherId}, sequence ${env.value.sequence})` } };
  return { kind: 'event_plane_message', result: full };
}

/**
 * What `vantage decode` does with one message's bytes, as a library call: the format (detected
 * when `auto`), the kind of value, and the decoder's result. Throws InputError when `auto` cannot
 * recognise the bytes.
 */
export function decodeCapturedMessage(
  bytes: Uint8Array,
  opts: { readonly format?: Format; readonly topic?: string } = {},
): { format: Exclude<Format, 'auto'>; kind: string; result: Result<unknown> } {
  const format = opts.format === undefined || opts.format === 'auto' ? detect(bytes) : opts.format;
  return { format, ...decode(format, bytes, opts.topic) };
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseOptions(argv, ['format', 'input-encoding', 'topic'], [], 1);
  const format = choice('format', values.format, FORMATS, 'auto');
  const encoding = choice('input-encoding', values['input-encoding'], ENCODINGS, 'auto');
  const topic = typeof values.topic === 'string' ? values.topic : undefined;
  const bytes = unwrapInput(await readInput(io, positionals[0] ?? '-'), encoding);
  const { format: chosen, kind, result } = decodeCapturedMessage(bytes, { format, topic });
  if (!result.ok) {
    io.stderr(`rejected (${chosen}): ${result.code}: ${result.reason}\n`);
    return EXIT.REJECTED;
  }
  io.stdout(printJson({ format: chosen, [kind]: result.value }));
  return EXIT.OK;
}
