// The claim explainer in the browser: goodputlab/theory/claim.py, line for line, in JavaScript.
// The numbers a claim is read against (RANGES, the cluster's defaults, the bytes per parameter) are
// not here: the page's config carries them from the Python (goodputlab/charts/site_claim.py).
// tests/test_site_claim.py runs this file in Chromium at many claims (every lever, plausible and
// implausible ones, edge cases) and holds every implied value to explain()'s to 1e-9 relative and
// every reason and note to its text, so the two cannot drift. Keep the order of operations.
"use strict";

const ClaimModel = (() => {
  const HOUR = 3600.0;
  const YEAR_H = 365.0 * 24.0;

  function ettr(tau, delta, lag, recovery, mtbf) {  // claim.py's ettr: the same job, a save counted as training
    const first = tau + delta;
    const cycle = first + Math.max(0.0, lag - tau);
    if ((recovery + first + lag) / mtbf > 700) return 0.0;
    const survive = -Math.expm1(-cycle / mtbf);
    const computed = mtbf * -Math.expm1(-tau / mtbf) * (1.0 + Math.exp(-first / mtbf) / survive);
    const durable = tau * Math.exp(-(first + lag) / mtbf) / survive;
    return Math.exp(-recovery / mtbf) * (mtbf - computed + durable) / mtbf;
  }

  function goodput(tau, delta, lag, recovery, mtbf) {
    const first = tau + delta;
    const cycle = first + Math.max(0.0, lag - tau);
    const exponent = (recovery + first + lag) / mtbf;
    if (exponent > 700) return 0.0;
    return tau * Math.exp(-exponent) / (mtbf * -Math.expm1(-cycle / mtbf));
  }

  function bisect(f, lo, hi, log = true, steps = 200) {
    let fLo = f(lo);
    for (let i = 0; i < steps; i++) {
      const mid = log ? Math.sqrt(lo * hi) : 0.5 * (lo + hi);
      const fMid = f(mid);
      if ((fMid > 0) === (fLo > 0)) { lo = mid; fLo = fMid; } else { hi = mid; }
      if (hi - lo <= 1e-12 * hi) break;
    }
    return 0.5 * (lo + hi);
  }

  function bestInterval(delta, lag, mtbf, floor = 0.0) {
    const root = delta <= 0 ? mtbf * 1e-9
      : bisect(t => mtbf * -Math.expm1(-(t + delta) / mtbf) - t, mtbf * 1e-12, mtbf);
    const candidates = [root, Math.min(lag, mtbf)];
    if (lag > mtbf) candidates.push(lag);
    let best = candidates[0], value = goodput(best, delta, lag, 0.0, mtbf);
    for (const t of candidates.slice(1)) {  // Python's max: the first of equals wins
      const g = goodput(t, delta, lag, 0.0, mtbf);
      if (g > value) { best = t; value = g; }
    }
    return Math.max(best, floor);
  }

  function bestGoodput(delta, lag, recovery, mtbf, floor = 0.0) {
    const tau = bestInterval(delta, lag, mtbf, floor);
    return [goodput(tau, delta, lag, recovery, mtbf), tau];
  }

  const solveMtbf = (target, delta, lag, recovery, floor = 0.0) =>
    bisect(m => bestGoodput(delta, lag, recovery, m, floor)[0] - target, 1e-3, 1e13);

  function solveRecovery(target, delta, lag, mtbf) {
    const ceiling = bestGoodput(delta, lag, 0.0, mtbf)[0];
    return mtbf * Math.log(ceiling / target);
  }

  function solveIntervals(target, delta, lag, recovery, mtbf) {
    const [best, tau] = bestGoodput(delta, lag, recovery, mtbf);
    if (best < target) return null;
    const f = t => goodput(t, delta, lag, recovery, mtbf) - target;
    const short = f(mtbf * 1e-12) < 0 ? bisect(f, mtbf * 1e-12, tau) : 0.0;
    return [short, bisect(f, tau, mtbf * 1e4)];
  }

  // --- Python's number formats -------------------------------------------------------------------
  function fixed(x, digits) {  // f"{x:.{digits}f}": the exact value rounded half to even, as Python does
    if (!isFinite(x)) return isNaN(x) ? "nan" : (x > 0 ? "inf" : "-inf");
    const neg = x < 0 || Object.is(x, -0);
    const a = Math.abs(x);
    // the exact decimal expansion (toFixed is exact below 1e21; above, a double is a whole number)
    const exact = a < 1e21 ? a.toFixed(100) : BigInt(a).toString() + "." + "0".repeat(100);
    const [whole, frac] = exact.split(".");
    const rest = frac.slice(digits);
    let kept = BigInt(whole + frac.slice(0, digits));
    const half = rest[0] === "5" && !/[1-9]/.test(rest.slice(1));
    if (rest[0] > "5" || (rest[0] === "5" && !half) || (half && kept % 2n === 1n)) kept += 1n;
    const text = kept.toString().padStart(digits + 1, "0");
    const body = digits ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
    return (neg ? "-" : "") + body;
  }
  function commas(s) {  // thousands separators in the integer part of a fixed-point string
    const [whole, frac] = s.split(".");
    const sign = whole.startsWith("-") ? "-" : "";
    const digits = sign ? whole.slice(1) : whole;
    const grouped = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return sign + grouped + (frac === undefined ? "" : "." + frac);
  }
  function general3(x) {  // f"{x:.3g}"
    if (x === 0) return Object.is(x, -0) ? "-0" : "0";
    if (!isFinite(x)) return isNaN(x) ? "nan" : (x > 0 ? "inf" : "-inf");
    const [mant, power] = x.toExponential(2).split("e");
    const exp = Number(power);
    if (exp < -4 || exp >= 3) {
      const m = mant.replace(/0+$/, "").replace(/\.$/, "");
      return `${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
    }
    const s = fixed(x, 2 - exp);
    return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
  }
  const fmt = v => Math.abs(v) >= 1000 ? commas(fixed(v, 0)) : general3(v);
  const pct1 = v => fixed(100 * v, 1) + "%";
  const signed1 = v => (v >= 0 && !Object.is(v, -0) ? "+" : "") + fixed(v, 1);
  function hours(s) {
    if (s < 120) return `${fixed(s, 0)} s`;
    if (s < 2 * HOUR) return `${fixed(s / 60, 1)} min`;
    return `${commas(fixed(s / HOUR, 1))} h`;
  }

  // --- the explanation ---------------------------------------------------------------------------
  const PIN_NAMES = ["storage_gbps", "save_s", "restart_s", "detect_s"];  // Pins' fields, in their order

  function explain(lever, before, after, gpus, modelParamsB, K, pins = {}) {
    const refusal = validate(lever, before, after, gpus, modelParamsB, K) || validatePins(pins);
    if (refusal) return { error: refusal };
    const pinned = {};
    for (const name of PIN_NAMES) if (pins[name] !== undefined && pins[name] !== null) pinned[name] = pins[name];
    const c = { ...K.cluster };
    const claim = { lever, before_share: before, after_share: after, gpus, model_params_b: modelParamsB,
                    implied: {}, assumed: {}, checks: [], reasons: [], effects: null, notes: [], ettr: {},
                    reading: K.reading[lever], pinned };
    const parameters = modelParamsB * 1e9;
    const total = parameters * K.checkpoint_bytes_per_parameter;
    if (pinned.storage_gbps !== undefined) c.storage_bps_per_gpu = pinned.storage_gbps * 1e9 / gpus;
    else if (pinned.save_s !== undefined) c.storage_bps_per_gpu = total / pinned.save_s / gpus;
    if (pinned.restart_s !== undefined) c.restart_s = pinned.restart_s;
    if (pinned.detect_s !== undefined) c[lever === "detection" ? "watchdog_s" : "detect_s"] = pinned.detect_s;
    const storage = c.storage_bps_per_gpu * gpus;
    const rankBytes = total / gpus;
    const ckpt = { total_bytes: total, rank_bytes: rankBytes, write_s: total / storage,
                   snapshot_s: rankBytes / c.host_copy_bps };
    claim.assumed.checkpoint_tb = ckpt.total_bytes / 1e12;
    claim.assumed.snapshot_s = ckpt.snapshot_s;
    const storagePinned = pinned.storage_gbps !== undefined || pinned.save_s !== undefined;
    const solvedPinned = (lever === "async" || lever === "memory") ? storagePinned
      : (pinned.restart_s !== undefined && lever === "hot-spare");
    ({ "async": saves, "memory": saves, "hot-spare": hotSpare, "interval": interval,
       "detection": recovery, "restart": recovery })[lever](claim, c, ckpt, storage, K, solvedPinned);
    claim.plausible = claim.reasons.length === 0;
    return claim;
  }

  function validatePins(pins) {  // claim.Pins' checks
    const has = name => pins[name] !== undefined && pins[name] !== null;
    if (has("storage_gbps") && has("save_s")) return "save: not with a pinned storage: pin the storage or the save, not both";
    if (has("storage_gbps") && !(pins.storage_gbps > 0 && pins.storage_gbps <= 1e9)) return "storage: a number of GB/s > 0";
    if (has("save_s") && !(pins.save_s > 0 && pins.save_s <= 1e7)) return "save: a number of seconds > 0";
    for (const name of ["restart_s", "detect_s"]) {
      if (has(name) && !(pins[name] >= 0 && pins[name] <= 1e7)) return `${name === "restart_s" ? "restart" : "detection"}: a number of seconds >= 0`;
    }
    return null;
  }

  function validate(lever, before, after, gpus, modelParamsB, K) {
    if (!K.levers.includes(lever)) return `lever: ${lever} is not one of ${K.levers.join(", ")}`;
    if (!(before > 0 && before < 1)) return "goodput before: a share between 0 and 100% (both open)";
    if (!(after > 0 && after < 1)) return "goodput after: a share between 0 and 100% (both open)";
    if (after <= before) return `goodput after: a goodput above the one before (${pct1(before)}): a lever that helps`;
    if (!(Number.isInteger(gpus) && gpus >= 1 && gpus <= 10000000)) return "GPUs: a whole number from 1 to 10,000,000";
    if (!(modelParamsB >= 0.001 && modelParamsB <= 100000)) return "model: from 0.001 to 100,000 billion parameters";
    return null;
  }

  function check(claim, key, value, unitValue, K) {
    const r = K.ranges[key];
    const ok = r.low / K.tolerance <= value && value <= r.high * K.tolerance;
    claim.checks.push({ key, value, plausible: ok, unit: r.unit, published_low: r.low, published_high: r.high,
                        published: r.published, sources: r.refs, quantity: r.quantity });
    if (!ok) {
      const [factor, side] = value > r.high ? [value / r.high, "above"] : [value > 0 ? r.low / value : Infinity, "below"];
      const reason = `it needs a ${r.quantity} of ${unitValue}, ${fmt(factor)} times ${side} the published ` +
                     `range: ${r.published}`;
      if (key === "device_mtbf_h") claim.reasons.unshift(reason); else claim.reasons.push(reason);  // the decisive first
    }
  }

  function setEttr(claim, before, after, mtbf) {
    claim.ettr = { before: ettr(...before, mtbf), after: ettr(...after, mtbf) };
  }

  function contradiction(claim, impliedBefore, what, K) {
    if (Math.abs(impliedBefore - claim.before_share) > K.consistency) {
      claim.reasons.push(`with ${what} pinned, the failure rate that gives ${pct1(claim.after_share)} after gives ` +
                         `${pct1(impliedBefore)} before, not the claimed ${pct1(claim.before_share)}: the two goodputs ` +
                         "contradict each other");
    } else {
      claim.notes.push(`with ${what} pinned, the two goodputs agree: the after state's failure rate gives ` +
                       `${pct1(impliedBefore)} before`);
    }
  }

  function mtbfCheck(claim, jobMtbf, K) {
    const deviceH = jobMtbf * claim.gpus / HOUR;
    claim.implied.device_mtbf_h = deviceH;
    claim.implied.job_mtbf_h = jobMtbf / HOUR;
    check(claim, "device_mtbf_h", deviceH, `${fmt(deviceH)} h per GPU (${fmt(deviceH / YEAR_H)} years)`, K);
  }

  function assumeStorage(claim, storageBps, writeS) {
    claim.assumed.storage_gbps = storageBps / 1e9;
    claim.assumed.save_s = writeS;
  }

  function recovery(claim, c, ckpt, storage, K, _pinned) {
    const w = ckpt.write_s;
    assumeStorage(claim, storage, w);
    const name = claim.lever === "restart" ? "restart" : "detect";
    const old = name === "restart" ? c.restart_s : c.watchdog_s;
    const other = name === "restart" ? c.detect_s : c.restart_s;
    claim.assumed[`${name}_before_s`] = old;
    claim.assumed[name === "restart" ? "detect_s" : "restart_s"] = other;
    const m = solveMtbf(claim.before_share, w, 0.0, old + other + w);
    mtbfCheck(claim, m, K);
    const fresh = solveRecovery(claim.after_share, w, 0.0, m) - other - w;
    const tau = bestInterval(w, 0.0, m);
    if (fresh < 0) {  // no time reaches it: the bound, not a negative time
      const ceiling = bestGoodput(w, 0.0, other + w, m)[0];
      const word = name === "restart" ? "restart" : "detection";
      claim.reasons.push(`even an instant ${word} gives at most ${pct1(ceiling)}, below the claimed ${pct1(claim.after_share)}`);
      claim.ettr = { before: ettr(tau, w, 0.0, old + other + w, m) };
    } else {
      claim.implied[`${name}_after_s`] = fresh;
      check(claim, name === "restart" ? "restart_s" : "detect_s", fresh, hours(fresh), K);
      setEttr(claim, [tau, w, 0.0, old + other + w], [tau, w, 0.0, fresh + other + w], m);
    }
    claim.notes.push(`the best interval does not move: a ${name === "restart" ? "restart" : "detection"} ` +
                     "scales the whole goodput curve by exp(-R/M) (chapter 3)");
  }

  function hotSpare(claim, c, ckpt, storage, K, pinned) {
    const w = ckpt.write_s;
    assumeStorage(claim, storage, w);
    claim.assumed.detect_s = c.detect_s;
    claim.assumed.spare_swap_s = c.spare_swap_s;
    const m = solveMtbf(claim.after_share, w, 0.0, c.detect_s + c.spare_swap_s + w);
    mtbfCheck(claim, m, K);
    const tau = bestInterval(w, 0.0, m);
    let cold;
    if (pinned) {
      claim.assumed.restart_s = c.restart_s;
      contradiction(claim, bestGoodput(w, 0.0, c.detect_s + c.restart_s + w, m)[0], `a cold restart of ${hours(c.restart_s)}`, K);
      cold = c.restart_s;
    } else {
      cold = solveRecovery(claim.before_share, w, 0.0, m) - c.detect_s - w;
      claim.implied.restart_s = cold;
      check(claim, "restart_s", cold, hours(cold) + " before the spares", K);
    }
    setEttr(claim, [tau, w, 0.0, c.detect_s + cold + w], [tau, w, 0.0, c.detect_s + c.spare_swap_s + w], m);
    claim.notes.push("the best interval does not move: the spares shorten the recovery, which scales the whole " +
                     "goodput curve by exp(-R/M) (chapter 3)");
  }

  function interval(claim, c, ckpt, storage, K, _pinned) {
    const w = ckpt.write_s;
    assumeStorage(claim, storage, w);
    claim.assumed.detect_s = c.detect_s;
    claim.assumed.restart_s = c.restart_s;
    const r = c.detect_s + c.restart_s + w;
    const m = solveMtbf(claim.after_share, w, 0.0, r);
    mtbfCheck(claim, m, K);
    const best = bestInterval(w, 0.0, m);
    const [short, long] = solveIntervals(claim.before_share, w, 0.0, r, m);
    claim.implied.interval_after_min = best / 60;
    claim.implied.interval_before_long_min = long / 60;
    claim.implied.interval_before_short_min = short / 60;
    setEttr(claim, [long, w, 0.0, r], [best, w, 0.0, r], m);
    claim.notes.push(`before, the job checkpointed either every ${hours(long)} (too rarely: lost work) or every ` +
                     `${hours(short)} (too often: saving), against the best ${hours(best)}`);
  }

  function saves(claim, c, ckpt, storage, K, pinned) {
    claim.assumed.detect_s = c.detect_s;
    claim.assumed.restart_s = c.restart_s;
    const r0 = c.detect_s + c.restart_s;
    const gpus = claim.gpus, total = ckpt.total_bytes;
    const afterState = w => {
      if (claim.lever === "async") return [ckpt.snapshot_s, w, r0 + w, 0.0];
      const copy = ckpt.rank_bytes / c.peer_copy_bps;
      return [ckpt.snapshot_s, copy, r0 + copy, Math.max(0.0, w / c.disk_every - ckpt.snapshot_s)];
    };
    const beforeAt = (w, m) => bestGoodput(w, 0.0, r0 + w, m)[0];
    const mOf = x => solveMtbf(claim.after_share, ...afterState(x));
    const gap = x => beforeAt(x, mOf(x)) - claim.before_share;
    const hiW = 1e7;
    let w;
    if (pinned) {
      w = total / storage;
      claim.assumed.storage_gbps = storage / 1e9;
      claim.assumed.save_s = w;
    } else {
      w = gap(hiW) < 0 && 0 < gap(1e-6) ? bisect(gap, 1e-6, hiW) : null;
    }
    if (w === null) {
      const lowest = beforeAt(hiW, mOf(hiW));
      // the failure rate comes first when even the fastest storage needs one no published cluster has
      const leastH = mOf(1e-6) * gpus / HOUR;
      const r = K.ranges.device_mtbf_h;
      if (leastH > r.high * K.tolerance) {
        claim.reasons.push(`it needs a device MTBF of at least ${fmt(leastH)} h per GPU, ` +
                           `${fmt(leastH / r.high)} times above the published range: ${r.published}`);
      }
      claim.reasons.push(
        `no storage bandwidth makes it true: ${claim.lever} saves that reach ${pct1(claim.after_share)} cannot start from ` +
        `below ${pct1(lowest)}, because saves slow enough to cost the synchronous run more would hold back the ` +
        (claim.lever === "async" ? "asynchronous one too (its checkpoints become durable only after the write)"
                                 : "RAM copy's run too (its storage copies must keep up)"));
      return;
    }
    const m = mOf(w);
    const bps = total / w;
    if (!pinned) {
      claim.implied.storage_gbps = bps / 1e9;
      claim.implied.storage_per_gpu_mbps = bps / gpus / 1e6;
      claim.implied.save_s = w;
    }
    mtbfCheck(claim, m, K);
    if (pinned) {
      contradiction(claim, beforeAt(w, m), `a synchronous save of ${hours(w)} (${fmt(bps / 1e9)} GB/s)`, K);
    } else {
      check(claim, "save_s", w,
            `${hours(w)} (${fmt(bps / 1e9)} GB/s in all, ${fmt(1000 * bps / gpus / 1e9)} MB/s per GPU)`, K);
    }
    const tauBefore = bestInterval(w, 0.0, m);
    const [blocking, lag, rec, floor] = afterState(w);
    const tauAfter = bestInterval(blocking, lag, m, floor);
    const atOld = goodput(tauBefore, blocking, lag, rec, m);
    const start = pinned ? beforeAt(w, m) : claim.before_share;  // pinned: the before the model gives
    claim.implied.interval_before_min = tauBefore / 60;
    claim.implied.interval_after_min = tauAfter / 60;
    setEttr(claim, [tauBefore, w, 0.0, r0 + w], [tauAfter, blocking, lag, rec], m);
    claim.effects = { cheaper_saves_pts: 100 * (atOld - start),
                      shorter_interval_pts: 100 * (claim.after_share - atOld),
                      interval_before_min: tauBefore / 60, interval_after_min: tauAfter / 60 };
    claim.notes.push(
      `two effects: at the old interval (${hours(tauBefore)}) the cheaper saves alone give ` +
      `${signed1(100 * (atOld - start))} points; moving to the new best interval (${hours(tauAfter)}), which ` +
      `cuts the lost work, gives the other ${signed1(100 * (claim.after_share - atOld))}`);
  }

  return { explain, goodput, ettr, bestInterval, solveMtbf, fmt, hours, pct1 };
})();

if (typeof module !== "undefined") module.exports = ClaimModel;
