/* Leaseline report: canvas timeline/plots and SVG anomaly graphs, written for this page only.
 * Data comes from the JSON block #leaseline-data: operations as
 * base64 typed columns (so 100k operations decode in milliseconds), sorted by invoke time. */
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("leaseline-data").textContent);
  window.leaselineErrors = window.leaselineErrors || [];

  function b64(s, Type) {
    if (!s) return new Type(0);
    const bin = atob(s), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  const C = D.ops || {};
  const N = C.n || 0;
  const OPS = {
    index: b64(C.index, Int32Array), cindex: b64(C.cindex, Int32Array),
    process: b64(C.process, Int32Array), lane: b64(C.lane, Int16Array),
    f: b64(C.f, Uint8Array), type: b64(C.type, Uint8Array), key: b64(C.key, Int32Array),
    node: b64(C.node, Int16Array), inv: b64(C.invoke, Float64Array), cmp: b64(C.complete, Float64Array),
  };
  const F_NAMES = ["read", "write", "cas", "other"], TYPE_NAMES = ["ok", "fail", "info", "open"];
  const LANES = D.lanes || [];
  const END = Math.max(D.endMs || 0, N ? OPS.cmp.reduce((a, b) => Math.max(a, b), 0) : 0, 1);
  let maxDur = 0;
  for (let i = 0; i < N; i++) maxDur = Math.max(maxDur, OPS.cmp[i] - OPS.inv[i]);

  // Colours: hue by outcome, shade by function (reads light, writes/cas darker).
  const COLORS = {
    ok: ["#8fd3a8", "#2e9d5b", "#1f7a8c", "#5a8f6f"], fail: ["#f2a5a2", "#d9534f", "#b23a48", "#d9534f"],
    info: ["#f6cf8e", "#e8a33d", "#c7771a", "#e8a33d"], open: ["#c9ced6", "#8895a3", "#8895a3", "#8895a3"],
  };
  const NEMESIS_COLORS = { partition: "rgba(232,163,61,0.18)", kill: "rgba(217,83,79,0.16)",
                           pause: "rgba(122,111,214,0.17)" };
  const nemColor = (name) => NEMESIS_COLORS[name] || "rgba(120,130,145,0.15)";

  function record(i) {
    const k = OPS.key[i], nd = OPS.node[i], p = OPS.process[i];
    const rec = {
      index: OPS.index[i], complete_index: OPS.cindex[i] < 0 ? null : OPS.cindex[i],
      process: p < 0 ? (D.procNames[p] ?? p) : p, type: TYPE_NAMES[OPS.type[i]],
      f: OPS.f[i] === 3 ? (D.fOther[i] ?? "other") : F_NAMES[OPS.f[i]],
      key: k >= 0 ? D.keys[k] : null, value: D.values[i] ? JSON.parse(D.values[i]) : null,
      node: nd >= 0 ? D.nodes[nd] : null, invoke_ms: +OPS.inv[i].toFixed(3),
      complete_ms: +OPS.cmp[i].toFixed(3), latency_ms: +(OPS.cmp[i] - OPS.inv[i]).toFixed(3),
    };
    if (D.errors[i] !== undefined) rec.error = D.errors[i];
    const inForce = D.nemesis.filter((n) => n.start <= OPS.cmp[i] && (n.end === null || n.end >= OPS.inv[i]));
    if (inForce.length) rec.nemesis_in_force = inForce.map((n) => n.name + (n.value ? " " + JSON.stringify(n.value) : ""));
    return rec;
  }

  const panel = document.getElementById("record-panel");
  function showRecord(title, rec) {
    panel.querySelector("h3 span").textContent = title;
    panel.querySelector("pre").textContent = JSON.stringify(rec, null, 2);
    panel.style.display = "block";
    panel.dataset.index = rec.index ?? rec.id ?? "";
  }
  panel.querySelector("button").addEventListener("click", () => { panel.style.display = "none"; });

  // ---------- shared x view (ms) across timeline and plots ----------
  const view = { t0: 0, t1: END, key: -1, selected: -1, highlight: new Set(), listeners: [] };
  view.set = function (t0, t1) {
    const span = Math.max(t1 - t0, 0.01);
    if (span >= END) { t0 = 0; t1 = END; } else {
      if (t0 < 0) { t1 -= t0; t0 = 0; }
      if (t1 > END) { t0 -= t1 - END; t1 = END; }
    }
    view.t0 = Math.max(0, t0); view.t1 = t1;
    view.listeners.forEach((f) => f());
  };
  const redrawAll = () => view.listeners.forEach((f) => f());

  function firstVisible(t0) { // first row whose invoke >= t0 - maxDur (rows sorted by invoke)
    let lo = 0, hi = N, target = t0 - maxDur;
    while (lo < hi) { const m = (lo + hi) >> 1; if (OPS.inv[m] < target) lo = m + 1; else hi = m; }
    return lo;
  }
  function niceTicks(a, b, n) {
    const span = b - a; if (!(span > 0)) return [a];
    const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = []; for (let t = Math.ceil(a / step) * step; t <= b + 1e-9; t += step) out.push(t);
    return out;
  }
  function fmtMs(t) {
    const a = Math.abs(t);
    if (a >= 60000) return (t / 60000).toFixed(a % 60000 ? 1 : 0) + " min";
    if (a >= 1000) return String(+(t / 1000).toFixed(a < 10000 ? 2 : 1)) + " s";
    if (a >= 1 || a === 0) return (+t.toFixed(1)) + " ms";
    return (+(t * 1000).toFixed(0)) + " µs";
  }

  // A canvas sized to its CSS box and device pixels; returns ctx with CSS-pixel coordinates.
  function setupCanvas(canvas, height) {
    const dpr = window.devicePixelRatio || 1, w = canvas.parentElement.clientWidth || 800;
    canvas.style.height = height + "px";
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(height * dpr);
    const ctx = canvas.getContext("2d"); ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx, w, h: height };
  }
  const M = { left: 78, right: 14, top: 22, bottom: 26 };
  const xOf = (t, w) => M.left + (t - view.t0) / (view.t1 - view.t0) * (w - M.left - M.right);
  const tOf = (x, w) => view.t0 + (x - M.left) / (w - M.left - M.right) * (view.t1 - view.t0);

  function drawNemesis(ctx, w, top, bottom, labels) {
    ctx.save();
    for (const n of D.nemesis) {
      const e = n.end === null ? END : n.end;
      if (e < view.t0 || n.start > view.t1) continue;
      const x0 = Math.max(M.left, xOf(n.start, w)), x1 = Math.min(w - M.right, xOf(e, w));
      ctx.fillStyle = nemColor(n.name); ctx.fillRect(x0, top, Math.max(1, x1 - x0), bottom - top);
      if (labels && x1 - x0 > 30) {
        ctx.fillStyle = "#6b7785"; ctx.font = "11px sans-serif"; ctx.fillText(n.name, x0 + 3, top - 6);
      }
    }
    ctx.restore();
  }
  function drawXAxis(ctx, w, y) {
    ctx.save(); ctx.strokeStyle = "#c5ccd5"; ctx.fillStyle = "#6b7785"; ctx.font = "11px sans-serif";
    ctx.beginPath(); ctx.moveTo(M.left, y + .5); ctx.lineTo(w - M.right, y + .5); ctx.stroke();
    ctx.textAlign = "center";
    for (const t of niceTicks(view.t0, view.t1, Math.max(2, Math.floor((w - M.left) / 110)))) {
      const x = xOf(t, w); ctx.beginPath(); ctx.moveTo(x + .5, y); ctx.lineTo(x + .5, y + 4); ctx.stroke();
      ctx.fillText(fmtMs(t), x, y + 15);
    }
    ctx.restore();
  }

  // Wheel zooms around the cursor, drag pans, double-click resets; `onClick` gets a real click.
  function attachZoom(canvas, onClick, onHover) {
    let drag = null;
    canvas.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const w = canvas.clientWidth, t = tOf(ev.offsetX, w), k = Math.pow(1.0015, ev.deltaY);
      view.set(t - (t - view.t0) * k, t + (view.t1 - t) * k);
    }, { passive: false });
    canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, t0: view.t0, t1: view.t1, moved: false }; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) { if (ev.target === canvas && onHover) onHover(ev); return; }
      const dx = ev.clientX - drag.x; if (Math.abs(dx) > 3) drag.moved = true;
      if (!drag.moved) return;
      const dt = dx / (canvas.clientWidth - M.left - M.right) * (drag.t1 - drag.t0);
      view.set(drag.t0 - dt, drag.t1 - dt);
    });
    window.addEventListener("mouseup", (ev) => {
      if (drag && !drag.moved && ev.target === canvas && onClick) onClick(ev);
      drag = null;
    });
    canvas.addEventListener("dblclick", () => view.set(0, END));
    if (onHover) canvas.addEventListener("mouseleave", () => { tooltip.style.display = "none"; });
  }
  const tooltip = document.createElement("div"); tooltip.className = "tooltip"; document.body.appendChild(tooltip);
  function tip(ev, text) {
    if (!text) { tooltip.style.display = "none"; return; }
    tooltip.textContent = text; tooltip.style.display = "block";
    tooltip.style.left = (ev.pageX + 12) + "px"; tooltip.style.top = (ev.pageY + 12) + "px";
  }

  // ---------- timeline ----------
  function timeline() {
    const canvas = document.getElementById("timeline");
    if (!canvas) return;
    if (!N) { canvas.parentElement.innerHTML = '<div class="empty">No operations to draw: ' +
                (D.historyProblem || "the history is empty") + "</div>"; return; }
    const nLanes = Math.max(1, LANES.length);
    const laneH = Math.max(7, Math.min(26, Math.floor(560 / nLanes)));
    const height = M.top + nLanes * laneH + M.bottom;
    canvas.dataset.total = N;
    function draw() {
      const { ctx, w } = setupCanvas(canvas, height);
      const plotBottom = M.top + nLanes * laneH;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, height);
      for (let l = 0; l < nLanes; l++) if (l % 2) { ctx.fillStyle = "#f7f9fb"; ctx.fillRect(M.left, M.top + l * laneH, w - M.left - M.right, laneH); }
      drawNemesis(ctx, w, M.top, plotBottom, true);
      const x0c = M.left, x1c = w - M.right, pad = laneH > 10 ? 2 : 1, cols = Math.ceil(x1c - x0c) + 1;
      let lastRow = firstVisible(view.t0), hi = N;
      { let lo = lastRow; while (lo < hi) { const m = (lo + hi) >> 1; if (OPS.inv[m] <= view.t1) lo = m + 1; else hi = m; } }
      // Zoomed out (several operations per pixel) each pixel column of a lane shows the worst
      // outcome in it (fail, then info, then ok by majority of reads/writes): drawing bars
      // there would leave whichever came last on top and hide the failures.
      const dense = (hi - lastRow) / Math.max(1, cols * nLanes) > 0.35;
      let drawn = 0, sel = null;
      const marked = [];  // the highlighted anomaly's operations (outlined)
      const buckets = new Map();
      const bucket = (color) => { let p = buckets.get(color); if (!p) { p = new Path2D(); buckets.set(color, p); } return p; };
      const agg = dense ? [0, 1, 2, 3].map(() => new Uint32Array(cols * nLanes)) : null; // reads ok, writes ok, fail, info
      for (let i = firstVisible(view.t0); i < hi; i++) {
        if (OPS.cmp[i] < view.t0) continue;
        if (view.key >= 0 && OPS.key[i] !== view.key) continue;
        let a = xOf(OPS.inv[i], w), b = xOf(OPS.cmp[i], w);
        a = Math.max(a, x0c); b = Math.min(Math.max(b, a + 1), x1c);
        drawn++;
        const y = M.top + OPS.lane[i] * laneH + pad;
        if (i === view.selected) sel = [a, y, b - a, laneH - 2 * pad];
        if (view.highlight.has(i)) marked.push([a, y, b - a, laneH - 2 * pad]);
        if (dense) {
          const t = OPS.type[i], which = t === 1 ? 2 : t >= 2 ? 3 : (OPS.f[i] === 0 ? 0 : 1), base = OPS.lane[i] * cols;
          for (let x = Math.floor(a - x0c), e = Math.floor(b - x0c); x <= e && x < cols; x++) agg[which][base + x]++;
        } else {
          bucket(COLORS[TYPE_NAMES[OPS.type[i]]][OPS.f[i]]).rect(a, y, b - a, laneH - 2 * pad);
        }
      }
      if (dense) {
        const [rd, wr, fl, inf] = agg;
        for (let l = 0; l < nLanes; l++) for (let x = 0; x < cols; x++) {
          const k = l * cols + x;
          const color = fl[k] ? COLORS.fail[1] : inf[k] ? COLORS.info[1] : rd[k] + wr[k] === 0 ? null
            : rd[k] >= wr[k] ? COLORS.ok[0] : COLORS.ok[1];
          if (color) bucket(color).rect(x0c + x, M.top + l * laneH + pad, 1, laneH - 2 * pad);
        }
      }
      // ok operations first, so fail/info ones stay visible when they share a pixel.
      const okColors = new Set(COLORS.ok);
      const paint = [...buckets].sort((a, b) => okColors.has(b[0]) - okColors.has(a[0]));
      for (const [color, p] of paint) { ctx.fillStyle = color; ctx.fill(p); }
      if (dense) drawNemesis(ctx, w, M.top, plotBottom, false); // tint over the solid columns
      canvas.dataset.mode = dense ? "density" : "operations";
      ctx.strokeStyle = "#d9534f"; ctx.lineWidth = 2.5;
      for (const [x, y, bw, bh] of marked) ctx.strokeRect(x - 2, y - 2, bw + 4, bh + 4);
      canvas.dataset.highlighted = marked.length;
      if (sel) { ctx.strokeStyle = "#1d2733"; ctx.lineWidth = 2; ctx.strokeRect(sel[0] - 1, sel[1] - 1, sel[2] + 2, sel[3] + 2); }
      ctx.fillStyle = "#6b7785"; ctx.font = (laneH >= 12 ? 11 : 9) + "px sans-serif"; ctx.textAlign = "right";
      const every = Math.ceil(11 / laneH);
      for (let l = 0; l < nLanes; l += every) ctx.fillText(LANES[l] || "", M.left - 6, M.top + l * laneH + laneH / 2 + 4);
      drawXAxis(ctx, w, plotBottom);
      canvas.dataset.drawn = drawn;
      document.getElementById("timeline-status").textContent =
        `${drawn.toLocaleString()} of ${N.toLocaleString()} operations drawn · ${fmtMs(view.t0)} – ${fmtMs(view.t1)}`;
    }
    function hit(ev) {
      const w = canvas.clientWidth, lane = Math.floor((ev.offsetY - M.top) / laneH);
      if (lane < 0 || lane >= nLanes || ev.offsetX < M.left) return -1;
      const t = tOf(ev.offsetX, w), slack = (view.t1 - view.t0) / (w - M.left - M.right) * 3;
      let best = -1, bestD = Infinity;
      for (let i = firstVisible(t - slack); i < N && OPS.inv[i] <= t + slack; i++) {
        if (OPS.lane[i] !== lane || (view.key >= 0 && OPS.key[i] !== view.key)) continue;
        const d = t < OPS.inv[i] ? OPS.inv[i] - t : t > OPS.cmp[i] ? t - OPS.cmp[i] : 0;
        if (d <= slack && d < bestD) { best = i; bestD = d; }
      }
      return best;
    }
    attachZoom(canvas, (ev) => {
      const i = hit(ev); if (i < 0) return;
      view.selected = i; showRecord("Operation " + OPS.index[i], record(i)); redrawAll();
    }, (ev) => {
      const i = hit(ev);
      tip(ev, i < 0 ? "" : `${OPS.f[i] === 3 ? (D.fOther[i] ?? "other") : F_NAMES[OPS.f[i]]} ${D.keys[OPS.key[i]] ?? ""} → ${TYPE_NAMES[OPS.type[i]]} ` +
          `${D.values[i] || ""} (${(OPS.cmp[i] - OPS.inv[i]).toFixed(2)} ms)`);
    });
    view.listeners.push(draw);
    // For tests: the centre (canvas CSS px) of the widest operation drawn, to click on it.
    window.leaselineProbe = () => {
      const w = canvas.clientWidth; let best = -1, bw = 0;
      for (let i = firstVisible(view.t0); i < N && OPS.inv[i] <= view.t1; i++) {
        if (view.key >= 0 && OPS.key[i] !== view.key) continue;
        const a = Math.max(xOf(OPS.inv[i], w), M.left), b = Math.min(xOf(OPS.cmp[i], w), w - M.right);
        if (b - a > bw) { bw = b - a; best = i; }
      }
      if (best < 0) return null;
      const a = Math.max(xOf(OPS.inv[best], w), M.left), b = Math.min(xOf(OPS.cmp[best], w), w - M.right);
      return { x: (a + b) / 2, y: M.top + OPS.lane[best] * laneH + laneH / 2, index: OPS.index[best] };
    };
    // Programmatic access for tests and the anomaly "show in timeline" buttons.
    window.leaselineTimeline = { select: (i) => { view.selected = i; showRecord("Operation " + OPS.index[i], record(i)); redrawAll(); },
                                 rowOfIndex: (idx) => OPS.index.indexOf(idx) };
    // An anomaly type's operations of one key: filter to the key, outline them, zoom onto them.
    window.leaselineShowOps = (key, indices) => {
      const rows = indices.map((idx) => OPS.index.indexOf(idx)).filter((r) => r >= 0);
      view.highlight = new Set(rows);
      const keySel = document.getElementById("key-filter"), k = D.keys.indexOf(key);
      if (keySel && k >= 0) { keySel.value = String(k); view.key = k; }
      if (rows.length) {
        const a = Math.min(...rows.map((r) => OPS.inv[r])), b = Math.max(...rows.map((r) => OPS.cmp[r]));
        const pad = Math.max(50, (b - a) * 0.15); view.set(a - pad, b + pad);
      } else redrawAll();
      document.getElementById("timeline-card").scrollIntoView({ behavior: "smooth" });
    };
  }

  // ---------- latency (log scale) ----------
  function latency() {
    const canvas = document.getElementById("latency");
    if (!canvas || !N) { if (canvas) canvas.parentElement.innerHTML = '<div class="empty">No operations.</div>'; return; }
    let lo = Infinity, hi = 0;
    for (let i = 0; i < N; i++) { const l = OPS.cmp[i] - OPS.inv[i]; if (l > 0) { lo = Math.min(lo, l); hi = Math.max(hi, l); } }
    if (!(hi > 0)) { lo = 0.1; hi = 1; }
    const L0 = Math.log10(lo) - 0.05, L1 = Math.log10(hi) + 0.05, H = 260;
    function draw() {
      const { ctx, w } = setupCanvas(canvas, H), bottom = H - M.bottom;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, H);
      drawNemesis(ctx, w, M.top, bottom, false);
      const yOf = (l) => bottom - (Math.log10(Math.max(l, lo)) - L0) / (L1 - L0) * (bottom - M.top);
      ctx.strokeStyle = "#eef1f4"; ctx.fillStyle = "#6b7785"; ctx.font = "11px sans-serif"; ctx.textAlign = "right";
      for (let e = Math.floor(L0); e <= Math.ceil(L1); e++) {
        for (const m of [1, 2, 5]) {
          const v = m * Math.pow(10, e), y = yOf(v); if (y < M.top || y > bottom) continue;
          ctx.beginPath(); ctx.moveTo(M.left, y + .5); ctx.lineTo(w - M.right, y + .5); ctx.stroke();
          ctx.fillText(fmtMs(v), M.left - 6, y + 4);
        }
      }
      const buckets = new Map();
      for (let i = firstVisible(view.t0); i < N && OPS.inv[i] <= view.t1; i++) {
        if (OPS.inv[i] < view.t0 || (view.key >= 0 && OPS.key[i] !== view.key)) continue;
        const color = COLORS[TYPE_NAMES[OPS.type[i]]][OPS.f[i]];
        let p = buckets.get(color); if (!p) { p = new Path2D(); buckets.set(color, p); }
        p.rect(xOf(OPS.inv[i], w) - 1, yOf(OPS.cmp[i] - OPS.inv[i]) - 1, 2.2, 2.2);
      }
      for (const [color, p] of buckets) { ctx.fillStyle = color; ctx.fill(p); }
      drawXAxis(ctx, w, bottom);
    }
    attachZoom(canvas);
    view.listeners.push(draw);
  }

  // ---------- throughput (completions per second, by outcome) ----------
  function throughput() {
    const canvas = document.getElementById("throughput");
    if (!canvas || !N) { if (canvas) canvas.parentElement.innerHTML = '<div class="empty">No operations.</div>'; return; }
    const H = 260;
    function draw() {
      const { ctx, w } = setupCanvas(canvas, H), bottom = H - M.bottom;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, H);
      drawNemesis(ctx, w, M.top, bottom, false);
      const nb = Math.max(10, Math.min(200, Math.floor((w - M.left - M.right) / 5)));
      const width = (view.t1 - view.t0) / nb, counts = [0, 1, 2].map(() => new Float64Array(nb));
      for (let i = 0; i < N; i++) {
        const t = OPS.cmp[i]; if (t < view.t0 || t >= view.t1) continue;
        if (view.key >= 0 && OPS.key[i] !== view.key) continue;
        const ty = Math.min(OPS.type[i], 2);
        counts[ty][Math.min(nb - 1, Math.floor((t - view.t0) / width))] += 1000 / width;
      }
      let max = 1; counts.forEach((c) => c.forEach((v) => { max = Math.max(max, v); }));
      const yOf = (v) => bottom - v / (max * 1.08) * (bottom - M.top);
      ctx.strokeStyle = "#eef1f4"; ctx.fillStyle = "#6b7785"; ctx.font = "11px sans-serif"; ctx.textAlign = "right";
      for (const v of niceTicks(0, max * 1.08, 4)) {
        const y = yOf(v); ctx.beginPath(); ctx.moveTo(M.left, y + .5); ctx.lineTo(w - M.right, y + .5); ctx.stroke();
        ctx.fillText(v >= 1000 ? (v / 1000).toFixed(1) + "k/s" : (+v.toFixed(1)) + "/s", M.left - 6, y + 4);
      }
      ["#2e9d5b", "#d9534f", "#e8a33d"].forEach((color, ty) => {
        ctx.strokeStyle = color; ctx.lineWidth = 1.6; ctx.beginPath();
        for (let b = 0; b < nb; b++) {
          const x = xOf(view.t0 + (b + 0.5) * width, w), y = yOf(counts[ty][b]);
          if (b) ctx.lineTo(x, y); else ctx.moveTo(x, y);
        }
        ctx.stroke();
      });
      drawXAxis(ctx, w, bottom);
    }
    attachZoom(canvas);
    view.listeners.push(draw);
  }

  // ---------- staleness histogram vs lease ----------
  function staleness() {
    const canvas = document.getElementById("staleness");
    if (!canvas) return;
    const S = D.shifts || [], lease = D.leaseMs;
    canvas.dataset.reads = S.length;
    if (!S.length) { canvas.parentElement.innerHTML = '<div class="empty">No read needed a shift: every read ' +
                       "returned a value current within its own invocation and completion.</div>"; return; }
    const maxS = S.reduce((a, b) => Math.max(a, b), 0), top = Math.max(maxS, lease || 0) * 1.08 || 1;
    const H = 240, nb = 40, width = top / nb, bins = new Array(nb).fill(0);
    S.forEach((s) => { bins[Math.min(nb - 1, Math.floor(s / width))]++; });
    const peak = Math.max(...bins);
    function draw() {
      const { ctx, w } = setupCanvas(canvas, H), bottom = H - M.bottom;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, H);
      const xOfS = (s) => M.left + s / top * (w - M.left - M.right);
      const yOf = (c) => bottom - c / (peak * 1.1) * (bottom - M.top);
      ctx.strokeStyle = "#eef1f4"; ctx.fillStyle = "#6b7785"; ctx.font = "11px sans-serif"; ctx.textAlign = "right";
      for (const v of niceTicks(0, peak * 1.1, 4)) {
        if (v % 1) continue;
        const y = yOf(v); ctx.beginPath(); ctx.moveTo(M.left, y + .5); ctx.lineTo(w - M.right, y + .5); ctx.stroke();
        ctx.fillText(String(v), M.left - 6, y + 4);
      }
      bins.forEach((c, b) => {
        if (!c) return;
        const s = b * width; ctx.fillStyle = lease !== null && s + width > lease ? "#d9534f" : "#e8a33d";
        ctx.fillRect(xOfS(s) + 1, yOf(c), Math.max(1, xOfS(width) - M.left - 2), bottom - yOf(c));
      });
      ctx.textAlign = "center"; ctx.strokeStyle = "#c5ccd5"; ctx.fillStyle = "#6b7785";
      ctx.beginPath(); ctx.moveTo(M.left, bottom + .5); ctx.lineTo(w - M.right, bottom + .5); ctx.stroke();
      for (const s of niceTicks(0, top, 8)) ctx.fillText(fmtMs(s), xOfS(s), bottom + 15);
      if (lease !== null && lease !== undefined) {
        const x = xOfS(lease); ctx.strokeStyle = "#b23a48"; ctx.setLineDash([6, 4]); ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(x, M.top - 6); ctx.lineTo(x, bottom); ctx.stroke(); ctx.setLineDash([]);
        ctx.fillStyle = "#b23a48"; ctx.textAlign = x > w - 160 ? "right" : "left";
        ctx.fillText(`lease ${fmtMs(lease)}`, x + (x > w - 160 ? -6 : 6), M.top + 4);
      }
    }
    view.listeners.push(draw);
  }

  // ---------- anomaly graphs (SVG, laid out by time and process) ----------
  const EDGE_COLORS = { "real-time": "#5b6b7d", "reads-from": "#2d6cdf", "version-order": "#2e9d5b" };
  // A list-append cycle's edges are all in the cycle: coloured by their kind instead.
  const KIND_COLORS = { ww: "#2e9d5b", wr: "#2d6cdf", rw: "#d9534f", process: "#7a6fd6", realtime: "#5b6b7d" };
  const SVGNS = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent) {
    const e = document.createElementNS(SVGNS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  const nodeTime = (n) => ["invoke_ms", "invoke", "time", "start"].map((k) => n[k]).find((v) => typeof v === "number") ?? 0;
  function graph(container, A) {
    const g = A.graph || {}, nodes = (g.nodes || []).map((n) => Object.assign({}, n));
    const links = g.edges || g.links || [];
    container.dataset.nodes = nodes.length; container.dataset.edges = links.length;
    if (!nodes.length) { container.innerHTML = '<div class="empty">This violation has no counterexample graph.</div>'; return; }
    const procs = [...new Set(nodes.map((n) => String(n.process)))];
    const order = nodes.slice().sort((a, b) => nodeTime(a) - nodeTime(b));
    const hasRole = nodes.some((n) => n.role), NW = 170, NH = hasRole ? 60 : 46, GX = 110, GY = 70, PADX = 30, PADY = 40;
    order.forEach((n, r) => { n._x = PADX + r * (NW + GX); n._y = PADY + procs.indexOf(String(n.process)) * (NH + GY) + 10; });
    const W = PADX * 2 + order.length * (NW + GX) - GX + 40, H = PADY * 2 + procs.length * (NH + GY) - GY + 40;
    const svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` }, container);
    const defs = el("defs", {}, svg);
    for (const [name, color] of Object.entries(Object.assign({ cycle: "#d9534f" }, EDGE_COLORS, KIND_COLORS))) {
      const m = el("marker", { id: `arrow-${A.id}-${name}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
                               markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
      el("path", { d: "M0,0 L10,5 L0,10 z", fill: color }, m);
    }
    procs.forEach((p, r) => {
      const t = el("text", { x: 6, y: PADY + r * (NH + GY) + 4, class: "elabel" }, svg);
      t.textContent = "process " + p;
    });
    const byId = new Map(nodes.map((n) => [String(n.id), n]));
    const edgeLayer = el("g", {}, svg), nodeLayer = el("g", {}, svg);
    const edgeEls = links.map((l) => {
      const kind = KIND_COLORS[l.type] ? l.type : null;
      const color = kind ? KIND_COLORS[kind] : l.cycle ? "#d9534f" : (EDGE_COLORS[l.type] || "#8895a3");
      const marker = kind || (l.cycle ? "cycle" : (EDGE_COLORS[l.type] ? l.type : "real-time"));
      const path = el("path", { class: "edge" + (l.cycle ? " cycle" : ""), stroke: color,
                                "marker-end": `url(#arrow-${A.id}-${marker})` }, edgeLayer);
      const label = el("text", { class: "elabel" + (l.cycle ? " cycle" : ""), "text-anchor": "middle" }, edgeLayer);
      label.textContent = l.label || ((l.type || "") + (l.cycle ? " ⟲" : ""));
      return { l, path, label };
    });
    function layoutEdges() {
      const seen = new Map();
      for (const { l, path, label } of edgeEls) {
        const s = byId.get(String(l.source)), t = byId.get(String(l.target));
        if (!s || !t) continue;
        const fwd = String(l.source) < String(l.target);
        const pair = fwd ? l.source + "|" + l.target : l.target + "|" + l.source, k = (seen.get(pair) || 0); seen.set(pair, k + 1);
        const sx = s._x + NW / 2, sy = s._y + NH / 2, tx = t._x + NW / 2, ty = t._y + NH / 2;
        const dx = tx - sx, dy = ty - sy, len = Math.hypot(dx, dy) || 1;
        // The bend's side is taken from the pair's canonical direction, so A->B and B->A part ways.
        const side = fwd ? 1 : -1;
        // Leave each box at its border; bend pairs of opposite edges apart.
        const clip = (bx, by, ux, uy) => { const f = Math.min(Math.abs(NW / 2 / (ux || 1e-9)), Math.abs(NH / 2 / (uy || 1e-9))); return [bx + ux * f, by + uy * f]; };
        const [ax, ay] = clip(sx, sy, dx / len, dy / len), [bx, by] = clip(tx, ty, -dx / len, -dy / len);
        const bend = side * (k % 2 ? -1 : 1) * (34 + 26 * Math.floor(k / 2) + 0.12 * len) * (s._y === t._y ? 1.6 : 1);
        const mx = (ax + bx) / 2 - dy / len * bend, my = (ay + by) / 2 + dx / len * bend;
        path.setAttribute("d", `M${ax},${ay} Q${mx},${my} ${bx},${by}`);
        label.setAttribute("x", (ax + 2 * mx + bx) / 4); label.setAttribute("y", (ay + 2 * my + by) / 4 - 4);
      }
    }
    const involved = new Map();  // operation index -> the anomaly types it is part of
    for (const [t, ops] of Object.entries(A.types || {})) for (const o of ops) involved.set(String(o), (involved.get(String(o)) || []).concat(t));
    for (const n of nodes) {
      const f = String(n.f || ""), types = involved.get(String(n.index ?? n.id));
      const grp = el("g", { class: "node " + f + (types ? " involved" : ""), transform: `translate(${n._x},${n._y})` }, nodeLayer);
      if (types) { const tt = el("text", { x: 0, y: -6, class: "small involved" }, grp); tt.textContent = types.join(", "); }
      grp.dataset.id = n.id;
      el("rect", { width: NW, height: NH, rx: 7 }, grp);
      const t1 = el("text", { x: 9, y: 18 }, grp);
      const val = f === "cas" && Array.isArray(n.value) ? `${JSON.stringify(n.value[0])}→${JSON.stringify(n.value[1])}` : JSON.stringify(n.value ?? null);
      t1.textContent = (n.label ? `T${n.id} ${n.label}` : `${f} ${val}`).slice(0, 22) + (n.type && n.type !== "ok" ? ` (${n.type})` : "");
      const t2 = el("text", { x: 9, y: 35, class: "small" }, grp);
      const tt = nodeTime(n), ct = typeof n.complete_ms === "number" ? n.complete_ms : null;
      t2.textContent = `#${n.index ?? n.id} · ${n.node ?? ""} · ${fmtMs(tt)}` + (ct !== null ? `+${(ct - tt).toFixed(1)}` : " → ?");
      if (n.role) { const t3 = el("text", { x: 9, y: 51, class: "small role" }, grp); t3.textContent = String(n.role).slice(0, 30); }
      let drag = null;
      grp.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, nx: n._x, ny: n._y, moved: false }; ev.preventDefault(); });
      window.addEventListener("mousemove", (ev) => {
        if (!drag) return;
        const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        if (!drag.moved) return;
        n._x = drag.nx + dx; n._y = drag.ny + dy; grp.setAttribute("transform", `translate(${n._x},${n._y})`); layoutEdges();
      });
      window.addEventListener("mouseup", () => { if (drag && !drag.moved) select(); drag = null; });
      grp.addEventListener("click", (ev) => { if (ev.detail === 0) select(); }); // keyboard / synthetic clicks
      function select() {
        container.querySelectorAll(".node.selected").forEach((x) => x.classList.remove("selected"));
        grp.classList.add("selected");
        const rec = {}; for (const k in n) if (!k.startsWith("_")) rec[k] = n[k];
        const touching = links.filter((l) => String(l.source) === String(n.id) || String(l.target) === String(n.id))
          .map((l) => `${l.source} -${l.type}${l.cycle ? " (cycle)" : ""}-> ${l.target}`);
        if (touching.length) rec.edges = touching;
        showRecord(A.title ? `${A.title}: T${n.id}` : `Key ${A.key}: operation ${n.index ?? n.id}`, rec);
      }
    }
    layoutEdges();
  }

  function anomalies() {
    (D.anomalyTypes || []).forEach((T, i) => {
      const btn = document.getElementById("show-type-" + i);
      if (btn) btn.addEventListener("click", () => window.leaselineShowOps && window.leaselineShowOps(T.key, T.ops));
    });
    (D.anomalies || []).forEach((A, i) => {
      A.id = i;
      const c = document.getElementById("graph-" + i);
      if (c) graph(c, A);
      const btn = document.getElementById("show-" + i);
      if (btn) btn.addEventListener("click", () => {
        const ns = (A.graph && A.graph.nodes) || A.ops || [];
        const ts = ns.map(nodeTime), cs = ns.map((n) => typeof n.complete_ms === "number" ? n.complete_ms : nodeTime(n));
        const keySel = document.getElementById("key-filter"), k = D.keys.indexOf(A.key);
        if (keySel && k >= 0) { keySel.value = String(k); view.key = k; }
        if (ts.length) { const a = Math.min(...ts), b = Math.max(...cs), pad = Math.max(50, (b - a) * 0.15); view.set(a - pad, b + pad); }
        document.getElementById("timeline-card").scrollIntoView({ behavior: "smooth" });
      });
    });
  }

  function controls() {
    const sel = document.getElementById("key-filter");
    if (sel) {
      if (D.keys.length <= 5000) D.keys.forEach((k, i) => { const o = document.createElement("option"); o.value = i; o.textContent = k; sel.appendChild(o); });
      sel.addEventListener("change", () => { view.key = +sel.value; redrawAll(); });
    }
    const reset = document.getElementById("zoom-reset");
    if (reset) reset.addEventListener("click", () => view.set(0, END));
    const zin = document.getElementById("zoom-in"), zout = document.getElementById("zoom-out");
    const zoom = (k) => { const m = (view.t0 + view.t1) / 2, h = (view.t1 - view.t0) / 2 * k; view.set(m - h, m + h); };
    if (zin) zin.addEventListener("click", () => zoom(0.5));
    if (zout) zout.addEventListener("click", () => zoom(2));
    let pending = false;
    window.addEventListener("resize", () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; redrawAll(); }); } });
  }

  function run(step) { try { step(); } catch (e) { window.leaselineErrors.push(String(e && e.stack || e)); console.error(e); } }
  [timeline, latency, throughput, staleness, anomalies, controls].forEach(run);
  run(redrawAll);
  document.body.dataset.ready = "1";
})();
