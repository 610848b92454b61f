// Draws the report's charts from the JSON island (#kx-data) with the inlined ECharts (SVG
// renderer), then records a self-check for tests: per chart its status, data points and SVG
// elements drawn, in the data-kx-charts attribute of <html>, and data-kx-ready set to 1 when done.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('kx-data').textContent);
  var root = document.documentElement;
  var checks = {};
  var charts = [];
  var C = { compute: '#3b6fd4', comm: '#e8833a', idle: '#9aa3ad', exposed: '#d64541', overlapped: '#4caf7a',
            memory: '#8e5bd0', other: '#b9a24a' };

  function fmtNs(v) { return v >= 1e6 ? (v / 1e6).toFixed(3) + ' ms' : (v / 1e3).toFixed(3) + ' µs'; }
  function msOf(ns) { return (ns / 1e6).toFixed(3); }
  function fmtBytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(i ? 2 : 0) + ' ' + u[i];
  }
  function svgCount(el) { return el.querySelectorAll('svg path, svg rect, svg polyline, svg circle').length; }

  function draw(id, points, option, why) {
    var el = document.getElementById('c-' + id);
    if (!el) return;
    if (!points) {
      el.classList.add('nodata');
      el.textContent = why;
      checks[id] = { status: 'absent', reason: why, points: 0, svg: 0 };
      return;
    }
    try {
      var chart = echarts.init(el, null, { renderer: 'svg' });
      option.animation = false;
      chart.setOption(option);
      charts.push(chart);
      checks[id] = { status: 'drawn', points: points, svg: svgCount(el) };
    } catch (e) {
      console.error('chart ' + id + ': ' + (e && e.stack ? e.stack : e));
      checks[id] = { status: 'failed', reason: String(e), points: points, svg: 0 };
    }
  }
  var zoom = function (extra) {
    return [{ type: 'inside', xAxisIndex: 0 }, Object.assign({ type: 'slider', xAxisIndex: 0, height: 18, bottom: 6 }, extra || {})];
  };

  // Timeline lanes: one heatmap series per lane, rows "rank r · lane".
  (function () {
    var T = D.timeline;
    if (!T || !T.ranks.length) return draw('timeline', 0, null, 'no GPU work in the selection');
    var lanes = [['compute', 'compute'], ['comm', 'communication'], ['idle', 'idle']];
    var rows = [], xs = [], series = [], maps = [], n = 0;
    for (var b = 0; b < T.bins; b++) xs.push(msOf(T.t0_ns + b * T.bin_ns));
    for (var r = T.ranks.length - 1; r >= 0; r--)
      for (var l = lanes.length - 1; l >= 0; l--) rows.push('rank ' + T.ranks[r] + ' · ' + lanes[l][1]);
    lanes.forEach(function (lane, li) {
      var data = [];
      T.ranks.forEach(function (rank, ri) {
        var y = (T.ranks.length - 1 - ri) * lanes.length + (lanes.length - 1 - li);
        var v = T[lane[0]][ri];
        for (var b = 0; b < v.length; b++) if (v[b] > 0) data.push([b, y, v[b] / 10]);
      });
      n += data.length;
      series.push({ name: lane[1], type: 'heatmap', data: data, progressive: 0, emphasis: { disabled: true } });
      maps.push({ show: false, seriesIndex: li, min: 0, max: 100, inRange: { color: ['#ffffff', C[lane[0]]] } });
    });
    // One 14 px row per lane, so many ranks stay readable (the page scrolls).
    document.getElementById('c-timeline').style.height = Math.max(260, rows.length * 14 + 90) + 'px';
    draw('timeline', n, {
      tooltip: { formatter: function (p) {
        return rows[p.value[1]] + '<br>' + xs[p.value[0]] + ' ms (+' + fmtNs(T.bin_ns) + '): ' + p.value[2].toFixed(1) + ' % busy';
      } },
      grid: { left: 150, right: 20, top: 10, bottom: 60 },
      xAxis: { type: 'category', data: xs, name: 'ms', nameLocation: 'end', axisLabel: { hideOverlap: true } },
      yAxis: { type: 'category', data: rows, splitArea: { show: true } },
      visualMap: maps, series: series, dataZoom: zoom({ bottom: 4 })
    }, '');
  })();

  // Critical path: its segments as bars on one lane per rank, coloured by kind.
  (function () {
    var P = D.critical_path;
    if (!P || !P.segments.length) return draw('critpath', 0, null, 'no critical path in the selection');
    var col = { compute: C.compute, comm_transfer: C.comm, comm_wait: C.exposed, host: C.other,
                launch_latency: C.memory, idle: C.idle };
    var rows = P.ranks.map(function (r) { return 'rank ' + r; });
    var data = P.segments.map(function (g) {
      return { value: [g[0], g[1] / 1e6, g[2] / 1e6, g[3], g[4]], itemStyle: { color: col[P.kinds[g[3]]] } };
    });
    document.getElementById('c-critpath').style.height = Math.max(200, rows.length * 28 + 90) + 'px';
    draw('critpath', data.length, {
      tooltip: { formatter: function (p) {
        var v = p.value;
        return rows[v[0]] + ' · ' + P.kinds[v[3]] + (v[4] ? ': ' + v[4] : '') + '<br>' + v[1].toFixed(3) +
          ' to ' + v[2].toFixed(3) + ' ms (' + fmtNs((v[2] - v[1]) * 1e6) + ')';
      } },
      grid: { left: 90, right: 20, top: 10, bottom: 60 },
      xAxis: { type: 'value', name: 'ms (step ' + P.step + ')', nameLocation: 'end', min: 0 },
      yAxis: { type: 'category', data: rows },
      dataZoom: zoom({ bottom: 4 }),
      series: [{ type: 'custom', encode: { x: [1, 2], y: 0 }, data: data,
        renderItem: function (params, api) {
          var a = api.coord([api.value(1), api.value(0)]), b = api.coord([api.value(2), api.value(0)]);
          var h = api.size([0, 1])[1] * 0.6;
          return { type: 'rect', shape: { x: a[0], y: a[1] - h / 2, width: Math.max(1, b[0] - a[0]), height: h },
                   style: api.style() };
        } }]
    }, '');
  })();

  // Straggler heatmap: rank × collective, colour = wait.
  (function () {
    var S = D.stragglers;
    if (!S || !S.cells.length) return draw('stragglers', 0, null, 'no collective matched across ranks');
    document.getElementById('c-stragglers').style.height = Math.max(220, S.ranks.length * 22 + 90) + 'px';
    draw('stragglers', S.cells.length, {
      tooltip: { formatter: function (p) {
        var c = S.cols[p.value[0]];
        return 'collective ' + c.label + '<br>rank ' + S.ranks[p.value[1]] + ' waited ' + fmtNs(p.value[2]) +
          (c.last >= 0 ? '<br>last to arrive: rank ' + c.last : '');
      } },
      grid: { left: 70, right: 90, top: 10, bottom: 60 },
      xAxis: { type: 'category', data: S.cols.map(function (c) { return c.label; }), axisLabel: { hideOverlap: true } },
      yAxis: { type: 'category', data: S.ranks.map(function (r) { return 'rank ' + r; }) },
      visualMap: { min: 0, max: S.max_ns > 0 ? S.max_ns : 1, formatter: function (v) { return fmtNs(v); }, calculable: true, orient: 'vertical', right: 4, top: 10,
                   text: ['wait', ''], inRange: { color: ['#fff7e0', '#f4a63a', '#c0392b', '#5e0b0b'] } },
      series: [{ type: 'heatmap', data: S.cells, progressive: 0, emphasis: { disabled: true } }],
      dataZoom: S.cols.length > 60 ? zoom() : []
    }, '');
  })();

  // All-to-all: sender × receiver, colour = bytes.
  (function () {
    var A = D.alltoall;
    if (!A || !A.cells.length) return draw('alltoall', 0, null, 'no all-to-all collective with a known size matched across ranks');
    var names = A.ranks.map(function (r) { return 'rank ' + r; });
    draw('alltoall', A.cells.length, {
      tooltip: { formatter: function (p) {
        return 'rank ' + A.ranks[p.value[1]] + ' → rank ' + A.ranks[p.value[0]] + ': ' + fmtBytes(p.value[2]);
      } },
      grid: { left: 70, right: 90, top: 10, bottom: 40 },
      xAxis: { type: 'category', data: names, name: 'to' },
      yAxis: { type: 'category', data: names, name: 'from' },
      visualMap: { min: 0, max: A.max > 0 ? A.max : 1, formatter: function (v) { return fmtBytes(v); }, calculable: true, orient: 'vertical', right: 4, top: 10,
                   text: ['bytes', ''], inRange: { color: ['#eef5ff', '#6fa8dc', '#1f4e8c', '#0b1f40'] } },
      series: [{ type: 'heatmap', data: A.cells, progressive: 0, emphasis: { disabled: true } }]
    }, '');
  })();

  // Overlap: per rank communication split into overlapped and exposed.
  (function () {
    var O = D.overlap, n = 0;
    O.ranks.forEach(function (r, i) { if (O.overlapped_ns[i] > 0 || O.exposed_ns[i] > 0) n += 2; });
    var us = function (a) { return a.map(function (v) { return v / 1000; }); };
    if (!n) return draw('overlap', 0, null, 'no communication kernels in the selection');
    draw('overlap', n, {
      tooltip: { trigger: 'axis', valueFormatter: function (v) { return fmtNs(v * 1000); } },
      legend: { top: 0 },
      grid: { left: 70, right: 20, top: 30, bottom: 30 },
      xAxis: { type: 'category', data: O.ranks.map(function (r) { return 'rank ' + r; }) },
      yAxis: { type: 'value', name: 'µs' },
      series: [
        { name: 'overlapped with compute', type: 'bar', stack: 'c', data: us(O.overlapped_ns), itemStyle: { color: C.overlapped } },
        { name: 'exposed communication', type: 'bar', stack: 'c', data: us(O.exposed_ns), itemStyle: { color: C.exposed },
          label: { show: true, position: 'top', formatter: function (p) { return 'exposed ' + O.exposed_pct[p.dataIndex].toFixed(1) + ' % of span'; } } }
      ]
    }, '');
  })();

  // Gap histogram.
  (function () {
    var G = D.gaps, n = 0;
    G.counts.forEach(function (c) { if (c > 0) n++; });
    if (!n) return draw('gaps', 0, null, 'no idle gaps in the selection');
    draw('gaps', n, {
      tooltip: { trigger: 'axis' },
      grid: { left: 70, right: 20, top: 20, bottom: 50 },
      xAxis: { type: 'category', data: G.labels, name: 'µs', axisLabel: { rotate: 30 } },
      yAxis: { type: 'value', name: 'gaps' },
      series: [{ type: 'bar', data: G.counts, itemStyle: { color: C.idle } }]
    }, '');
  })();

  // Top kernels by total time.
  (function () {
    var K = D.kernels;
    if (!K.names.length) return draw('kernels', 0, null, 'no kernels in the selection');
    var names = K.names.slice().reverse(), tot = K.total_ns.slice().reverse().map(function (v) { return v / 1000; }), cat = K.category.slice().reverse();
    var short = names.map(function (s) { return s.length > 48 ? s.slice(0, 47) + '…' : s; });
    draw('kernels', names.length, {
      tooltip: { formatter: function (p) {
        return names[p.dataIndex].replace(/</g, '&lt;') + '<br>' + cat[p.dataIndex] + ', ' + fmtNs(p.value * 1000) + ' total, ' +
          K.count[K.count.length - 1 - p.dataIndex] + ' launches';
      } },
      grid: { left: 330, right: 30, top: 10, bottom: 30 },
      xAxis: { type: 'value', name: 'µs' },
      yAxis: { type: 'category', data: short, axisLabel: { width: 320, overflow: 'truncate' } },
      series: [{ type: 'bar', data: tot.map(function (v, i) {
        return { value: v, itemStyle: { color: /comm/.test(cat[i]) ? C.comm : /mem/.test(cat[i]) ? C.memory : C.compute } };
      }) }]
    }, '');
  })();

  // GPU time by annotated range (NVTX / user annotations).
  (function () {
    var R = D.ranges || { names: [] };
    if (!R.names.length) return draw('ranges', 0, null, 'no NVTX or user-annotation ranges in the selection');
    var names = R.names.slice().reverse(), tot = R.gpu_ns.slice().reverse().map(function (v) { return v / 1000; });
    var calls = R.calls.slice().reverse(), items = R.items.slice().reverse();
    draw('ranges', names.length, {
      tooltip: { formatter: function (p) {
        var i = p.dataIndex;
        return names[i].replace(/</g, '&lt;') + '<br>' + fmtNs(p.value * 1000) + ' GPU time, ' + items[i] + ' GPU items in ' + calls[i] + ' calls';
      } },
      grid: { left: 330, right: 30, top: 10, bottom: 30 },
      xAxis: { type: 'value', name: 'µs' },
      yAxis: { type: 'category', data: names.map(function (s) { return s.length > 48 ? s.slice(0, 47) + '…' : s; }), axisLabel: { width: 320, overflow: 'truncate' } },
      series: [{ type: 'bar', data: tot, itemStyle: { color: C.compute } }]
    }, '');
  })();

  // Roofline: log-log, ops as points (intensity FLOP/B, TFLOP/s), roofs as dashed lines.
  (function () {
    var Rf = D.roofline || { points: [], peaks: [] };
    if (!Rf.points.length) return draw('roofline', 0, null, Rf.why || 'no op with known FLOPs and bytes');
    var xmin = Infinity, xmax = 0, tmax = 1, byClass = {}, series = [];
    Rf.points.forEach(function (p) {
      xmin = Math.min(xmin, p[0]); xmax = Math.max(xmax, p[0]); tmax = Math.max(tmax, p[2]);
      (byClass[p[4]] = byClass[p[4]] || []).push([p[0], p[1] / 1e12, p[2], p[3], p[5], p[6]]);
    });
    Object.keys(byClass).forEach(function (c) {
      series.push({ name: c, type: 'scatter', data: byClass[c],
                    symbolSize: function (v) { return 5 + 25 * Math.sqrt(v[2] / tmax); } });
    });
    if (Rf.bytes_per_s) Rf.peaks.forEach(function (pk) {
      var ridge = pk.flops_per_s / Rf.bytes_per_s, lo = Math.min(xmin, ridge) / 2, hi = Math.max(xmax, ridge) * 2;
      series.push({ name: pk.dtype + ' roof', type: 'line', showSymbol: false, silent: true,
                    lineStyle: { type: 'dashed', width: 1 },
                    data: [[lo, lo * Rf.bytes_per_s / 1e12], [ridge, pk.flops_per_s / 1e12], [hi, pk.flops_per_s / 1e12]] });
    });
    draw('roofline', Rf.points.length, {
      tooltip: { formatter: function (p) {
        var v = p.value;
        if (!v || v.length < 6) return p.seriesName;
        return String(v[3]).replace(/</g, '&lt;') + '<br>' + v[1].toFixed(2) + ' TFLOP/s at ' + v[0].toFixed(1) +
          ' FLOP/B (' + v[4] + '), ' + v[5].toFixed(1) + ' % of bound, ' + fmtNs(v[2]) + ' GPU time; ' + p.seriesName;
      } },
      legend: { top: 0, type: 'scroll' },
      grid: { left: 80, right: 30, top: 40, bottom: 50 },
      xAxis: { type: 'log', name: 'FLOP/B', nameLocation: 'middle', nameGap: 28 },
      yAxis: { type: 'log', name: 'TFLOP/s' },
      series: series
    }, '');
  })();

  // Per-device counters (step series): GPU memory in bytes, board power from NVML in mW → W.
  function counterChart(id, series, why, scale, fmt, yAxis) {
    var n = 0;
    series.forEach(function (s) { n += s.points.length; });
    if (!n) return draw(id, 0, null, why);
    draw(id, n, {
      tooltip: { trigger: 'axis', valueFormatter: fmt },
      legend: { top: 0, type: 'scroll' },
      grid: { left: 90, right: 30, top: 30, bottom: 60 },
      xAxis: { type: 'value', name: 'ms', scale: true },
      yAxis: yAxis,
      series: series.map(function (s) { return { name: s.name, type: 'line', step: 'end', showSymbol: false, data: s.points.map(function (p) { return [p[0] / 1e6, p[1] / scale]; }) }; }),
      dataZoom: zoom()
    }, '');
  }
  counterChart('memory', D.memory || [], 'no GPU memory counters in this store', 1, fmtBytes,
               { type: 'value', axisLabel: { formatter: fmtBytes } });
  counterChart('power', D.power || [], 'no GPU power samples in this store (NVML not available when it was recorded)', 1000,
               function (v) { return v.toFixed(1) + ' W'; }, { type: 'value', name: 'W' });

  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
  root.setAttribute('data-kx-charts', JSON.stringify(checks));
  root.setAttribute('data-kx-ready', '1');
})();
