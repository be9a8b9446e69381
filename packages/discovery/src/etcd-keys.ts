/**
 * How Dynamo's logical discovery keys are spelled in etcd: as they are, slashes unencoded, after an
 * optional `root` (README.md, "etcd backend", measured from Dynamo 1.6.1).
 */

export type EtcdKeyRejection =
  | { readonly ok: false; readonly code: 'key_not_utf8'; readonly reason: string }
  | { readonly ok: false; readonly code: 'key_outside_root'; readonly reason: string };

type EtcdKeyResult = { readonly ok: true; readonly key: string } | EtcdKeyRejection;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const lossy = new TextDecoder('utf-8');

/** The key as text with U+FFFD where it is not UTF-8, and its bytes in hex (both cut at 96 bytes). */
function preview(bytes: Uint8Array): string {
  const cut = bytes.subarray(0, 96);
  const hex = Array.from(cut, (b) => b.toString(16).padStart(2, '0')).join('');
  const more = bytes.length > cut.length ? '…' : '';
  return `${JSON.stringify(lossy.decode(cut))}${more} (${bytes.length} bytes: ${hex}${more})`;
}

/**
 * The logical key of an etcd key, or a typed rejection: a key that is not valid UTF-8 (Dynamo's
 * keys always are; anything else was written by something that is not Dynamo) or one outside
 * `root` (etcd only sends keys in the watched range, so this means a misconfiguration).
 */
export function logicalKeyOf(etcdKey: Uint8Array, root = ''): EtcdKeyResult {
  let text: string;
  try {
    text = utf8.decode(etcdKey);
  } catch {
    return { ok: false, code: 'key_not_utf8', reason: `etcd key is not valid UTF-8: ${preview(etcdKey)}` };
  }
  if (!text.startsWith(root)) {
    return { ok: false, code: 'key_outside_root', reason: `etcd key ${JSON.stringify(text.slice(0, 200))} is not under the root ${JSON.stringify(root)}` };
  }
  return { ok: true, key: text.slice(root.length) };
}
