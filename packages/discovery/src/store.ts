/**
 * A Dynamo discovery store as a stream of key changes. Keys are always Dynamo's logical form (the
 * README's "What Dynamo 1.6.1 writes"), whatever the backend's own spelling (file-store.ts, etcd-keys.ts).
 */
export type DiscoveryChange =
  | { readonly kind: 'put'; readonly key: string; readonly value: Uint8Array }
  | { readonly kind: 'delete'; readonly key: string };

export interface DiscoveryStore {
  /** `file` or `etcd`: for logs and metrics labels. */
  readonly backend: string;
  /**
   * Report every key under `prefix` (for example `v1/`) to `onChanges`, first all
   * present ones in one call with `initial` true, then changes as they happen.
   * Resolves once the initial listing has been delivered. Errors after that are
   * reported through `onError`, and the store keeps trying to resume its watch.
   */
  watch(
    prefix: string,
    onChanges: (changes: readonly DiscoveryChange[], initial: boolean) => void,
    onError?: (err: Error) => void,
  ): Promise<void>;
  /** Stop watching and release connections and timers. */
  close(): Promise<void>;
}
