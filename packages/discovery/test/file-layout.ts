// Dynamo's file layout for a logical key, to write discovery files as Dynamo does (the store reads
// them back with fileNameToKey): used by this package's tests and the indexer's.
import { join } from 'node:path';

/** The file path Dynamo uses for a logical key: the first two segments are directories (`v1/mdc`), the rest one encoded name. */
export function keyToFilePath(dir: string, key: string): string {
  const parts = key.split('/');
  if (parts.length < 3) throw new RangeError(`discovery key ${JSON.stringify(key)} has no bucket`);
  const rest = parts.slice(2).join('/');
  const encoded = [...new TextEncoder().encode(rest)]
    .map((b) => (/[A-Za-z0-9]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`))
    .join('');
  return join(dir, parts[0]!, parts[1]!, encoded);
}
