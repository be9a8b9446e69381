/**
 * A Dynamo discovery store as a stream of key changes.
 *
 * Dynamo 1.6.1 keeps its discovery entries under logical keys such as
 * `v1/mdc/{ns}/{comp}/{ep}/{instance_id as 16 hex digits}`, `v1/instances/…`,
 * `v1/event_channels/…` and `v1/event_sources/…`, each value one JSON document.
 * The file backend (`DYN_FILE_KV=<dir>`) writes one file per key at
 * `<dir>/<bucket>/<percent-encoded rest of the key>` (for example
 * `<dir>/v1/mdc/dynamo%2Fbackend%2Fgenerate%2Fc54390c7385591cc`); etcd holds
 * the same logical keys, each under the lease of the process that wrote it.
 *
 * A backend reports every key under a prefix once at start (`initial: true`),
 * then each put and delete as it happens. Keys are always the logical form,
 * whatever the backend's own spelling.
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
