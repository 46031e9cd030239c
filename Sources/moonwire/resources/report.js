// moonwire report: a readout of the values under the pointer on the charts
// over time. The charts are drawn without it; it reads their points back from
// the SVG paths and the axis each chart carries in its data- attributes.
(function () {
  "use strict";
  var units = {
    "s": function (v) {
      if (v === 0) return "0";
      if (v < 1e-3) return digits(v * 1e6) + " µs";
      if (v < 1) return digits(v * 1e3) + " ms";
      return digits(v) + " s";
    },
    "B": function (v) {
      var names = ["B", "KiB", "MiB", "GiB"], i = 0;
      while (v >= 1024 && i < names.length - 1) { v /= 1024; i++; }
      return (i === 0 ? Math.round(v) : digits(v)) + " " + names[i];
    },
    "/s": function (v) { return short(v) + "/s"; },
    "": function (v) { return short(v); }
  };
  function digits(v) { return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2); }
  function short(v) {
    if (Math.abs(v) >= 1e6) return digits(v / 1e6) + "M";
    if (Math.abs(v) >= 1e3) return digits(v / 1e3) + "k";
    return Math.abs(v) >= 1 || v === 0 ? digits(v) : v.toPrecision(2);
  }
  function clock(t) {
    if (t < 60) return digits(t) + " s";
    var s = Math.round(t), h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
    var mm = (h > 0 && m < 10 ? "0" : "") + m, ss = (r < 10 ? "0" : "") + r;
    return (h > 0 ? h + ":" : "") + mm + ":" + ss;
  }
  function points(path) {
    var out = [], re = /[ML](-?[\d.]+),(-?[\d.]+)/g, m;
    var d = path.getAttribute("d") || "";
    while ((m = re.exec(d)) !== null) out.push([parseFloat(m[1]), parseFloat(m[2])]);
    return out;
  }
  function setUp(svg) {
    var box = svg.dataset.box.split(" ").map(Number);
    var low = Number(svg.dataset.low), high = Number(svg.dataset.high), log = svg.dataset.log === "true";
    var end = Number(svg.dataset.end), format = units[svg.dataset.unit] || units[""];
    var figure = svg.parentNode;
    var series = Array.prototype.map.call(svg.querySelectorAll("path.line"), function (path) {
      return { label: path.textContent, key: path.getAttribute("class").split(" ")[1], points: points(path) };
    });
    function value(y) {
      var f = 1 - (y - box[1]) / box[3];
      return log ? Math.pow(10, Math.log10(low) + f * (Math.log10(high) - Math.log10(low))) : low + f * (high - low);
    }
    var ns = "http://www.w3.org/2000/svg";
    var cursor = document.createElementNS(ns, "line");
    cursor.setAttribute("class", "cursor");
    cursor.setAttribute("y1", box[1]);
    cursor.setAttribute("y2", box[1] + box[3]);
    cursor.style.display = "none";
    svg.appendChild(cursor);
    var readout = document.createElement("div");
    readout.className = "readout";
    readout.style.display = "none";
    figure.appendChild(readout);
    svg.addEventListener("mousemove", function (event) {
      var rect = svg.getBoundingClientRect();
      var x = (event.clientX - rect.left) / rect.width * svg.viewBox.baseVal.width;
      if (x < box[0] || x > box[0] + box[2]) { hide(); return; }
      // The point nearest the pointer, within half the spacing of its series' points.
      var lines = [], at = null;
      series.forEach(function (s) {
        var best = null, n = s.points.length;
        s.points.forEach(function (p) { if (best === null || Math.abs(p[0] - x) < Math.abs(best[0] - x)) best = p; });
        var reach = Math.max(box[2] / 100, n > 1 ? 0.6 * (s.points[n - 1][0] - s.points[0][0]) / (n - 1) : box[2] / 50);
        if (best === null || Math.abs(best[0] - x) > reach) return;
        if (at === null || Math.abs(best[0] - x) < Math.abs(at - x)) at = best[0];
        lines.push('<i class="' + s.key + '"></i>' + s.label + " " + format(value(best[1])));
      });
      x = at === null ? x : at;
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.style.display = "";
      readout.innerHTML = "<b>t = " + clock((x - box[0]) / box[2] * end) + "</b>" + (lines.join("<br>") || "no value");
      readout.style.display = "";
      var left = event.clientX - figure.getBoundingClientRect().left + 14;
      readout.style.left = Math.min(left, figure.clientWidth - readout.offsetWidth - 4) + "px";
      readout.style.top = (event.clientY - figure.getBoundingClientRect().top + 14) + "px";
    });
    function hide() { cursor.style.display = "none"; readout.style.display = "none"; }
    svg.addEventListener("mouseleave", hide);
  }
  Array.prototype.forEach.call(document.querySelectorAll("svg.chart.time"), setUp);
  // For tests and measurements: the script ran to its end, and when the page
  // had loaded (milliseconds from the start of navigation).
  document.documentElement.dataset.ready = "yes";
  window.addEventListener("load", function () {
    document.documentElement.dataset.loadMs = String(Math.round(performance.now()));
  });
})();
