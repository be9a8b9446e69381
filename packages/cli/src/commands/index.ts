/**
 * The command table. A new command (replay, fit, sweep, evaluate, infra) is
 * one file in this folder exporting a Command, plus one line here.
 */
import type { Command } from '../command';
import { decodeCommand } from './decode';
import { evaluateCommand } from './evaluate';
import { fitCommand } from './fit';
import { hashCommand } from './hash';
import { replayCommand } from './replay';
import { replaySimCommand } from './replay-sim';
import { studyCommand } from './study';
import { sweepCommand } from './sweep';

export const COMMANDS: readonly Command[] = [hashCommand, decodeCommand, replayCommand, fitCommand, replaySimCommand, sweepCommand, evaluateCommand, studyCommand];
