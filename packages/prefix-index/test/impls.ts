/**
 * The index implementations the shared suites (semantics, reference-model and Dynamo differential
 * tests) run against. `RunIndex` keeps runs of blocks per node (README, "A second layout, with runs
 * of blocks"); it is not the product index yet and has no snapshot, so the suites skip their
 * snapshot steps for it.
 */
import { PrefixIndex } from '../src/index';
import { RunIndex } from '../src/run-index';

export interface Implementation {
  readonly name: string;
  /** Typed as PrefixIndex's class: the suites use only what both have, snapshots only when `snapshots`. */
  readonly Index: typeof PrefixIndex;
  readonly snapshots: boolean;
}

export const IMPLEMENTATIONS: readonly Implementation[] = [
  { name: 'PrefixIndex', Index: PrefixIndex, snapshots: true },
  { name: 'RunIndex', Index: RunIndex as unknown as typeof PrefixIndex, snapshots: false },
];
