import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (the folder holding the workspace package.json). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Everything downloaded, built or run by infra lives below `.infra/` (ignored by git):
 * bin/ (nats-server), kafka/<version>/libs (broker jars), m2/ (Maven cache),
 * gomod/ and gocache/ (Go build caches), run/ (pid files, logs, broker data of `infra up`).
 */
export const INFRA_DIR = process.env.VANTAGE_INFRA_DIR ?? join(REPO_ROOT, '.infra');
export const BIN_DIR = join(INFRA_DIR, 'bin');
export const RUN_DIR = join(INFRA_DIR, 'run');
