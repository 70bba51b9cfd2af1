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

// Bars with 95 % interval whiskers, one per label, on a shared scale.
function chart(est) {
  const n = est.labels.length, w = 380, rowH = 22, left = 110, h = n * rowH + 18;
  const finite = [0, 1, ...est.low, ...est.high, ...est.values].filter(Number.isFinite);
  const lo = Math.min(...finite), hi = Math.max(...finite);
  const x = (v) => left + (Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo || 1) * (w - left - 10);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "chart"); svg.setAttribute("width", w); svg.setAttribute("height", h);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e); return e;
  };
  add("line", { x1: x(0), x2: x(0), y1: 0, y2: n * rowH, stroke: "#999" });
  add("text", { x: x(0) - 3, y: h - 4 }, "0");
  add("line", { x1: x(1), x2: x(1), y1: 0, y2: n * rowH, stroke: "#ccc", "stroke-dasharray": "3 3" });
  add("text", { x: x(1) - 3, y: h - 4 }, "1");
  est.labels.forEach((label, j) => {
    const y = j * rowH + 4, v = est.values[j];
    add("text", { x: 2, y: y + 12 }, label.length > 16 ? label.slice(0, 15) + "…" : label);
    if (Number.isFinite(v)) add("rect", { x: Math.min(x(0), x(v)), y: y, width: Math.abs(x(v) - x(0)), height: 14, fill: "#2f7ed8", opacity: 0.75 });
    if (Number.isFinite(est.low[j]) && Number.isFinite(est.high[j])) {
      add("line", { x1: x(est.low[j]), x2: x(est.high[j]), y1: y + 7, y2: y + 7, stroke: "#111", "stroke-width": 2 });
      add("line", { x1: x(est.low[j]), x2: x(est.low[j]), y1: y + 2, y2: y + 12, stroke: "#111" });
      add("line", { x1: x(est.high[j]), x2: x(est.high[j]), y1: y + 2, y2: y + 12, stroke: "#111" });
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
      el("td", {}, s.seat), el("td", {}, s.name + (s.connected ? "" : " (left)")),
      el("td", {}, bar, el("span", { class: "estimate" }, `${(s.spent || 0).toFixed(2)} / ${budget ? budget.toFixed(2) : "?"}`)),
      el("td", { class: "estimate" }, (s.machine_spent || 0).toFixed(2))));
  }
  document.getElementById("joined").textContent = `${state.joined || 0} joined`;
}

function renderRequest(req) {
  const box = el("div", { class: "request", id: `request-${req.id}` });
  box.append(el("div", {}, el("b", {}, req.label), " — ", el("span", { class: "q" }, req.question)));
  box.append(el("div", { class: "meta" }, `${req.kind}, ε = ${req.epsilon} · asked ${req.asked} · answered ${req.answered} · refused ${req.refused}` + (req.missing ? ` · missing ${req.missing}` : "")));
  const chips = el("div", { class: "chips" });
  for (const c of req.chips) {
    chips.append(el("span", { class: "chip" + (c.refused ? " refused" : ""), title: c.name }, `${c.name}: ${c.refused ? "refused" : (typeof c.value === "string" ? c.value : JSON.stringify(c.value))}`));
  }
  box.append(chips);
  if (req.estimate) {
    const est = req.estimate;
    const lines = el("div", { class: "estimate" });
    est.labels.forEach((_, j) => lines.append(el("div", { class: "est", id: `est-${req.id}-${j}` }, estimateText(est, j))));
    box.append(el("div", { class: "meta" }, `debiased estimate from ${est.n} reports (95 % interval):`), lines, chart(est));
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
    for (const round of step.rounds.slice().reverse()) {
      const r = el("div", { class: "round" }, el("h4", {}, `session ${round.session}, round ${round.round}${round.last ? "" : " (more rounds follow)"}${round.done ? "" : " — answers arriving…"}`));
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
  for (const e of state.events.slice().reverse()) log.append(el("li", {}, `${new Date(e.time * 1000).toLocaleTimeString()} ${e.text}`));
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
