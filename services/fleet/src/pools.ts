import { isValidPoolName } from '@vantage/protocol';
import type { LoadgenPool } from './gateway';

/** `efficient:64[:model],capable:64[:model]` (efficient first). Throws with a readable message. */
export function parsePools(spec: string): { efficient: LoadgenPool; capable: LoadgenPool } {
  const parts = spec.split(',').map((p) => p.trim());
  if (parts.length !== 2) throw new Error(`--pools needs two entries (efficient first, capable second), got ${spec}`);
  const [e, c] = parts.map((p) => {
    const [name, bs, model] = p.split(':');
    if (!name || !isValidPoolName(name)) throw new Error(`bad pool name in --pools: ${p}`);
    const blockSize = bs === undefined || bs === '' ? 64 : Number(bs);
    if (!Number.isInteger(blockSize) || blockSize <= 0) throw new Error(`bad block size in --pools: ${p}`);
    return { name, blockSize, model: model ?? name };
  });
  return { efficient: e!, capable: c! };
}
