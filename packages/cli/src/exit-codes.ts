/**
 * Exit codes, stable for scripts (documented in the README). The 64+ values
 * follow BSD sysexits so they mean the same as in other operator tools.
 */
export const EXIT = Object.freeze({
  /** Success. */
  OK: 0,
  /** Unexpected internal failure (a bug): message on stderr. */
  INTERNAL: 1,
  /** The input was read but the decoder rejected it: code and reason on stderr. */
  REJECTED: 2,
  /** Bad command line: unknown command or option, missing or invalid argument. */
  USAGE: 64,
  /** Input data unusable before decoding: bad hex/base64, token ids that are not u32. */
  DATA: 65,
  /** Input file missing or unreadable. */
  NO_INPUT: 66,
});

/** Thrown by commands for a bad command line; `run()` prints it with the command's usage. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Thrown by commands for unusable input data or an unreadable file. */
export class InputError extends Error {
  override name = 'InputError';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}
