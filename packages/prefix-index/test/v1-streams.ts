/**
 * The command streams behind `fixtures/snapshot-v1.json`: images written by the version-1 snapshot
 * format (before the node table and block-id tables were made compact). The restore test replays
 * the same streams into a fresh index and checks that each version-1 image restores to an index
 * that behaves exactly like it.
 */
import fc from 'fast-check';
import { cmdArb } from './streams';
import type { Cmd } from './streams';

export const V1_SEED = 0x5eed_00f1;
export const V1_STREAMS = 12;

/** [before the snapshot, after it] for each fixture image. */
export function v1Streams(): Array<[Cmd[], Cmd[]]> {
  return fc.sample(fc.tuple(fc.array(cmdArb, { minLength: 20, maxLength: 80 }), fc.array(cmdArb, { maxLength: 30 })), {
    seed: V1_SEED,
    numRuns: V1_STREAMS,
  });
}
