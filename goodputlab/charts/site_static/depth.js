// goodputlab.theory.data_stall's depth_for_share in JavaScript: how much prefetch rides out jittery
// storage, by replaying 2,000 seeded reads through the DataLoader's rules (a simulation with loops,
// which Vega's expressions cannot hold). The standard normal draws come from the Python (numpy's
// generator seeded by (seed, step, 0x10)), written into the page's config at build time, so the page
// replays exactly the reads the notebook does; tests/test_site_depth.py holds this file to the Python.
// A classic script (no module: a page opened from disk refuses modules); strict, in a block, so only
// DepthModel leaves it.
"use strict";
{

// read_latency_s: log-normal with mean `meanS` and coefficient of variation `cv`, from the draw z
function latency(meanS, cv, z) {
  if (meanS <= 0) return 0.0;
  if (cv <= 0) return meanS;
  const sigma = Math.sqrt(Math.log1p(cv ** 2));
  return meanS * Math.exp(sigma * z - sigma * sigma / 2);
}

// simulate_waits with W >= 1 workers, `prefetch` batches each, a constant step: the loop's wait for each batch
function simulateWaits(lat, transformS, workers, prefetch, stepS, readS, handoffS) {
  const n = lat.length;
  const depth = workers * prefetch;
  const taken = new Float64Array(n);
  const waits = new Float64Array(n);
  const dispatch = new Float64Array(n);  // batches 0 .. depth-1 are dispatched at the start
  const workerFree = new Float64Array(workers);
  for (let k = 0; k < n; k++) {
    const w = k % workers;
    const start = Math.max(dispatch[k], workerFree[w]);
    const ready = workerFree[w] = start + (lat[k] + transformS + readS);
    const arrive = k === 0 ? 0.0 : taken[k - 1] + stepS;  // the loop asks for batch k
    taken[k] = Math.max(arrive, ready) + handoffS;
    waits[k] = taken[k] - arrive;
    if (k + depth < n) dispatch[k + depth] = taken[k];
  }
  return waits;
}

// depth_for_share for W >= 1: the smallest prefetch (up to maxPrefetch) whose steady-state share of
// data wait is at most the target; the first tenth of the steps (the pipeline filling) left out
function depthForShare(target, loadS, transformS, workers, stepS, jitter, draws, maxPrefetch) {
  const lat = draws.map((z) => latency(loadS, jitter, z));
  const settled = Math.max(1, Math.floor(draws.length / 10));
  const share = (prefetch) => {
    const w = simulateWaits(lat, transformS, workers, prefetch, stepS, 0.0, 0.0).subarray(settled);
    let sum = 0.0;
    for (const x of w) sum += x;
    return sum / (sum + stepS * w.length);
  };
  let last = 1.0;
  for (let p = 1; p <= maxPrefetch; p++) {
    last = share(p);
    if (last <= target) return { feasible: true, prefetch: p, depth: workers * p, share: last };
  }
  return { feasible: false, prefetch: null, depth: null, share: last };
}

// the page's outputs from its signals (calculator.js calls this after every change)
function outputs(v, data) {
  const a = depthForShare(v.target_pct / 100, v.load_s, v.transform_s, Math.round(v.workers), v.step_s,
                          v.jitter, data.draws, data.max_prefetch);
  return { prefetch_needed: a.feasible ? a.prefetch : NaN, jitter_share: a.share };
}

window.DepthModel = { latency, simulateWaits, depthForShare, outputs };
}
