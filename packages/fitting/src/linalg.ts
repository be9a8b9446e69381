/**
 * Dense linear solve for the ridge normal equations (at most four unknowns):
 * Gaussian elimination with partial pivoting, which reports a singular system
 * (λ = 0 with a collinear design) instead of mangling it. README, "Solver".
 */
type SolveResult = { readonly ok: true; readonly x: number[] } | { readonly ok: false; readonly reason: string };

/** Solve A x = b. A is n x n (not modified). Singular means a pivot below 1e-12 of the largest entry. */
export function solveLinear(a: readonly (readonly number[])[], b: readonly number[]): SolveResult {
  const n = b.length;
  if (a.length !== n || a.some((row) => row.length !== n)) return { ok: false, reason: 'matrix and vector sizes differ' };
  const m = a.map((row, i) => [...row, b[i] as number]);
  let scale = 0;
  for (const row of a) for (const v of row) scale = Math.max(scale, Math.abs(v));
  if (!Number.isFinite(scale)) return { ok: false, reason: 'matrix has a non-finite entry' };
  const tol = 1e-12 * (scale === 0 ? 1 : scale);
  for (let col = 0; col < n; col++) {
    let piv = col;
    for (let r = col + 1; r < n; r++) if (Math.abs((m[r] as number[])[col] as number) > Math.abs((m[piv] as number[])[col] as number)) piv = r;
    const pr = m[piv] as number[];
    const pv = pr[col] as number;
    if (Math.abs(pv) <= tol) return { ok: false, reason: `singular system (pivot ${pv} in column ${col})` };
    m[piv] = m[col] as number[];
    m[col] = pr;
    for (let r = col + 1; r < n; r++) {
      const row = m[r] as number[];
      const f = (row[col] as number) / pv;
      if (f === 0) continue;
      for (let c = col; c <= n; c++) row[c] = (row[c] as number) - f * (pr[c] as number);
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    const row = m[r] as number[];
    let s = row[n] as number;
    for (let c = r + 1; c < n; c++) s -= (row[c] as number) * (x[c] as number);
    x[r] = s / (row[r] as number);
  }
  return { ok: true, x };
}
