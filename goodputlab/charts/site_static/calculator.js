// goodputlab's website calculators: sliders -> Vega signals -> numbers and chart, all in this page.
// The page carries its config (id="calculator-config"): the Vega-Lite spec, whose parameters hold every
// formula (written by goodputlab/charts/vega_formulas.py), the sliders and the outputs to show.
// window.vegaEmbed comes from vega-bundle.js (vl-convert-python's bundle), loaded before this script.
// Classic deferred scripts, not modules: a module is refused on a page opened from disk (file://).
// The block keeps this script's names out of the global scope the bundle's top-level names share.
{

const config = JSON.parse(document.getElementById("calculator-config").textContent);
const STEPS = 1000; // positions of a log slider

function round3(v) { return Number(v.toPrecision(3)); }

// slider position <-> value, for each scale
function toValue(s, pos) {
  pos = Number(pos);
  if (s.scale === "linear") return pos;
  if (s.scale === "pow2") return 2 ** pos;
  if (s.zero) { if (pos === 0) return 0; pos = (pos - 1) * STEPS / (STEPS - 1); }
  return round3(s.lo * (s.hi / s.lo) ** (pos / STEPS));
}
function toPosition(s, v) {
  if (s.scale === "linear") return v;
  if (s.scale === "pow2") return Math.round(Math.log2(v));
  if (s.zero && v <= 0) return 0;
  const p = Math.round(STEPS * Math.log(v / s.lo) / Math.log(s.hi / s.lo));
  return s.zero ? Math.max(1, Math.round(1 + p * (STEPS - 1) / STEPS)) : p;
}
function range(s) {
  if (s.scale === "linear") return [s.lo, s.hi, s.step];
  if (s.scale === "pow2") return [Math.round(Math.log2(s.lo)), Math.round(Math.log2(s.hi)), 1];
  return [0, STEPS, 1];
}

// goodputlab.theory.human_duration, in JavaScript
function duration(seconds) {
  if (seconds === 0) return "0 (continuously)";
  if (seconds < 60) return `${Number(seconds.toPrecision(3))}s`;
  let total = Math.round(seconds);
  const days = Math.floor(total / 86400); total -= days * 86400;
  const hours = Math.floor(total / 3600); total -= hours * 3600;
  const minutes = Math.floor(total / 60), secs = total - minutes * 60;
  if (days) return `${days}d ${hours}h`;
  if (hours) return `${hours}h ${minutes}m`;
  return `${minutes}m ${secs}s`;
}
const FORMATS = {
  duration,
  share: (v) => `${(100 * v).toFixed(1)}%`,
  number: (v) => (Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : String(Number(v.toPrecision(3)))),
  count: (v) => Math.round(v).toLocaleString("en-US"),
};
function shown(s, v) {
  if (s.options && s.options.length > 0) return "";
  if (s.scale === "pow2" || s.scale === "linear") return v.toLocaleString("en-US");
  return String(round3(v));
}

async function main() {
  const form = document.getElementById("controls");
  const table = document.getElementById("outputs");
  const rows = {};
  for (const o of config.outputs) {
    const tr = table.insertRow();
    tr.insertCell().textContent = o.label;
    const td = tr.insertCell();
    const out = document.createElement("output");
    out.dataset.name = o.name;
    td.appendChild(out);
    rows[o.name] = out;
  }
  const result = await vegaEmbed("#chart", config.spec, { actions: false, renderer: "svg" });
  const view = result.view;
  const show = () => {
    // outputs a page script computes from the signals (a simulation: Vega's expressions have no loops)
    const extra = config.extra
      ? window[config.extra.model].outputs(Object.fromEntries(config.extra.inputs.map((n) => [n, view.signal(n)])),
                                           config.extra.data)
      : {};
    for (const o of config.outputs) {
      const v = o.name in extra ? extra[o.name] : view.signal(o.name);
      rows[o.name].dataset.value = String(v);
      // NaN: the model refuses the setting (the capstone: a job MTBF under 5 minutes), or has no answer
      rows[o.name].textContent = Number.isFinite(v) ? FORMATS[o.kind](v) : (o.none || "not computed");
    }
    document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
  };
  const labels = {};
  // a control that changes nothing under the others' current values is hidden (Slider.shown_when)
  const showControls = () => {
    for (const s of config.sliders) {
      if (s.shown_when) labels[s.name].hidden = !s.shown_when[1].includes(String(view.signal(s.shown_when[0])));
    }
  };
  for (const s of config.sliders) {
    const label = document.createElement("label");
    labels[s.name] = label;
    const name = document.createElement("span");
    name.textContent = s.label;
    const choice = s.options && s.options.length > 0; // a list of choices, not a slider
    const input = document.createElement(choice ? "select" : "input");
    input.name = s.name;
    if (choice) {
      for (const o of s.options) input.add(new Option(o, o, false, o === s.value));
    } else {
      input.type = "range";
      [input.min, input.max, input.step] = range(s).map(String);
      input.value = String(toPosition(s, s.value));
    }
    const value = document.createElement("output");
    value.className = "value";
    const set = async (v) => {
      value.dataset.value = String(v);
      value.textContent = shown(s, v);
      view.signal(s.name, v);
      await view.runAsync();
      showControls();
      show();
    };
    input.addEventListener(choice ? "change" : "input", () => set(choice ? input.value : toValue(s, input.value)));
    label.append(name, input, value);
    form.appendChild(label);
    value.dataset.value = String(s.value);
    value.textContent = shown(s, s.value);
  }
  showControls();
  show();
}

main().catch((e) => {
  document.getElementById("chart").textContent = `The calculator failed: ${e}`;
  throw e;
});
}
