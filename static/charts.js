// Hand-drawn SVG charts for the admin page: a line chart (training curves per epoch) and a
// grouped bar chart (models compared metric by metric). No library: the machine may be offline.
"use strict";

const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  // Colours that stay apart for readers with the common colour-vision deficiencies (Okabe–Ito).
  const COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];

  function el(name, attrs = {}, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** About `count` round tick values covering [lo, hi]. */
  function ticks(lo, hi, count) {
    if (!(hi > lo)) {
      const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
      lo -= pad;
      hi += pad;
    }
    const raw = (hi - lo) / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const first = Math.floor(lo / step) * step;
    const out = [];
    for (let v = first; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    if (out[out.length - 1] < hi) out.push(Number((out[out.length - 1] + step).toPrecision(12)));
    return out;
  }

  function fmt(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1000 || a < 0.001) return v.toExponential(1);
    return Number(v.toPrecision(3)).toString();
  }

  function frame(width, height, title) {
    const svg = el("svg", {
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": title,
      class: "chart-svg",
    });
    svg.append(el("title", {}, title));
    svg.append(el("text", { x: width / 2, y: 16, "text-anchor": "middle", class: "chart-title" }, title));
    return svg;
  }

  function legend(svg, names, x, y) {
    names.forEach((name, i) => {
      const ly = y + i * 16;
      svg.append(el("rect", { x, y: ly - 9, width: 10, height: 10, fill: COLOURS[i % COLOURS.length] }));
      svg.append(el("text", { x: x + 14, y: ly, class: "chart-legend" }, name));
    });
  }

  /**
   * A line chart of several series over the same x values.
   * series: [{name, points: [[x, y], ...]}]; points with a non-finite y are skipped.
   */
  function line(title, xLabel, series, opts = {}) {
    const width = opts.width || 440;
    const height = opts.height || 240;
    const m = { left: 52, right: 12, top: 26, bottom: 38 + 16 * series.length };
    const svg = frame(width, height, title);
    const all = series.flatMap((s) => s.points.filter(([, y]) => Number.isFinite(y)));
    if (all.length === 0) {
      svg.append(el("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "chart-empty" }, "no data yet"));
      return svg;
    }
    const xs = all.map(([x]) => x);
    const ys = all.map(([, y]) => y);
    const xTicks = ticks(Math.min(...xs), Math.max(...xs), Math.min(8, Math.max(1, xs.length)));
    const yLo = opts.yFrom0 ? Math.min(0, ...ys) : Math.min(...ys);
    const yTicks = ticks(yLo, Math.max(...ys), 5);
    const [x0, x1] = [xTicks[0], xTicks[xTicks.length - 1]];
    const [y0, y1] = [yTicks[0], yTicks[yTicks.length - 1]];
    const plotW = width - m.left - m.right;
    const plotH = height - m.top - m.bottom;
    const sx = (x) => m.left + ((x - x0) / (x1 - x0 || 1)) * plotW;
    const sy = (y) => m.top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;

    for (const t of yTicks) {
      svg.append(el("line", { x1: m.left, x2: m.left + plotW, y1: sy(t), y2: sy(t), class: "chart-grid" }));
      svg.append(el("text", { x: m.left - 6, y: sy(t) + 4, "text-anchor": "end", class: "chart-tick" }, fmt(t)));
    }
    for (const t of xTicks) {
      if (!Number.isInteger(t) && opts.integerX) continue;
      svg.append(el("text", { x: sx(t), y: m.top + plotH + 16, "text-anchor": "middle", class: "chart-tick" }, fmt(t)));
    }
    svg.append(el("line", { x1: m.left, x2: m.left + plotW, y1: m.top + plotH, y2: m.top + plotH, class: "chart-axis" }));
    svg.append(el("line", { x1: m.left, x2: m.left, y1: m.top, y2: m.top + plotH, class: "chart-axis" }));
    svg.append(el("text", { x: m.left + plotW / 2, y: m.top + plotH + 32, "text-anchor": "middle", class: "chart-tick" }, xLabel));

    series.forEach((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const pts = s.points.filter(([, y]) => Number.isFinite(y));
      if (pts.length === 0) return;
      svg.append(el("polyline", {
        points: pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" "),
        fill: "none",
        stroke: colour,
        "stroke-width": 2,
      }));
      for (const [x, y] of pts) {
        const dot = el("circle", { cx: sx(x), cy: sy(y), r: pts.length > 40 ? 1.5 : 3, fill: colour });
        dot.append(el("title", {}, `${s.name}, ${xLabel} ${x}: ${fmt(y)}`));
        svg.append(dot);
      }
    });
    legend(svg, series.map((s) => s.name), m.left, height - 16 * series.length + 6);
    return svg;
  }

  /**
   * A grouped bar chart: one group per category, one bar per series within each group.
   * series: [{name, values: [v per category]}]; values are expected in [0, 1] (IR metrics).
   */
  function bars(title, categories, series, opts = {}) {
    const width = opts.width || 720;
    const m = { left: 44, right: 12, top: 26, bottom: 30 + 16 * series.length };
    const height = (opts.plotHeight || 200) + m.top + m.bottom;
    const svg = frame(width, height, title);
    if (series.length === 0) {
      svg.append(el("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "chart-empty" }, "no models yet"));
      return svg;
    }
    const values = series.flatMap((s) => s.values.filter(Number.isFinite));
    const yTicks = ticks(0, Math.max(1e-9, ...values), 5);
    const yMax = yTicks[yTicks.length - 1];
    const plotW = width - m.left - m.right;
    const plotH = height - m.top - m.bottom;
    const sy = (y) => m.top + plotH - (y / yMax) * plotH;
    for (const t of yTicks) {
      svg.append(el("line", { x1: m.left, x2: m.left + plotW, y1: sy(t), y2: sy(t), class: "chart-grid" }));
      svg.append(el("text", { x: m.left - 6, y: sy(t) + 4, "text-anchor": "end", class: "chart-tick" }, fmt(t)));
    }
    const groupW = plotW / categories.length;
    const barW = Math.max(2, (groupW * 0.8) / series.length);
    categories.forEach((cat, c) => {
      const gx = m.left + c * groupW + groupW * 0.1;
      series.forEach((s, i) => {
        const v = s.values[c];
        if (!Number.isFinite(v)) return;
        const rect = el("rect", {
          x: gx + i * barW,
          y: sy(v),
          width: barW - 1,
          height: Math.max(0, sy(0) - sy(v)),
          fill: COLOURS[i % COLOURS.length],
        });
        rect.append(el("title", {}, `${s.name} ${cat}: ${v.toFixed(4)}`));
        svg.append(rect);
      });
      svg.append(el("text", { x: m.left + c * groupW + groupW / 2, y: m.top + plotH + 16, "text-anchor": "middle", class: "chart-tick" }, cat));
    });
    svg.append(el("line", { x1: m.left, x2: m.left + plotW, y1: sy(0), y2: sy(0), class: "chart-axis" }));
    legend(svg, series.map((s) => s.name), m.left, height - 16 * series.length + 6);
    return svg;
  }

  return { line, bars, ticks };
})();
