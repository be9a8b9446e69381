// Ridge regression against systems solved by hand, lambda = 0 as ordinary
// least squares, the unpenalised intercept, and grouped CV's choice of lambda.
import { describe, expect, it } from 'vitest';
import { solveLinear } from '../src/linalg';
import { crossValidateRidge, groupFolds, ridgeSolve } from '../src/ridge';

describe('solveLinear', () => {
  it('needs the row swap of partial pivoting', () => {
    const r = solveLinear([[0, 1], [1, 0]], [2, 3]);
    expect(r).toEqual({ ok: true, x: [3, 2] });
  });
  it('reports a singular system instead of returning garbage', () => {
    const r = solveLinear([[1, 2], [2, 4]], [1, 2]);
    expect(r.ok).toBe(false);
  });
});

describe('ridgeSolve', () => {
  // x = 0, 1, 2; y = 1, 3, 5: OLS gives y = 1 + 2x exactly.
  const X2 = [[1, 0], [1, 1], [1, 2]];
  const y2 = [1, 3, 5];

  it('lambda = 0 is ordinary least squares', () => {
    const r = ridgeSolve(X2, y2, 0, [false, true]);
    if (!r.ok) throw new Error(r.reason);
    expect(r.beta[0]).toBeCloseTo(1, 12);
    expect(r.beta[1]).toBeCloseTo(2, 12);
  });

  it('lambda = 1 with the intercept unpenalised: [[3,3],[3,6]] b = [9,13] -> (5/3, 4/3)', () => {
    const r = ridgeSolve(X2, y2, 1, [false, true]);
    if (!r.ok) throw new Error(r.reason);
    expect(r.beta[0]).toBeCloseTo(5 / 3, 12);
    expect(r.beta[1]).toBeCloseTo(4 / 3, 12);
    // Unpenalised intercept: the fit passes through the means (x 1, y 3).
    expect((r.beta[0] as number) + (r.beta[1] as number) * 1).toBeCloseTo(3, 12);
  });

  it('penalising the intercept too would give a different answer: [[4,3],[3,6]] b = [9,13] -> (1, 5/3)', () => {
    const r = ridgeSolve(X2, y2, 1, [true, true]);
    if (!r.ok) throw new Error(r.reason);
    expect(r.beta[0]).toBeCloseTo(1, 12);
    expect(r.beta[1]).toBeCloseTo(5 / 3, 12);
  });

  // y = 1 + 2a + 3b exactly on four points.
  const X3 = [[1, 1, 0], [1, 0, 1], [1, 1, 1], [1, 0, 0]];
  const y3 = [3, 4, 6, 1];

  it('three unknowns, lambda = 0: exact OLS (1, 2, 3)', () => {
    const r = ridgeSolve(X3, y3, 0, [false, true, true]);
    if (!r.ok) throw new Error(r.reason);
    r.beta.forEach((b, i) => expect(b).toBeCloseTo([1, 2, 3][i] as number, 12));
  });

  it('three unknowns, lambda = 2: [[4,2,2],[2,4,1],[2,1,4]] b = [14,9,10] -> (8/3, 2/3, 1)', () => {
    const r = ridgeSolve(X3, y3, 2, [false, true, true]);
    if (!r.ok) throw new Error(r.reason);
    expect(r.beta[0]).toBeCloseTo(8 / 3, 12);
    expect(r.beta[1]).toBeCloseTo(2 / 3, 12);
    expect(r.beta[2]).toBeCloseTo(1, 12);
  });

  it('collinear columns: singular at lambda = 0, solvable with lambda > 0', () => {
    const X = [[1, 1, 1], [1, 2, 2], [1, 3, 3]];
    expect(ridgeSolve(X, [1, 2, 3], 0, [false, true, true]).ok).toBe(false);
    const r = ridgeSolve(X, [1, 2, 3], 0.1, [false, true, true]);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.beta[1]).toBeCloseTo(r.beta[2] as number, 12);
  });
});

describe('grouped cross-validation', () => {
  it('keeps each group in one fold and is deterministic per seed', () => {
    const groups = Array.from({ length: 50 }, (_, i) => `c${i % 13}`);
    const a = groupFolds(groups, 5, 3);
    const b = groupFolds([...groups].reverse(), 5, 3);
    expect([...a].sort()).toEqual([...b].sort());
    expect(new Set(a.values()).size).toBe(5);
    expect(a.size).toBe(13);
  });

  it('picks the minimum CV error: noiseless linear data -> lambda 0', () => {
    const x: number[][] = [];
    const y: number[] = [];
    const g: string[] = [];
    for (let i = 0; i < 20; i++) {
      const v = (i % 7) - 3;
      x.push([1, v]);
      y.push(10 + 4 * v);
      g.push(`c${i % 10}`);
    }
    const cv = crossValidateRidge(x, y, g, [0, 1, 10], [false, true], { folds: 5, seed: 1 });
    if (!cv.ok) throw new Error(cv.reason);
    expect(cv.value.lambda).toBe(0);
    expect(cv.value.curve[0]?.mse).toBeCloseTo(0, 18);
    expect(cv.value.curve[2]?.mse as number).toBeGreaterThan(cv.value.curve[1]?.mse as number);
  });

  it('ties go to the larger lambda (an intercept-only model ignores lambda)', () => {
    const x = [[1], [1], [1], [1]];
    const cv = crossValidateRidge(x, [1, 2, 3, 5], ['a', 'b', 'c', 'd'], [0, 0.5, 7], [false], { folds: 4, seed: 1 });
    if (!cv.ok) throw new Error(cv.reason);
    expect(new Set(cv.value.curve.map((c) => c.mse)).size).toBe(1);
    expect(cv.value.lambda).toBe(7);
  });

  it('marks lambdas whose folds are singular and chooses among the rest', () => {
    const x = [[1, 1, 1], [1, 2, 2], [1, 3, 3], [1, 4, 4]];
    const cv = crossValidateRidge(x, [1, 2, 3, 4], ['a', 'b', 'c', 'd'], [0, 0.1], [false, true, true], { folds: 2, seed: 1 });
    if (!cv.ok) throw new Error(cv.reason);
    expect(cv.value.curve[0]?.mse).toBeNull();
    expect(cv.value.lambda).toBe(0.1);
  });

  it('refuses with fewer than two conditions', () => {
    expect(crossValidateRidge([[1], [1]], [1, 2], ['a', 'a'], [0], [false], { folds: 5, seed: 1 }).ok).toBe(false);
  });
});
