// The classroom dashboard: renders the teacher's state snapshot (GET /state, then Server-Sent
// Events from /events). Everything shown is what the aggregator already knows: randomized
// reports, refusals, declared budgets and spent budget. No library, no CDN: it works offline.
// Student text (names, error texts) is untrusted: it only ever becomes a text node, an attribute
// value or textContent -- never markup (no innerHTML, insertAdjacentHTML or document.write
// anywhere here). The page's Content-Security-Policy allows this file and style.css only, so
// styles are set through the CSSOM (element.style), not a style attribute.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "cssWidth") node.style.width = v;  // the CSSOM: allowed by style-src 'self'
    else node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function fmt(x) { return (x === null || x === undefined || Number.isNaN(x)) ? "–" : Number(x).toFixed(3); }

// One estimate as text: "value [low, high]" per label; the same numbers the state carries.
function estimateText(est, j) { return `${est.labels[j]}: ${fmt(est.values[j])} [${fmt(est.low[j])}, ${fmt(est.high[j])}]`; }

// Bars with 95 % interval whiskers, one per label, drawn on the parameter's range (est.bounds,
// [0, 1] for a fraction). An unbiased estimate or an interval end outside it is drawn clipped at
// the edge, marked with an arrow, and the note under the chart says why (clipped(est)).
function outside(est) {
  const [lo, hi] = est.bounds || [0, 1];
  return [...est.low, ...est.high, ...est.values].some((v) => Number.isFinite(v) && (v < lo || v > hi));
}

function chart(est) {
  const n = est.labels.length, w = 560, rowH = 30, left = 150, h = n * rowH + 26;
  const [lo, hi] = est.bounds || [0, 1];
  const x = (v) => left + (Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo || 1) * (w - left - 16);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart"); svg.setAttribute("width", w); svg.setAttribute("height", h);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e); return e;
  };
  add("line", { x1: x(lo), x2: x(lo), y1: 0, y2: n * rowH, stroke: "#999" });
  add("text", { x: x(lo) - 5, y: h - 4 }, String(lo));
  add("line", { x1: x(hi), x2: x(hi), y1: 0, y2: n * rowH, stroke: "#999", "stroke-dasharray": "4 4" });
  add("text", { x: x(hi) - 5, y: h - 4 }, String(hi));
  est.labels.forEach((label, j) => {
    const y = j * rowH + 5, v = est.values[j], a = est.low[j], b = est.high[j];
    add("text", { x: 2, y: y + 17 }, label.length > 14 ? label.slice(0, 13) + "…" : label);
    if (Number.isFinite(v)) add("rect", { x: x(lo), y: y, width: x(v) - x(lo), height: 20, fill: "#2f7ed8", opacity: 0.75 });
    if (Number.isFinite(a) && Number.isFinite(b)) {
      add("line", { x1: x(a), x2: x(b), y1: y + 10, y2: y + 10, stroke: "#111", "stroke-width": 3 });
      // An end inside the range is a whisker; an end beyond it, an arrow at the edge.
      if (a >= lo) add("line", { x1: x(a), x2: x(a), y1: y + 3, y2: y + 17, stroke: "#111", "stroke-width": 2 });
      else add("text", { x: x(lo) - 2, y: y + 16, class: "clip" }, "◀");
      if (b <= hi) add("line", { x1: x(b), x2: x(b), y1: y + 3, y2: y + 17, stroke: "#111", "stroke-width": 2 });
      else add("text", { x: x(hi) - 12, y: y + 16, class: "clip" }, "▶");
    }
  });
  return svg;
}

function renderStudents(state) {
  const body = document.querySelector("#students tbody");
  body.replaceChildren();
  const students = Object.values(state.students).sort((a, b) => a.seat - b.seat);
  for (const s of students) {
    const budget = s.budget || 0, frac = budget > 0 ? Math.min(1, s.spent / budget) : 0;
    const bar = el("div", { class: "bar" + (frac >= 0.999 ? " full" : "") }, el("span", { cssWidth: `${(100 * frac).toFixed(1)}%` }));
    body.append(el("tr", { class: s.connected ? "" : "away", id: `student-${s.seat}` },
      el("td", {}, s.seat), el("td", { class: "name", title: s.name }, s.name + (s.connected ? "" : " (left)")),
      el("td", {}, bar, el("span", { class: "estimate" }, `${(s.spent || 0).toFixed(2)} / ${budget ? budget.toFixed(2) : "?"}`)),
      el("td", { class: "estimate" }, (s.machine_spent || 0).toFixed(2))));
  }
  document.getElementById("joined").textContent = `${state.joined || 0} joined`;
}

function renderRequest(req) {
  const box = el("div", { class: "request", id: `request-${req.id}` });
  // The question in words; its formula (req.query) as the label's title and, for a learner's
  // question (not a lesson's own, which the lesson labels), on a smaller line under it.
  box.append(el("div", {}, el("b", { class: "label", title: req.query || "" }, req.label), ...(req.question ? [" — ", el("span", { class: "q" }, req.question)] : [])));
  if (!req.students_only && req.query && req.query !== req.label) box.append(el("div", { class: "formula" }, req.query));
  box.append(el("div", { class: "meta" }, `${req.kind}, ε = ${req.epsilon} · asked ${req.asked} · answered ${req.answered} · refused ${req.refused}` + (req.missing ? ` · missing ${req.missing}` : "")));
  const chips = el("div", { class: "chips" });
  for (const c of req.chips) {
    // The value is what the student's terminal said was sent ("bits 0100" for OUE, 0/1, a category).
    chips.append(el("span", { class: "chip" + (c.refused ? " refused" : ""), title: c.name }, `${c.name}: ${c.refused ? "refused" : (typeof c.value === "string" ? c.value : JSON.stringify(c.value))}`));
  }
  box.append(chips);
  if (req.estimate) {
    const est = req.estimate;
    const lines = el("div", { class: "estimate" });
    est.labels.forEach((_, j) => lines.append(el("div", { class: "est", id: `est-${req.id}-${j}` }, estimateText(est, j))));
    box.append(el("div", { class: "meta" }, `debiased estimate from ${est.n} reports (95 % interval):`), lines, chart(est));
    if (outside(est)) {
      box.append(el("p", { class: "note" }, "Outside 0–1? The debiasing undoes the randomizer's lies on average, so with few reports an estimate or an interval "
        + "end can fall below 0 or above 1 (the numbers above are the unbiased ones). The bars are clipped at 0 and 1; an arrow marks an interval that goes on."));
    }
  }
  return box;
}

function renderSteps(state) {
  const steps = document.getElementById("steps");
  steps.replaceChildren();
  const list = state.steps.slice().reverse();  // the current step first
  for (const step of list) {
    const box = el("div", { class: `step ${step.status}` }, el("h3", {}, step.title), el("p", { class: "say" }, step.say));
    if (step.result && step.result.text) box.append(el("p", { class: "result" }, step.result.text));
    for (const round of step.rounds) {  // oldest first: a later round may depend on an earlier one
      const title = round.title || "a question";
      const r = el("div", { class: "round" }, el("h4", {}, `${title[0].toUpperCase()}${title.slice(1)}${round.last ? "" : " (another question follows, chosen from these answers)"}${round.done ? "" : " — answers arriving…"}`));
      for (const req of round.requests) r.append(renderRequest(req));
      box.append(r);
    }
    steps.append(box);
  }
  if (!list.length) steps.append(el("p", {}, "Waiting for the class to join…"));
}

function renderLog(state) {
  const log = document.getElementById("log");
  log.replaceChildren();
  // Newest first; each line keeps its number over the whole class (e.n), whatever scrolled away.
  state.events.forEach((e, i) => {
    const item = el("li", { value: e.n || i + 1 }, `${new Date(e.time * 1000).toLocaleTimeString()} ${e.text}`);
    log.prepend(item);
  });
}

function render(state) {
  document.getElementById("join").textContent = state.class.join || "…";
  document.getElementById("version").textContent = state.version;
  document.body.dataset.version = state.version;
  document.body.dataset.finished = state.finished ? "yes" : "no";
  renderStudents(state);
  renderSteps(state);
  renderLog(state);
}

let latest = -1, source = null, poll = null;
function accept(state) {
  if (state.version > latest) { latest = state.version; render(state); }
  if (state.finished) {  // the lessons are over: nothing more will change, stop listening
    if (source) source.close();
    if (poll) clearInterval(poll);
    document.getElementById("status").textContent = "the lessons are over";
  }
}

// The snapshot the page was served with (an inert JSON data block): rendered at once, before any round trip.
const initial = document.getElementById("initial-state");
try { if (initial) accept(JSON.parse(initial.textContent)); } catch (e) { /* not served by the dashboard: /state follows */ }
fetch("/state").then((r) => r.json()).then(accept).catch(() => {});
if (window.EventSource) {
  source = new EventSource("/events");
  source.addEventListener("state", (e) => accept(JSON.parse(e.data)));
  source.onopen = () => { document.getElementById("status").textContent = "live"; };
  source.onerror = () => { if (source.readyState !== EventSource.CLOSED) document.getElementById("status").textContent = "reconnecting…"; };
} else {
  poll = setInterval(() => fetch("/state").then((r) => r.json()).then(accept).catch(() => {}), 1000);
}
