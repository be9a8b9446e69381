/** @vantage/cli: the operator command line, runnable in-process for tests and tools. */
export { run } from './run';
export { decodeCapturedMessage } from './commands/decode';
export { processIo, type CliIo } from './io';
export { EXIT } from './exit-codes';
