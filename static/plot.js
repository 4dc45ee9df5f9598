// Loss and scale plots with values on hover and keyboard focus, and two runs overlaid on one axis
// (templates/jobs/_result.html, templates/jobs/_plot_compare.html). The server-drawn SVG is the no-JavaScript view:
// this script draws the same chart again with the browser's own DOM, at the width the page has.
//
// What to draw comes from the server (app/services/jobs/charts.py, planned by labs/trace/chart.py, the code that
// drew the SVG): axis ranges in axis units, ticks with their labels, each line's colour, dashes, marker shape and
// size, its points and the words its readout says. This script maps axis units to pixels and handles input; it
// chooses no tick, formats no number and picks no colour. A figure opts in with data-plot-src, the URL of that
// plan: a result's chart (`?as=chart`), or two runs' chart on one axis (`?as=chart&with=ID`). A file with several
// panels (tp-sweep's measured and predicted charts) is drawn as that many charts one under another, each with its
// legend under it, so a phone reads every line's name without swiping.
//
// Input. Pointer: the x nearest the pointer is read out. Keyboard: the plot is one tab stop; ← → move a step,
// Home End jump to the ends, PageUp PageDown move a tenth of the run. The readout is a status line that screen
// readers announce: "step 20 · BF16 reference 2.303 · FP8 delayed 2.411".
(function () {
  "use strict";
  if (window.PlotViewer) return;  // a report page includes the script once per result

  var NS = "http://www.w3.org/2000/svg";

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

  // A plan's marker at (x, y): its outline, given about the origin, moved there (as labs/trace/svgplot.py draws it).
  function marker(parent, m, x, y, colour, cls) {
    var g = svg("g", { "class": cls || "marker", "data-shape": m.shape, transform: "translate(" + x.toFixed(1) + " " +
      y.toFixed(1) + ")" }, parent);
    var paint = { fill: "none", stroke: colour, "stroke-width": m.stroke_width };
    if (m.shape === "circle") svg("circle", Object.assign({ r: m.r }, paint), g);
    else svg("polygon", Object.assign({ points: m.points.map(function (p) { return p.join(","); }).join(" ") }, paint), g);
    return g;
  }

  function ring(parent, r, x, y, cls) {
    return svg("circle", { "class": cls || "ring", cx: x, cy: y, r: r.r, fill: "none", stroke: r.colour,
      "stroke-width": r.stroke_width }, parent);
  }

  // ---- one figure: loads its plan, then one Panel per chart ------------------------------------------------
  function Plot(figure) {
    this.figure = figure;
    this.src = figure.getAttribute("data-plot-src");
    this.load();
  }

  Plot.prototype.load = function () {
    var self = this;
    fetch(this.src, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (data) {
      if (data.panels && data.panels.length) self.setUp(data.panels);
    }).catch(function () { /* the drawn SVG stays: it says everything this view adds but the hover values */ });
  };

  Plot.prototype.setUp = function (plans) {
    var self = this, box = document.createElement("div");
    box.className = "plotv";
    this.panels = plans.map(function (plan) { return new Panel(plan, box); });
    this.figure.querySelectorAll(".scroll-box, .scroll-hint").forEach(function (e) { e.hidden = true; });
    this.figure.insertBefore(box, this.figure.querySelector("figcaption"));
    this.draw();
    if (window.ResizeObserver) new ResizeObserver(function () { self.draw(); }).observe(box);
  };

  Plot.prototype.draw = function () {
    // stacked panels start their plots at one x, so a TP degree sits at one x in every panel
    var left = Math.max.apply(null, this.panels.map(function (p) { return p.plan.left; }));
    this.panels.forEach(function (p) { p.draw(left); });
  };

  // ---- one chart: its axes, lines, HTML legend under it and a readout ---------------------------------------
  function Panel(plan, box) {
    var self = this;
    this.plan = plan;
    this.index = null;  // the x the readout is on, as an index into plan.steps
    var heading = document.createElement("p");
    heading.className = "plotv-title";
    heading.textContent = plan.title;
    this.host = document.createElement("div");
    this.host.className = "plotv-chart";
    this.host.tabIndex = 0;
    this.host.setAttribute("role", "group");
    this.host.setAttribute("aria-label", plan.title + ". Use the left and right arrow keys to read each " +
      plan.xlabel + "'s values.");
    var legend = document.createElement("ul");
    legend.className = "plotv-legend small";
    var item = function (draw, name) {
      var li = document.createElement("li"), key = svg("svg", { width: 30, height: 18, "aria-hidden": "true" });
      draw(key);
      li.appendChild(key);
      li.appendChild(document.createTextNode(" " + name));
      legend.appendChild(li);
    };
    plan.lines.forEach(function (l) {
      item(function (key) {
        svg("line", { x1: 1, x2: 29, y1: 9, y2: 9, stroke: l.colour, "stroke-width": 2.5, "stroke-dasharray": l.dash },
          key);
        if (l.marker) marker(key, l.marker, 15, 9, l.colour, "key");
      }, l.name);
    });
    if (plan.ring) item(function (key) { ring(key, plan.ring, 15, 9, "key"); }, plan.ring.label);
    this.readout = document.createElement("p");
    this.readout.className = "plotv-readout small";
    this.readout.setAttribute("role", "status");
    this.readout.setAttribute("aria-live", "polite");
    this.readout.textContent = "Point at the plot, or focus it and press ← →, to read each " + plan.xlabel +
      "'s values.";
    box.append(heading, this.host, legend, this.readout);
    this.host.addEventListener("pointermove", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("pointerdown", function (e) { self.pointAt(e.clientX); });
    this.host.addEventListener("keydown", function (e) { self.key(e); });
    this.host.addEventListener("focus", function () { if (self.index === null) self.select(0); });
  }

  // `left`: the y-axis margin, shared with the figure's other panels.
  Panel.prototype.draw = function (left) {
    var self = this, plan = this.plan, X = plan.x, Y = plan.y;
    var width = Math.max(280, Math.round(this.host.clientWidth || 600));
    var height = width < 520 ? 220 : 300;
    var top = 10, bottom = 40, right = 14, pw = width - left - right, ph = height - top - bottom;
    this.px = function (x) { return left + (x - X.lo) / (X.hi - X.lo) * pw; };
    this.py = function (y) { return top + ph - (y - Y.lo) / (Y.hi - Y.lo) * ph; };

    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "font-family": "system-ui, sans-serif", "font-size": 12, "aria-hidden": "true" });
    svg("rect", { width: width, height: height, fill: "#fff" }, root);
    Y.ticks.forEach(function (t) {
      var y = self.py(t.at);
      svg("line", { x1: left, x2: left + pw, y1: y, y2: y, stroke: "#ddd" }, root);
      text(root, left - 6, y + 4, t.label, { "class": "tick-y", "text-anchor": "end", fill: "#333" });
    });
    X.ticks.forEach(function (t) {
      var x = self.px(t.at);
      svg("line", { x1: x, x2: x, y1: top + ph, y2: top + ph + 4, stroke: "#333" }, root);
      text(root, x, top + ph + 17, t.label, { "class": "tick-x", "text-anchor": "middle", fill: "#333" });
    });
    svg("rect", { "class": "frame", x: left, y: top, width: pw, height: ph, fill: "none", stroke: "#333" }, root);
    text(root, left + pw / 2, height - 6, X.title, { "text-anchor": "middle", fill: "#111" });
    text(root, 0, 0, Y.title, { "text-anchor": "middle", fill: "#111",
      transform: "translate(12 " + (top + ph / 2) + ") rotate(-90)" });
    plan.lines.forEach(function (l) {
      var d = "", pen = "M";
      l.points.forEach(function (p) {
        if (p[1] === null) { pen = "M"; return; }  // a gap, as the drawn chart leaves it
        d += pen + self.px(p[0]).toFixed(1) + "," + self.py(p[1]).toFixed(1) + " ";
        pen = "L";
      });
      svg("path", { d: d, fill: "none", stroke: l.colour, "stroke-width": 2, "stroke-dasharray": l.dash }, root);
      if (l.marker) {
        l.points.forEach(function (p) {
          if (p[1] !== null) marker(root, l.marker, self.px(p[0]), self.py(p[1]), l.colour);
        });
      }
      l.rings.forEach(function (j) { ring(root, plan.ring, self.px(l.points[j][0]), self.py(l.points[j][1])); });
    });
    this.cursor = svg("g", { "pointer-events": "none" }, root);
    this.plotTop = top;
    this.plotBottom = top + ph;
    this.host.replaceChildren(root);
    if (this.index !== null) this.select(this.index);
  };

  Panel.prototype.pointAt = function (clientX) {
    var r = this.host.getBoundingClientRect(), x = clientX - r.left, best = 0, self = this, steps = this.plan.steps;
    steps.forEach(function (s, i) {
      if (Math.abs(self.px(s.at) - x) < Math.abs(self.px(steps[best].at) - x)) best = i;
    });
    if (steps.length) this.select(best);
  };

  Panel.prototype.key = function (e) {
    var n = this.plan.steps.length, i = this.index === null ? 0 : this.index, page = Math.max(1, Math.round(n / 10));
    var moves = { ArrowLeft: i - 1, ArrowRight: i + 1, Home: 0, End: n - 1, PageUp: i - page, PageDown: i + page };
    if (!(e.key in moves) || !n) return;
    e.preventDefault();
    this.select(Math.max(0, Math.min(n - 1, moves[e.key])));
  };

  Panel.prototype.select = function (i) {
    var self = this, step = this.plan.steps[i], parts = [];
    this.index = i;
    this.cursor.replaceChildren();
    var x = this.px(step.at);
    svg("line", { x1: x, x2: x, y1: this.plotTop, y2: this.plotBottom, stroke: "#555", "stroke-dasharray": "2 3" },
      this.cursor);
    this.plan.lines.forEach(function (l) {
      var j = l.points.findIndex(function (p) { return p[0] === step.at; });
      if (j < 0) return;
      parts.push(l.name + " " + l.values[j]);
      if (l.points[j][1] !== null) {
        svg("circle", { cx: x, cy: self.py(l.points[j][1]), r: 4.5, fill: "#fff", stroke: l.colour,
          "stroke-width": 2 }, self.cursor);
      }
    });
    this.readout.textContent = this.plan.xlabel + " " + step.label + " · " + parts.join(" · ");
  };

  function start() {
    document.querySelectorAll("figure[data-plot-src]").forEach(function (f) {
      if (f.plotViewer) return;
      f.plotViewer = new Plot(f);
    });
  }

  window.PlotViewer = { start: start };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
  // results that arrive by htmx (a job card finishing, a comparison chosen) carry figures too
  document.addEventListener("htmx:afterSettle", start);
})();
