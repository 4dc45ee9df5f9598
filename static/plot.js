// Loss and scale plots with values on hover and keyboard focus, and two runs overlaid on one axis
// (templates/jobs/_result.html, templates/jobs/_plot_compare.html). The server-drawn SVG is the no-JavaScript view:
// this script reads the series that labs/trace/svgplot.py line_chart keeps in the SVG's <metadata> (JSON, never
// markup: nothing of the file is put into the page) and draws the same chart again with the browser's own DOM.
//
// A figure opts in with data-plot-src: a JSON list of {url, run} (one entry for a result, two for a comparison,
// `run` naming each: "A · #12"). Charts with several panels (tp-sweep's) keep their drawing: there is one metadata
// per panel, and their panels are read side by side, not overlaid.
//
// Input. Pointer: the step nearest the pointer is read out. Keyboard: the plot is one tab stop; ← → move a step,
// Home End jump to the ends, PageUp PageDown move a tenth of the run. The readout is a status line that screen
// readers announce: "step 20 · BF16 reference 2.303 · FP8 delayed 2.411".
(function () {
  "use strict";
  if (window.PlotViewer) return;  // a report page includes the script once per result

  var NS = "http://www.w3.org/2000/svg";
  // Okabe-Ito, as labs/trace/svgplot.py PALETTE: a series keeps its colour across the runs of an overlay.
  var PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#8a6d00", "#56B4E9", "#333333"];
  var SUPER = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

  // labs/words.py number(): decimals with separators inside [1e-4, 1e15), else "6.07 × 10⁻⁷"; `digits` significant.
  function number(v, digits) {
    if (v == null || !isFinite(v)) return "no value";
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e-4 && a < 1e15) {
      return new Intl.NumberFormat("en", { maximumSignificantDigits: digits || 4 }).format(v);
    }
    var parts = v.toExponential(Math.max((digits || 4) - 2, 0)).split("e");
    var mant = parts[0].indexOf(".") >= 0 ? parts[0].replace(/0+$/, "").replace(/\.$/, "") : parts[0];
    var exp = String(Number(parts[1])).split("").map(function (c) { return SUPER[c]; }).join("");
    return mant + " × 10" + exp;
  }

  function svg(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }

  function text(parent, x, y, s, attrs) {
    var t = svg("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    t.textContent = s;
    return t;
  }

  function niceTicks(lo, hi) {
    if (hi <= lo) hi = lo + (Math.abs(lo) || 1);
    var raw = (hi - lo) / 4, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var t = Math.floor(lo / step) * step; t <= hi + step / 2 && out.length < 12; t += step) {
      out.push(Math.round(t * 1e10) / 1e10);
    }
    return out;
  }

  function readChart(svgText) {
    var doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
    var metas = doc.querySelectorAll('metadata[data-plot="line-chart"]');
    if (metas.length !== 1) return null;
    return JSON.parse(metas[0].textContent);
  }

  // ---- one plot ------------------------------------------------------------------------------------------
  function Plot(figure) {
    this.figure = figure;
    this.sources = JSON.parse(figure.getAttribute("data-plot-src") || "[]");
    this.index = null;  // the x the readout is on, as an index into this.xs
    this.load();
  }

  Plot.prototype.load = function () {
    var self = this;
    Promise.all(this.sources.map(function (s) {
      return fetch(s.url, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      }).then(readChart);
    })).then(function (charts) {
      if (charts.some(function (c) { return c === null; })) return;  // several panels, or an older file: as drawn
      // two runs may watch different tensors (an amax history): one axis would mix them, so both stay as drawn
      if (charts.some(function (c) { return c.subject !== charts[0].subject; })) return;
      self.setUp(charts);
    }).catch(function () { /* the drawn SVG stays: it says everything this view adds but the hover values */ });
  };

  Plot.prototype.setUp = function (charts) {
    var self = this, first = charts[0], overlay = charts.length > 1;
    this.logY = first.log_y;
    this.xlabel = first.xlabel;
    this.ylabel = first.ylabel;
    this.lines = [];
    charts.forEach(function (c, r) {
      c.series.forEach(function (s, i) {
        self.lines.push({
          name: overlay ? self.sources[r].run + " · " + s.name : s.name,
          colour: PALETTE[i % PALETTE.length],
          // one run solid and the other dashed; without an overlay, the dashes the lab drew
          dash: overlay ? (r === 1 ? "7 4" : "") : (s.dashed ? "6 4" : ""),
          xs: s.xs,
          ys: s.ys,
        });
      });
    });
    var seen = {};
    this.xs = [];
    this.lines.forEach(function (l) {
      l.xs.forEach(function (x) { if (!seen[x]) { seen[x] = true; self.xs.push(x); } });
    });
    this.xs.sort(function (a, b) { return a - b; });

    var box = document.createElement("div");
    box.className = "plotv";
    var title = first.title + (overlay ? ": " + this.sources.map(function (s) { return s.run; }).join(" and ") : "");
    this.host = document.createElement("div");
    this.host.className = "plotv-chart";
    this.host.tabIndex = 0;
    this.host.setAttribute("role", "group");
    this.host.setAttribute("aria-label", title + ". Use the left and right arrow keys to read each " +
      (first.xlabel || "point") + "'s values.");
    var legend = document.createElement("ul");
    legend.className = "plotv-legend small";
    this.lines.forEach(function (l) {
      var li = document.createElement("li"), key = svg("svg", { width: 26, height: 10, "aria-hidden": "true" });
      svg("line", { x1: 1, x2: 25, y1: 5, y2: 5, stroke: l.colour, "stroke-width": 2.5, "stroke-dasharray": l.dash },
        key);
      li.appendChild(key);
      li.appendChild(document.createTextNode(" " + l.name));
      legend.appendChild(li);
    });
    this.readout = document.createElement("p");
    this.readout.className = "plotv-readout small";
    this.readout.setAttribute("role", "status");
    this.readout.setAttribute("aria-live", "polite");
    this.readout.textContent = "Point at the plot, or focus it and press ← →, to read each " +
      (first.xlabel || "point") + "'s values.";
    var heading = document.createElement("p");
    heading.className = "plotv-title";
    heading.textContent = title;
    box.append(heading, this.host, legend, this.readout);
    this.figure.querySelectorAll(".scroll-box, .scroll-hint").forEach(function (e) { e.hidden = true; });
    this.figure.insertBefore(box, this.figure.querySelector("figcaption"));

    this.host.addEventListener("pointermove", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("pointerdown", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("keydown", function (e) { self.key(e); });
    this.host.addEventListener("focus", function () { if (self.index === null) self.select(0); });
    if (window.ResizeObserver) new ResizeObserver(function () { self.draw(); }).observe(this.host);
    this.draw();
  };

  Plot.prototype.draw = function () {
    var self = this, width = Math.max(280, Math.round(this.host.clientWidth || 600));
    var height = width < 520 ? 220 : 300, logY = this.logY;
    var ty = function (v) { return logY ? Math.log10(v) : v; };
    var ok = function (v) { return v != null && isFinite(v) && (!logY || v > 0); };
    var xs = this.xs.length ? this.xs : [0, 1], ys = [];
    this.lines.forEach(function (l) { l.ys.forEach(function (v) { if (ok(v)) ys.push(ty(v)); }); });
    if (!ys.length) ys = [0, 1];
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var yt = logY ? [] : niceTicks(y0, y1);
    if (logY) for (var k = Math.floor(y0); k <= Math.ceil(Math.max(y1, y0 + 1)); k++) yt.push(k);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
    if (y1 <= y0) y1 = y0 + 1;
    var labels = yt.map(function (t) { return number(logY ? Math.pow(10, t) : t, 3); });
    var left = 30 + 6.5 * Math.max.apply(null, labels.map(function (s) { return s.length; }));
    var top = 10, bottom = 40, right = 14, pw = width - left - right, ph = height - top - bottom;
    var x0 = xs[0], x1 = xs[xs.length - 1] > x0 ? xs[xs.length - 1] : x0 + 1;
    this.px = function (x) { return left + (x - x0) / (x1 - x0) * pw; };
    this.py = function (v) { return top + ph - (ty(v) - y0) / (y1 - y0) * ph; };
    this.ok = ok;

    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "font-family": "system-ui, sans-serif", "font-size": 12, "aria-hidden": "true" });
    svg("rect", { width: width, height: height, fill: "#fff" }, root);
    yt.forEach(function (t, i) {
      var y = top + ph - (t - y0) / (y1 - y0) * ph;
      svg("line", { x1: left, x2: left + pw, y1: y, y2: y, stroke: "#ddd" }, root);
      text(root, left - 6, y + 4, labels[i], { "text-anchor": "end", fill: "#333" });
    });
    niceTicks(x0, x1).filter(function (t) { return t >= x0 && t <= x1; }).forEach(function (t) {
      var x = self.px(t);
      svg("line", { x1: x, x2: x, y1: top + ph, y2: top + ph + 4, stroke: "#333" }, root);
      text(root, x, top + ph + 17, number(t, 3), { "text-anchor": "middle", fill: "#333" });
    });
    svg("rect", { x: left, y: top, width: pw, height: ph, fill: "none", stroke: "#333" }, root);
    text(root, left + pw / 2, height - 6, this.xlabel, { "text-anchor": "middle", fill: "#111" });
    text(root, 0, 0, this.ylabel + (logY ? " (log)" : ""), { "text-anchor": "middle", fill: "#111",
      transform: "translate(12 " + (top + ph / 2) + ") rotate(-90)" });
    this.lines.forEach(function (l) {
      var d = "", pen = "M";
      l.xs.forEach(function (x, i) {
        if (!ok(l.ys[i])) { pen = "M"; return; }  // a gap, as the drawn chart leaves it
        d += pen + self.px(x).toFixed(1) + "," + self.py(l.ys[i]).toFixed(1) + " ";
        pen = "L";
      });
      svg("path", { d: d, fill: "none", stroke: l.colour, "stroke-width": 2, "stroke-dasharray": l.dash }, root);
    });
    this.cursor = svg("g", { "pointer-events": "none" }, root);
    this.plotTop = top;
    this.plotBottom = top + ph;
    this.host.replaceChildren(root);
    if (this.index !== null) this.select(this.index);
  };

  Plot.prototype.pointAt = function (clientX) {
    var r = this.host.getBoundingClientRect(), x = clientX - r.left, best = 0, self = this;
    this.xs.forEach(function (v, i) {
      if (Math.abs(self.px(v) - x) < Math.abs(self.px(self.xs[best]) - x)) best = i;
    });
    this.select(best);
  };

  Plot.prototype.key = function (e) {
    var n = this.xs.length, i = this.index === null ? 0 : this.index, page = Math.max(1, Math.round(n / 10));
    var moves = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: n - 1, PageUp: i - page, PageDown: i + page };
    if (!(e.key in moves)) return;
    e.preventDefault();
    this.select(Math.max(0, Math.min(n - 1, moves[e.key])));
  };

  Plot.prototype.select = function (i) {
    var self = this, x = this.xs[i], parts = [];
    this.index = i;
    this.cursor.replaceChildren();
    svg("line", { x1: this.px(x), x2: this.px(x), y1: this.plotTop, y2: this.plotBottom, stroke: "#555",
      "stroke-dasharray": "2 3" }, this.cursor);
    this.lines.forEach(function (l) {
      var j = l.xs.indexOf(x), v = j >= 0 ? l.ys[j] : undefined;
      if (v === undefined) return;
      parts.push(l.name + " " + (v === null ? "no value (not finite)" : number(v, 4)));
      if (self.ok(v)) {
        svg("circle", { cx: self.px(x), cy: self.py(v), r: 4.5, fill: "#fff", stroke: l.colour, "stroke-width": 2 },
          self.cursor);
      }
    });
    this.readout.textContent = (this.xlabel || "x") + " " + number(x, 6) + " · " + parts.join(" · ");
  };

  function start() {
    document.querySelectorAll("figure[data-plot-src]").forEach(function (f) {
      if (f.plotViewer) return;
      f.plotViewer = new Plot(f);
    });
  }

  window.PlotViewer = { start: start, number: number };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  // results that arrive by htmx (a job card finishing, a comparison chosen) carry figures too
  document.addEventListener("htmx:afterSettle", start);
})();
