// The timeline viewer of a lab result's Chrome traces (templates/jobs/_timeline_viewer.html), and the hand-off of a
// trace to Perfetto. Hand-written: charting libraries draw series against an x axis, not spans on lanes, and
// the viewer must be keyboard-usable, which needs focusable HTML elements rather than a canvas.
//
// Model. A trace (app/services/jobs/timelines.py) is spans of ranks on lanes, times in ms from the start of the span's
// own step. The view is a window [v0, v1] in those ms, shared by the one or two traces shown (stacked, so two
// runs or two schedules read on aligned axes). Zoom scales the window around an anchor, pan shifts it; both are
// clamped to the domain, the longer of the shown steps (or of whole traces, for "all steps").
//
// Everything drawn besides the spans comes computed from the server, by the code that draws the lab's SVG
// timelines: lane colours and names, each step's overlap windows per rank, where each step sits when all are laid
// end to end, and the axis ticks with their labels. Ticks: the trace carries the tick set of each step's fitted
// view and of "all steps"; a zoom or pan that leaves every set held asks /api/v1/charts/time-ticks for the window
// (app/web/routes/charts.py), and until the answer comes the ticks held move with the view. A set says the range
// of times it covers and of window widths it suits, so this script only compares; it computes no tick, formats no
// number and chooses no colour.
//
// Input. Pointer: drag pans; two pointers pinch-zoom; Ctrl+wheel (a trackpad pinch arrives as that) zooms;
// Shift+wheel or a sideways wheel pans; a plain wheel scrolls the page, as a learner reading it expects. Keys on a
// timeline: + − zoom, ← → pan, 0 or Home fits. Tab then reaches the spans (one tab stop, a roving tabindex):
// ← → move along a lane, ↑ ↓ to the lane above or below, + − zoom around the span. A span's name, start, length
// and bytes are shown on hover and focus in one status line, which screen readers announce.
(function () {
  "use strict";
  if (window.TimelineViewer) return;  // a report page includes the viewer once per result

  var PERFETTO = "https://ui.perfetto.dev";
  var TICKS = "/api/v1/charts/time-ticks";
  var ZOOM = 1.5;  // one + or − press
  var PAN = 0.2;  // one ← or → press moves a fifth of the window
  var MIN_WINDOW_MS = 0.001;  // 1 µs: spans are recorded to the µs
  var HELD_TICKS = 40;  // tick sets kept from the server's answers, newest first

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  function label(trace) {
    var m = /^tp(\d+)$/.exec(trace.label);
    var name = m ? "TP=" + m[1] : trace.label;
    return trace.source ? trace.source + " · " + name : name;
  }

  // Does tick set `t` cover the window [v0, v1] at the density it is for?
  function suits(t, v0, v1) {
    var w = v1 - v0;
    return t.lo <= v0 && v1 <= t.hi && t.min_width < w && w <= t.max_width;
  }

  // ---- one viewer ------------------------------------------------------------------------------------------
  function Viewer(root) {
    this.root = root;
    this.traces = JSON.parse(root.getAttribute("data-traces") || "[]");
    this.cache = {};  // trace key -> its data, once fetched
    this.shown = [];  // the data of the one or two traces drawn
    this.step = "";
    this.stepChosen = false;
    this.view = [0, 1];
    this.domain = [0, 1];
    this.focusKey = null;  // the span that holds the roving tab stop: "panel:index"
    this.fetched = [];  // tick sets the server answered for zoomed windows
    this.ticksShown = null;  // the set the axis drew last, kept while a better one is on its way
    this.asking = false;
    this.q = function (role) { return root.querySelector('[data-role="' + role + '"]'); };
    this.build();
  }

  Viewer.prototype.build = function () {
    var self = this, traceSel = this.q("trace"), cmpSel = this.q("compare");
    cmpSel.appendChild(new Option("nothing", ""));
    this.traces.forEach(function (t, i) {
      traceSel.appendChild(new Option(label(t), String(i)));
      cmpSel.appendChild(new Option(label(t), String(i)));
    });
    var first = this.root.getAttribute("data-first"), second = this.root.getAttribute("data-second");
    if (first) traceSel.value = first;
    if (second) cmpSel.value = second;
    traceSel.addEventListener("change", function () { self.load(true); });
    cmpSel.addEventListener("change", function () { self.load(true); });
    this.q("step").addEventListener("change", function (e) {
      self.step = e.target.value;
      self.stepChosen = true;
      self.fit();
    });
    this.root.querySelectorAll("[data-act]").forEach(function (b) {
      b.addEventListener("click", function () { self.act(b.getAttribute("data-act"), null); });
    });
    this.q("perfetto").addEventListener("click", function () { self.perfetto(); });
    this.load(true);
  };

  Viewer.prototype.fetchTrace = function (index) {
    var t = this.traces[index], self = this;
    if (this.cache[index]) return Promise.resolve(this.cache[index]);
    return fetch(t.data, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (!r.ok) return r.json().catch(function () { return {}; }).then(function (body) {
        throw new Error(body.detail || ("the trace could not be read (HTTP " + r.status + ")"));
      });
      return r.json();
    }).then(function (data) {
      data.trace = t;
      self.cache[index] = data;
      return data;
    });
  };

  Viewer.prototype.load = function (refit) {
    var self = this, a = this.q("trace").value, b = this.q("compare").value;
    var wanted = [a].concat(b !== "" && b !== a ? [b] : []);
    Promise.all(wanted.map(function (i) { return self.fetchTrace(Number(i)); })).then(function (shown) {
      self.shown = shown;
      self.fillSteps();
      self.root.hidden = false;
      self.hideFallback();
      var t = self.traces[Number(a)];
      var dl = self.q("download");
      dl.href = t.file;
      dl.setAttribute("download", shown[0].file_name);
      if (refit) self.fit(); else self.draw();
    }).catch(function (err) {
      self.root.hidden = false;
      self.q("panels").textContent = "";
      self.q("panels").appendChild(el("p", "error", "The timeline viewer could not show this trace: " + err.message +
        ". The drawn timelines above and the trace download still work."));
    });
  };

  // The server-drawn timelines of this result are the no-JavaScript view; once the viewer draws, they go (a
  // report's evidence keeps them: the grader scores the figures that were handed in).
  Viewer.prototype.hideFallback = function () {
    var result = this.root.closest(".result");
    if (!result || this.root.hasAttribute("data-keep-fallback")) return;
    result.querySelectorAll("figure.plot.wide").forEach(function (f) { f.hidden = true; });
  };

  Viewer.prototype.fillSteps = function () {
    var sel = this.q("step"), steps = this.shown[0].steps, keep = this.step;
    sel.textContent = "";
    steps.forEach(function (s) {
      sel.appendChild(new Option(s.name + " · " + s.words, String(s.step)));
    });
    if (steps.length > 1) sel.appendChild(new Option("all steps, one after another", "all"));
    var values = Array.prototype.map.call(sel.options, function (o) { return o.value; });
    // the last step (the one the drawn timeline shows) until the learner picks one, then theirs while it exists
    this.step = this.stepChosen && values.indexOf(keep) >= 0 ? keep : String(steps[steps.length - 1].step);
    sel.value = this.step;
    sel.disabled = steps.length < 2;
  };

  // The step of `data` shown: the chosen one, its last if it has fewer steps, or null for "all steps".
  Viewer.prototype.stepOf = function (data) {
    if (this.step === "all") return null;
    var wanted = Number(this.step);
    var found = data.steps.filter(function (s) { return s.step === wanted; })[0];
    return found || data.steps[data.steps.length - 1];
  };

  // The spans of `data` for the step shown, each with where it starts on the axis: within a step, from its start;
  // "all steps", the steps laid end to end at the offsets the server gives (each step's time is from its own start).
  Viewer.prototype.visible = function (data) {
    var shown = this.stepOf(data), at = {};
    data.steps.forEach(function (s) { at[s.step] = shown === null ? s.offset_ms : 0; });
    return data.spans.filter(function (s) { return shown === null || s.step === shown.step; }).map(function (s) {
      return { s: s, t0: s.start_ms + at[s.step] };
    });
  };

  // The overlap windows of `rank` in the step shown, placed as visible() places its spans.
  Viewer.prototype.windows = function (data, rank) {
    var shown = this.stepOf(data), out = [];
    data.steps.forEach(function (s) {
      if (shown !== null && s !== shown) return;
      var at = shown === null ? s.offset_ms : 0;
      s.overlap.forEach(function (o) {
        if (o.rank === rank) o.windows.forEach(function (w) { out.push([w[0] + at, w[1] + at]); });
      });
    });
    return out;
  };

  // What the shown step (or "all steps") of `data` spans: its length and the ticks of its fitted view.
  Viewer.prototype.extent = function (data) {
    var shown = this.stepOf(data);
    return shown === null ? data.all : shown;
  };

  Viewer.prototype.fit = function () {
    var self = this, end = 0;
    this.shown.forEach(function (d) { end = Math.max(end, self.extent(d).dur_ms); });
    this.domain = [0, end > 0 ? end : 1];
    this.view = this.domain.slice();
    this.draw();
  };

  Viewer.prototype.setView = function (v0, v1) {
    var d0 = this.domain[0], d1 = this.domain[1], w = Math.max(v1 - v0, MIN_WINDOW_MS);
    w = Math.min(w, d1 - d0);
    v0 = Math.min(Math.max(v0, d0), d1 - w);
    this.view = [v0, v0 + w];
    this.draw();
  };

  Viewer.prototype.zoom = function (factor, anchor) {
    var v0 = this.view[0], v1 = this.view[1];
    var a = anchor == null ? (v0 + v1) / 2 : anchor;
    this.setView(a - (a - v0) / factor, a + (v1 - a) / factor);
  };

  Viewer.prototype.pan = function (fraction) {
    var w = this.view[1] - this.view[0];
    this.setView(this.view[0] + fraction * w, this.view[1] + fraction * w);
  };

  Viewer.prototype.act = function (what, anchor) {
    if (what === "in") this.zoom(ZOOM, anchor);
    else if (what === "out") this.zoom(1 / ZOOM, anchor);
    else if (what === "left") this.pan(-PAN);
    else if (what === "right") this.pan(PAN);
    else if (what === "fit") this.setView(this.domain[0], this.domain[1]);
  };

  // ---- drawing -------------------------------------------------------------------------------------------
  Viewer.prototype.x = function (t) { return (100 * (t - this.view[0])) / (this.view[1] - this.view[0]); };

  Viewer.prototype.draw = function () {
    var self = this, panels = this.q("panels"), hadFocus = panels.contains(document.activeElement);
    var focusedPlot = hadFocus && document.activeElement.classList.contains("tlv-plot")
      ? document.activeElement.getAttribute("data-panel") : null;
    var set = this.ticks();  // one set for every panel: the traces share the window
    this.ticksDrawn = set;
    panels.textContent = "";
    this.spanEls = [];
    this.keys();
    this.shown.forEach(function (data, p) { panels.appendChild(self.panel(data, p, set)); });
    this.labelsInside();
    if (focusedPlot !== null) {
      var plot = panels.querySelector('.tlv-plot[data-panel="' + focusedPlot + '"]');
      if (plot) plot.focus({ preventScroll: true });
    } else if (hadFocus && this.focusKey) {
      // the focused span stays focused; panned out of the window, its timeline takes the focus
      var span = panels.querySelector('[data-key="' + this.focusKey + '"]');
      var home = panels.querySelector('.tlv-plot[data-panel="' + this.focusKey.split(":")[0] + '"]');
      if (span) span.focus({ preventScroll: true });
      else if (home) home.focus({ preventScroll: true });
    }
  };

  // The legend's keys in the colours the spans and bands are drawn in.
  Viewer.prototype.keys = function () {
    var data = this.shown[0], lanes = {};
    data.lanes.forEach(function (l) { lanes[l.name] = l; });
    this.root.querySelectorAll("[data-key-lane]").forEach(function (k) {
      var lane = lanes[k.getAttribute("data-key-lane")];
      k.parentElement.hidden = !lane;  // a lane this trace has no spans on is not drawn, so not keyed
      if (lane) k.style.backgroundColor = lane.colour;
    });
    this.root.querySelectorAll("[data-key-overlap]").forEach(function (k) {
      k.style.backgroundColor = data.overlap.fill;
      k.style.borderColor = data.overlap.edge;
    });
  };

  // The tick set for the view: one held that suits it, else (while the server is asked) the last one drawn.
  Viewer.prototype.ticks = function () {
    var self = this, v0 = this.view[0], v1 = this.view[1];
    var held = this.shown.map(function (d) { return self.extent(d).ticks; }).concat(this.fetched);
    var found = held.filter(function (t) { return suits(t, v0, v1); })[0];
    if (found) return (this.ticksShown = found);
    this.ask();
    return this.ticksShown || held[0];
  };

  // Ask the server for the view's ticks; one request at a time, and the answer redraws if it is still wanted.
  // Until then the timelines are aria-busy: their axis still shows the ticks held, which may not suit the view.
  Viewer.prototype.ask = function () {
    var self = this, v0 = this.view[0], v1 = this.view[1], key = v0 + "," + v1;
    if (this.asking || this.asked === key) return;  // an answer that did not suit is not asked for again
    this.asking = true;
    this.asked = key;
    this.q("panels").setAttribute("aria-busy", "true");
    fetch(TICKS + "?lo=" + encodeURIComponent(v0) + "&hi=" + encodeURIComponent(v1), {
      credentials: "same-origin", headers: { Accept: "application/json" },
    }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (t) {
      self.fetched = [t].concat(self.fetched).slice(0, HELD_TICKS);
    }).catch(function () { /* the ticks held stay on the axis */ }).then(function () {
      self.asking = false;
      var now = self.ticks();  // may ask again, for a view that moved while this answer was on its way
      if (now !== self.ticksDrawn) self.draw();
      if (!self.asking) self.q("panels").removeAttribute("aria-busy");
    });
  };

  // A label centred on a tick near the plot's edge would be cut off: it is moved just inside, its mark is not.
  Viewer.prototype.labelsInside = function () {
    this.q("panels").querySelectorAll(".tlv-plot").forEach(function (plot) {
      var box = plot.getBoundingClientRect();
      var left = box.left + plot.clientLeft, right = left + plot.clientWidth;
      plot.querySelectorAll(".tlv-tick").forEach(function (tick) {
        var r = tick.getBoundingClientRect();
        var shift = r.right > right ? right - r.right : r.left < left ? left - r.left : 0;
        if (shift) tick.style.setProperty("--shift", shift + "px");
      });
    });
  };

  Viewer.prototype.axis = function (set) {
    var self = this, row = el("div", "tlv-axis");
    row.setAttribute("aria-hidden", "true");
    set.ticks.forEach(function (t) {
      if (t.at < self.view[0] || t.at > self.view[1]) return;
      var tick = el("span", "tlv-tick", t.label);
      tick.style.left = self.x(t.at) + "%";
      row.appendChild(tick);
    });
    return row;
  };

  Viewer.prototype.panel = function (data, p, set) {
    var self = this, spans = this.visible(data);
    var box = el("div", "tlv-panel");
    var shown = this.stepOf(data);
    var stepWords = shown === null ? data.all.name : shown.name;
    box.appendChild(el("p", "tlv-title", label(data.trace) + " · " + stepWords));
    var plot = el("div", "tlv-plot");
    plot.tabIndex = 0;
    plot.setAttribute("role", "group");
    plot.setAttribute("data-panel", String(p));
    var axis = this.axis(set), marks = axis.querySelectorAll(".tlv-tick");
    var showing = marks.length ? ", its axis marked from " + marks[0].textContent + " to " +
      marks[marks.length - 1].textContent : "";
    plot.setAttribute("aria-label", "Timeline of " + label(data.trace) + ", " + stepWords + showing +
      ". Plus and minus zoom, left and right arrows pan; Tab reaches the spans.");
    plot.appendChild(axis);
    data.ranks.forEach(function (r) {
      var mine = spans.filter(function (v) { return v.s.rank === r.rank; });
      var block = el("div", "tlv-rank");
      block.appendChild(el("p", "tlv-rank-name", r.name));
      var lanes = el("div", "tlv-lanes"), bands = el("div", "tlv-bands");
      bands.setAttribute("aria-hidden", "true");
      self.windows(data, r.rank).forEach(function (iv) {
        if (iv[1] < self.view[0] || iv[0] > self.view[1]) return;
        var band = el("div", "tlv-band"), left = Math.max(self.x(iv[0]), 0), right = Math.min(self.x(iv[1]), 100);
        band.style.left = left + "%";  // a window that starts or ends out of view is cut at the track's edge
        band.style.width = Math.max(right - left, 0.3) + "%";
        if (self.x(iv[0]) >= 0) band.classList.add("tlv-band-start");
        if (self.x(iv[1]) <= 100) band.classList.add("tlv-band-end");
        band.style.backgroundColor = data.overlap.css;
        band.style.borderColor = data.overlap.edge;
        bands.appendChild(band);
      });
      data.lanes.forEach(function (lane) {
        var row = el("div", "tlv-row");
        row.appendChild(el("span", "tlv-lane-name", lane.short));
        var track = el("div", "tlv-track");
        track.setAttribute("role", "list");
        track.setAttribute("aria-label", r.name + ", " + lane.name);
        mine.filter(function (v) { return v.s.lane === lane.name; }).forEach(function (v) {
          var end = v.t0 + v.s.dur_ms;
          if (end < self.view[0] || v.t0 > self.view[1]) return;  // off screen: not drawn, not focusable
          track.appendChild(self.spanEl(v, p, r, lane));
        });
        row.appendChild(track);
        lanes.appendChild(row);
      });
      lanes.appendChild(bands);  // over the spans, translucent: the window reads across all three lanes
      block.appendChild(lanes);
      plot.appendChild(block);
    });
    this.listen(plot);
    box.appendChild(plot);
    return box;
  };

  Viewer.prototype.spanEl = function (v, p, r, lane) {
    var s = v.s, key = p + ":" + this.shown[p].spans.indexOf(s), laneName = lane.name;
    var left = this.x(v.t0), right = this.x(v.t0 + s.dur_ms);
    var d = el("div", "tlv-span tlv-" + laneName);
    d.style.backgroundColor = lane.colour;
    d.style.color = lane.ink;
    d.style.left = Math.max(left, 0) + "%";
    d.style.width = Math.max(Math.min(right, 100) - Math.max(left, 0), 0.15) + "%";
    d.setAttribute("role", "listitem");
    d.setAttribute("data-key", key);
    d.tabIndex = -1;
    var words = this.words(s, r);
    d.setAttribute("aria-label", words);
    d.title = words;
    if (right - left > 8) d.appendChild(el("span", "tlv-span-name", s.name));
    this.spanEls.push({ el: d, v: v, panel: p, rank: r.rank, lane: laneName, key: key });
    return d;
  };

  Viewer.prototype.words = function (s, r) {
    var w = s.words, parts = [r.name + " · " + s.lane + ": " + s.name, "starts " + w.start + " into the step",
      "lasts " + w.duration];
    if (w.bytes) parts.push(w.bytes);
    if (w.shape) parts.push(w.shape);
    return parts.join(" · ");
  };

  Viewer.prototype.readout = function (text) { this.q("readout").textContent = text; };

  // ---- input -----------------------------------------------------------------------------------------------
  Viewer.prototype.tabStop = function () {
    // One span per timeline is in the tab order: the one last focused, else the first drawn.
    var self = this;
    this.shown.forEach(function (_, p) {
      var mine = self.spanEls.filter(function (e) { return e.panel === p; });
      var keep = mine.filter(function (e) { return e.key === self.focusKey; })[0] || mine[0];
      mine.forEach(function (e) { e.el.tabIndex = e === keep ? 0 : -1; });
    });
  };

  Viewer.prototype.anchorAt = function (plot, clientX) {
    var track = plot.querySelector(".tlv-track"), box = track.getBoundingClientRect();
    var f = (clientX - box.left) / box.width;
    return this.view[0] + Math.min(Math.max(f, 0), 1) * (this.view[1] - this.view[0]);
  };

  Viewer.prototype.moveFocus = function (from, key) {
    var here = this.spanEls.filter(function (e) { return e.el === from; })[0];
    if (!here) return;
    var same = this.spanEls.filter(function (e) { return e.panel === here.panel; });
    var next = null;
    if (key === "ArrowLeft" || key === "ArrowRight") {
      var lane = same.filter(function (e) { return e.rank === here.rank && e.lane === here.lane; });
      next = lane[lane.indexOf(here) + (key === "ArrowRight" ? 1 : -1)];
      if (!next) {  // at the edge of the window: pan on, so the lane's next span comes into view
        this.pan(key === "ArrowRight" ? PAN * 2 : -PAN * 2);
        return;
      }
    } else if (key === "ArrowUp" || key === "ArrowDown") {
      var rows = [];
      same.forEach(function (e) {
        var id = e.rank + "/" + e.lane;
        if (rows.indexOf(id) < 0) rows.push(id);
      });
      var to = rows[rows.indexOf(here.rank + "/" + here.lane) + (key === "ArrowDown" ? 1 : -1)];
      if (!to) return;
      var mid = here.v.t0 + here.v.s.dur_ms / 2;
      same.filter(function (e) { return e.rank + "/" + e.lane === to; }).forEach(function (e) {
        var d = Math.abs(e.v.t0 + e.v.s.dur_ms / 2 - mid);
        if (!next || d < next.d) next = { e: e, d: d };
      });
      next = next && next.e;
    } else if (key === "Home" || key === "End") {
      next = key === "Home" ? same[0] : same[same.length - 1];
    }
    if (next) {
      this.focusKey = next.key;
      this.tabStop();
      next.el.focus();
    }
  };

  Viewer.prototype.listen = function (plot) {
    var self = this, pointers = {}, last = null;
    plot.addEventListener("keydown", function (e) {
      var onSpan = e.target.classList.contains("tlv-span");
      var anchor = null;
      if (onSpan) {
        var it = self.spanEls.filter(function (x) { return x.el === e.target; })[0];
        if (it) anchor = it.v.t0 + it.v.s.dur_ms / 2;
      }
      if (e.key === "+" || e.key === "=") self.act("in", anchor);
      else if (e.key === "-" || e.key === "_" || e.key === "−") self.act("out", anchor);
      else if (onSpan && /^(Arrow(Left|Right|Up|Down)|Home|End)$/.test(e.key)) self.moveFocus(e.target, e.key);
      else if (e.key === "ArrowLeft") self.act("left");
      else if (e.key === "ArrowRight") self.act("right");
      else if (e.key === "0" || e.key === "Home") self.act("fit");
      else return;
      e.preventDefault();
    });
    plot.addEventListener("focusin", function (e) {
      var it = self.spanEls.filter(function (x) { return x.el === e.target; })[0];
      if (!it) return;
      self.focusKey = it.key;
      self.tabStop();
      self.readout(it.el.getAttribute("aria-label"));
    });
    plot.addEventListener("pointerover", function (e) {
      var span = e.target.closest && e.target.closest(".tlv-span");
      if (span) self.readout(span.getAttribute("aria-label"));
    });
    plot.addEventListener("wheel", function (e) {
      if (e.ctrlKey || e.metaKey) {
        self.zoom(Math.pow(1.0015, -e.deltaY), self.anchorAt(plot, e.clientX));
      } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        self.pan((e.shiftKey ? e.deltaY : e.deltaX) / plot.clientWidth);
      } else {
        return;  // a plain wheel scrolls the page
      }
      e.preventDefault();
    }, { passive: false });
    plot.addEventListener("pointerdown", function (e) {
      if (e.button !== 0) return;
      pointers[e.pointerId] = e.clientX;
      last = null;
      plot.setPointerCapture(e.pointerId);
    });
    plot.addEventListener("pointermove", function (e) {
      if (!(e.pointerId in pointers)) return;
      var ids = Object.keys(pointers), track = plot.querySelector(".tlv-track");
      var msPerPx = (self.view[1] - self.view[0]) / track.getBoundingClientRect().width;
      if (ids.length === 1) {
        var dx = e.clientX - pointers[e.pointerId];
        if (Math.abs(dx) > 0) plot.classList.add("tlv-dragging");
        pointers[e.pointerId] = e.clientX;
        self.pan(-dx * msPerPx / (self.view[1] - self.view[0]));
      } else {
        pointers[e.pointerId] = e.clientX;
        var xs = ids.map(function (id) { return pointers[id]; });
        var spread = Math.abs(xs[0] - xs[1]);
        if (last && spread > 0) self.zoom(spread / last, self.anchorAt(plot, (xs[0] + xs[1]) / 2));
        last = spread;
      }
    });
    function up(e) {
      delete pointers[e.pointerId];
      last = null;
      if (!Object.keys(pointers).length) plot.classList.remove("tlv-dragging");
    }
    plot.addEventListener("pointerup", up);
    plot.addEventListener("pointercancel", up);
    this.tabStop();
  };

  // ---- Perfetto ----------------------------------------------------------------------------------------------
  // Perfetto's documented hand-off, "Deep linking to the Perfetto UI" (https://perfetto.dev/docs/visualization/
  // deep-linking-to-perfetto-ui): open ui.perfetto.dev with window.open, post 'PING' until it answers 'PONG' (its
  // message channel is not buffered), then post {perfetto: {buffer, title, fileName}} with the trace's bytes.
  // The tab is opened first, inside the click, so a popup blocker sees the learner's gesture.
  Viewer.prototype.perfetto = function () {
    var self = this, data = this.shown[0], status = this.q("perfetto-status");
    if (!data) return;
    var say = function (text) { status.textContent = text; };
    var win = window.open(PERFETTO, "_blank");
    if (!win) {
      say("The browser blocked the new tab. Allow pop-ups for this site, or download the trace and open it at " +
        "ui.perfetto.dev with “Open trace file”.");
      return;
    }
    say("Opening Perfetto UI in a new tab…");
    var buffer = null, timer = null, started = Date.now(), done = false;
    function finish(text) {
      done = true;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      say(text);
    }
    function onMessage(e) {
      if (done || e.source !== win || e.origin !== PERFETTO || e.data !== "PONG" || !buffer) return;
      win.postMessage({ perfetto: { buffer: buffer, title: data.title, fileName: data.file_name } }, PERFETTO);
      finish("Sent " + data.file_name + " to Perfetto UI in the other tab.");
    }
    window.addEventListener("message", onMessage);
    fetch(data.trace.file, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.arrayBuffer();
    }).then(function (b) {
      buffer = b;
      timer = setInterval(function () {
        if (win.closed) {
          finish("The Perfetto tab closed (or the browser kept it apart from this page) before the trace was " +
            "sent. Download the trace and open it at ui.perfetto.dev with “Open trace file”.");
        } else if (Date.now() - started > 30000) {
          finish("Perfetto UI did not answer within 30 s (it needs the internet). Download the trace and open " +
            "it there with “Open trace file” when you are online.");
        } else {
          win.postMessage("PING", PERFETTO);
        }
      }, 100);
    }).catch(function (err) {
      finish("The trace could not be read (" + err.message + "), so nothing was sent.");
    });
  };

  // ---- start -----------------------------------------------------------------------------------------------
  function start(scope) {
    (scope || document).querySelectorAll("[data-tlv]:not([data-tlv-ready])").forEach(function (root) {
      root.setAttribute("data-tlv-ready", "");
      root.viewer = new Viewer(root);
    });
  }
  window.TimelineViewer = { start: start };
  // A result arrives by htmx when a run finishes (the job card swaps itself): start the viewers it brings.
  new MutationObserver(function () { start(); }).observe(document.documentElement, { childList: true, subtree: true });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { start(); });
  else start();
})();
