// ste's HTML report: draws the run embedded in #ste-data (see src/report/html.rs for its
// layout). Hand-written, no dependencies, no network.
//
// The page is a list of SECTIONS. Each claims the keys of the Run it shows; keys no section
// claims (data added by later versions of ste) are drawn by the generic renderer, where the
// "*" entry stands. To give new data a section of its own, add an entry with its keys; a
// section made of parts (as the accounting one) lists them for drawParts, which draws the
// fields of its object that no part knows generically, so nothing new is ever hidden.
//
// When it has drawn everything, the script writes what it drew into #ste-status (series and
// row counts, errors), which the test suite reads through headless Chromium.
(function () {
  'use strict';

  const started = performance.now();
  const status = { rendered: false, errors: [], sections: [], generic: [] };
  window.addEventListener('error', (e) => status.errors.push(String(e.message || e.type)));
  window.addEventListener('unhandledrejection', (e) =>
    status.errors.push('unhandled rejection: ' + String(e.reason)));
  document.addEventListener('securitypolicyviolation', (e) =>
    status.errors.push('blocked by the page policy: ' + e.violatedDirective + ' ' + e.blockedURI));

  // ---------------------------------------------------------------- formatting

  const esc = (s) => String(s).replace(/[&<>"']/g, (c) =>
    ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

  function trimZeros(s) {
    return s.indexOf('.') >= 0 ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  }

  // As ste's text report prints them (units.rs): 512 B, 1.5 KiB, 1 GiB.
  function fmtBytes(b) {
    if (b == null) return 'n/a';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    if (Math.abs(b) < 1024) return Math.round(b) + ' B';
    let v = b, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    const t = Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);
    return trimZeros(t) + ' ' + units[u];
  }

  // 0, 850µs, 12ms, 1.5s, 2m05s, 1h02m.
  function fmtDur(ns) {
    if (ns == null) return 'n/a';
    const US = 1e3, MS = 1e6, S = 1e9;
    if (ns === 0) return '0';
    if (ns < MS) return trimZeros((ns / US).toFixed(1)) + 'µs';
    if (ns < S) return trimZeros((ns / MS).toFixed(1)) + 'ms';
    if (ns < 60 * S) return trimZeros((ns / S).toFixed(2)) + 's';
    if (ns < 3600 * S) {
      const s = Math.floor(ns / S);
      return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
    }
    const m = Math.floor(ns / (60 * S));
    return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
  }

  const fmtInt = (n) => (n == null ? 'n/a' : Math.round(n).toLocaleString('en-US'));
  const fmtCores = (c) => (c == null ? 'n/a' : (c >= 10 ? c.toFixed(0) : c.toFixed(2)) + ' cores');
  const fmtPct = (f) => (f * 100 >= 10 ? (f * 100).toFixed(0) : trimZeros((f * 100).toFixed(2))) + '%';

  // A value of the Run, formatted by the unit its key names.
  function fmtValue(key, v) {
    if (v == null) return 'n/a';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    if (typeof v === 'number') {
      if (/(^|_)(pid|ppid|tid|tgid)$/.test(key)) return String(v);
      if (/_ns$/.test(key)) return fmtDur(v);
      if (/_bytes$/.test(key)) return fmtBytes(v);
      if (key === 'budget' || /_fraction$/.test(key)) return fmtPct(v);
      return Number.isInteger(v) ? fmtInt(v) : String(v);
    }
    return String(v);
  }

  // The exact value behind a formatted one, for titles.
  function exactTitle(key, v) {
    if (typeof v !== 'number') return '';
    if (/_ns$/.test(key)) return fmtInt(v) + ' ns';
    if (/_bytes$/.test(key)) return fmtInt(v) + ' bytes';
    return '';
  }

  // `max_gap_ns` → `Max gap`: the unit is in the formatted value.
  const ACRONYMS = { cpu: 'CPU', pss: 'PSS', rss: 'RSS', io: 'I/O', pid: 'pid', ppid: 'ppid' };
  const humanize = (key) => {
    const words = key.replace(/_(ns|bytes)$/, '').split(/[_.]/).map((w) => ACRONYMS[w] || w);
    const s = words.join(' ');
    return s.charAt(0).toUpperCase() + s.slice(1);
  };

  // ---------------------------------------------------------------- data

  async function loadData() {
    const el = document.getElementById('ste-data');
    if (el.dataset.encoding === 'gzip-base64') {
      const bin = atob(el.textContent.trim());
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      if (typeof DecompressionStream === 'undefined') {
        throw new Error('this browser cannot inflate the embedded data (no DecompressionStream); open the report in a current browser');
      }
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
      return JSON.parse(await new Response(stream).text());
    }
    return JSON.parse(el.textContent);
  }

  // Colours: programs come most-memory first, so the biggest get distinct colours.
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#86bcb6', '#d37295', '#8cd17d', '#b6992d', '#499894'];
  const color = (k) => PALETTE[k % PALETTE.length];
  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  // Everything the sections share, derived once from the view.
  function model(V) {
    const run = V.run, P = V.processes, C = P.columns;
    const n = P.program.length;
    const S = V.samples.t_ns ? V.samples.t_ns.length : 0;
    let wall = Math.max(1, run.totals.wall_ns || 0, S ? V.samples.t_ns[S - 1] : 0);
    for (let i = 0; i < n; i++) wall = Math.max(wall, C.end_ns[i] == null ? C.start_ns[i] : C.end_ns[i]);
    const execsOf = new Array(n);
    for (let k = 0; k < V.execs.process.length; k++) {
      const i = V.execs.process[k];
      (execsOf[i] || (execsOf[i] = [])).push(k);
    }
    const children = new Array(n);
    const roots = [];
    for (let i = 0; i < n; i++) {
      const p = P.parent[i];
      if (p < 0) roots.push(i); else (children[p] || (children[p] = [])).push(i);
    }
    // Tree order: each process followed by its descendants, children in creation order.
    const order = [];
    const stack = roots.slice().reverse();
    while (stack.length) {
      const i = stack.pop();
      order.push(i);
      const c = children[i];
      if (c) for (let k = c.length - 1; k >= 0; k--) stack.push(c[k]);
    }
    // Readings grouped by sample.
    const R = V.readings;
    const firstReading = new Int32Array(S + 1).fill(R.sample.length);
    for (let r = R.sample.length - 1; r >= 0; r--) firstReading[R.sample[r]] = r;
    for (let k = S - 1; k >= 0; k--) firstReading[k] = Math.min(firstReading[k], firstReading[k + 1]);
    // Processes by pid and start (pids are reused): the critical path names them so.
    const byPidStart = new Map();
    for (let i = 0; i < n; i++) byPidStart.set(C.pid[i] + '@' + C.start_ns[i], i);
    const lastOfPid = new Map();
    for (let i = 0; i < n; i++) lastOfPid.set(C.pid[i], i);
    // The ledger's figures, one column each ({key, values, source}; see html/ledger.rs).
    const L = P.ledger || { sources: [], columns: [] };
    const ledgerCols = new Map(L.columns.map((c) => [c.key, c]));
    const M = {
      V, run, n, S, wall, execsOf, order,
      find: (pid, start) => { const i = byPidStart.get(pid + '@' + start); return i == null ? -1 : i; },
      findLast: (pid) => { const i = lastOfPid.get(pid); return i == null ? -1 : i; },
      ledgerColumns: L.columns,
      ledgerValue: (key, i) => { const c = ledgerCols.get(key); return c ? c.values[i] : null; },
      // The source ({name, from, exact}) of value i of column c, null when it has none.
      ledgerSource: (c, i) => {
        const k = typeof c.source === 'number' ? c.source : c.source[i];
        return c.values[i] == null || k < 0 ? null : L.sources[k];
      },
      start: C.start_ns, end: C.end_ns, pid: C.pid,
      label: (i) => V.programs[P.program[i]] + (P.forked[i] ? ' (fork)' : ''),
      argv: (i) => (P.argv[i] >= 0 ? V.strings[P.argv[i]] : null),
      color: (i) => color(P.program[i]),
      readingsOf: (k) => [firstReading[k], firstReading[k + 1]],
      hasReadings: R.sample.length > 0,
    };
    const acc = run.accounting;
    // The critical path as process indices, root first; each link's own time by index.
    M.path = [];
    M.pathSelf = new Map();
    for (const l of (acc && acc.critical_path) || []) {
      const i = M.find(l.pid, l.start_ns);
      if (i < 0) continue;
      M.path.push(i);
      M.pathSelf.set(i, l.self_ns);
    }
    return M;
  }

  function exitText(M, i) {
    const C = M.V.processes.columns;
    if (C.exit_code && C.exit_code[i] != null) return 'exited ' + C.exit_code[i];
    if (C.signal && C.signal[i] != null) return 'killed by signal ' + C.signal[i];
    return M.end[i] == null ? 'running or end missed' : 'unknown';
  }

  // ---------------------------------------------------------------- shared view state

  const view = { t0: 0, t1: 1, group: 'program', cgroup: true, path: true, redraw: [] };
  function setWindow(t0, t1) {
    view.t0 = t0; view.t1 = t1;
    view.redraw.forEach((f) => f());
  }

  // ---------------------------------------------------------------- tooltip

  const tip = document.getElementById('tip');
  let tipPinned = false;
  function showTip(html, x, y, pin) {
    tip.innerHTML = html;
    tip.hidden = false;
    tipPinned = !!pin;
    const r = tip.getBoundingClientRect();
    const vw = window.innerWidth, vh = window.innerHeight;
    let left = x + 14, top = y + 14;
    if (left + r.width > vw - 6) left = Math.max(6, x - r.width - 14);
    if (top + r.height > vh - 6) top = Math.max(6, y - r.height - 14);
    tip.style.left = left + 'px';
    tip.style.top = top + 'px';
  }
  function hideTip(force) { if (force || !tipPinned) { tip.hidden = true; tipPinned = false; } }
  document.addEventListener('pointerdown', (e) => {
    if (!e.target.closest || !e.target.closest('.chart, .timeline-wrap')) hideTip(true);
  });

  // ---------------------------------------------------------------- axes

  // Ticks on a 1-2-5 step for a time range.
  function timeTicks(t0, t1, maxTicks) {
    const span = Math.max(1, t1 - t0);
    let step = 1;
    for (;;) {
      const s = [1, 2, 5].map((m) => m * step).find((s) => span / s <= maxTicks);
      if (s) { step = s; break; }
      step *= 10;
    }
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return out;
  }

  // Ticks for a y axis from 0 to at least `v`: a round step (1, 2, 2.5 or 5 × a power of ten,
  // × a power of 1024 for bytes) giving 3 to 5 intervals, so labels read 50 MiB, not 37.5.
  function niceTicks(v, binary) {
    if (!(v > 0)) v = 1;
    let unit = 1;
    if (binary) while (v / unit >= 1024) unit *= 1024;
    const raw = v / 4 / unit;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw - 1e-12) || 10) * mag * unit;
    const ticks = [];
    for (let t = 0; t < v + step - 1e-9 * step; t += step) ticks.push(t);
    if (ticks.length < 2) ticks.push(step);
    return ticks;
  }

  // ---------------------------------------------------------------- stacked chart (SVG)

  // Draws stacked step areas. `spans[k]` is [from, to] in ns for value k of every series.
  function stackedChart(host, opt) {
    const W = Math.max(280, host.clientWidth || 600);
    const H = opt.height;
    const m = { l: 62, r: 12, t: 22, b: 24 };
    const pw = W - m.l - m.r, ph = H - m.t - m.b;
    const t0 = view.t0, t1 = view.t1;
    const X = (t) => m.l + ((t - t0) / (t1 - t0)) * pw;
    const K = opt.spans.length;
    const stack = new Float64Array(K);
    let top = 0;
    for (let k = 0; k < K; k++) {
      if (opt.spans[k][1] < t0 || opt.spans[k][0] > t1) continue;
      let s = 0;
      for (const se of opt.series) s += se.values[k] || 0;
      top = Math.max(top, s, opt.totals ? opt.totals[k] || 0 : 0);
    }
    // A peak line far above the areas would flatten them, unless it must show (`always`).
    for (const h of opt.hlines || []) if (h.always || h.v <= top * 2) top = Math.max(top, h.v);
    for (const ln of opt.lines || []) for (const [t, v] of ln.points) if (t <= t1) top = Math.max(top, v);
    for (const mk of opt.markers || []) if (mk.t >= t0 && mk.t <= t1) top = Math.max(top, mk.v);
    const yt = niceTicks(top * 1.02, opt.binary);
    const yTop = yt[yt.length - 1];
    const Y = (v) => m.t + ph - (v / yTop) * ph;
    const parts = [];
    parts.push(`<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(opt.label)}" data-series="${opt.series.length}" data-points="${K}">`);
    const clip = 'c' + Math.random().toString(36).slice(2);
    parts.push(`<defs><clipPath id="${clip}"><rect x="${m.l}" y="${m.t - 2}" width="${pw}" height="${ph + 2}"/></clipPath></defs>`);
    // Grid and y axis.
    parts.push('<g class="grid">');
    for (const v of yt) parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${Y(v).toFixed(1)}" y2="${Y(v).toFixed(1)}"/>`);
    parts.push('</g><g class="axis">');
    for (const v of yt) parts.push(`<text x="${m.l - 6}" y="${(Y(v) + 4).toFixed(1)}" text-anchor="end">${esc(opt.yFmt(v))}</text>`);
    const ticks = timeTicks(t0, t1, Math.max(2, Math.floor(pw / 80)));
    for (const t of ticks) {
      const x = X(t).toFixed(1);
      parts.push(`<line x1="${x}" x2="${x}" y1="${m.t + ph}" y2="${m.t + ph + 4}"/><text x="${x}" y="${H - 6}" text-anchor="middle">${esc(fmtDur(t))}</text>`);
    }
    parts.push(`<path d="M${m.l},${m.t + ph}H${W - m.r}"/></g>`);
    // Areas, bottom series first.
    parts.push(`<g clip-path="url(#${clip})">`);
    for (const se of opt.series) {
      let upper = '', lower = '';
      let first = true;
      for (let k = 0; k < K; k++) {
        const [a, b] = opt.spans[k];
        if (b < t0 || a > t1) continue;
        const base = stack[k], v = se.values[k] || 0;
        const xa = Math.max(m.l - 1, X(a)).toFixed(1), xb = Math.min(W - m.r + 1, X(b)).toFixed(1);
        const yu = Y(base + v).toFixed(1), yl = Y(base).toFixed(1);
        upper += (first ? 'M' : 'L') + xa + ',' + yu + 'L' + xb + ',' + yu;
        lower = 'L' + xb + ',' + yl + 'L' + xa + ',' + yl + lower;
        first = false;
        stack[k] = base + v;
      }
      // No outline: with more rounds than pixels, outlines of the steps would swamp the areas.
      if (!first) parts.push(`<path d="${upper}${lower}Z" fill="${se.color}" fill-opacity="0.9"><title>${esc(se.name)}</title></path>`);
    }
    // Step lines over the areas: each point holds until the next, the last until `until`.
    for (const ln of opt.lines || []) {
      let d = '';
      const pts = ln.points;
      for (let k = 0; k < pts.length; k++) {
        const [t, v] = pts[k];
        const next = k + 1 < pts.length ? pts[k + 1][0] : ln.until;
        if (next < t0 || t > t1) continue;
        const xa = Math.max(m.l - 1, X(t)).toFixed(1), xb = Math.min(W - m.r + 1, X(next)).toFixed(1);
        const y = Y(v).toFixed(1);
        d += (d ? 'L' : 'M') + xa + ',' + y + 'L' + xb + ',' + y;
      }
      if (d) parts.push(`<path class="${ln.cls}" d="${d}" fill="none"><title>${esc(ln.name)}</title></path>`);
    }
    parts.push('</g>');
    // Labels never overlap: each takes a box; a line's label that would cover one already
    // placed goes below its line, else is left out (the line keeps its tooltip, the legend
    // its value). Marker labels are placed first.
    const boxes = [];
    const takes = (x, anchor, y, text, size) => {
      const w = text.length * size * 0.62;
      const x0 = anchor === 'end' ? x - w : x;
      const b = [x0, x0 + w, y - size, y + 3];
      if (b[2] < 0 || b[3] > H || boxes.some((o) => b[0] < o[1] && o[0] < b[1] && b[2] < o[3] && o[2] < b[3])) return false;
      boxes.push(b);
      return true;
    };
    const markParts = [];
    for (const mk of opt.markers || []) {
      if (mk.t < t0 || mk.t > t1) continue;
      const x = X(mk.t), y = Y(mk.v);
      const right = x < m.l + pw * 0.6;
      const lx = x + (right ? 8 : -8), ly = Math.max(m.t + 10, y - 6);
      takes(lx, right ? 'start' : 'end', ly, mk.label, 12);
      markParts.push(`<circle class="mark" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="4"><title>${esc(mk.label)}</title></circle>`);
      markParts.push(`<text class="mark-label" x="${lx.toFixed(1)}" y="${ly.toFixed(1)}" text-anchor="${right ? 'start' : 'end'}">${esc(mk.label)}</text>`);
    }
    for (const h of opt.hlines || []) {
      if (h.v > yTop) continue;
      const y = Y(h.v);
      parts.push(`<line class="${h.cls || 'peakline'}" x1="${m.l}" x2="${W - m.r}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}"><title>${esc(h.label)}</title></line>`);
      // Labels of lines that may lie close together go to opposite ends (`left`).
      const lx = h.left ? m.l + 4 : W - m.r - 4, anchor = h.left ? 'start' : 'end';
      const ly = [y - 4, y + 13].find((yy) => takes(lx, anchor, yy, h.label, 11));
      if (ly != null) parts.push(`<text class="line-label" x="${lx}" y="${ly.toFixed(1)}" text-anchor="${anchor}">${esc(h.label)}</text>`);
    }
    parts.push(...markParts);
    parts.push(`<line class="cursor" x1="0" x2="0" y1="${m.t}" y2="${m.t + ph}" visibility="hidden"/>`);
    parts.push(`<rect class="brush" x="0" y="${m.t}" width="0" height="${ph}" visibility="hidden"/>`);
    parts.push(`<rect class="hit" x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="transparent"/>`);
    parts.push('</svg>');
    host.innerHTML = parts.join('');
    const svg = host.firstChild;
    const cursor = svg.querySelector('.cursor'), brush = svg.querySelector('.brush');
    const toT = (clientX) => {
      const r = svg.getBoundingClientRect();
      const x = ((clientX - r.left) / r.width) * W;
      return { x, t: t0 + ((x - m.l) / pw) * (t1 - t0) };
    };
    const find = (t) => {
      let lo = 0, hi = K - 1, best = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (opt.spans[mid][0] <= t) { best = mid; lo = mid + 1; } else hi = mid - 1;
      }
      return best >= 0 && t <= opt.spans[best][1] ? best : -1;
    };
    let drag = null;
    svg.addEventListener('pointermove', (e) => {
      const { x, t } = toT(e.clientX);
      if (drag) {
        const a = Math.max(m.l, Math.min(drag, x)), b = Math.min(W - m.r, Math.max(drag, x));
        brush.setAttribute('x', a); brush.setAttribute('width', b - a); brush.setAttribute('visibility', 'visible');
        return;
      }
      if (x < m.l || x > W - m.r) { cursor.setAttribute('visibility', 'hidden'); hideTip(); return; }
      cursor.setAttribute('x1', x); cursor.setAttribute('x2', x); cursor.setAttribute('visibility', 'visible');
      const k = find(t);
      if (k < 0) { hideTip(); return; }
      showTip(opt.tip(k, t), e.clientX, e.clientY, e.pointerType !== 'mouse');
    });
    svg.addEventListener('pointerleave', () => { cursor.setAttribute('visibility', 'hidden'); if (!drag) hideTip(); });
    svg.addEventListener('pointerdown', (e) => {
      if (e.pointerType !== 'mouse' || e.button !== 0) return;
      drag = toT(e.clientX).x;
      svg.setPointerCapture(e.pointerId);
    });
    svg.addEventListener('pointerup', (e) => {
      if (drag == null) return;
      const x = toT(e.clientX).x;
      const a = Math.min(drag, x), b = Math.max(drag, x);
      drag = null;
      brush.setAttribute('visibility', 'hidden');
      if (b - a > 6) {
        const ta = t0 + ((Math.max(m.l, a) - m.l) / pw) * (t1 - t0);
        const tb = t0 + ((Math.min(W - m.r, b) - m.l) / pw) * (t1 - t0);
        if (tb - ta >= 1000) setWindow(ta, tb);
      }
    });
    svg.addEventListener('dblclick', () => setWindow(0, modelWall));
    return svg;
  }
  let modelWall = 1;

  // Series that stayed at zero (programs too short to use a clock tick between two rounds)
  // are counted, not listed.
  function legend(series, valueText, zeroText) {
    const shown = series.filter((s) => s.peak > 0);
    const quiet = series.length - shown.length;
    return '<div class="legend">' + shown.map((s) =>
      `<span><span class="sw" style="background:${s.color}"></span>${esc(s.name)}<span class="lv">${esc(valueText(s))}</span></span>`
    ).join('') + (quiet ? `<span class="lv">${esc(zeroText(quiet))}</span>` : '') + '</div>';
  }

  // The largest series at point k, for a chart's tooltip.
  function seriesRows(series, k, fmt) {
    const rows = series.map((se) => [se, se.values[k]]).filter((r) => r[1] > 0)
      .sort((a, b) => b[1] - a[1]).slice(0, 12);
    return tipRows(rows.map(([se, v]) =>
      [`<span class="sw" style="background:${se.color}"></span>${esc(se.name)}`, esc(fmt(v))]));
  }

  function tipRows(rows) {
    return '<table>' + rows.map((r) => `<tr><td>${r[0]}</td><td>${r[1]}</td></tr>`).join('') + '</table>';
  }

  // ---------------------------------------------------------------- series

  const TOP = 10;

  // Groups per-process values into series: by program or by process, the TOP largest (by
  // peak) and "other". There are U values per series; `each(k, add)` calls `add(i, v)` for
  // every contribution v of process i to value k, and `scale(k)` divides value k's sums (CPU:
  // by the bin's length). With `cap`, a value whose series add up past it is scaled down to
  // it, every series alike (CPU: the machine's CPUs).
  function groupSeries(M, U, each, scale, cap) {
    const V = M.V, P = V.processes;
    const byProcess = view.group === 'process';
    const groupOf = (i) => (byProcess ? i : P.program[i]);
    const peak = new Map(), sparse = new Map();
    const totals = new Float64Array(U);
    for (let k = 0; k < U; k++) {
      const sums = new Map();
      each(k, (i, v) => {
        const g = groupOf(i);
        sums.set(g, (sums.get(g) || 0) + v);
      });
      let f = scale(k), all = 0;
      for (const v of sums.values()) all += v / f;
      if (cap != null && all > cap) f *= all / cap;
      for (const [g, s] of sums) {
        const v = s / f;
        totals[k] += v;
        if (!(peak.get(g) >= v)) peak.set(g, v);
        let l = sparse.get(g);
        if (!l) sparse.set(g, (l = []));
        l.push(k, v);
      }
    }
    const ranked = [...peak.keys()].sort((a, b) => peak.get(b) - peak.get(a));
    const top = ranked.slice(0, TOP);
    const series = top.map((g, rank) => {
      const values = new Float64Array(U);
      const l = sparse.get(g);
      for (let j = 0; j < l.length; j += 2) values[l[j]] = l[j + 1];
      return {
        name: byProcess ? `${M.label(g)} (pid ${M.pid[g]})` : V.programs[g],
        color: byProcess ? color(rank) : color(g),
        values, peak: peak.get(g),
      };
    });
    if (ranked.length > TOP) {
      const values = new Float64Array(U);
      let pk = 0;
      for (let k = 0; k < U; k++) {
        let s = totals[k];
        for (const se of series) s -= se.values[k];
        values[k] = Math.max(0, s);
        pk = Math.max(pk, values[k]);
      }
      series.push({ name: `${ranked.length - TOP} other ${byProcess ? 'processes' : 'programs'}`, color: css('--other'), values, peak: pk });
    }
    return { series, totals };
  }

  // `cgroup`: the chart can draw the cgroup's memory, which the reader may hide (it can be
  // far above the PSS areas, which it then flattens).
  function groupToolbar(cgroup) {
    const bar = document.createElement('div');
    bar.className = 'toolbar';
    bar.innerHTML = '<label>Stack by</label><span class="seg">' +
      '<button type="button" data-g="program">program</button><button type="button" data-g="process">process</button></span>' +
      (cgroup ? '<button type="button" class="cgroup toggle" title="The memory of ste\'s cgroup: its high-water marks at sampling rounds, and its exact peak">cgroup memory</button>' : '') +
      '<span class="spacer"></span><button type="button" class="reset" hidden>Reset zoom</button>';
    const sync = () => {
      bar.querySelectorAll('[data-g]').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.g === view.group)));
      if (cgroup) bar.querySelector('.cgroup').setAttribute('aria-pressed', String(view.cgroup));
      bar.querySelector('.reset').hidden = view.t0 === 0 && view.t1 === modelWall;
    };
    bar.addEventListener('click', (e) => {
      const g = e.target.dataset && e.target.dataset.g;
      if (g) { view.group = g; view.redraw.forEach((f) => f()); }
      if (e.target.classList.contains('cgroup')) { view.cgroup = !view.cgroup; view.redraw.forEach((f) => f()); }
      if (e.target.classList.contains('reset')) setWindow(0, modelWall);
    });
    sync();
    view.redraw.push(sync);
    return bar;
  }

  const narrow = () => window.innerWidth < 640;

  // ---------------------------------------------------------------- sections

  // A `tag` element of class `cls` with its heading `h` and a lead (markup), appended to parent.
  function headed(parent, tag, cls, h, id, title, lead) {
    const el = document.createElement(tag);
    el.className = cls;
    el.id = id;
    el.innerHTML = `<${h}>${esc(title)}</${h}>` + (lead ? `<p class="lead">${lead}</p>` : '');
    parent.appendChild(el);
    return el;
  }
  const card = (main, id, title, lead) => headed(main, 'section', 'card', 'h2', id, title, lead);
  // A part of a section, under a heading of its own.
  const sectionPart = (s, id, title, lead) => headed(s, 'div', 'part', 'h3', id, title, lead);

  function sourceBadge(run, figure) {
    const s = run.sources && run.sources[figure];
    if (!s) return '';
    const title = s.from + (s.note ? ' — ' + s.note : '');
    return `<span class="badge ${s.exact ? 'exact' : 'sampled'}" title="${esc(title)}">${s.exact ? 'exact' : 'sampled'}</span>`;
  }

  // Max PSS's badge from how its sample was read (the totals' kind): an exact round, a carried
  // tick (within its bound) or the high-water mark at an exit (an upper bound).
  // Exact only where the largest lower bound and the largest upper bound of all samples meet
  // (a run of an older version: from its kind).
  function maxPssBadge(run) {
    const t = run.totals, kind = t.max_pss_kind;
    if (kind == null) return sourceBadge(run, 'max_pss_bytes');
    const src = run.sources && run.sources.max_pss_bytes;
    const title = src ? src.from : '';
    if (t.max_pss_low_bytes != null && run.sampler && run.sampler.exit_marks === false) {
      return `<span class="badge sampled" title="${esc(title)}">lower bound</span>`;
    }
    if (t.max_pss_low_bytes != null && t.max_pss_high_bytes != null) {
      if (t.max_pss_low_bytes === t.max_pss_high_bytes) return badge(true, title);
      return `<span class="badge sampled" title="${esc(title)}">bounded</span>`;
    }
    if (kind === 'exit_peak') return `<span class="badge sampled" title="${esc(title)}">upper bound</span>`;
    return badge(kind === 'exact', title);
  }

  function drawSummary(M, s) {
    const run = M.run, t = run.totals;
    const e = run.exit;
    let exit;
    if (e.launch_error) exit = `<span class="bad">could not start</span>`;
    else if (e.code != null) exit = e.code === 0 ? '0' : `<span class="bad">${e.code}</span>`;
    else if (e.signal != null) exit = `<span class="bad">signal ${e.signal}</span>`;
    else exit = 'unknown';
    const peakPid = t.peak_rss_pid;
    let peakWho = '';
    if (peakPid != null) {
      const i = M.pid.indexOf(peakPid);
      peakWho = `pid ${peakPid}` + (i >= 0 ? ` (${esc(M.label(i))})` : '');
    }
    const lost = run.overhead.lost_events;
    // The tree's CPU as the text's Walltime line gives it, and its line when it has one.
    const L = M.V.labels || {};
    const figures = [
      ['Exit status', exit, e.launch_error ? esc(e.launch_error.message) : (e.core_dumped ? 'core dumped' : ''), ''],
      ['Wall time', esc(fmtDur(t.wall_ns)), `${fmtInt(t.wall_ns)} ns`, sourceBadge(run, 'wall_ns')],
      ['User CPU', esc(fmtDur(L.cpu_user_ns)), L.cpu_user_ns != null ? `${fmtInt(L.cpu_user_ns)} ns` : '', L.cpu_note ? '' : sourceBadge(run, 'user_ns')],
      ['System CPU', esc(fmtDur(L.cpu_sys_ns)), L.cpu_sys_ns != null ? `${fmtInt(L.cpu_sys_ns)} ns` : '', L.cpu_note ? '' : sourceBadge(run, 'sys_ns')],
      ['Max PSS', esc(fmtBytes(t.max_pss_bytes)), t.max_pss_bytes != null ? `${fmtInt(t.max_pss_bytes)} bytes at ${esc(fmtDur(t.max_pss_t_ns))}` + ((M.V.labels || {}).max_pss_exactness ? `; ${esc(M.V.labels.max_pss_exactness)}` : '') : 'no sample', maxPssBadge(run)],
      ['Peak RSS of one process', esc(fmtBytes(t.peak_rss_bytes)), peakWho, sourceBadge(run, 'peak_rss_bytes')],
      ['Processes', esc(fmtInt(t.processes)), t.still_running ? `${fmtInt(t.still_running)} still running` : '', sourceBadge(run, 'processes')],
      ['Threads', esc(fmtInt(t.threads)), '', sourceBadge(run, 'threads')],
      ['Execs', esc(fmtInt(t.execs)), [run.overhead.lost.argv_unread ? `${fmtInt(run.overhead.lost.argv_unread)} argv unreadable` : '', run.overhead.lost.argv_doubtful ? `${fmtInt(run.overhead.lost.argv_doubtful)} argv not shown (maybe a later image's)` : ''].filter(Boolean).join('; '), sourceBadge(run, 'execs')],
      ['Lost events', lost === 0 ? 'none' : lost == null ? '<span class="bad">some</span>' : `<span class="bad">${fmtInt(lost)}</span>`, lost === 0 ? '' : 'see Sampling and overhead', ''],
      ['Tracker', esc(run.tracker), '', ''],
      ['Machine', run.machine_cpus != null ? esc(plural(run.machine_cpus, 'CPU')) : 'n/a', run.machine_cpus != null ? 'online when the run began: no CPU rate passes it' : 'not recorded (a run of an older ste)', ''],
    ];
    const known = new Set(['wall_ns', 'user_ns', 'sys_ns', 'processes', 'threads', 'execs', 'max_pss_bytes',
      'max_pss_t_ns', 'peak_rss_bytes', 'peak_rss_pid', 'still_running']);
    for (const [k, v] of Object.entries(t)) {
      if (known.has(k)) continue;
      figures.push([humanize(k), esc(fmtValue(k, v)), esc(exactTitle(k, v)), sourceBadge(run, k)]);
    }
    let h = `<div class="command" title="the command as typed">${esc(run.command.map(argText).join(' '))}</div>`;
    h += '<div class="figures">' + figures.map(([k, v, d, b]) =>
      `<div class="figure"><div class="k">${esc(k)}${b}</div><div class="v">${v}</div>${d ? `<div class="d">${d}</div>` : ''}</div>`
    ).join('') + '</div>';
    const notes = [L.cpu_note, L.oom].filter(Boolean).concat(run.notes || []);
    if (notes.length) {
      h += '<ul class="notes">' + notes.map((n) => `<li>${esc(n)}</li>`).join('') + '</ul>';
    }
    s.insertAdjacentHTML('beforeend', h);
  }

  const argText = (a) => (typeof a === 'string' ? a : '\\x' + (a.bytes || []).map((b) => b.toString(16).padStart(2, '0')).join('\\x'));

  // A chart and its legend, appended to section s.
  function chartParts(s) {
    const host = document.createElement('div');
    host.className = 'chart';
    const leg = document.createElement('div');
    s.appendChild(host);
    s.appendChild(leg);
    return { host, leg };
  }

  // Draws now, and again whenever the view changes (zoom, grouping, size, theme).
  function keepDrawn(draw) {
    draw();
    view.redraw.push(draw);
  }

  // The cgroup's memory, where the accounting knows it: the running high-water mark of its
  // usage at the sampling rounds that raised it (rounds that raised nothing are not kept, so
  // falls cannot be drawn), and its exact peak. Null without a cgroup.
  function groupMemory(M) {
    const a = M.run.accounting, g = a && a.group;
    if (!g) return null;
    const exact = a.memory && a.memory.group_peak;
    const points = [];
    let hw = 0;
    for (const r of g.rounds || []) {
      if (r.usage_bytes <= hw) continue;
      hw = r.usage_bytes;
      points.push([r.t_ns, hw]);
    }
    if (!points.length && !exact) return null;
    // The high-water mark at time t, for tooltips.
    const at = (t) => {
      let v = null;
      for (const [pt, pv] of points) { if (pt > t) break; v = pv; }
      return v;
    };
    return { points, exact, at };
  }

  function drawMemory(M, s) {
    const V = M.V, run = M.run;
    const cg = groupMemory(M);
    s.appendChild(groupToolbar(cg != null));
    const { host, leg } = chartParts(s);
    if (!M.S) {
      host.innerHTML = '<p class="empty">No memory samples: the tree ended before the first sampling round.</p>';
      status.memory_series = 0;
      return;
    }
    const T = V.samples.t_ns;
    const spans = T.map((t, k) => [t, k + 1 < M.S ? T[k + 1] : Math.max(t, M.wall)]);
    const draw = () => {
      let series;
      if (M.hasReadings) {
        const R = V.readings;
        const each = (k, add) => {
          const [a, b] = M.readingsOf(k);
          for (let r = a; r < b; r++) add(R.process[r], R.pss_bytes[r]);
        };
        series = groupSeries(M, M.S, each, () => 1).series;
      } else {
        series = [{ name: 'whole tree', color: css('--accent'), values: V.samples.pss_bytes, peak: V.samples.pss_bytes.reduce((a, b) => Math.max(a, b), 0) }];
      }
      const t = run.totals;
      const markers = [];
      if (t.max_pss_bytes != null && t.max_pss_t_ns != null) {
        markers.push({ t: t.max_pss_t_ns, v: t.max_pss_bytes, label: `Max PSS ${fmtBytes(t.max_pss_bytes)} at ${fmtDur(t.max_pss_t_ns)}` });
      }
      // Exact peaks: the largest process's high-water RSS, and any other peak of the tree.
      const hlines = [];
      for (const [k, v] of Object.entries(t)) {
        // A bound is how far a figure may be off, not a peak of the tree: not a line.
        if (v == null || k === 'max_pss_bytes' || /_bound_bytes$/.test(k) || !/(peak|max).*_bytes$/.test(k)) continue;
        const src = run.sources && run.sources[k];
        const what = k === 'peak_rss_bytes' ? 'largest process peak RSS' : humanize(k).toLowerCase();
        hlines.push({ v, label: `${what} ${fmtBytes(v)}${src ? (src.exact ? ' (exact)' : ' (sampled)') : ''}` });
      }
      const lines = [];
      let cgLegend = '';
      const showGroup = cg && view.cgroup;
      if (showGroup) {
        if (cg.points.length) {
          lines.push({ name: 'cgroup memory, highest so far (sampled every 20 ms)', cls: 'groupline', points: cg.points, until: M.wall });
          cgLegend += `<span><span class="sw line group"></span>cgroup memory, highest so far<span class="lv">sampled, ${esc(fmtBytes(cg.points[cg.points.length - 1][1]))} at most</span></span>`;
        }
        if (cg.exact) hlines.push({ v: cg.exact.bytes, cls: 'grouppeak', always: true, left: true, label: `cgroup peak ${fmtBytes(cg.exact.bytes)} (exact)` });
      }
      // The peak lines in the legend too: their labels give way when they would overlap.
      for (const h of hlines) cgLegend += `<span><span class="sw line dashed ${h.cls === 'grouppeak' ? 'group' : 'peak'}"></span>${esc(h.label)}</span>`;
      stackedChart(host, {
        label: 'PSS over time', height: narrow() ? 220 : 280, binary: true, spans, series, markers, hlines, lines,
        totals: V.samples.pss_bytes, yFmt: fmtBytes,
        tip: (k, t) => {
          const g = showGroup ? cg.at(t) : null;
          return `<b>${esc(fmtDur(T[k]))}</b> · PSS ${esc(fmtBytes(V.samples.pss_bytes[k]))} · RSS ${esc(fmtBytes(V.samples.rss_bytes[k]))} · ${fmtInt(V.samples.processes[k])} processes` +
            (g != null ? `<br>cgroup memory so far at most ${esc(fmtBytes(g))}` : '') +
            seriesRows(series, k, fmtBytes);
        },
      });
      leg.innerHTML = legend(series, (se) => 'peak ' + fmtBytes(se.peak), (n) => `and ${n} with no PSS read`);
      if (cgLegend) leg.firstChild.insertAdjacentHTML('beforeend', cgLegend);
      status.memory_series = series.length;
      status.memory_lines = hlines.map((h) => h.label);
      status.memory_cgroup = showGroup ? { points: cg.points.length, peak: cg.exact ? cg.exact.bytes : null } : null;
    };
    keepDrawn(draw);
  }

  function drawCpu(M, s) {
    const V = M.V, run = M.run, C = V.cpu;
    const { host, leg } = chartParts(s);
    if (!C || !C.process.length) {
      host.innerHTML = '<p class="empty">No per-process CPU in this run (it was recorded by an older ste, or no process was read long enough for a rate).</p>';
      status.cpu_series = 0;
      return;
    }
    // Each span is a process's CPU between two moments it was known (its start, readings of
    // its 10 ms ticks at least 100 ms apart, its exact CPU at its end), spread evenly over
    // it; a bin's value is the CPU its spans put in it over its length. Bins are never
    // shorter than the spans' own floor, so no rate is taken over less.
    const cap = run.machine_cpus;
    const draw = () => {
      const t0 = view.t0, t1 = Math.max(view.t1, view.t0 + 1);
      const bin = Math.max(C.min_span_ns, (t1 - t0) / 600);
      const U = Math.max(1, Math.ceil((t1 - t0) / bin));
      const spans = [];
      for (let k = 0; k < U; k++) spans.push([t0 + k * bin, Math.min(t1, t0 + (k + 1) * bin)]);
      // Each bin's spans, found once per drawing.
      const inBin = Array.from({ length: U }, () => []);
      for (let j = 0; j < C.process.length; j++) {
        const a = C.from_ns[j], b = C.to_ns[j];
        if (b <= a || b <= t0 || a >= t1) continue;
        const k0 = Math.max(0, Math.floor((a - t0) / bin)), k1 = Math.min(U - 1, Math.floor((b - t0) / bin));
        for (let k = k0; k <= k1; k++) inBin[k].push(j);
      }
      const each = (k, add) => {
        const [x, y] = spans[k];
        for (const j of inBin[k]) {
          const a = C.from_ns[j], b = C.to_ns[j];
          const overlap = Math.min(b, y) - Math.max(a, x);
          if (overlap > 0) add(C.process[j], C.cpu_ns[j] * overlap / (b - a));
        }
      };
      const scale = (k) => Math.max(1, spans[k][1] - spans[k][0]);
      const { series, totals } = groupSeries(M, U, each, scale, cap);
      const t = run.totals, L = M.V.labels || {};
      const hlines = [];
      if (L.cpu_user_ns != null && L.cpu_sys_ns != null && t.wall_ns > 0) {
        const avg = (L.cpu_user_ns + L.cpu_sys_ns) / t.wall_ns;
        hlines.push({ v: avg, cls: 'avgline', label: `average over the run ${fmtCores(avg)} (exact)` });
      }
      if (cap != null) hlines.push({ v: cap, label: `the machine's ${cap} CPUs` });
      stackedChart(host, {
        label: 'CPU over time', height: narrow() ? 180 : 220, binary: false, spans, series, hlines,
        yFmt: (v) => (v === 0 ? '0' : trimZeros(v.toFixed(2))),
        tip: (k) => {
          let total = 0;
          for (const se of series) total += se.values[k];
          return `<b>${esc(fmtDur(spans[k][0]))} – ${esc(fmtDur(spans[k][1]))}</b> · ${esc(fmtCores(total))}` +
            seriesRows(series, k, fmtCores);
        },
      });
      const machine = cap != null ? `never drawn above the machine's ${cap} CPUs` : 'the machine\'s CPU count is unknown (a run of an older ste): not capped by it';
      leg.innerHTML = legend(series, (se) => 'peak ' + fmtCores(se.peak),
        (n) => `and ${n} with no CPU in this window`) +
        `<div class="legend"><span class="lv">bins of ${esc(fmtDur(bin))}; ${esc(machine)}</span></div>`;
      status.cpu_series = series.length;
      status.cpu_peak = totals.reduce((a, b) => Math.max(a, b), 0);
      status.cpu_cap = cap == null ? null : cap;
    };
    keepDrawn(draw);
  }

  function drawTimeline(M, s) {
    const V = M.V, P = V.processes;
    const bar = document.createElement('div');
    bar.className = 'toolbar';
    const hasPath = M.path.length >= 2;
    bar.innerHTML = '<label>One row per</label><span class="seg"><button type="button" data-m="process">process</button><button type="button" data-m="program">program</button></span>' +
      (hasPath ? '<button type="button" class="path toggle" title="The chain of processes whose lifetimes bound the wall time (Exact accounting)">critical path</button>' : '') +
      '<span class="spacer"></span><span class="count lead"></span>';
    const wrap = document.createElement('div');
    wrap.className = 'timeline-wrap';
    const axis = document.createElement('canvas');
    axis.className = 'timeline-axis';
    const scroll = document.createElement('div');
    scroll.className = 'timeline-scroll';
    const canvas = document.createElement('canvas');
    const spacer = document.createElement('div');
    scroll.appendChild(canvas);
    scroll.appendChild(spacer);
    wrap.appendChild(axis);
    wrap.appendChild(scroll);
    s.appendChild(bar);
    s.appendChild(wrap);
    // Big runs start aggregated: one row per program.
    let mode = M.n > 5000 ? 'program' : 'process';
    const byProgram = V.programs.map(() => []);
    for (let i = 0; i < M.n; i++) byProgram[P.program[i]].push(i);
    const programRows = byProgram.map((l, g) => g).filter((g) => byProgram[g].length);
    // The row of each process in either mode, for the critical path's links.
    const orderRow = new Int32Array(M.n);
    M.order.forEach((i, r) => { orderRow[i] = r; });
    const programRow = new Int32Array(V.programs.length).fill(-1);
    programRows.forEach((g, r) => { programRow[g] = r; });
    const rowOf = (i) => (mode === 'process' ? orderRow[i] : programRow[P.program[i]]);
    const RH = 18;
    const rows = () => (mode === 'process' ? M.order.length : programRows.length);
    let W = 0, LW = 0, Hv = 0;
    const X = (t) => LW + ((t - view.t0) / (view.t1 - view.t0)) * (W - LW - 8);
    const endOf = (i) => (M.end[i] == null ? M.wall : M.end[i]);

    function layout() {
      W = Math.max(280, wrap.clientWidth);
      LW = Math.min(220, Math.round(W * 0.3));
      Hv = Math.min(rows() * RH, narrow() ? 420 : 520);
      const dpr = window.devicePixelRatio || 1;
      for (const [c, h] of [[canvas, Hv], [axis, 24]]) {
        c.width = Math.round(W * dpr); c.height = Math.round(h * dpr);
        c.style.width = W + 'px'; c.style.height = h + 'px';
        c.getContext('2d').setTransform(dpr, 0, 0, dpr, 0, 0);
      }
      spacer.style.height = Math.max(0, rows() * RH - Hv) + 'px';
      scroll.style.height = Hv + 'px';
      bar.querySelectorAll('[data-m]').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.m === mode)));
      if (hasPath) bar.querySelector('.path').setAttribute('aria-pressed', String(view.path));
      bar.querySelector('.count').textContent = mode === 'process'
        ? `${fmtInt(M.n)} processes, nested by parent`
        : `${fmtInt(programRows.length)} programs, ${fmtInt(M.n)} processes`;
      wrap.dataset.rows = rows();
      wrap.dataset.mode = mode;
      status.timeline_rows = rows();
      status.timeline_mode = mode;
    }

    function drawAxis() {
      const g = axis.getContext('2d');
      g.clearRect(0, 0, W, 24);
      g.fillStyle = css('--muted');
      g.strokeStyle = css('--line');
      g.font = '11px system-ui, sans-serif';
      g.textBaseline = 'middle';
      g.fillText(mode === 'process' ? 'process' : 'program', 8, 12);
      for (const t of timeTicks(view.t0, view.t1, Math.max(2, Math.floor((W - LW) / 80)))) {
        const x = X(t);
        g.beginPath(); g.moveTo(x + 0.5, 18); g.lineTo(x + 0.5, 24); g.stroke();
        g.textAlign = 'center';
        g.fillText(fmtDur(t), Math.min(W - 24, Math.max(LW + 10, x)), 10);
      }
    }

    function fit(g, text, w) {
      if (g.measureText(text).width <= w) return text;
      let lo = 0, hi = text.length;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (g.measureText(text.slice(0, mid) + '…').width <= w) lo = mid; else hi = mid - 1;
      }
      return text.slice(0, lo) + '…';
    }

    function draw() {
      const g = canvas.getContext('2d');
      const top = scroll.scrollTop;
      g.clearRect(0, 0, W, Hv);
      const first = Math.floor(top / RH), last = Math.min(rows(), first + Math.ceil(Hv / RH) + 1);
      g.font = '12px system-ui, sans-serif';
      g.textBaseline = 'middle';
      const text = css('--text'), muted = css('--muted'), rowBg = css('--row'), grid = css('--grid');
      g.strokeStyle = grid;
      for (const t of timeTicks(view.t0, view.t1, Math.max(2, Math.floor((W - LW) / 80)))) {
        g.beginPath(); g.moveTo(X(t) + 0.5, 0); g.lineTo(X(t) + 0.5, Hv); g.stroke();
      }
      for (let r = first; r < last; r++) {
        const y = r * RH - top;
        if (r % 2) { g.fillStyle = rowBg; g.fillRect(0, y, LW, RH); }
        if (mode === 'process') {
          const i = M.order[r];
          const indent = Math.min(P.depth[i], 12) * 8;
          g.fillStyle = text;
          g.fillText(fit(g, M.label(i), LW - 12 - indent), 6 + indent, y + RH / 2);
          bar1(g, i, y + 3, RH - 6, 1);
        } else {
          const prog = programRows[r];
          g.fillStyle = text;
          const l = byProgram[prog];
          g.fillText(fit(g, `${V.programs[prog]} ×${l.length}`, LW - 12), 6, y + RH / 2);
          g.globalAlpha = l.length > 50 ? 0.35 : 0.7;
          for (const i of l) bar1(g, i, y + 3, RH - 6, 0);
          g.globalAlpha = 1;
        }
      }
      if (hasPath && view.path) drawPath(g, top, first, last);
      g.fillStyle = muted;
      g.fillRect(LW - 1, 0, 1, Hv);
    }

    // The critical path: its processes' bars outlined, and each link joined to the next at
    // the next one's start.
    function drawPath(g, top, first, last) {
      const y = (r) => r * RH - top + RH / 2;
      g.save();
      g.strokeStyle = css('--mark');
      g.lineWidth = 2;
      for (let k = 0; k < M.path.length; k++) {
        const i = M.path[k], r = rowOf(i);
        const a = M.start[i], b = endOf(i);
        if (r >= first && r < last && b >= view.t0 && a <= view.t1) {
          const x0 = Math.max(LW, X(a)), x1 = Math.min(W - 8, X(b));
          g.strokeRect(x0 - 1, y(r) - RH / 2 + 2, Math.max(2, x1 - x0 + 2), RH - 4);
        }
        if (k === 0) continue;
        const p = M.path[k - 1], rp = rowOf(p);
        const x = X(a);
        if (x < LW || x > W - 8 || Math.max(r, rp) < first || Math.min(r, rp) >= last) continue;
        g.beginPath();
        g.moveTo(x + 0.5, y(rp));
        g.lineTo(x + 0.5, y(r));
        g.stroke();
        g.beginPath();
        g.arc(x + 0.5, y(rp), 2.5, 0, 2 * Math.PI);
        g.fillStyle = css('--mark');
        g.fill();
      }
      g.restore();
      status.timeline_path = M.path.length;
    }

    function bar1(g, i, y, h, ticks) {
      const a = M.start[i], b = endOf(i);
      if (b < view.t0 || a > view.t1) return;
      const x0 = Math.max(LW, X(a)), x1 = Math.min(W - 8, X(b));
      g.fillStyle = M.color(i);
      g.fillRect(x0, y, Math.max(1, x1 - x0), h);
      if (M.end[i] == null) { g.fillStyle = css('--muted'); g.fillRect(Math.max(x0, x1 - 3), y, 3, h); }
      if (ticks && M.execsOf[i]) {
        g.fillStyle = css('--text');
        for (const k of M.execsOf[i]) {
          const x = X(V.execs.t_ns[k]);
          if (x >= LW && x <= W - 8) g.fillRect(x, y - 2, 1.5, h + 4);
        }
      }
    }

    function processAt(clientX, clientY) {
      const rc = canvas.getBoundingClientRect();
      const x = clientX - rc.left, y = clientY - rc.top;
      const r = Math.floor((y + scroll.scrollTop) / RH);
      if (r < 0 || r >= rows() || x < LW) return -1;
      const t = view.t0 + ((x - LW) / (W - LW - 8)) * (view.t1 - view.t0);
      const slack = (4 / (W - LW - 8)) * (view.t1 - view.t0);
      const hit = (i) => M.start[i] - slack <= t && t <= endOf(i) + slack;
      if (mode === 'process') return hit(M.order[r]) ? M.order[r] : -1;
      const l = byProgram[programRows[r]];
      for (let k = l.length - 1; k >= 0; k--) if (hit(l[k])) return l[k];
      return -1;
    }

    function describe(i) {
      const C = P.columns;
      const argv = M.argv(i);
      const n = M.execsOf[i] ? M.execsOf[i].length : 0;
      const rows = [
        ['pid', `${M.pid[i]}${C.ppid[i] != null ? ` (parent ${C.ppid[i]})` : ''}`],
        ['lived', `${esc(fmtDur(M.start[i]))} – ${M.end[i] == null ? 'end unknown' : esc(fmtDur(M.end[i]))}` +
          (M.end[i] != null ? ` (${esc(fmtDur(M.end[i] - M.start[i]))})` : '')],
        ['exit', esc(exitText(M, i))],
        ['threads', fmtInt(C.threads[i])],
        ['execs', fmtInt(n)],
        ['peak RSS', esc(fmtBytes(M.ledgerValue('peak_rss_bytes', i) ?? C.peak_rss_bytes[i]))],
      ];
      // The ledger's main figures, when it has them.
      const lv = (k) => M.ledgerValue(k, i);
      if (lv('cpu_ns') != null) {
        const split = lv('user_ns') != null && lv('sys_ns') != null ? ` (user ${fmtDur(lv('user_ns'))}, system ${fmtDur(lv('sys_ns'))})` : '';
        rows.push(['CPU', esc(fmtDur(lv('cpu_ns')) + split)]);
      }
      if (lv('run_queue_ns') != null) rows.push(['waiting for a CPU', esc(fmtDur(lv('run_queue_ns')))]);
      if (lv('read_bytes') != null || lv('write_bytes') != null) rows.push(['storage I/O', esc(`read ${fmtBytes(lv('read_bytes'))}, written ${fmtBytes(lv('write_bytes'))}`)]);
      if (lv('minor_faults') != null) rows.push(['page faults', esc(`${fmtInt(lv('minor_faults'))} minor, ${fmtInt(lv('major_faults'))} major`)]);
      if (M.pathSelf.has(i)) rows.push(['critical path', esc(`on it, ${fmtDur(M.pathSelf.get(i))} of its own`)]);
      let argvText = argv == null ? (P.forked[i] ? 'no exec: runs its parent\'s program' : 'argv unknown') : argv;
      if (argvText.length > 400) argvText = argvText.slice(0, 400) + ' …';
      return `<b><span class="sw" style="background:${M.color(i)}"></span>${esc(M.label(i))}</b><div class="argv">${esc(argvText)}</div>` + tipRows(rows);
    }

    const pointer = (e) => {
      const i = processAt(e.clientX, e.clientY);
      if (i < 0) { hideTip(); return; }
      showTip(describe(i), e.clientX, e.clientY, e.pointerType !== 'mouse');
    };
    canvas.addEventListener('pointermove', pointer);
    canvas.addEventListener('click', pointer);
    canvas.addEventListener('pointerleave', () => hideTip());
    let pending = false;
    scroll.addEventListener('scroll', () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; draw(); });
    });
    bar.addEventListener('click', (e) => {
      const m = e.target.dataset && e.target.dataset.m;
      if (m && m !== mode) { mode = m; scroll.scrollTop = 0; all(); }
      if (e.target.classList.contains('path')) { view.path = !view.path; all(); }
    });
    // Other sections (the critical path's list) show a process here: its row scrolled into
    // view and its tooltip pinned.
    view.showProcess = (i) => {
      const r = rowOf(i);
      if (r < 0) return;
      wrap.scrollIntoView({ block: 'nearest' });
      scroll.scrollTop = Math.max(0, r * RH - Hv / 2);
      draw();
      const rc = canvas.getBoundingClientRect();
      const x = Math.max(LW, Math.min(W - 8, X((M.start[i] + endOf(i)) / 2)));
      showTip(describe(i), rc.left + x, rc.top + r * RH - scroll.scrollTop + RH, true);
    };
    const all = () => { layout(); drawAxis(); draw(); };
    keepDrawn(all);
  }

  // Compares row indices by their sort keys `key[i]`: numbers by value, the rest as text,
  // unknown values last whatever the direction, ties in the rows' order.
  const byKey = (key, desc) => (a, b) => {
    const x = key[a], y = key[b];
    if (x == null || y == null) return x == null ? (y == null ? a - b : 1) : -1;
    const d = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
    return (desc ? -d : d) || a - b;
  };

  // The ledger's figures (html/ledger.rs): column title, and what the figure is for the
  // header's tooltip. A figure not listed here still gets a column, titled from its name.
  const LEDGER_FIGURES = {
    cpu_ns: ['CPU', 'time on a CPU: user + system (the exact runtime where the source has it)'],
    user_ns: ['user', 'user CPU'],
    sys_ns: ['system', 'system CPU'],
    run_queue_ns: ['CPU wait', 'time runnable but waiting for a CPU (run queue)'],
    blkio_delay_ns: ['block I/O wait', 'time waiting for synchronous block I/O (delay accounting)'],
    swap_reclaim_delay_ns: ['swap wait', 'time waiting for swap-in, memory reclaim, thrashing and compaction (delay accounting)'],
    task_time_ns: ['task time', 'its threads\' lifetimes, summed'],
    peak_rss_bytes: ['peak RSS', 'high-water resident set'],
    peak_vm_bytes: ['peak VM', 'high-water virtual size'],
    minor_faults: ['minor faults', 'page faults served without I/O'],
    major_faults: ['major faults', 'page faults that read from storage'],
    voluntary_switches: ['vol. switches', 'voluntary context switches: it waited for something'],
    involuntary_switches: ['invol. switches', 'involuntary context switches: it was preempted'],
    read_bytes: ['read', 'bytes read from storage'],
    write_bytes: ['written', 'bytes written to storage'],
    read_char_bytes: ['rchar', 'bytes passed to read-like system calls'],
    write_char_bytes: ['wchar', 'bytes passed to write-like system calls'],
  };
  // Generic process columns that say what a ledger column already says.
  const SAME_AS_LEDGER = { 'io.read_bytes': 'read_bytes', 'io.write_bytes': 'write_bytes', 'io.rchar_bytes': 'read_char_bytes', 'io.wchar_bytes': 'write_char_bytes' };

  const sourceText = (src) => src.name + (src.from !== src.name ? ': ' + src.from : '') + (src.exact ? ' (exact)' : ' (sampled)');

  // A column of the ledger table for ledger figure column c.
  function ledgerColumn(M, c) {
    const [title, what] = LEDGER_FIGURES[c.key] || [humanize(c.key).toLowerCase(), ''];
    const used = new Map();
    for (let i = 0; i < M.n; i++) {
      const src = M.ledgerSource(c, i);
      if (src) used.set(src, (used.get(src) || 0) + 1);
    }
    const from = [...used.keys()].map((src) => sourceText(src) + (used.size > 1 ? ` — ${fmtInt(used.get(src))} processes` : '')).join('\n');
    return {
      key: c.key, title, num: true, w: Math.max(80, Math.min(120, title.length * 8 + 24)),
      head: `${what ? what + '\n' : ''}from ${from}`,
      get: (i) => c.values[i], fmt: (v) => fmtValue(c.key, v),
      exact: (v, i) => {
        const src = M.ledgerSource(c, i);
        const t = exactTitle(c.key, v);
        return src ? (t ? t + ' · ' : '') + sourceText(src) : t;
      },
    };
  }

  function drawLedger(M, s) {
    const V = M.V, P = V.processes, C = P.columns;
    const handled = new Set(['pid', 'start_ns', 'end_ns', 'exit_code', 'signal', 'threads', 'peak_rss_bytes']);
    const ledgerKeys = new Set(M.ledgerColumns.map((c) => c.key));
    for (const [k, same] of Object.entries(SAME_AS_LEDGER)) if (ledgerKeys.has(same)) handled.add(k);
    const cols = [
      { key: 'pid', title: 'pid', num: true, w: 80, get: (i) => M.pid[i] },
      { key: 'program', title: 'program', w: 150, get: (i) => M.label(i) },
      { key: 'start_ns', title: 'start', num: true, w: 90, get: (i) => M.start[i], fmt: fmtDur },
      { key: 'end_ns', title: 'end', num: true, w: 90, get: (i) => M.end[i], fmt: fmtDur },
      { key: 'duration', title: 'duration', num: true, w: 90, get: (i) => (M.end[i] == null ? null : M.end[i] - M.start[i]), fmt: fmtDur },
      { key: 'exit', title: 'exit', w: 120, get: (i) => exitText(M, i) },
      { key: 'threads', title: 'threads', num: true, w: 75, get: (i) => C.threads[i] },
      { key: 'execs', title: 'execs', num: true, w: 65, get: (i) => (M.execsOf[i] ? M.execsOf[i].length : 0) },
    ];
    // The ledger's figures (peak RSS among them, with its source), else the core's peak RSS.
    if (!ledgerKeys.has('peak_rss_bytes')) cols.push({ key: 'peak_rss_bytes', title: 'peak RSS', num: true, w: 95, get: (i) => C.peak_rss_bytes[i], fmt: fmtBytes });
    for (const c of M.ledgerColumns) cols.push(ledgerColumn(M, c));
    status.ledger_columns = M.ledgerColumns.map((c) => c.key);
    for (const key of Object.keys(C)) {
      if (handled.has(key)) continue;
      const values = C[key];
      // A column unknown for every process says nothing a row could not.
      if (values.every((v) => v == null)) continue;
      const num = values.some((v) => typeof v === 'number');
      cols.push({ key, title: key.replace(/_bytes$|_ns$/, ''), num, w: Math.max(80, Math.min(140, key.length * 8)), get: (i) => values[i], fmt: (v) => fmtValue(key, v), exact: (v) => exactTitle(key, v) });
    }
    cols.push({ key: 'argv', title: 'argv', w: 520, get: (i) => M.argv(i) || '' });
    const bar = document.createElement('div');
    bar.className = 'toolbar';
    bar.innerHTML = '<input type="search" placeholder="Filter by program, argv or pid" aria-label="Filter processes" size="32"><span class="spacer"></span><span class="count lead"></span>';
    const wrap = document.createElement('div');
    wrap.className = 'table-wrap';
    const total = cols.reduce((a, c) => a + c.w, 0);
    wrap.innerHTML = `<table class="ledger fixed" style="min-width:${total}px"><colgroup>${cols.map((c) => `<col style="width:${c.w}px">`).join('')}</colgroup><thead><tr>${cols.map((c, k) => `<th class="sortable${c.num ? ' num' : ''}" data-k="${k}" data-key="${esc(c.key)}" title="${esc(c.head || c.key)}">${esc(c.title)}<span class="arrow"></span></th>`).join('')}</tr></thead><tbody></tbody></table>`;
    s.appendChild(bar);
    s.appendChild(wrap);
    const tbody = wrap.querySelector('tbody');
    const RH = 24;
    let rows = M.order.slice();
    let sortKey = -1, desc = false;
    const cell = (c, i) => {
      const v = c.get(i);
      const text = c.fmt ? c.fmt(v) : v == null ? 'n/a' : String(v);
      const title = c.exact ? c.exact(v, i) : c.key === 'argv' || c.key === 'program' ? String(v) : '';
      return `<td class="${c.num ? 'num' : c.key === 'argv' ? 'mono' : ''}"${title ? ` title="${esc(title)}"` : ''}>${esc(text)}</td>`;
    };
    function render() {
      const top = wrap.scrollTop;
      const view = wrap.clientHeight || 480;
      const first = Math.max(0, Math.floor(top / RH) - 10);
      const last = Math.min(rows.length, first + Math.ceil(view / RH) + 20);
      let h = `<tr class="spacer"><td colspan="${cols.length}" style="height:${first * RH}px"></td></tr>`;
      for (let r = first; r < last; r++) {
        const i = rows[r];
        h += '<tr>' + cols.map((c) => cell(c, i)).join('') + '</tr>';
      }
      h += `<tr class="spacer"><td colspan="${cols.length}" style="height:${(rows.length - last) * RH}px"></td></tr>`;
      tbody.innerHTML = h;
    }
    function update() {
      const q = bar.querySelector('input').value.trim().toLowerCase();
      rows = M.order.filter((i) => !q || M.label(i).toLowerCase().includes(q) || String(M.pid[i]) === q ||
        (M.argv(i) || '').toLowerCase().includes(q));
      if (sortKey >= 0) {
        const c = cols[sortKey];
        const key = rows.map((i) => c.get(i));
        const idx = rows.map((_, k) => k);
        idx.sort(byKey(key, desc));
        rows = idx.map((k) => rows[k]);
      }
      wrap.querySelectorAll('th .arrow').forEach((a, k) => { a.textContent = k === sortKey ? (desc ? ' ▼' : ' ▲') : ''; });
      bar.querySelector('.count').textContent = `${fmtInt(rows.length)} of ${fmtInt(M.n)} processes`;
      wrap.dataset.rows = rows.length;
      status.ledger_rows = rows.length;
      render();
    }
    wrap.querySelector('thead').addEventListener('click', (e) => {
      const th = e.target.closest('th');
      if (!th) return;
      const k = Number(th.dataset.k);
      if (k === sortKey) desc = !desc; else { sortKey = k; desc = cols[k].num; }
      update();
    });
    bar.querySelector('input').addEventListener('input', update);
    let pending = false;
    wrap.addEventListener('scroll', () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; render(); });
    });
    update();
  }

  function drawSources(M, s) {
    const src = M.run.sources || {};
    const keys = Object.keys(src);
    if (!keys.length) { s.insertAdjacentHTML('beforeend', '<p class="empty">This run lists no sources.</p>'); return; }
    s.insertAdjacentHTML('beforeend', '<div class="table-wrap"><table><thead><tr><th>figure</th><th>comes from</th><th>exact?</th><th>qualified by</th></tr></thead><tbody>' +
      keys.map((k) => `<tr><td class="mono">${esc(k)}</td><td>${esc(src[k].from)}</td><td>${src[k].exact ? '<span class="badge exact">exact</span>' : '<span class="badge sampled">sampled</span>'}</td><td>${esc(src[k].note || '')}</td></tr>`).join('') +
      '</tbody></table></div>');
  }

  // ---------------------------------------------------------------- exact accounting

  // Draws the fields of `obj` (the Run's `path`) that `parts` know, each part under its own
  // heading, then every field no part knows generically (a later ste's additions). A part is
  // { id, keys, title, lead, draw(M, host, obj) } and is skipped when none of its keys is
  // there or when draw returns false (nothing to show). Returns the ids of the parts drawn.
  function drawParts(M, s, obj, path, parts) {
    const known = new Set();
    const drawn = [];
    for (const part of parts) {
      for (const k of part.keys) known.add(k);
      if (!part.keys.some((k) => k in obj)) continue;
      const host = sectionPart(s, path + '-' + part.id, part.title, part.lead);
      if (part.draw(M, host, obj) === false) host.remove(); else drawn.push(part.id);
    }
    for (const k of Object.keys(obj)) {
      if (known.has(k)) continue;
      s.insertAdjacentHTML('beforeend', `<div class="part" data-generic="${esc(path + '.' + k)}"><h3>${esc(humanize(k))}</h3>${generic(k, obj[k])}</div>`);
      status.generic.push(path + '.' + k);
    }
    return drawn;
  }

  function badge(exact, title) {
    return `<span class="badge ${exact ? 'exact' : 'sampled'}"${title ? ` title="${esc(title)}"` : ''}>${exact ? 'exact' : 'sampled'}</span>`;
  }

  // A process as `pid 12 (cc1)`, from its pid and start (or its last use of the pid).
  function processText(M, pid, start) {
    const i = start == null ? M.findLast(pid) : M.find(pid, start);
    return `pid ${pid}` + (i >= 0 ? ` (${M.label(i)})` : '');
  }

  const share = (v, total) => (total > 0 ? fmtPct(v / total) : '');

  // The three memory figures side by side (four with the summed peaks): one row each, with a
  // bar on a common scale, the value, its source and exactness, and what it means.
  function accMemory(M, host, a) {
    const m = a.memory || {}, g = a.group;
    const rows = [];
    if (m.group_peak) {
      const f = m.group_peak;
      const segs = [];
      const notes = [];
      if (g && g.sampled_peak_bytes != null && g.sampled_peak_anon_bytes != null && g.sampled_peak_file_bytes != null) {
        const an = g.sampled_peak_anon_bytes, fi = g.sampled_peak_file_bytes;
        segs.push({ cls: 'anon', v: Math.min(an, f.bytes), name: 'anonymous' });
        segs.push({ cls: 'cache', v: Math.min(fi, Math.max(0, f.bytes - an)), name: 'page cache' });
        segs.push({ cls: 'rest', v: Math.max(0, f.bytes - an - fi), name: 'the rest' });
        notes.push(`At the highest sampling round (${esc(fmtBytes(g.sampled_peak_bytes))} at ${esc(fmtDur(g.sampled_peak_t_ns))}): ` +
          `<span class="sw anon"></span>anonymous ${esc(fmtBytes(an))}, <span class="sw cache"></span>page cache ${esc(fmtBytes(fi))}; ` +
          `<span class="sw rest"></span>the rest of the peak is kernel memory${g.end && g.end.kernel_peak_bytes != null ? ` (at most ${esc(fmtBytes(g.end.kernel_peak_bytes))})` : ''} and what rose between rounds.`);
      }
      if (g && g.end && g.end.file_bytes != null) notes.push(`Page cache still charged at the end: ${esc(fmtBytes(g.end.file_bytes))} (files the tree read or wrote).`);
      rows.push({ id: 'group_peak', title: 'Group peak', sub: 'the whole tree, page cache included (cgroup)', f, segs, notes });
    } else {
      // Said, not left out: without it the other figures are easy to misread.
      const why = (a.unavailable || []).find((u) => /group memory peak/.test(u.figure));
      rows.push({ id: 'group_peak', title: 'Group peak', sub: 'the whole tree, page cache included (cgroup)', f: null,
        notes: [why ? `Not measured: ${esc(why.why)}.` : 'Not measured: ste had no cgroup of its own on this run.'] });
    }
    if (m.largest_process_peak) {
      const f = m.largest_process_peak;
      rows.push({ id: 'largest_process_peak', title: 'Largest process peak', sub: f.pid != null ? esc(processText(M, f.pid)) : '', f,
        notes: ['The high-water resident set of one process (it counts the pages it shares with others).'] });
    }
    // As the text report: only when every process lived at the same time (else it adds peaks
    // that never coexisted), and as the upper bound it is, not as an exact figure.
    if (m.summed_process_peaks && (M.V.labels || {}).summed_peaks_shown) {
      const f = m.summed_process_peaks;
      rows.push({ id: 'summed_process_peaks', title: 'Process peaks summed', sub: `over ${fmtInt(f.processes)} processes`, f, bound: true,
        notes: ['An upper bound of the tree\'s resident set: they need not have peaked together, and shared pages count once per process.'] });
    }
    if (m.pss_max) {
      const f = m.pss_max;
      const at = M.run.totals.max_pss_t_ns;
      rows.push({ id: 'pss_max', title: 'Max PSS', sub: at != null ? `at ${esc(fmtDur(at))}` : '', f,
        notes: [(M.V.labels || {}).max_pss_exactness ? esc(M.V.labels.max_pss_exactness) + '.' : 'The highest sum of PSS over the live tree.'] });
    }
    if (!rows.some((r) => r.f)) return false;
    const top = Math.max(...rows.map((r) => (r.f ? r.f.bytes : 0)), 1);
    let h = '<div class="recon">';
    for (const r of rows) {
      if (!r.f) {
        h += `<div class="mrow na" data-figure="${r.id}"><div class="k"><b>${esc(r.title)}</b><div class="d">${r.sub}</div></div>` +
          '<div class="bar"></div><div class="v"><span class="big">n/a</span></div>' +
          `<div class="d">${r.notes.join(' ')}</div></div>`;
        continue;
      }
      const segs = r.segs && r.segs.length ? r.segs : [{ cls: r.f.exact && !r.bound ? 'exact' : 'sampled', v: r.f.bytes, name: r.title }];
      const b = r.bound ? `<span class="badge sampled" title="${esc(r.f.from)}">upper bound</span>` : badge(r.f.exact, r.f.from);
      h += `<div class="mrow" data-figure="${r.id}" data-bytes="${r.f.bytes}">` +
        `<div class="k"><b>${esc(r.title)}</b>${b}${r.sub ? `<div class="d">${r.sub}</div>` : ''}</div>` +
        `<div class="bar" role="img" aria-label="${esc(r.title + ' ' + fmtBytes(r.f.bytes))}">` +
        segs.map((sg) => `<span class="${sg.cls}" style="width:${(100 * sg.v / top).toFixed(2)}%" title="${esc(sg.name + ' ' + fmtBytes(sg.v))}"></span>`).join('') + '</div>' +
        `<div class="v"><span class="big">${esc(fmtBytes(r.f.bytes))}</span><span class="exactv">${esc(fmtInt(r.f.bytes))} bytes</span></div>` +
        `<div class="d">${[`From ${esc(r.f.from)}.`].concat(r.notes || []).join(' ')}</div></div>`;
    }
    h += '</div>';
    host.insertAdjacentHTML('beforeend', h);
    status.accounting.memory = rows.map((r) => [r.id, r.f ? r.f.bytes : null]);
  }

  // ste's cgroup: what it measured besides the memory peak.
  function accGroup(M, host, a) {
    const g = a.group;
    if (!g) return false;
    const src = M.run.sources || {};
    const e = g.end || {};
    const exact = (k) => badge(true, src[k] ? src[k].from : 'read once the tree had ended');
    const split = src['group.anon_file'];
    const sampled = badge(false, split ? split.from + (split.note ? ' — ' + split.note : '') : 'sampled at rounds');
    const rows = [];
    if (e.cpu_ns != null) {
      const us = e.cpu_user_ns != null && e.cpu_sys_ns != null ? ` (user ${fmtDur(e.cpu_user_ns)}, system ${fmtDur(e.cpu_sys_ns)})` : '';
      rows.push(['CPU of everything in the group', esc(fmtDur(e.cpu_ns) + us) + exact('group.cpu_ns')]);
    }
    if (e.pids_peak != null) rows.push(['Most tasks alive at once', esc(fmtInt(e.pids_peak)) + exact('group.pids_peak')]);
    if (e.kernel_peak_bytes != null) rows.push(['Kernel memory peak', esc(fmtBytes(e.kernel_peak_bytes)) + exact('group.memory_peak_bytes')]);
    if (g.max_anon_bytes != null) rows.push(['Highest anonymous memory at a round', esc(fmtBytes(g.max_anon_bytes)) + sampled]);
    if (g.max_file_bytes != null) rows.push(['Highest page cache at a round', esc(fmtBytes(g.max_file_bytes)) + sampled]);
    if (e.anon_bytes != null || e.file_bytes != null) rows.push(['Still charged at the end', esc(`anonymous ${fmtBytes(e.anon_bytes)}, page cache ${fmtBytes(e.file_bytes)}`) + exact('group.memory_peak_bytes')]);
    rows.push([`cgroup v${esc(g.version)}`, (g.dirs || []).map((d) => `<div class="mono dir">${esc(d)}</div>`).join('') + '<span class="lead">made for the run, removed after it</span>']);
    host.insertAdjacentHTML('beforeend', '<table class="kv"><tbody>' + rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join('') + '</tbody></table>');
  }

  // Where the time went: the tasks' lifetimes summed, split into CPU, waits and the rest.
  function accTime(M, host, a) {
    const t = a.time;
    if (!t) return false;
    const total = t.task_time_ns;
    const segs = [];
    // CPU is the exact runtime; user/system split it by clock ticks, so the bar splits the
    // runtime in their proportion and the legend gives both as measured.
    if (t.cpu_ns != null) {
      const us = t.user_ns != null && t.sys_ns != null ? t.user_ns + t.sys_ns : 0;
      if (us > 0) {
        segs.push({ id: 'user', name: 'user CPU', v: t.user_ns, w: t.cpu_ns * t.user_ns / us });
        segs.push({ id: 'system', name: 'system CPU', v: t.sys_ns, w: t.cpu_ns * t.sys_ns / us });
      } else segs.push({ id: 'cpu', name: 'on a CPU', v: t.cpu_ns, w: t.cpu_ns });
    }
    const waits = [
      ['run_queue', 'waiting for a CPU', t.run_queue_ns],
      ['blkio', 'block I/O', t.blkio_ns],
      ['swap', 'swap and reclaim', t.swap_reclaim_ns],
      ['other', 'the rest', t.other_ns],
    ];
    for (const [id, name, v] of waits) segs.push({ id, name, v, w: v });
    const shown = segs.filter((sg) => sg.v != null);
    let h = `<p class="timehead"><b>${esc(fmtDur(total))}</b> of task time (every thread's lifetime, summed) over <b>${esc(fmtDur(t.wall_ns))}</b> of wall time` +
      (total != null && t.wall_ns > 0 ? ` (${esc((total / t.wall_ns).toFixed(2))} threads alive on average)` : '') +
      ` ${badge(true, 'summed from the ledger: ' + t.from)}</p>`;
    if (total > 0) {
      h += '<div class="bar timebar" role="img" aria-label="where the time went">' + shown.map((sg) =>
        `<span class="t-${sg.id}" style="width:${(100 * Math.max(0, sg.w) / total).toFixed(2)}%" title="${esc(sg.name + ' ' + fmtDur(sg.v) + ' (' + share(sg.v, total) + ')')}"></span>`).join('') + '</div>';
    }
    h += '<ul class="timelegend">' + segs.map((sg) => sg.v == null
      ? `<li class="na" data-segment="${sg.id}"><span class="sw t-${sg.id}"></span><span class="n">${esc(sg.name)}</span><span class="tv">n/a</span></li>`
      : `<li data-segment="${sg.id}" data-ns="${sg.v}"><span class="sw t-${sg.id}"></span><span class="n">${esc(sg.name)}</span><span class="tv" title="${esc(fmtInt(sg.v))} ns"><b>${esc(fmtDur(sg.v))}</b> ${esc(share(sg.v, total))}</span></li>`).join('') + '</ul>';
    const notes = [`Summed over every thread of the tree from the ledger (${esc(t.from)}).`];
    if (segs.some((sg) => sg.id === 'user')) notes.push(`CPU is the scheduler's exact runtime, ${esc(fmtDur(t.cpu_ns))}; the user/system split is counted in clock ticks.`);
    notes.push('The rest is time asleep or waiting otherwise: for children, pipes, the network, locks.');
    if (a.delays_on) notes.push(a.delays_switched_by_ste ? 'Delay accounting was on: ste switched it on for the run (--delays) and back off after.' : 'Delay accounting was on.');
    else notes.push('Block I/O and swap/reclaim waits need delay accounting, which was off: <code>ste --delays</code> switches it on for the run (root).');
    const b = a.before_release;
    if (b && b.alive_ns > 0) notes.push(`The command's first process waited ${esc(fmtDur(b.alive_ns))} while ste set up (blocked until ste released it${b.cpu_ns != null ? `, ${esc(fmtDur(b.cpu_ns))} of it on a CPU` : ''}): left out of its figures, as time zero is the release.`);
    if (t.processes_without_figures) notes.push(`<span class="bad">${esc(fmtInt(t.processes_without_figures))} process${t.processes_without_figures === 1 ? '' : 'es'} without figures left out.</span>`);
    // The tree's CPU by a source that counts every process (tree_cpu), as the text says it.
    const cpuNote = (M.V.labels || {}).cpu_note;
    if (cpuNote) notes.push(`The tree's CPU: ${esc(cpuNote)}.`);
    h += `<p class="lead">${notes.join(' ')}</p>`;
    host.insertAdjacentHTML('beforeend', h);
    status.accounting.time = shown.map((sg) => [sg.id, sg.v]);
  }

  // The critical path as a list, each link with its lifetime and its own time on the path.
  function accPath(M, host, a) {
    const path = a.critical_path || [];
    if (path.length < 2) return false;
    const wall = Math.max(1, M.run.totals.wall_ns);
    // A long path (a big parallel build's) shows its two ends; the JSON has every link.
    const cut = path.length > PATH_ROWS ? [PATH_ROWS / 2, path.length - PATH_ROWS / 2] : null;
    let h = `<div class="table-wrap"><table class="path" data-rows="${path.length}"><thead><tr><th class="num idx">#</th><th class="num">pid</th><th class="prog">program</th><th class="num when">from</th><th class="num when">to</th><th class="num">lived</th><th class="num">its own time</th><th class="selfbar"></th></tr></thead><tbody>`;
    path.forEach((l, k) => {
      if (cut && k >= cut[0] && k < cut[1]) {
        if (k === cut[0]) h += `<tr class="more"><td colspan="8">… ${esc(fmtInt(cut[1] - cut[0]))} more links (the JSON report has them all) …</td></tr>`;
        return;
      }
      const i = M.find(l.pid, l.start_ns);
      const end = l.end_ns == null ? M.run.totals.wall_ns : l.end_ns;
      h += `<tr data-i="${i}" data-pid="${l.pid}" title="${i >= 0 ? 'show it on the timeline' : ''}"><td class="num idx">${k + 1}</td><td class="num">${esc(l.pid)}</td>` +
        `<td class="prog">${i >= 0 ? `<span class="sw" style="background:${M.color(i)}"></span>${esc(M.label(i))}` : ''}</td>` +
        `<td class="num when">${esc(fmtDur(l.start_ns))}</td><td class="num when">${l.end_ns == null ? 'running' : esc(fmtDur(l.end_ns))}</td>` +
        `<td class="num">${esc(fmtDur(end - l.start_ns))}</td><td class="num" title="${esc(fmtInt(l.self_ns))} ns">${esc(fmtDur(l.self_ns))}</td>` +
        `<td class="selfbar"><span style="width:${(100 * l.self_ns / wall).toFixed(2)}%"></span></td></tr>`;
    });
    h += '</tbody></table></div>';
    host.insertAdjacentHTML('beforeend', h);
    host.querySelector('tbody').addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      const i = tr ? Number(tr.dataset.i) : -1;
      if (i >= 0 && view.showProcess) view.showProcess(i);
    });
    status.accounting.critical_path = path.length;
  }
  const PATH_ROWS = 400;

  function accLingering(M, host, a) {
    const list = a.lingering || [];
    if (!list.length) return false;
    const rootEnd = M.n ? M.end[0] : null;
    let h = `<div class="table-wrap"><table data-rows="${list.length}"><thead><tr><th class="num">pid</th><th>program</th><th>how it ended</th></tr></thead><tbody>`;
    for (const l of list.slice(0, MAX_GENERIC_ROWS)) {
      const i = M.findLast(l.pid);
      const how = l.killed ? '<span class="bad">ended by ste (--kill-lingering)</span>'
        : l.end_ns == null ? 'still running when ste stopped waiting'
          : `ended ${esc(fmtDur(l.end_ns - Math.min(rootEnd == null ? l.end_ns : rootEnd, l.end_ns)))} after the command`;
      h += `<tr data-pid="${esc(l.pid)}"><td class="num">${esc(l.pid)}</td><td>${i >= 0 ? esc(M.label(i)) : ''}</td><td>${how}</td></tr>`;
    }
    h += '</tbody></table></div>';
    if (list.length > MAX_GENERIC_ROWS) h += `<p class="lead">The first ${fmtInt(MAX_GENERIC_ROWS)} of ${fmtInt(list.length)}; the JSON report has them all.</p>`;
    if (a.killed_lingering) h += `<p class="lead">ste sent ${esc(a.killed_lingering)}.</p>`;
    host.insertAdjacentHTML('beforeend', h);
    status.accounting.lingering = list.length;
  }

  function accUnavailable(M, host, a) {
    const items = (a.unavailable || []).map((u) => `<li><b>${esc(u.figure)}</b>: ${esc(u.why)}</li>`);
    if (a.taskstats_cut) items.push(`<li class="bad"><b>taskstats records lost</b>: ${esc(fmtInt(a.taskstats_cut))} exit record${a.taskstats_cut === 1 ? ' was' : 's were'} longer than ste reads, cut short; some processes miss their exit figures</li>`);
    if (a.taskstats_overruns) items.push(`<li class="bad"><b>taskstats records lost</b>: the receive buffer overflowed ${esc(fmtInt(a.taskstats_overruns))} time${a.taskstats_overruns === 1 ? '' : 's'}; some processes miss their exit figures</li>`);
    if (a.taskstats_incomplete) items.push(`<li><b>${esc(fmtInt(a.taskstats_incomplete))} process${a.taskstats_incomplete === 1 ? '' : 'es'}</b> miss the taskstats records of some of their threads</li>`);
    if (!items.length) return false;
    host.insertAdjacentHTML('beforeend', `<ul class="notes unavailable" data-rows="${items.length}">${items.join('')}</ul>`);
    status.accounting.unavailable = (a.unavailable || []).map((u) => u.figure);
  }

  const ACCOUNTING_PARTS = [
    { id: 'memory', keys: ['memory'], title: 'Memory: three figures, reconciled', lead: 'Each measures something else: the group\'s peak counts everything charged to the tree at once (page cache too); a process\'s peak counts only its own pages; the PSS curve is sampled.', draw: accMemory },
    { id: 'time', keys: ['time', 'delays_on', 'delays_switched_by_ste', 'before_release', 'tree_cpu'], title: 'Where the time went', draw: accTime },
    { id: 'critical_path', keys: ['critical_path'], title: 'Critical path', lead: 'The chain of processes whose lifetimes bound the wall time, root first: each waited for the next. Its own time is the part of the path no later link covers. Outlined on the timeline; click a row to show it there.', draw: accPath },
    { id: 'group', keys: ['group'], title: 'ste\'s cgroup', draw: accGroup },
    { id: 'lingering', keys: ['lingering', 'killed_lingering'], title: 'Lingering processes', lead: 'Descendants still running when the command\'s first process ended.', draw: accLingering },
    { id: 'unavailable', keys: ['unavailable', 'taskstats_overruns', 'taskstats_cut', 'taskstats_incomplete'], title: 'Not measured on this run', draw: accUnavailable },
  ];

  // The by-program view: the rows the text's --by-program prints, sortable.
  function drawPrograms(M, s) {
    const rows = M.V.by_program;
    const cols = [
      { key: 'program', title: 'program', get: (r) => r.program },
      { key: 'runs', title: 'runs', num: true, get: (r) => r.runs, fmt: (v) => fmtInt(v) },
      { key: 'cpu_ns', title: 'CPU', num: true, get: (r) => r.cpu_ns, fmt: (v, r) => (v == null ? 'n/a' : fmtDur(v)) + (r.cpu_unknown ? ` (+${fmtInt(r.cpu_unknown)} unmeasured)` : ''),
        tip: (v, r) => (r.user_ns != null ? `user ${fmtDur(r.user_ns)}, system ${fmtDur(r.sys_ns)}` : '') },
      { key: 'cpu_share', title: 'share', num: true, get: (r) => r.cpu_share, fmt: (v) => (v == null ? 'n/a' : fmtPct(v)) },
      { key: 'share_bar', title: '', bar: (r) => r.cpu_share },
      { key: 'span_ns', title: 'span', num: true, get: (r) => r.span_ns, fmt: (v) => fmtDur(v) },
      { key: 'largest_peak_bytes', title: 'largest peak', num: true, get: (r) => r.largest_peak_bytes, fmt: (v) => (v == null ? 'n/a' : fmtBytes(v)) },
    ];
    sortableTable(s, cols, rows, { id: 'programs', attrs: (r) => `data-program="${esc(r.program)}"` });
    status.programs = rows.length;
  }

  function drawAccounting(M, s) {
    status.accounting = {};
    status.accounting.parts = drawParts(M, s, M.run.accounting, 'accounting', ACCOUNTING_PARTS);
  }

  // ---------------------------------------------------------------- sortable tables

  // A table of `rows` with columns { key, title, num, get(row), fmt(v, row) (text) or
  // html(v, row) (markup), tip(v, row), cls, head (the header's tooltip) }, or bar columns
  // { key, title, bar(row) } drawing a fraction as a bar. A click on a header sorts by it
  // (numbers largest first, unknown values last), a second click reverses; rows start in the
  // order given. `opt.attrs(row)` gives a row's attributes. At most MAX_GENERIC_ROWS rows are
  // drawn, and the rest is said.
  function sortableTable(host, cols, rows, opt) {
    opt = opt || {};
    const wrap = document.createElement('div');
    wrap.className = 'table-wrap';
    wrap.innerHTML = `<table class="sorted" data-rows="${rows.length}"${opt.id ? ` data-table="${esc(opt.id)}"` : ''}><thead><tr>` +
      cols.map((c, k) => `<th class="${c.bar ? 'barcell' : 'sortable'}${c.num ? ' num' : ''}" data-k="${k}" data-key="${esc(c.key)}"${c.head ? ` title="${esc(c.head)}"` : ''}>${esc(c.title)}<span class="arrow"></span></th>`).join('') +
      '</tr></thead><tbody></tbody></table>';
    host.appendChild(wrap);
    if (rows.length > MAX_GENERIC_ROWS) host.insertAdjacentHTML('beforeend', `<p class="lead">The first ${fmtInt(MAX_GENERIC_ROWS)} of ${fmtInt(rows.length)} rows; the JSON report has them all.</p>`);
    const tbody = wrap.querySelector('tbody');
    let order = rows.map((_, k) => k), sortKey = -1, desc = false;
    const cell = (c, r) => {
      if (c.bar) {
        const f = Math.max(0, Math.min(1, c.bar(r) || 0));
        return `<td class="barcell"><span style="width:${(100 * f).toFixed(2)}%"></span></td>`;
      }
      const v = c.get(r);
      const inner = c.html ? c.html(v, r) : esc(c.fmt ? c.fmt(v, r) : v == null ? 'n/a' : String(v));
      const t = c.tip ? c.tip(v, r) : '';
      return `<td class="${c.num ? 'num' : ''}${c.cls ? ' ' + c.cls : ''}"${t ? ` title="${esc(t)}"` : ''}>${inner}</td>`;
    };
    function draw() {
      if (sortKey >= 0) {
        const c = cols[sortKey];
        const key = rows.map((r) => c.get(r));
        order.sort(byKey(key, desc));
      }
      wrap.querySelectorAll('th .arrow').forEach((a, k) => { a.textContent = k === sortKey ? (desc ? ' ▼' : ' ▲') : ''; });
      tbody.innerHTML = order.slice(0, MAX_GENERIC_ROWS).map((k) =>
        `<tr${opt.attrs ? ' ' + opt.attrs(rows[k]) : ''}>` + cols.map((c) => cell(c, rows[k])).join('') + '</tr>').join('');
    }
    wrap.querySelector('thead').addEventListener('click', (e) => {
      const th = e.target.closest('th.sortable');
      if (!th) return;
      const k = Number(th.dataset.k);
      if (k === sortKey) desc = !desc; else { sortKey = k; desc = !!cols[k].num; }
      draw();
    });
    draw();
    return wrap;
  }

  // Figures in boxes, as the summary shows them: [title, value markup, detail markup, badge].
  function figureBoxes(figures) {
    return '<div class="figures">' + figures.map(([k, v, d, b]) =>
      `<div class="figure"><div class="k">${esc(k)}${b || ''}</div><div class="v">${v}</div>${d ? `<div class="d">${d}</div>` : ''}</div>`).join('') + '</div>';
  }

  // A figure's source badge from run.sources, with where it came from on hover.
  function sourceOf(M, figure) {
    const src = M.run.sources && M.run.sources[figure];
    return src ? badge(src.exact, src.from + (src.note ? ' — ' + src.note : '')) : '';
  }

  const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : (many || one + 's')}`;
  const sum = (list, f) => list.reduce((a, x) => a + (f(x) || 0), 0);
  const basename = (p) => String(p).replace(/\/+$/, '').split('/').pop();

  // ---------------------------------------------------------------- system calls

  // A system call's name as the text report prints it: compat calls carry their ABI.
  function syscallName(sc, r) {
    const base = r.name != null ? r.name : `unknown #${r.nr}`;
    return r.compat ? `${base} (${sc.compat_arch || 'compat'})` : base;
  }

  // Nanoseconds as the system call tables show them: `125ns`, `4.5µs`, `12ms`.
  const callTime = (ns) => (ns == null ? 'n/a' : ns > 0 && ns < 1000 ? ns + 'ns' : fmtDur(ns));

  function drawSyscalls(M, s) {
    const sc = M.run.syscalls, L = M.V.labels || {};
    const calls = sc.calls || [];
    const total = sum(calls, (r) => r.calls), failed = sum(calls, (r) => r.errors);
    const timeNs = sc.timed ? sum(calls, (r) => r.total_ns) : null;
    const st = status.syscalls = { method: sc.method, timed: sc.timed, calls: total, failed, time_ns: timeNs, rows: calls.length };
    const src = sourceOf(M, 'syscalls');
    s.insertAdjacentHTML('beforeend', `<p class="lead">${esc(L.syscalls_method || sc.method)}; names, files and subsystems from ${esc(sc.table)}.</p>` +
      figureBoxes([
        ['System calls', esc(fmtInt(total)), '', src],
        ['Failed', failed ? `<span class="bad">${esc(fmtInt(failed))}</span>` : '0', total ? esc(share(failed, total)) + ' of the calls' : '', src],
        ['Time in calls', esc(callTime(timeNs)), sc.timed ? `${fmtInt(timeNs)} ns` : 'counts only (--syscalls=count)', sc.timed ? src : ''],
        ['Distinct calls', esc(fmtInt(calls.length)), `${esc(sc.arch)}${sc.compat_arch ? ' and ' + esc(sc.compat_arch) : ''}`, ''],
      ]));
    if (!calls.length) { s.insertAdjacentHTML('beforeend', '<p class="empty">The tree made no system call that returned.</p>'); return; }
    const timed = (cols) => (sc.timed ? cols : []);

    // Kernel subsystems, with the same subtotals as the text's table.
    const groups = new Map();
    for (const r of calls) {
      let g = groups.get(r.group);
      if (!g) groups.set(r.group, (g = { group: r.group, calls: 0, errors: 0, total_ns: sc.timed ? 0 : null, max_ns: sc.timed ? 0 : null, n: 0 }));
      g.calls += r.calls; g.errors += r.errors; g.n++;
      if (sc.timed) { g.total_ns += r.total_ns || 0; g.max_ns = Math.max(g.max_ns, r.max_ns || 0); }
    }
    const glist = [...groups.values()].sort((a, b) => b.calls - a.calls || (a.group < b.group ? -1 : 1));
    const topCalls = Math.max(1, ...glist.map((g) => g.calls));
    const topTime = sc.timed ? Math.max(1, ...glist.map((g) => g.total_ns)) : 1;
    const host = sectionPart(s, 'syscalls-subsystems', 'By kernel subsystem', 'Each call\'s subsystem comes from the kernel source file that defines it. Click a column to sort.');
    sortableTable(host, [
      { key: 'group', title: 'subsystem', get: (g) => g.group },
      { key: 'n', title: 'calls made', num: true, get: (g) => g.n, fmt: fmtInt, head: 'distinct system calls' },
      { key: 'calls', title: 'calls', num: true, get: (g) => g.calls, fmt: fmtInt },
      { key: 'calls_bar', title: 'share of the calls', bar: (g) => g.calls / topCalls },
      { key: 'errors', title: 'errors', num: true, get: (g) => g.errors, fmt: fmtInt },
    ].concat(timed([
      { key: 'total_ns', title: 'time', num: true, get: (g) => g.total_ns, fmt: callTime, tip: (v) => fmtInt(v) + ' ns' },
      { key: 'time_bar', title: 'share of the time', bar: (g) => g.total_ns / topTime },
    ])), glist, { id: 'syscall-groups', attrs: (g) => `data-group="${esc(g.group)}" data-calls="${g.calls}"` });
    st.groups = glist.map((g) => [g.group, g.calls]);

    const calls1 = sectionPart(s, 'syscalls-calls', 'By system call', 'Most calls first, as strace -c counts them (exit and exit_group, which never return, are not counted). Click a column to sort.');
    const origin = (r) => r.file != null ? r.file + (r.subsystem != null ? ` (${r.subsystem})` : '') : r.name == null ? 'newer than the table: name and subsystem unknown' : '';
    sortableTable(calls1, [
      { key: 'name', title: 'system call', get: (r) => syscallName(sc, r), cls: 'mono' },
      { key: 'group', title: 'subsystem', get: (r) => r.group },
      { key: 'calls', title: 'calls', num: true, get: (r) => r.calls, fmt: fmtInt },
      { key: 'errors', title: 'errors', num: true, get: (r) => r.errors, fmt: fmtInt },
    ].concat(timed([
      { key: 'total_ns', title: 'time', num: true, get: (r) => r.total_ns, fmt: callTime, tip: (v) => (v == null ? '' : fmtInt(v) + ' ns') },
      { key: 'avg_ns', title: 'avg', num: true, get: (r) => (r.total_ns == null || !r.calls ? null : Math.floor(r.total_ns / r.calls)), fmt: callTime },
      { key: 'max_ns', title: 'max', num: true, get: (r) => r.max_ns, fmt: callTime },
    ])).concat([
      { key: 'file', title: 'defined in (MAINTAINERS entry)', get: origin, cls: 'mono dir' },
    ]), calls, { id: 'syscalls', attrs: (r) => `data-call="${esc(syscallName(sc, r))}" data-calls="${r.calls}" data-errors="${r.errors}"` });

    if ((sc.errors || []).length) {
      const names = callNames(sc, calls);
      const host2 = sectionPart(s, 'syscalls-errnos', 'Failed calls by errno', '');
      sortableTable(host2, [
        { key: 'call', title: 'system call', get: (e) => names.get((e.compat ? 'c' : '') + e.nr) || `#${e.nr}`, cls: 'mono' },
        { key: 'errno', title: 'error', get: (e) => (e.name != null ? e.name : `errno ${e.errno}`), cls: 'mono' },
        { key: 'calls', title: 'calls', num: true, get: (e) => e.calls, fmt: fmtInt },
      ], sc.errors, { id: 'syscall-errnos' });
      st.errnos = sc.errors.length;
    }

    const u = sc.uncounted || {};
    const missing = [];
    if (u.bad_numbers > 0) missing.push(`${plural(u.bad_numbers, 'call')} with a number outside the tables (x32, or skipped by seccomp or a tracer)`);
    if (u.errno_unclassified > 0) missing.push(`${fmtInt(u.errno_unclassified)} failures not broken down by errno`);
    if (u.per_process_missing > 0) missing.push(`${plural(u.per_process_missing, 'call')} counted for the tree but in no process (records lost, or processes still running)`);
    if (missing.length) s.insertAdjacentHTML('beforeend', `<p class="lead" data-part="uncounted">Not in the figures above: ${esc(missing.join('; '))}.</p>`);

    if (sc.per_process) drawSyscallImages(M, s, sc, L, callNames(sc, calls));
  }

  // Each call's name by its number and ABI.
  const callNames = (sc, calls) => new Map(calls.map((r) => [(r.compat ? 'c' : '') + r.nr, syscallName(sc, r)]));

  // Per program (the images of each exec'd program summed, as the text report does), then
  // per process image.
  function drawSyscallImages(M, s, sc, L, callName) {
    const images = sc.images || [];
    const progOf = (k) => (L.syscall_images && L.syscall_images[k] != null ? L.syscall_images[k] : '?');
    const nameOf = (c) => callName.get((c.compat ? 'c' : '') + c.nr) || `#${c.nr}`;
    const byProg = new Map();
    const rows = images.map((im, k) => {
      const r = { k, program: progOf(k), pid: im.pid, calls: sum(im.calls, (c) => c.calls), errors: sum(im.calls, (c) => c.errors),
        total_ns: sc.timed ? sum(im.calls, (c) => c.total_ns) : null, im };
      let p = byProg.get(r.program);
      if (!p) byProg.set(r.program, (p = { program: r.program, images: 0, calls: 0, errors: 0, total_ns: sc.timed ? 0 : null, per: new Map() }));
      p.images++; p.calls += r.calls; p.errors += r.errors;
      if (sc.timed) p.total_ns += r.total_ns;
      for (const c of im.calls) {
        const key = (c.compat ? 'c' : '') + c.nr;
        const u = p.per.get(key) || { c, calls: 0 };
        u.calls += c.calls;
        p.per.set(key, u);
      }
      return r;
    });
    const progs = [...byProg.values()].sort((a, b) => b.calls - a.calls || (a.program < b.program ? -1 : 1));
    // As the text: most calls first, then native before compat, then by number.
    const most = (p) => [...p.per.values()].sort((a, b) => b.calls - a.calls || a.c.compat - b.c.compat || a.c.nr - b.c.nr)
      .slice(0, 4).map((u) => `${nameOf(u.c)} ${fmtInt(u.calls)}`).join(', ');
    const top = Math.max(1, ...progs.map((p) => p.calls));
    const timedCol = sc.timed ? [{ key: 'total_ns', title: 'time', num: true, get: (r) => r.total_ns, fmt: callTime, tip: (v) => fmtInt(v) + ' ns' }] : [];
    const host = sectionPart(s, 'syscalls-programs', 'By program', `${esc(plural(images.length, 'process image'))}; each process between its start or exec and its next exec or end.`);
    sortableTable(host, [
      { key: 'program', title: 'program', get: (p) => p.program },
      { key: 'images', title: 'images', num: true, get: (p) => p.images, fmt: fmtInt },
      { key: 'calls', title: 'calls', num: true, get: (p) => p.calls, fmt: fmtInt },
      { key: 'bar', title: '', bar: (p) => p.calls / top },
      { key: 'errors', title: 'errors', num: true, get: (p) => p.errors, fmt: fmtInt },
    ].concat(timedCol, [{ key: 'most', title: 'most made', get: most, cls: 'mono' }]), progs,
    { id: 'syscall-programs', attrs: (p) => `data-program="${esc(p.program)}" data-calls="${p.calls}"` });
    const host2 = sectionPart(s, 'syscalls-images', 'By process image', 'Every image: a process from its start or an exec to its next exec or its end.');
    sortableTable(host2, [
      { key: 'pid', title: 'pid', num: true, get: (r) => r.pid, fmt: String },
      { key: 'program', title: 'program', get: (r) => r.program },
      { key: 'calls', title: 'calls', num: true, get: (r) => r.calls, fmt: fmtInt },
      { key: 'errors', title: 'errors', num: true, get: (r) => r.errors, fmt: fmtInt },
    ].concat(timedCol, [{ key: 'most', title: 'most made', get: (r) => r.im.calls.slice().sort((a, b) => b.calls - a.calls).slice(0, 4).map((c) => `${nameOf(c)} ${fmtInt(c.calls)}`).join(', '), cls: 'mono' }]),
    rows, { id: 'syscall-images', attrs: (r) => `data-pid="${r.pid}" data-calls="${r.calls}"` });
    status.syscalls.programs = progs.map((p) => [p.program, p.images, p.calls]);
    status.syscalls.images = images.length;
  }

  // ---------------------------------------------------------------- malloc

  function drawMalloc(M, s) {
    const m = M.run.malloc, L = M.V.labels || {};
    const images = m.images || [];
    const shown = images.filter((_, k) => !L.malloc_shown || L.malloc_shown[k]);
    const uncovered = m.uncovered || [];
    const asked = (i) => i.bytes.malloc + i.bytes.calloc + i.bytes.realloc + i.bytes.memalign;
    const callsOf = (i) => { const c = i.calls; return c.malloc + c.calloc + c.realloc + c.memalign + c.free + c.free_null; };
    const st = status.malloc = { images: shown.length, calls: sum(shown, callsOf), uncovered: uncovered.map((u) => [u.pid, u.reason]) };
    s.insertAdjacentHTML('beforeend', `<p class="lead">${esc(plural(shown.length, 'process image'))} with ste's shim (every call counted)${uncovered.length ? `; ${fmtInt(uncovered.length)} without it (below)` : ''}. Shim: <code>${esc(m.shim)}</code>.</p>` +
      figureBoxes([
        ['malloc-family calls', esc(fmtInt(st.calls)), 'malloc, calloc, realloc, memalign family, free', sourceOf(M, 'malloc_calls')],
        ['Bytes asked for', esc(fmtBytes(sum(shown, asked))), `${fmtInt(sum(shown, asked))} bytes`, sourceOf(M, 'malloc_calls')],
        ['Given back', esc(fmtBytes(sum(shown, (i) => i.bytes.freed))), 'chunk bytes, by free and realloc', sourceOf(M, 'malloc_calls')],
        ['Failed allocations', esc(fmtInt(sum(shown, (i) => i.calls.failed))), '', ''],
        ['Images not reached', uncovered.length ? `<span class="bad">${esc(fmtInt(uncovered.length))}</span>` : '0', '', ''],
      ]));
    drawMallocHeld(M, s, m, images);
    if (shown.length) {
      const host = sectionPart(s, 'malloc-images', 'Process images', 'One row per image the shim ran in (an exec\'d program, or a forked child). Click a column to sort; each image\'s details follow.');
      sortableTable(host, [
        { key: 'pid', title: 'pid', num: true, get: (i) => i.pid, fmt: String },
        { key: 'program', title: 'program', get: (i) => basename(i.program), tip: (v, i) => i.program },
        { key: 't_ns', title: 'from', num: true, get: (i) => i.t_ns, fmt: fmtDur },
        { key: 'calls', title: 'calls', num: true, get: callsOf, fmt: fmtInt },
        { key: 'malloc', title: 'malloc', num: true, get: (i) => i.calls.malloc, fmt: fmtInt },
        { key: 'free', title: 'free', num: true, get: (i) => i.calls.free, fmt: fmtInt },
        { key: 'asked', title: 'asked', num: true, get: asked, fmt: fmtBytes, tip: (v) => fmtInt(v) + ' bytes' },
        { key: 'freed', title: 'given back', num: true, get: (i) => i.bytes.freed, fmt: fmtBytes, tip: (v) => fmtInt(v) + ' bytes' },
        { key: 'peak_held', title: 'peak held', num: true, get: (i) => (i.held_peak ? i.held_peak.high_bytes : i.peak_held_bytes), fmt: fmtBytes, head: 'the most it held at any moment, counted by the shim: exact with one thread, the upper bound with several (details below)' },
        { key: 'held_at_end', title: 'never given back', num: true, get: (i) => i.held_at_end_bytes, fmt: fmtBytes, head: 'what it still held when it ended (exact)' },
        { key: 'threads', title: 'threads', num: true, get: (i) => i.threads, fmt: fmtInt },
      ], shown, { id: 'malloc-images', attrs: (i) => `data-pid="${i.pid}" data-image="${i.image}" data-calls="${callsOf(i)}"` });
      shown.slice(0, MALLOC_DETAILS).forEach((i, n) => host.insertAdjacentHTML('beforeend', mallocImage(M, i, n === 0)));
      if (shown.length > MALLOC_DETAILS) host.insertAdjacentHTML('beforeend', `<p class="lead">Details of the first ${MALLOC_DETAILS} images; the JSON report has them all.</p>`);
    }
    if (uncovered.length) {
      const host = sectionPart(s, 'malloc-uncovered', 'Images the shim could not run in', 'Their calls are not counted: the reason is why the shim was not loaded.');
      sortableTable(host, [
        { key: 'pid', title: 'pid', num: true, get: (u) => u.pid, fmt: String },
        { key: 'program', title: 'program', get: (u) => u.program, cls: 'mono dir' },
        { key: 't_ns', title: 'at', num: true, get: (u) => u.t_ns, fmt: fmtDur },
        { key: 'reason', title: 'why', get: (u) => L.malloc_uncovered ? L.malloc_uncovered[uncovered.indexOf(u)] : u.reason },
      ], uncovered, { id: 'malloc-uncovered', attrs: (u) => `data-pid="${u.pid}" data-reason="${esc(u.reason)}"` });
    }
    s.insertAdjacentHTML('beforeend', `<p class="lead">SDT probes: ${esc(m.probes)}. ste spent ${esc(fmtDur(m.cpu_ns))} reading segments and checking execs outside its sampling rounds.</p>`);
    st.per_image = shown.map((i) => ({ pid: i.pid, image: i.image, calls: callsOf(i), malloc: i.calls.malloc, free: i.calls.free, asked: asked(i), held_at_end: i.held_at_end_bytes, peak_held: i.peak_held_bytes }));
  }
  const MALLOC_DETAILS = 50;

  // What the text report says of one image, as a table in a details element.
  function mallocImage(M, i, open) {
    const c = i.calls, b = i.bytes;
    const rows = [];
    const kind = i.allocator.kind;
    if (kind === 'program') rows.push(['allocator', `its own malloc (<code>${esc(i.allocator.path)}</code>): the shim sees none of its calls`]);
    else if (kind === 'library') rows.push(['allocator', `<code>${esc(i.allocator.path)}</code> (not glibc's: calls and bytes only)`]);
    if (kind !== 'program') {
      const fam = [['malloc', c.malloc, b.malloc], ['calloc', c.calloc, b.calloc], ['realloc', c.realloc, b.realloc], ['memalign family', c.memalign, b.memalign]];
      rows.push(['calls', fam.map(([n, k, v], j) => `${n} ${esc(fmtInt(k))} (${esc(fmtInt(v))}${j ? '' : ' bytes asked'})`).join(', ') +
        `, free ${esc(fmtInt(c.free))} (${esc(fmtInt(b.freed))} bytes given back)` + (c.free_null ? `, free(NULL) ${esc(fmtInt(c.free_null))}` : '') +
        (c.failed ? `, <span class="bad">${esc(fmtInt(c.failed))} failed</span>` : '') + sourceOf(M, 'malloc_calls')]);
    }
    if (kind !== 'program' && kind !== 'library') {
      const l = i.last;
      rows.push(['mmapped blocks', `${esc(fmtInt(i.mmapped_calls))} served in all (${esc(fmtBytes(i.mmapped_bytes))})` +
        (l ? `, ${esc(fmtInt(l.mmapped_blocks))} in use at the last snapshot (${esc(fmtBytes(l.mmapped_bytes))})` : '')]);
      const t = i.thresholds;
      rows.push(['thresholds', `mmap ${esc(fmtBytes(t.mmap_bytes))}, trim ${esc(fmtBytes(t.trim_bytes))} (${t.dynamic ? 'dynamic' : 'fixed by mallopt or the environment'}; ${esc(plural(t.changes, 'change'))}) <span class="badge sampled" title="${esc((M.run.sources.malloc_thresholds || {}).from || '')}">modelled</span>`]);
      const peak = ((M.V.labels || {}).malloc_held_peak || [])[M.run.malloc.images.indexOf(i)];
      rows.push(['held (chunk bytes of live blocks)', esc(peak || '') +
        `; ${esc(fmtBytes(i.held_at_end_bytes))} never given back` + sourceOf(M, i.held_peak ? 'malloc_held_peak' : 'malloc_held_bytes')]);
      if (!l) rows.push(['arenas', 'no snapshot (no malloc call after ste asked, and the image did not end with exit(): it exec\'d, called _exit or was killed)']);
      else if (l.arenas) {
        const heaps = sum(l.arenas, (a) => a.heaps), free = sum(l.arenas, (a) => a.free_bytes);
        const main = l.arenas.find((a) => a.index === 0);
        const others = l.arenas.filter((a) => a.index !== 0);
        rows.push([`arenas (${l.at_exit ? 'at exit' : 'at ' + esc(fmtDur(l.t_ns))})`,
          `${esc(fmtInt(l.arenas.length))} (main: ${esc(fmtBytes(main ? main.system_bytes : 0))} from sbrk; ${esc(plural(others.length, 'other'))}: ${esc(plural(heaps, 'heap'))}, ${esc(fmtBytes(sum(others, (a) => a.system_bytes)))} mmap'd), ${esc(fmtBytes(free))} free in them` +
          (l.info_truncated ? ' (malloc_info truncated: some arenas missing)' : '') + sourceOf(M, 'malloc_arenas') +
          '<table class="arenas"><thead><tr><th class="num">arena</th><th class="num">from the system</th><th class="num">at most</th><th class="num">free</th><th class="num">free chunks</th><th class="num">heaps</th></tr></thead><tbody>' +
          l.arenas.map((a) => `<tr><td class="num">${a.index}</td><td class="num">${esc(fmtBytes(a.system_bytes))}</td><td class="num">${esc(fmtBytes(a.max_system_bytes))}</td><td class="num">${esc(fmtBytes(a.free_bytes))}</td><td class="num">${esc(fmtInt(a.free_chunks))}</td><td class="num">${a.heaps == null ? '' : esc(fmtInt(a.heaps))}</td></tr>`).join('') +
          '</tbody></table>']);
      } else rows.push(['arenas', `${esc(fmtBytes(l.arena_bytes))} from the system in all (no malloc_info snapshot)`]);
      const g = i.largest_gap;
      if (g && g.held_bytes != null) {
        const gap = Math.max(0, g.resident_anon_bytes - g.held_bytes);
        if (gap > 0) rows.push(['held vs resident', `at ${esc(fmtDur(g.t_ns))}, held ${esc(fmtBytes(g.held_bytes))}, resident anonymous ${esc(fmtBytes(g.resident_anon_bytes))}: <b>${esc(fmtBytes(gap))}</b> resident but not held (kept by malloc: ${esc(fmtBytes(l ? l.free_bytes : null))} free in the arenas at the last snapshot)`]);
      }
    }
    const origin = i.origin === 'exec' ? 'started' : 'forked';
    const threads = plural(i.threads, 'thread') + (i.overflow_threads > 0 ? `; ${fmtInt(i.overflow_threads)} beyond the shim's slots, their counts approximate` : '');
    return `<details class="image" data-pid="${i.pid}" data-image="${i.image}"${open ? ' open' : ''}><summary>pid ${esc(i.pid)} <code>${esc(i.program)}</code> (${origin} at ${esc(fmtDur(i.t_ns))}, ${esc(threads)})</summary>` +
      '<table class="kv"><tbody>' + rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join('') + '</tbody></table></details>';
  }

  // What the images held over time (stacked, the largest images and the rest), and their
  // resident anonymous memory as a line.
  function drawMallocHeld(M, s, m, images) {
    const samples = (m.samples || []).filter((x) => x.held_bytes != null);
    if (!samples.length) return;
    const host0 = sectionPart(s, 'malloc-held', 'Held over time', `What each image held at the sampling rounds (chunk bytes handed out minus given back), stacked; the line is their resident anonymous memory. ${sourceOf(M, 'malloc_held_bytes')}`);
    const T = [...new Set(samples.map((x) => x.t_ns))].sort((a, b) => a - b);
    const at = new Map(T.map((t, k) => [t, k]));
    const K = T.length;
    // The last round holds for one more interval, not to the end of the run: the images may
    // have ended.
    const spans = T.map((t, k) => [t, k + 1 < K ? T[k + 1] : Math.min(Math.max(t, M.wall), t + (K > 1 ? t - T[k - 1] : 0))]);
    const per = new Map();
    const anon = new Float64Array(K), totals = new Float64Array(K);
    for (const x of samples) {
      const key = x.pid + '/' + x.image;
      let v = per.get(key);
      if (!v) per.set(key, (v = new Float64Array(K)));
      const k = at.get(x.t_ns);
      v[k] += x.held_bytes;
      anon[k] += x.resident_anon_bytes;
      totals[k] += x.held_bytes;
    }
    const prog = new Map(images.map((i) => [i.pid + '/' + i.image, basename(i.program)]));
    const all = [...per.entries()].map(([key, values]) => ({ key, values, peak: values.reduce((a, b) => Math.max(a, b), 0) }))
      .sort((a, b) => b.peak - a.peak);
    const series = all.slice(0, TOP).map((x, rank) => ({ name: `${prog.get(x.key) || '?'} (pid ${x.key.split('/')[0]})`, color: color(rank), values: x.values, peak: x.peak }));
    if (all.length > TOP) {
      const values = new Float64Array(K);
      for (const x of all.slice(TOP)) for (let k = 0; k < K; k++) values[k] += x.values[k];
      series.push({ name: `${all.length - TOP} other images`, color: css('--other'), values, peak: values.reduce((a, b) => Math.max(a, b), 0) });
    }
    const { host, leg } = chartParts(host0);
    const points = T.map((t, k) => [t, anon[k]]);
    keepDrawn(() => {
      stackedChart(host, {
        label: 'malloc: held over time', height: narrow() ? 180 : 220, binary: true, spans, series, totals,
        lines: [{ name: 'resident anonymous memory of these processes', cls: 'anonline', points, until: spans[K - 1][1] }],
        yFmt: fmtBytes,
        tip: (k) => `<b>${esc(fmtDur(T[k]))}</b> · held ${esc(fmtBytes(totals[k]))} · resident anonymous ${esc(fmtBytes(anon[k]))}` + seriesRows(series, k, fmtBytes),
      });
      leg.innerHTML = legend(series, (se) => 'peak ' + fmtBytes(se.peak), (n) => `and ${n} holding nothing`);
      leg.firstChild.insertAdjacentHTML('beforeend', '<span><span class="sw line anon"></span>resident anonymous memory</span>');
    });
    status.malloc_held = { series: series.length, rounds: K, peak: totals.reduce((a, b) => Math.max(a, b), 0) };
  }

  // ---------------------------------------------------------------- memory at the peak

  function drawPeak(M, s) {
    const p = M.run.memory_at_peak, L = M.V.labels || {}, snap = p.snapshot;
    const kinds = L.mapping_kinds || [];
    const kindLabel = new Map(kinds);
    const kindColor = new Map(kinds.map(([k], n) => [k, color(n)]));
    const st = status.memory_at_peak = { snapshot: !!snap, over_budget: p.info.over_budget, snapshots: p.info.snapshots, page_flags: p.info.page_flags };
    if (!snap) {
      s.insertAdjacentHTML('beforeend', '<p class="empty">No snapshot (nothing was sampled, or every new high was over the maps budget).</p>');
    } else {
      const highest = L.peak_where || '';
      s.insertAdjacentHTML('beforeend', `<p class="timehead" data-t-ns="${snap.t_ns}" data-pss="${snap.tree_pss_bytes}">At <b>${esc(fmtDur(snap.t_ns))}</b>, tree PSS <b>${esc(fmtBytes(snap.tree_pss_bytes))}</b>${esc(highest)}. ${badge(false, 'the sampling round with the highest PSS that could be mapped; /proc/PID/smaps of its largest processes')}</p>`);
      st.t_ns = snap.t_ns; st.tree_pss_bytes = snap.tree_pss_bytes; st.others = snap.others; st.others_pss_bytes = snap.others_pss_bytes;
      st.processes = [];
      const procs = snap.processes.map((pm, n) => {
        const byKind = new Map(), paths = new Map();
        for (const x of pm.mappings) {
          addFigures(byKind, x.kind, x.figures);
          if (x.kind === 'file' || x.kind === 'shmem') addFigures(paths, x.kind + '\u0000' + (x.path === '' ? '(anonymous shared)' : x.path), x.figures);
        }
        const rows = [...byKind.entries()].filter(([, f]) => f.rss_bytes > 0 || f.swap_bytes > 0)
          .sort((a, b) => b[1].pss_bytes - a[1].pss_bytes || kinds.findIndex((k) => k[0] === a[0]) - kinds.findIndex((k) => k[0] === b[0]));
        return { pm, n, rows, paths, name: (L.peak_programs && L.peak_programs[n]) || '?', pagesFrom: L.peak_pages_from && L.peak_pages_from[n] };
      });
      const top = Math.max(1, ...procs.map((x) => x.pm.totals.pss_bytes), snap.others_pss_bytes);
      const host = sectionPart(s, 'peak-processes', 'What filled memory', 'The largest processes of that round, by what their memory held (PSS by kind of mapping, from smaps).');
      let h = '<div class="recon">';
      for (const x of procs) {
        const t = x.pm.totals;
        h += `<div class="mrow" data-pid="${x.pm.pid}" data-pss="${t.pss_bytes}"><div class="k"><b>pid ${esc(x.pm.pid)} (${esc(x.name)})</b><div class="d">RSS ${esc(fmtBytes(t.rss_bytes))}, swap ${esc(fmtBytes(t.swap_bytes))}</div></div>` +
          `<div class="bar" role="img" aria-label="${esc(`pid ${x.pm.pid} PSS ${fmtBytes(t.pss_bytes)}`)}">` +
          x.rows.map(([k, f]) => `<span style="background:${kindColor.get(k)};width:${(100 * f.pss_bytes / top).toFixed(2)}%" title="${esc((kindLabel.get(k) || k) + ' ' + fmtBytes(f.pss_bytes))}"></span>`).join('') + '</div>' +
          `<div class="v"><span class="big">${esc(fmtBytes(t.pss_bytes))}</span><span class="exactv">${esc(fmtInt(t.pss_bytes))} bytes PSS</span></div>` +
          `<div class="d">${x.rows.map(([k, f]) => `<span class="sw" style="background:${kindColor.get(k)}"></span>${esc(kindLabel.get(k) || k)} ${esc(fmtBytes(f.pss_bytes))}`).join(' · ')}</div></div>`;
        st.processes.push({ pid: x.pm.pid, pss: t.pss_bytes, rss: t.rss_bytes, swap: t.swap_bytes, kinds: Object.fromEntries(x.rows.map(([k, f]) => [k, f.pss_bytes])) });
      }
      if (snap.others > 0) {
        h += `<div class="mrow" data-others="${snap.others}"><div class="k"><b>${esc(plural(snap.others, 'other process', 'other processes'))}</b><div class="d">not mapped</div></div>` +
          `<div class="bar"><span class="rest" style="width:${(100 * snap.others_pss_bytes / top).toFixed(2)}%"></span></div>` +
          `<div class="v"><span class="big">${esc(fmtBytes(snap.others_pss_bytes))}</span><span class="exactv">PSS</span></div></div>`;
      }
      h += '</div>';
      host.insertAdjacentHTML('beforeend', h);
      for (const x of procs) host.insertAdjacentHTML('beforeend', peakProcess(x, kindLabel, kindColor));
      st.flags = procs.filter((x) => x.pm.flags).length;
    }
    s.insertAdjacentHTML('beforeend', `<p class="lead" data-part="maps-info">Maps at peak: ${esc(L.peak_info || '')}.</p>`);
  }

  const FIGURE_KEYS = ['size_bytes', 'rss_bytes', 'pss_bytes', 'anon_bytes', 'file_bytes', 'dirty_bytes', 'shared_bytes', 'swap_bytes', 'swap_pss_bytes', 'thp_bytes', 'locked_bytes'];
  function addFigures(map, key, f) {
    let a = map.get(key);
    if (!a) map.set(key, (a = Object.fromEntries(FIGURE_KEYS.map((k) => [k, 0]))));
    for (const k of FIGURE_KEYS) a[k] += f[k] || 0;
  }

  const TOP_PATHS = 5;

  // One process at the peak, as the text report details it: its memory by kind (files and
  // shared memory by path), its pages by page-table state, flag and map count.
  function peakProcess(x, kindLabel, kindColor) {
    const pm = x.pm;
    const cellB = (v) => `<td class="num" title="${esc(fmtInt(v))} bytes">${esc(fmtBytes(v))}</td>`;
    let h = `<details class="peakproc" data-pid="${pm.pid}"${x.n === 0 ? ' open' : ''}><summary>pid ${esc(pm.pid)} (${esc(x.name)}): ${esc(plural(pm.mappings.length, 'mapping'))}, read in ${esc(fmtDur(pm.cost_ns))} of CPU</summary>`;
    h += '<div class="table-wrap"><table class="kinds"><thead><tr><th>kind</th><th class="num">PSS</th><th class="num">RSS</th><th class="num">anon</th><th class="num">swap</th><th class="num">THP</th></tr></thead><tbody>';
    for (const [k, f] of x.rows) {
      h += `<tr data-kind="${esc(k)}" data-pss="${f.pss_bytes}"><td><span class="sw" style="background:${kindColor.get(k)}"></span>${esc(kindLabel.get(k) || k)}</td>${cellB(f.pss_bytes)}${cellB(f.rss_bytes)}${cellB(f.anon_bytes)}${cellB(f.swap_bytes)}${cellB(f.thp_bytes)}</tr>`;
      if (k !== 'file' && k !== 'shmem') continue;
      const named = [...x.paths.entries()].filter(([key, g]) => key.startsWith(k + '\u0000') && (g.rss_bytes > 0 || g.swap_bytes > 0))
        .map(([key, g]) => [key.slice(k.length + 1), g]).sort((a, b) => b[1].pss_bytes - a[1].pss_bytes || (a[0] < b[0] ? -1 : 1));
      for (const [path, g] of named.slice(0, TOP_PATHS)) h += `<tr class="subrow"><td class="mono dir">${esc(path)}</td>${cellB(g.pss_bytes)}${cellB(g.rss_bytes)}<td></td><td></td><td></td></tr>`;
      if (named.length > TOP_PATHS) h += `<tr class="subrow"><td>${esc(fmtInt(named.length - TOP_PATHS))} more</td>${cellB(sum(named.slice(TOP_PATHS), (n) => n[1].pss_bytes))}<td></td><td></td><td></td><td></td></tr>`;
    }
    h += '</tbody></table></div>';
    const notes = [`Pages from: ${esc(x.pagesFrom || 'n/a')}.`];
    const p = pm.pte;
    if (p) notes.push(`Pages (pagemap): ${fmtInt(p.present)} present, ${fmtInt(p.swapped)} swapped, ${fmtInt(p.exclusive)} exclusive, ${fmtInt(p.soft_dirty)} soft-dirty, ${fmtInt(p.file_or_shared)} file-backed or shared.`);
    h += `<p class="lead">${notes.join(' ')}</p>`;
    if (pm.flags && pm.flags.length) {
      const top = Math.max(1, ...pm.flags.map((f) => f.pages));
      h += '<h4>Resident pages by flag (kpageflags)</h4><div class="table-wrap"><table class="flags"><thead><tr><th>flag</th><th class="num">pages</th><th class="num">bytes</th><th class="barcell"></th></tr></thead><tbody>' +
        pm.flags.map((f) => `<tr data-flag="${esc(f.name)}" data-pages="${f.pages}"><td><code>${esc(f.letter)}</code> ${esc(f.name)}</td><td class="num">${esc(fmtInt(f.pages))}</td><td class="num">${esc(fmtBytes(f.pages * pm.page_size_bytes))}</td><td class="barcell"><span style="width:${(100 * f.pages / top).toFixed(2)}%"></span></td></tr>`).join('') +
        '</tbody></table></div>';
    }
    if (pm.map_counts && pm.map_counts.length) {
      h += `<p class="lead">Resident pages by map count (kpagecount): ${esc(pm.map_counts.map((c) => `${c.map_count}× ${fmtInt(c.pages)}`).join(', '))}.</p>`;
    }
    return h + '</details>';
  }

  // ---------------------------------------------------------------- generic rendering

  const MAX_GENERIC_ROWS = 2000;

  function generic(key, v) {
    if (v == null) return '<span class="lead">n/a</span>';
    if (Array.isArray(v)) {
      if (!v.length) return '<span class="lead">none</span>';
      if (v.every((x) => x === null || typeof x !== 'object')) return esc(v.map((x) => fmtValue(key, x)).join(', '));
      const objects = v.filter((x) => x && typeof x === 'object' && !Array.isArray(x));
      const keys = [];
      for (const o of objects) for (const k of Object.keys(o)) if (!keys.includes(k)) keys.push(k);
      const shown = objects.slice(0, MAX_GENERIC_ROWS);
      const numeric = keys.map((k) => shown.some((o) => typeof o[k] === 'number'));
      let h = `<div class="table-wrap"><table data-rows="${objects.length}"><thead><tr>${keys.map((k, j) => `<th class="${numeric[j] ? 'num' : ''}" title="${esc(k)}">${esc(humanize(k))}</th>`).join('')}</tr></thead><tbody>`;
      for (const o of shown) {
        h += '<tr>' + keys.map((k, j) => {
          const x = o[k];
          const inner = x !== null && typeof x === 'object' ? generic(k, x) : esc(fmtValue(k, x));
          const t = exactTitle(k, x);
          return `<td class="${numeric[j] ? 'num' : ''}"${t ? ` title="${esc(t)}"` : ''}>${inner}</td>`;
        }).join('') + '</tr>';
      }
      h += '</tbody></table></div>';
      if (objects.length > shown.length) h += `<p class="lead">The first ${fmtInt(shown.length)} of ${fmtInt(objects.length)} rows; the JSON report has them all.</p>`;
      return h;
    }
    if (typeof v === 'object') {
      const entries = Object.entries(v);
      if (!entries.length) return '<span class="lead">none</span>';
      return '<table class="kv"><tbody>' + entries.map(([k, x]) => {
        const t = exactTitle(k, x);
        const inner = x !== null && typeof x === 'object' ? generic(k, x) : esc(fmtValue(k, x));
        return `<tr><td>${esc(humanize(k))}</td><td${t ? ` title="${esc(t)}"` : ''}>${inner}</td></tr>`;
      }).join('') + '</tbody></table>';
    }
    const t = exactTitle(key, v);
    return `<span${t ? ` title="${esc(t)}"` : ''}>${esc(fmtValue(key, v))}</span>`;
  }

  function drawGenericKeys(keys) {
    return (M, s) => {
      for (const k of keys) {
        if (keys.length > 1) s.insertAdjacentHTML('beforeend', `<h3>${esc(humanize(k))}</h3>`);
        s.insertAdjacentHTML('beforeend', generic(k, M.run[k]));
      }
    };
  }

  // ---------------------------------------------------------------- the page

  const SECTIONS = [
    { id: 'summary', title: 'Summary', keys: ['command', 'tracker', 'machine_cpus', 'exit', 'totals', 'notes', 'schema_version', 'generator'], draw: drawSummary },
    { id: 'accounting', title: 'Exact accounting', keys: ['accounting'], when: (M) => M.run.accounting != null, lead: 'Figures the kernel counted as each process ended and for ste\'s own cgroup: taskstats as root, the ptrace exit stop and wait4 otherwise. Sources are on the badges.', draw: drawAccounting },
    { id: 'memory', title: 'Memory over time', lead: 'PSS of the live tree at each sampling round, stacked by program or by process; the dot is the sampled maximum, dashed lines are exact peaks. Drag across a chart to zoom in, double-click to zoom out.', draw: drawMemory },
    { id: 'cpu', title: 'CPU over time', lead: 'CPU used by each process between the moments it was known: its start, sampling rounds that read its /proc/PID/stat (10 ms ticks, rates over at least 100 ms) and its exact CPU at its end; spread evenly over each interval. A process read by no round shows from its exact CPU over its life when a source measured it.', draw: drawCpu },
    { id: 'timeline', title: 'Processes over time', lead: 'One row per process, nested under its parent, coloured by program; ticks are execs. Hover or tap a bar for its argv and figures.', draw: drawTimeline },
    { id: 'programs', title: 'By program', when: (M) => (M.V.by_program || []).length > 0, lead: 'The tree by program (argv[0]\'s base name of each process\'s last exec, or what it was forked running), as --by-program prints it: its processes, their CPU and share of the tree\'s, from the first start to the last end, and the largest peak of one of them.', draw: drawPrograms },
    { id: 'ledger', title: 'Process ledger', lead: 'Every process of the tree. Click a column to sort; times are from the launch.', draw: drawLedger },
    { id: 'syscalls', title: 'System calls', keys: ['syscalls'], when: (M) => M.run.syscalls != null, draw: drawSyscalls },
    { id: 'malloc', title: 'malloc', keys: ['malloc'], when: (M) => M.run.malloc != null, lead: 'Every call of the malloc families, per process image, counted by ste\'s shim (LD_PRELOAD); what each image held, its arenas and thresholds.', draw: drawMalloc },
    { id: 'memory_at_peak', title: 'Memory at the peak', keys: ['memory_at_peak'], when: (M) => M.run.memory_at_peak != null, lead: 'What filled the tree\'s memory at its highest sampling round (--maps-at-peak): the largest processes\' mappings by kind, and their pages.', draw: drawPeak },
    { id: '*' },
    { id: 'sampling', title: 'Sampling and overhead', keys: ['sampler', 'overhead'], draw: drawGenericKeys(['sampler', 'overhead']) },
    { id: 'sources', title: 'Where each figure comes from', keys: ['sources'], lead: 'Exact figures were counted by the kernel; sampled ones were read at sampling rounds.', draw: drawSources },
  ];

  function render(V) {
    const M = model(V);
    modelWall = M.wall;
    view.t0 = 0; view.t1 = M.wall;
    const main = document.getElementById('main');
    main.innerHTML = '';
    const claimed = new Set();
    for (const sec of SECTIONS) for (const k of sec.keys || []) claimed.add(k);
    for (const sec of SECTIONS) {
      if (sec.id === '*') {
        for (const k of Object.keys(V.run)) {
          if (claimed.has(k)) continue;
          const s = card(main, 'run-' + k, humanize(k));
          s.dataset.generic = k;
          s.insertAdjacentHTML('beforeend', generic(k, V.run[k]));
          status.generic.push(k);
        }
        continue;
      }
      // A section whose data this run does not have (a run of an older ste) is left out.
      if (sec.when && !sec.when(M)) continue;
      const s = card(main, sec.id, sec.title, sec.lead);
      try {
        sec.draw(M, s);
        status.sections.push(sec.id);
      } catch (err) {
        status.errors.push(sec.id + ': ' + (err && err.stack || err));
        s.insertAdjacentHTML('beforeend', `<p class="error">This section could not be drawn: ${esc(err && err.message || err)}</p>`);
      }
    }
    main.insertAdjacentHTML('beforeend', `<footer class="foot">${esc(V.run.generator)} · Run schema ${esc(V.run.schema_version)} · a self-contained page: no network, nothing to install</footer>`);
    document.title = 'ste: ' + V.run.command.map(argText).join(' ');
    let pending = false;
    let lastW = main.clientWidth;
    new ResizeObserver(() => {
      if (pending || main.clientWidth === lastW) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; lastW = main.clientWidth; view.redraw.forEach((f) => f()); });
    }).observe(main);
  }

  // ---------------------------------------------------------------- theme

  const themes = ['auto', 'light', 'dark'];
  const themeButton = document.getElementById('theme');
  function applyTheme(t) {
    if (t === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = t;
    themeButton.textContent = { auto: '◐ Auto', light: '☀ Light', dark: '☾ Dark' }[t];
    themeButton.title = 'Theme: ' + t + ' (click to change)';
    try { localStorage.setItem('ste-theme', t); } catch (e) { /* storage may be off for files */ }
  }
  let theme = 'auto';
  try { theme = localStorage.getItem('ste-theme') || 'auto'; } catch (e) { /* as above */ }
  if (!themes.includes(theme)) theme = 'auto';
  applyTheme(theme);
  themeButton.addEventListener('click', () => {
    theme = themes[(themes.indexOf(theme) + 1) % themes.length];
    applyTheme(theme);
    view.redraw.forEach((f) => f());
  });
  if (window.matchMedia) {
    window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => view.redraw.forEach((f) => f()));
  }

  // ---------------------------------------------------------------- start

  function finish() {
    status.rendered = true;
    // From the script's start to everything drawn: what a reader waits for (bench/reports.sh).
    status.render_ms = Math.round(performance.now() - started);
    // For whole-page screenshots (the tests take them at this height).
    status.page_height = document.documentElement.scrollHeight;
    const el = document.getElementById('ste-status');
    el.textContent = JSON.stringify(status);
    document.documentElement.dataset.rendered = status.errors.length ? 'with-errors' : 'yes';
  }

  loadData().then((V) => {
    render(V);
    // Sections are drawn after the page loads: honour a link to one (report.html#timeline).
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target) target.scrollIntoView();
    finish();
  }).catch((err) => {
    status.errors.push('cannot draw the report: ' + (err && err.message || err));
    document.getElementById('main').innerHTML = `<p class="error">${esc('The report could not be drawn: ' + (err && err.message || err))}</p>`;
    finish();
  });
})();
