// locksuit's HTML report: draws each process's timeline from the data the
// page carries, and makes the stack tables sortable. No network, no
// libraries. Periods shorter than a pixel are merged per pixel column (the
// class that took most of it gives the colour); zoom in and they are exact.
"use strict";
(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const LABEL = 180, LANE = 18, GAP = 5, AXIS = 24, MIN_SPAN = 1000;
  const tip = document.getElementById("tooltip");

  function fmt(ns) {
    if (ns < 1000) return Math.round(ns) + " ns";
    if (ns < 1e6) return (ns / 1e3).toFixed(2) + " µs";
    if (ns < 1e9) return (ns / 1e6).toFixed(2) + " ms";
    return (ns / 1e9).toFixed(2) + " s";
  }

  async function inflate(b64) {
    const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // The packed periods into per-lane columns (see html.rs: TimelineData).
  function decode(bytes, count, lanes) {
    const cols = lanes.map(() => ({ start: [], end: [], cls: [], stack: [], rel: [], relAt: [], lock: [], timedOut: [], held: [] }));
    let i = 0;
    const next = () => {
      let v = 0, mul = 1, b;
      do { b = bytes[i++]; v += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
      return v;
    };
    let lastLane = -1, lastStart = 0;
    for (let n = 0; n < count; n++) {
      const lane = next();
      const start = (lane === lastLane ? lastStart : 0) + next();
      lastLane = lane; lastStart = start;
      const c = cols[lane];
      c.start.push(start);
      c.end.push(start + next());
      c.cls.push(next()); c.stack.push(next()); c.rel.push(next());
      c.relAt.push(next()); c.lock.push(next()); c.timedOut.push(next()); c.held.push(next());
    }
    return cols;
  }

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVGNS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // A round step of about `span / n`.
  function step(span, n) {
    const raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  class Timeline {
    constructor(host, data, cols) {
      this.host = host; this.data = data; this.cols = cols;
      this.end = Math.max(1, ...data.lanes.map((l) => l.end));
      this.v0 = 0; this.v1 = this.end;
      this.showPath = true;
      this.svg = el("svg", { role: "img", "aria-label": "timeline of every thread" });
      host.appendChild(this.svg);
      this.zoom = document.createElement("div");
      this.zoom.className = "zoom";
      host.appendChild(this.zoom);
      this.listen();
      this.draw();
    }

    laneY(i) { return AXIS + i * (LANE + GAP); }

    tipText(lane, j) {
      const d = this.data, c = this.cols[lane];
      const s = d.stacks[c.stack[j]] || { api: "?", line: "?", frames: [] };
      const lines = [
        `${d.classes[c.cls[j]]}: ${s.api} for ${fmt(c.end[j] - c.start[j])}${c.timedOut[j] ? " (timed out)" : ""}`,
        `thread ${d.lanes[lane].name}, from ${fmt(c.start[j])} to ${fmt(c.end[j])}`,
      ];
      if (c.lock[j]) lines.push(`waited for lock ${d.locks[c.lock[j] - 1]}`);
      // The blocker is the thread that held the lock when the wait began,
      // as in the report's "who blocks whom"; the last releaser may differ.
      const held = c.held[j] || c.rel[j];
      if (held) {
        const at = c.relAt[j] && held === c.rel[j] ? ` (taken at ${d.lines[c.relAt[j] - 1]})` : "";
        lines.push(`held by thread ${d.lanes[held - 1].name}${at} when this one began waiting`);
      }
      if (c.rel[j]) {
        const at = c.relAt[j] ? ` (taken at ${d.lines[c.relAt[j] - 1]})` : "";
        lines.push(c.rel[j] === held
          ? `which released it to this one`
          : `released to this one by thread ${d.lanes[c.rel[j] - 1].name}${at}, which took it meanwhile`);
      }
      lines.push(`at ${s.line}`);
      for (const f of s.frames) lines.push(`  ${f}`);
      return lines.join("\n");
    }

    draw() {
      const d = this.data, svg = this.svg;
      const width = Math.max(400, this.host.clientWidth);
      const plot = width - LABEL - 10;
      const height = this.laneY(d.lanes.length) + 20; // room for the span shown below
      svg.setAttribute("width", width);
      svg.setAttribute("height", height);
      svg.replaceChildren();
      const v0 = this.v0, v1 = this.v1, scale = plot / (v1 - v0);
      const x = (t) => LABEL + (t - v0) * scale;
      const axis = el("g", { class: "axis" }, svg);
      const st = step(v1 - v0, 8);
      for (let t = Math.ceil(v0 / st) * st; t <= v1; t += st) {
        el("line", { x1: x(t), x2: x(t), y1: AXIS - 6, y2: height }, axis);
        if (x(t) + 60 < width) el("text", { x: x(t) + 2, y: AXIS - 9 }, axis).textContent = fmt(t);
      }
      d.lanes.forEach((lane, i) => {
        const y = this.laneY(i);
        const g = el("g", { class: "lane", "data-tid": lane.tid }, svg);
        el("text", { class: "lane-label", x: 4, y: y + LANE - 5 }, g).textContent = lane.name;
        const r0 = Math.max(lane.start, v0), r1 = Math.min(lane.end, v1);
        if (r1 > r0) {
          el("rect", { class: "running", x: x(r0), y, width: Math.max(1, (r1 - r0) * scale), height: LANE }, g)
            .setAttribute("data-tip", `thread ${lane.name}: alive from ${fmt(lane.start)} to ${fmt(lane.end)}; grey where it was not blocked`);
        }
        this.drawPeriods(g, i, y, x, 1 / scale);
      });
      if (this.showPath && d.path && d.path.length) this.drawPath(x, scale);
      this.zoom.textContent = `${fmt(v0)} – ${fmt(v1)}`;
    }

    pathTip(s) {
      const d = this.data, [lane, start, end, kind, lock, line, ender, enderLine] = s;
      const who = `thread ${d.lanes[lane].name}`, lk = lock ? `lock ${d.locks[lock - 1]}` : "an unnamed lock";
      const span = `for ${fmt(end - start)} (from ${fmt(start)} to ${fmt(end)})`;
      const at = line ? ` at ${d.path_lines[line - 1]}` : "";
      const by = ender ? `thread ${d.lanes[ender - 1].name}` : "";
      let what;
      switch (d.path_kinds[kind]) {
        case "running": what = `${who} running ${span}`; break;
        case "holding": what = `${who} in a critical section of ${lk} ${span}, until it released it to the next thread on the path`; break;
        case "waiting":
          what = `${who} waiting for ${lk}${at} ${span}, ` + (ender
            ? `until released by ${by}${enderLine ? ` (taken at ${d.path_lines[enderLine - 1]})` : ""}: the path goes on in ${by}`
            : "whose releaser was not recorded: the path goes on in this thread");
          break;
        case "join": what = `${who} waiting${at} to join ` + (ender ? `${by} ${span}: the path goes on in ${by}` : `a thread ${span}`); break;
        default: what = `${who} in a condition wait${at} ${span} (its notifier is not followed)`;
      }
      return `critical path: ${what}`;
    }

    // The critical path over the lanes: an outlined band over each
    // segment, a strip in the gap above it coloured by what it did, and a
    // connector where the path goes on in another thread.
    drawPath(x, scale) {
      const d = this.data, v0 = this.v0, v1 = this.v1;
      const g = el("g", { class: "critical-path" }, this.svg);
      let prev = null;
      for (const s of d.path) {
        const [lane, start, end, kind] = s;
        if (prev && prev[0] !== lane && start >= v0 && start <= v1) {
          const y0 = this.laneY(prev[0]) + LANE / 2, y1 = this.laneY(lane) + LANE / 2;
          el("line", { class: "path-jump", x1: x(start), x2: x(start), y1: y0, y2: y1 }, g);
        }
        prev = s;
        if (end < v0 || start > v1) continue;
        const x0 = x(Math.max(start, v0)), w = Math.max(1, x(Math.min(end, v1)) - x0), y = this.laneY(lane);
        el("rect", { class: "path-band", x: x0, y: y - 1, width: w, height: LANE + 2 }, g);
        el("rect", { class: `path-seg path-${d.path_kinds[kind]}`, "data-kind": d.path_kinds[kind], x: x0, y: y - GAP + 1, width: w, height: GAP - 1 }, g)
          .setAttribute("data-tip", this.pathTip(s));
      }
    }

    drawPeriods(g, lane, y, x, pixelNs) {
      const d = this.data, c = this.cols[lane], v0 = this.v0, v1 = this.v1;
      // First period that ends after v0 (a lane's periods do not overlap).
      let lo = 0, hi = c.start.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (c.start[mid] < v0) lo = mid + 1; else hi = mid; }
      if (lo > 0 && c.end[lo - 1] > v0) lo--;
      let bucket = null;
      const flush = () => {
        if (!bucket) return;
        let best = 0, bestNs = -1;
        const parts = [];
        for (const k in bucket.ns) {
          if (bucket.ns[k] > bestNs) { best = +k; bestNs = bucket.ns[k]; }
          parts.push(`${d.classes[k]} ${fmt(bucket.ns[k])}`);
        }
        // As opaque as the share of the pixel's time spent blocked, over
        // the grey of running.
        let blocked = 0;
        for (const k in bucket.ns) blocked += bucket.ns[k];
        const opacity = Math.max(0.2, Math.min(1, blocked / pixelNs));
        el("rect", {
          class: "period aggregate", "data-class": d.classes[best], x: bucket.px, y, width: 1, height: LANE,
          fill: d.colours[best], "fill-opacity": opacity.toFixed(2), "data-tip": `${bucket.n} periods in this pixel, ${fmt(bucket.from)} to ${fmt(bucket.to)}: ${parts.join(", ")}; zoom in to see each`,
        }, g);
        bucket = null;
      };
      for (let j = lo; j < c.start.length && c.start[j] < v1; j++) {
        const x0 = x(Math.max(c.start[j], v0)), x1 = x(Math.min(c.end[j], v1));
        if (x1 - x0 >= 1) {
          flush();
          const r = el("rect", {
            class: "period", "data-class": d.classes[c.cls[j]], "data-lane": lane, "data-index": j,
            x: x0, y, width: x1 - x0, height: LANE, fill: d.colours[c.cls[j]],
          }, g);
          if (c.rel[j]) r.setAttribute("data-released-by", d.lanes[c.rel[j] - 1].tid);
          r.setAttribute("data-tip", this.tipText(lane, j));
          continue;
        }
        const px = Math.floor(x0);
        if (bucket && bucket.px !== px) flush();
        if (!bucket) bucket = { px, n: 0, ns: {}, from: c.start[j], to: c.end[j] };
        bucket.n++;
        bucket.to = c.end[j];
        bucket.ns[c.cls[j]] = (bucket.ns[c.cls[j]] || 0) + (c.end[j] - c.start[j]);
      }
      flush();
    }

    // The handoff into a lock wait: from the thread that released the lock
    // to the one it let in, at the moment of the release.
    handoff(rect) {
      const lane = +rect.dataset.lane, j = +rect.dataset.index, c = this.cols[lane];
      if (!c.rel[j]) return;
      const from = c.rel[j] - 1;
      const plot = Math.max(400, this.host.clientWidth) - LABEL - 10;
      const xe = LABEL + (c.end[j] - this.v0) * (plot / (this.v1 - this.v0));
      const y0 = this.laneY(from) + LANE / 2, y1 = this.laneY(lane) + LANE / 2;
      el("path", { class: "handoff", d: `M${xe},${y0} L${xe},${y1} m-4,${y1 > y0 ? -6 : 6} l4,${y1 > y0 ? 6 : -6} l4,${y1 > y0 ? -6 : 6}` }, this.svg);
    }

    listen() {
      const svg = this.svg;
      svg.addEventListener("mousemove", (e) => {
        const t = e.target.closest("[data-tip]");
        if (!t) { tip.hidden = true; return; }
        tip.textContent = t.dataset.tip;
        tip.hidden = false;
        const left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
        const top = e.clientY + 14 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 8 : e.clientY + 14;
        tip.style.left = left + "px";
        tip.style.top = top + "px";
      });
      svg.addEventListener("mouseover", (e) => {
        if (e.target.classList.contains("period") && e.target.dataset.releasedBy) this.handoff(e.target);
      });
      svg.addEventListener("mouseout", (e) => {
        if (e.target.classList.contains("period")) svg.querySelectorAll(".handoff").forEach((h) => h.remove());
      });
      svg.addEventListener("mouseleave", () => { tip.hidden = true; });
      this.host.addEventListener("wheel", (e) => {
        e.preventDefault();
        const plot = Math.max(400, this.host.clientWidth) - LABEL - 10;
        const at = this.v0 + Math.max(0, e.offsetX - LABEL) * (this.v1 - this.v0) / plot;
        const f = Math.exp(e.deltaY * 0.002);
        const span = Math.min(this.end, Math.max(MIN_SPAN, (this.v1 - this.v0) * f));
        this.v0 = Math.max(0, Math.min(this.end - span, at - (at - this.v0) * span / (this.v1 - this.v0)));
        this.v1 = this.v0 + span;
        this.later();
      }, { passive: false });
      let drag = null;
      this.host.addEventListener("mousedown", (e) => { drag = { x: e.clientX, v0: this.v0, v1: this.v1 }; this.host.classList.add("dragging"); });
      window.addEventListener("mouseup", () => { drag = null; this.host.classList.remove("dragging"); });
      window.addEventListener("mousemove", (e) => {
        if (!drag) return;
        const plot = Math.max(400, this.host.clientWidth) - LABEL - 10;
        const span = drag.v1 - drag.v0;
        const shift = (drag.x - e.clientX) * span / plot;
        this.v0 = Math.max(0, Math.min(this.end - span, drag.v0 + shift));
        this.v1 = this.v0 + span;
        this.later();
      });
      this.host.addEventListener("dblclick", () => { this.v0 = 0; this.v1 = this.end; this.later(); });
      window.addEventListener("resize", () => this.later());
    }

    later() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }
  }

  function sortable(table) {
    const heads = [...table.tHead.rows[0].cells];
    heads.forEach((th, col) => th.addEventListener("click", () => {
      const down = th.getAttribute("aria-sort") !== "descending";
      heads.forEach((h) => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      const number = th.dataset.type === "number";
      const key = (row) => number ? +row.cells[col].dataset.value : row.cells[col].textContent;
      const rows = [...table.tBodies[0].rows].sort((a, b) => {
        const ka = key(a), kb = key(b);
        const order = number ? ka - kb : String(ka).localeCompare(String(kb));
        return down ? -order : order;
      });
      table.tBodies[0].append(...rows);
    }));
  }

  async function main() {
    document.querySelectorAll("table.sortable").forEach(sortable);
    for (const script of document.querySelectorAll("script.timeline-data")) {
      const host = document.querySelector(`.timeline[data-process="${script.dataset.process}"]`);
      try {
        const data = JSON.parse(script.textContent);
        const bytes = data.count ? await inflate(data.periods) : new Uint8Array();
        const t = new Timeline(host, data, decode(bytes, data.count, data.lanes));
        host.timeline = t;
        const toggle = document.querySelector(`.path-toggle[data-process="${script.dataset.process}"]`);
        if (toggle) toggle.addEventListener("change", () => { t.showPath = toggle.checked; t.later(); });
      } catch (err) {
        host.textContent = "The timeline could not be drawn: " + err;
        host.dataset.failed = "yes";
      }
    }
    document.body.dataset.renderMs = performance.now().toFixed(0);
    document.body.dataset.rendered = "yes";
  }
  main();
})();
