/**
 * The command table. A new command is one file in this folder exporting the
 * members of a Command (`name`, `summary`, `help`, `run`), plus one line here.
 */
import type { Command } from '../command';
import * as decode from './decode';
import * as evaluate from './evaluate';
import * as fit from './fit';
import * as hash from './hash';
import * as replay from './replay';
import * as replaySim from './replay-sim';
import * as study from './study';
import * as sweep from './sweep';

export const COMMANDS: readonly Command[] = [hash, decode, replay, fit, replaySim, sweep, evaluate, study];
