// Test helpers: a logger whose lines are captured as parsed JSON objects.
import { createLogger, type Logger } from '../src/logger';

export interface CapturedLog {
  log: Logger;
  lines: Record<string, unknown>[];
  messages(): string[];
}

export function captureLogger(level: 'debug' | 'info' = 'debug'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    service: 'test',
    instanceId: 'i-1',
    level,
    destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  return { log, lines, messages: () => lines.map((l) => String(l['msg'])) };
}
