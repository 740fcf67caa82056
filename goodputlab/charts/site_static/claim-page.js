// The claim explainer's page: the controls -> ClaimModel.explain (claim.js) -> the verdict and the table.
// The page's config (id="claim-config") carries what claim.js reads a claim against, from the Python.
// Each shown number keeps its full value in data-value, and body's data-ready counts the redraws
// (tests/test_site.py reads both). A block keeps these names out of the global scope.
// Strict: its function declarations stay in the block (sloppy mode would also make them globals,
// overwriting the Vega bundle's top-level functions of the same name).
"use strict";
{

const config = JSON.parse(document.getElementById("claim-config").textContent);
const K = config.constants;
const form = document.getElementById("controls");

function el(tag, attrs = {}, text = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

function control(name, label, input) {
  const l = el("label");
  l.append(el("span", {}, label), el("output", { class: "value" }), input);
  input.name = name;
  form.append(l);
  return input;
}

const inputs = {
  lever: control("lever", "lever", (() => {
    const s = el("select");
    for (const k of K.levers) s.append(el("option", { value: k }, K.what[k]));
    return s;
  })()),
  before_pct: control("before_pct", "goodput before (%)", el("input", { type: "number", min: 1, max: 99.99, step: 0.1 })),
  after_pct: control("after_pct", "goodput after (%)", el("input", { type: "number", min: 1, max: 99.99, step: 0.1 })),
  gpus: control("gpus", "GPUs", el("input", { type: "number", min: 1, max: 10000000, step: 1 })),
  model_params_b: control("model_params_b", "model (billions of parameters)",
                          el("input", { type: "number", min: 0.001, max: 100000, step: "any" })),
};
// what the reader knows of the cluster before the lever (claim.Pins); blank: the chapter's default
const pins = {
  storage_gbps: control("storage_gbps", "pin: storage (GB/s)", el("input", { type: "number", min: 0, step: "any", placeholder: "default" })),
  save_s: control("save_s", "pin: a synchronous save (s)", el("input", { type: "number", min: 0, step: "any", placeholder: "default" })),
  restart_s: control("restart_s", "pin: restart (s)", el("input", { type: "number", min: 0, step: "any", placeholder: "default" })),
  detect_s: control("detect_s", "pin: detection (s)", el("input", { type: "number", min: 0, step: "any", placeholder: "default" })),
};
for (const [name, value] of Object.entries(config.defaults)) inputs[name].value = value;

function number(v) {  // the panel's format: whole above 100, three significant digits below
  if (!isFinite(v)) return String(v);
  return Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en-US") : String(Number(v.toPrecision(3)));
}

function draw() {
  const read = {};
  for (const [name, input] of Object.entries(inputs)) {
    read[name] = name === "lever" ? input.value : Number(input.value);
    const shown = input.parentElement.querySelector("output.value");
    shown.textContent = name === "lever" ? "" : input.value;
    shown.dataset.value = read[name];
  }
  const pinned = {};
  for (const [name, input] of Object.entries(pins)) {
    if (input.value.trim() !== "") pinned[name] = Number(input.value);
    input.parentElement.querySelector("output.value").textContent = input.value;
  }
  const claim = ClaimModel.explain(read.lever, read.before_pct / 100, read.after_pct / 100, read.gpus,
                                   read.model_params_b, K, pinned);
  const reading = document.getElementById("reading");
  const ettrLine = document.getElementById("ettr");
  reading.textContent = claim.error ? "" : `How the lever is read: ${claim.reading}.`;
  ettrLine.textContent = claim.error || !claim.ettr.before ? "" :
    "As ETTR (saves counted as training), at the implied failure rate: " +
    Object.entries(claim.ettr).map(([k, v]) => `${ClaimModel.pct1(v)} ${k}`).join(", ") + ".";
  const verdict = document.getElementById("verdict");
  const table = document.getElementById("outputs");
  const checks = document.getElementById("checks");
  const reasons = document.getElementById("reasons");
  table.replaceChildren(); checks.replaceChildren(); reasons.replaceChildren();
  if (claim.error) {
    verdict.textContent = `The claim cannot be read: ${claim.error}`;
    verdict.dataset.plausible = "error";
  } else {
    verdict.replaceChildren(
      `${K.what[claim.lever]}, ${inputs.before_pct.value}% to ${inputs.after_pct.value}% on ` +
      `${claim.gpus.toLocaleString("en-US")} GPUs (a ${claim.model_params_b}B-parameter model): `,
      el("strong", {}, claim.plausible ? "plausible" : "implausible"));
    verdict.dataset.plausible = String(claim.plausible);
    for (const [key, value] of Object.entries(claim.implied)) {
      const [label, unit] = K.labels[key] || [key, ""];
      const tr = el("tr");
      const out = el("output", { "data-name": key, "data-value": String(value) }, `${number(value)} ${unit}`);
      const td = el("td");
      td.append(out);
      tr.append(el("td", {}, label), td);
      table.append(tr);
    }
    for (const ch of claim.checks) {
      const li = el("li", { "data-key": ch.key, "data-plausible": String(ch.plausible) });
      li.append(`${ch.quantity}: `, el("strong", {}, ch.plausible ? "plausible" : "implausible"),
                ` (published: ${ch.published})`);
      checks.append(li);
    }
    for (const text of [...claim.reasons, ...claim.notes]) reasons.append(el("li", {}, text));
  }
  document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
}

for (const input of [...Object.values(inputs), ...Object.values(pins)]) input.addEventListener("input", draw);
draw();

}
