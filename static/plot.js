// Loss and scale plots with values on hover and keyboard focus, and two runs overlaid on one axis
// (templates/jobs/_result.html, templates/jobs/_plot_compare.html). The server-drawn SVG is the no-JavaScript view:
// this script reads the series that labs/trace/svgplot.py line_chart keeps in the SVG's <metadata> (JSON, never
// markup: nothing of the file is put into the page) and draws the same chart again with the browser's own DOM.
//
// A figure opts in with data-plot-src: a JSON list of {url, run} (one entry for a result, two for a comparison,
// `run` naming each: "A · #12"). A file with several panels (tp-sweep's measured and predicted charts, one metadata
// each) is redrawn as that many charts one under another, each with its legend under it, so a phone reads every
// line's name without swiping; panels are never overlaid with another run's.
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

  // Every panel a file holds (tp-sweep's chart stacks two: measured and predicted), each {title, series, ...}.
  function readPanels(svgText) {
    var doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
    var metas = doc.querySelectorAll('metadata[data-plot="line-chart"]');
    return Array.prototype.map.call(metas, function (m) { return JSON.parse(m.textContent); });
  }

  // Hollow markers, as labs/trace/svgplot.py draws with shapes=True: lines that coincide stay apart.
  var SHAPES = ["circle", "square", "triangle", "diamond"];
  function marker(parent, shape, x, y, colour) {
    var r = 4.5, a = { fill: "#fff", stroke: colour, "stroke-width": 1.8 };
    if (shape === "circle") return svg("circle", Object.assign({ cx: x, cy: y, r: r }, a), parent);
    if (shape === "square") return svg("rect", Object.assign({ x: x - r, y: y - r, width: 2 * r, height: 2 * r }, a), parent);
    var pts = shape === "triangle" ? [[x, y - r - 1], [x + r + 1, y + r], [x - r - 1, y + r]]
      : [[x, y - r - 1], [x + r + 1, y], [x, y + r + 1], [x - r - 1, y]];
    return svg("polygon", Object.assign({ points: pts.map(function (p) { return p.join(","); }).join(" ") }, a), parent);
  }

  // ---- one figure: loads its sources, then one Panel per chart to show ------------------------------------
  function Plot(figure) {
    this.figure = figure;
    this.sources = JSON.parse(figure.getAttribute("data-plot-src") || "[]");
    this.load();
  }

  Plot.prototype.load = function () {
    var self = this;
    Promise.all(this.sources.map(function (s) {
      return fetch(s.url, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      }).then(readPanels);
    })).then(function (files) {
      var specs = self.specs(files);
      if (specs) self.setUp(specs);
    }).catch(function () { /* the drawn SVG stays: it says everything this view adds but the hover values */ });
  };

  // What to draw: a file's panels one under another, or two runs' one-panel charts overlaid on one axis. null
  // (the drawing stays) for a file without series, or two runs whose charts cannot share an axis.
  Plot.prototype.specs = function (files) {
    var sources = this.sources;
    if (files.some(function (f) { return f.length === 0; })) return null;
    var spec = function (c, lines, title) {
      return { title: title, xlabel: c.xlabel, ylabel: c.ylabel, logY: c.log_y, logX: c.log_x, lines: lines };
    };
    var linesOf = function (c, run, r, overlay) {
      var few = c.series.every(function (s) { return s.xs.length <= 16; });
      return c.series.map(function (s, i) {
        return {
          name: overlay ? run + " · " + s.name : s.name,
          colour: PALETTE[i % PALETTE.length],
          // one run solid and the other dashed; without an overlay, the dashes the lab drew
          dash: overlay ? (r === 1 ? "7 4" : "") : (s.dashed ? "6 4" : ""),
          shape: few ? SHAPES[i % SHAPES.length] : null,
          xs: s.xs,
          ys: s.ys,
        };
      });
    };
    if (files.length === 1) {
      return files[0].map(function (c) { return spec(c, linesOf(c, "", 0, false), c.title); });
    }
    // two runs may watch different tensors (an amax history): one axis would mix them, so both stay as drawn
    if (files.some(function (f) { return f.length !== 1 || f[0].subject !== files[0][0].subject; })) return null;
    var lines = [];
    files.forEach(function (f, r) { lines = lines.concat(linesOf(f[0], sources[r].run, r, true)); });
    var title = files[0][0].title + ": " + sources.map(function (s) { return s.run; }).join(" and ");
    return [spec(files[0][0], lines, title)];
  };

  Plot.prototype.setUp = function (specs) {
    var self = this, box = document.createElement("div");
    box.className = "plotv";
    this.panels = specs.map(function (sp) { return new Panel(sp, box); });
    // stacked panels share their x axis and left margin, so a TP degree sits at one x in every panel
    var seen = {};
    this.xs = [];
    this.panels.forEach(function (p) {
      p.xs.forEach(function (x) { if (!seen[x]) { seen[x] = true; self.xs.push(x); } });
    });
    this.xs.sort(function (a, b) { return a - b; });
    this.figure.querySelectorAll(".scroll-box, .scroll-hint").forEach(function (e) { e.hidden = true; });
    this.figure.insertBefore(box, this.figure.querySelector("figcaption"));
    this.draw();
    if (window.ResizeObserver) new ResizeObserver(function () { self.draw(); }).observe(box);
  };

  Plot.prototype.draw = function () {
    var self = this, left = Math.max.apply(null, this.panels.map(function (p) { return p.scaleY().left; }));
    this.panels.forEach(function (p) { p.draw(self.xs, left); });
  };

  // ---- one chart: its axis, lines, HTML legend under it and a readout ---------------------------------------
  function Panel(spec, box) {
    var self = this;
    Object.assign(this, spec);
    this.index = null;  // the x the readout is on, as an index into this.xs
    var seen = {};
    this.xs = [];
    this.lines.forEach(function (l) {
      l.xs.forEach(function (x) { if (!seen[x]) { seen[x] = true; self.xs.push(x); } });
    });
    this.xs.sort(function (a, b) { return a - b; });
    var heading = document.createElement("p");
    heading.className = "plotv-title";
    heading.textContent = spec.title;
    this.host = document.createElement("div");
    this.host.className = "plotv-chart";
    this.host.tabIndex = 0;
    this.host.setAttribute("role", "group");
    this.host.setAttribute("aria-label", spec.title + ". Use the left and right arrow keys to read each " +
      (spec.xlabel || "point") + "'s values.");
    var legend = document.createElement("ul");
    legend.className = "plotv-legend small";
    this.lines.forEach(function (l) {
      var li = document.createElement("li"), key = svg("svg", { width: 30, height: 12, "aria-hidden": "true" });
      svg("line", { x1: 1, x2: 29, y1: 6, y2: 6, stroke: l.colour, "stroke-width": 2.5, "stroke-dasharray": l.dash },
        key);
      if (l.shape) marker(key, l.shape, 15, 6, l.colour);
      li.appendChild(key);
      li.appendChild(document.createTextNode(" " + l.name));
      legend.appendChild(li);
    });
    this.readout = document.createElement("p");
    this.readout.className = "plotv-readout small";
    this.readout.setAttribute("role", "status");
    this.readout.setAttribute("aria-live", "polite");
    this.readout.textContent = "Point at the plot, or focus it and press ← →, to read each " +
      (spec.xlabel || "point") + "'s values.";
    box.append(heading, this.host, legend, this.readout);
    this.host.addEventListener("pointermove", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("pointerdown", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("keydown", function (e) { self.key(e); });
    this.host.addEventListener("focus", function () { if (self.index === null) self.select(0); });
  }

  // The y axis: its range, ticks and labels, and the left margin its labels need.
  Panel.prototype.scaleY = function () {
    var logY = this.logY, ys = [];
    var ty = function (v) { return logY ? Math.log10(v) : v; };
    var ok = function (v) { return v != null && isFinite(v) && (!logY || v > 0); };
    this.lines.forEach(function (l) { l.ys.forEach(function (v) { if (ok(v)) ys.push(ty(v)); }); });
    if (!ys.length) ys = [0, 1];
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var yt = logY ? [] : niceTicks(y0, y1);
    if (logY) for (var k = Math.floor(y0); k <= Math.ceil(Math.max(y1, y0 + 1)); k++) yt.push(k);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
    if (y1 <= y0) y1 = y0 + 1;
    var labels = yt.map(function (t) { return number(logY ? Math.pow(10, t) : t, 3); });
    var left = 30 + 6.5 * Math.max.apply(null, labels.map(function (s) { return s.length; }));
    return { y0: y0, y1: y1, yt: yt, labels: labels, left: left, ty: ty, ok: ok };
  };

  // `xs` and `left`: the x values and left margin shared with the figure's other panels.
  Panel.prototype.draw = function (xs, left) {
    var self = this, width = Math.max(280, Math.round(this.host.clientWidth || 600));
    var height = width < 520 ? 220 : 300, logX = this.logX, sy = this.scaleY();
    var ty = sy.ty, ok = sy.ok, y0 = sy.y0, y1 = sy.y1, yt = sy.yt, labels = sy.labels;
    var tx = function (v) { return logX ? Math.log10(v) : v; };
    xs = xs && xs.length ? xs : [0, 1];
    var top = 10, bottom = 40, right = 14, pw = width - left - right, ph = height - top - bottom;
    var x0 = tx(xs[0]), x1 = tx(xs[xs.length - 1]) > x0 ? tx(xs[xs.length - 1]) : x0 + 1;
    var pad = logX ? (x1 - x0) * 0.04 : 0;  // a sweep's first and last degree off the frame, as drawn
    x0 -= pad; x1 += pad;
    this.px = function (x) { return left + (tx(x) - x0) / (x1 - x0) * pw; };
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
    // log x (TP degrees 1, 2, 4, 8): a tick at each value the runs have; linear x: round steps
    var xt = logX ? xs : niceTicks(xs[0], xs[xs.length - 1]).filter(function (t) {
      return t >= xs[0] && t <= xs[xs.length - 1];
    });
    xt.forEach(function (t) {
      var x = self.px(t);
      svg("line", { x1: x, x2: x, y1: top + ph, y2: top + ph + 4, stroke: "#333" }, root);
      text(root, x, top + ph + 17, number(t, 3), { "text-anchor": "middle", fill: "#333" });
    });
    svg("rect", { x: left, y: top, width: pw, height: ph, fill: "none", stroke: "#333" }, root);
    text(root, left + pw / 2, height - 6, this.xlabel, { "text-anchor": "middle", fill: "#111" });
    text(root, 0, 0, this.ylabel + (this.logY ? " (log)" : ""), { "text-anchor": "middle", fill: "#111",
      transform: "translate(12 " + (top + ph / 2) + ") rotate(-90)" });
    this.lines.forEach(function (l) {
      var d = "", pen = "M";
      l.xs.forEach(function (x, i) {
        if (!ok(l.ys[i])) { pen = "M"; return; }  // a gap, as the drawn chart leaves it
        d += pen + self.px(x).toFixed(1) + "," + self.py(l.ys[i]).toFixed(1) + " ";
        pen = "L";
      });
      svg("path", { d: d, fill: "none", stroke: l.colour, "stroke-width": 2, "stroke-dasharray": l.dash }, root);
      if (l.shape) {
        l.xs.forEach(function (x, i) { if (ok(l.ys[i])) marker(root, l.shape, self.px(x), self.py(l.ys[i]), l.colour); });
      }
    });
    this.cursor = svg("g", { "pointer-events": "none" }, root);
    this.plotTop = top;
    this.plotBottom = top + ph;
    this.host.replaceChildren(root);
    if (this.index !== null) this.select(this.index);
  };

  Panel.prototype.pointAt = function (clientX) {
    var r = this.host.getBoundingClientRect(), x = clientX - r.left, best = 0, self = this;
    this.xs.forEach(function (v, i) {
      if (Math.abs(self.px(v) - x) < Math.abs(self.px(self.xs[best]) - x)) best = i;
    });
    this.select(best);
  };

  Panel.prototype.key = function (e) {
    var n = this.xs.length, i = this.index === null ? 0 : this.index, page = Math.max(1, Math.round(n / 10));
    var moves = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: n - 1, PageUp: i - page, PageDown: i + page };
    if (!(e.key in moves)) return;
    e.preventDefault();
    this.select(Math.max(0, Math.min(n - 1, moves[e.key])));
  };

  Panel.prototype.select = function (i) {
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
