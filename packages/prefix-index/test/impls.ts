/**
 * The index implementations the shared suites (semantics, reference-model and Dynamo differential
 * tests) run against: `RunIndex`, runs of blocks per node (the product layout), and `PrefixIndex`,
 * a record per block (README, the two layouts in its introduction).
 */
import { PrefixIndex, RunIndex } from '../src/index';

export interface Implementation {
  readonly name: string;
  /** Typed as PrefixIndex's class: the suites use only what both have. */
  readonly Index: typeof PrefixIndex;
  /**
   * A restored index snapshots to the same bytes. `PrefixIndex` writes its tables as they are;
   * `RunIndex` writes the layout-neutral tree (version 3), whose order follows its tables', which a
   * restore rebuilds in another order: its round trip is checked by answers and statistics.
   */
  readonly exactSnapshots: boolean;
}

export const IMPLEMENTATIONS: readonly Implementation[] = [
  { name: 'PrefixIndex', Index: PrefixIndex, exactSnapshots: true },
  { name: 'RunIndex', Index: RunIndex as unknown as typeof PrefixIndex, exactSnapshots: false },
];
