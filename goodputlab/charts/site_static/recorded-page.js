// The recorded runs' page: lever lists -> the runs that match -> the picked run's charts (Vega-Lite specs
// of the package's own charts, one file per run in calculators/recorded/, loaded by a script tag when
// picked: it works from disk too). body's data-ready counts the redraws (tests/test_site.py reads it).
// Strict: its function declarations stay in the block (sloppy mode would also make them globals,
// overwriting the Vega bundle's top-level functions of the same name).
"use strict";
{

const config = JSON.parse(document.getElementById("recorded-config").textContent);
const form = document.getElementById("controls");
const ANY = "any";

function el(tag, attrs = {}, text = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

const selects = {};
for (const [key, label] of config.levers) {
  const values = [...new Set(config.runs.map(r => JSON.stringify(r.levers[key])))].sort();
  const s = el("select", { name: key });
  s.append(el("option", { value: ANY }, "any"));
  for (const v of values) s.append(el("option", { value: v }, String(JSON.parse(v))));
  const l = el("label");
  l.append(el("span", {}, label), el("output", { class: "value" }), s);
  form.append(l);
  selects[key] = s;
  s.addEventListener("input", () => { const m = matching(); list(m); pick(m.length ? m[0].name : null); });
}

function matching() {
  return config.runs.filter(r => Object.entries(selects).every(
    ([key, s]) => s.value === ANY || JSON.stringify(r.levers[key]) === s.value));
}

function list(runs) {
  const ul = document.getElementById("matches");
  ul.replaceChildren();
  if (!runs.length) ul.append(el("li", {}, "no recording has these levers: set one back to \"any\""));
  for (const r of runs) {
    const li = el("li");
    const a = el("a", { href: `#${r.name}`, "data-name": r.name }, r.name);
    a.addEventListener("click", e => { e.preventDefault(); pick(r.name); });
    li.append(a, `: ${r.title}`);
    ul.append(li);
  }
}

function load(name) {  // the run's charts: a script tag (a fetch is refused on a page opened from disk)
  return new Promise((resolve, reject) => {
    if (window.RECORDED_RUNS && window.RECORDED_RUNS[name]) return resolve(window.RECORDED_RUNS[name]);
    const s = el("script", { src: `${config.data_dir}/${name}.js` });
    s.onload = () => resolve(window.RECORDED_RUNS[name]);
    s.onerror = () => reject(new Error(`could not load ${name}'s charts`));
    document.head.append(s);
  });
}

const pct = v => `${(100 * v).toFixed(1)}%`;

async function pick(name) {
  const table = document.getElementById("outputs");
  table.replaceChildren();
  document.body.dataset.picked = name || "";
  const run = config.runs.find(r => r.name === name);
  if (run) {
    const rows = [["run", run.name, run.name], ["goodput", pct(run.goodput), run.goodput],
                  ["failures", String(run.failures), run.failures], ["wall time (s)", run.wall_s.toFixed(1), run.wall_s]];
    for (const [cat, share] of Object.entries(run.shares)) if (share > 0) rows.push([cat, pct(share), share]);
    for (const [label, text, value] of rows) {
      const tr = el("tr"), td = el("td");
      td.append(el("output", { "data-name": label, "data-value": String(value) }, text));
      tr.append(el("td", {}, label), td);
      table.append(tr);
    }
    const charts = await load(name);
    if (document.body.dataset.picked !== name) return;  // another run was picked meanwhile
    await vegaEmbed("#timeline", charts.timeline, { actions: false });
    await vegaEmbed("#breakdown", charts.breakdown, { actions: false });
  } else {
    for (const id of ["timeline", "breakdown"]) document.getElementById(id).replaceChildren();
  }
  document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
}

const first = matching();
list(first);
pick(location.hash.slice(1) || first[0].name);

}
