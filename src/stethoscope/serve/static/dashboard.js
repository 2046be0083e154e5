// The stethoscope dashboard: runs list, live curves (plotly), findings with causes and fixes, alerts,
// checkpoints and rollbacks, compare two runs. Reads only the JSON API next to it (serve/dashboard.py).
(function () {
  'use strict';
  performance.mark('sd-script');  // plotly.js (the script before this one) is parsed: the bench reads these marks
  var POLL_MS = parseInt(document.body.dataset.pollMs, 10) || 2000;
  var S = {
    runs: [], run: null, other: null, style: null, charts: [], last: null, asked: null, version: null,
    events: null, eventsKey: '', selected: null, polls: 0, busy: false, zoomed: {}
  };
  var CONFIG = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ['select2d', 'lasso2d']};

  function get(url) {
    return fetch(url, {cache: 'no-store'}).then(function (r) {
      if (!r.ok) { return r.text().then(function (t) { throw new Error(r.status + ': ' + t); }); }
      return r.json();
    });
  }
  function q(run, extra) { return '?run=' + encodeURIComponent(run) + (extra || ''); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function badge(sev) {
    var b = el('span', {'class': 'st-badge'}, sev);
    b.style.background = (S.style && S.style.severity_colors[sev]) || '#777';
    return b;
  }
  function status(text) { document.getElementById('sd-status').textContent = text; }
  function fmt(v) {
    if (v === null || v === undefined) { return '–'; }
    if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) < 1e15) { return v.toLocaleString('en-US'); }  // a step
    if (typeof v === 'number') { return Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : String(+v.toPrecision(5)); }
    return String(v);
  }

  // -- runs ---------------------------------------------------------------------------------------
  function loadRuns() {
    return get('api/runs').then(function (d) {
      S.runs = d.runs; S.style = d.style;
      var ul = document.getElementById('sd-runs');
      ul.textContent = '';
      var sel = document.getElementById('sd-compare');
      var keep = sel.value;
      sel.textContent = '';
      sel.appendChild(el('option', {value: ''}, '—'));
      d.runs.forEach(function (r) {
        var li = el('li', {'data-key': r.key, 'class': r.key === S.run ? 'sd-on' : ''});
        li.appendChild(el('div', {'class': 'sd-run-name'}, r.key));
        var n = r.findings ? (r.findings.critical || 0) + (r.findings.error || 0) + (r.findings.warning || 0) : 0;
        li.appendChild(el('div', {'class': 'sd-run-facts'},
          (r.status || '–') + ' · step ' + fmt(r.last_step) + ' · ' + r.ranks + ' rank(s) · ' + n + ' finding(s)'));
        li.addEventListener('click', function () { select(r.key); });
        ul.appendChild(li);
        var o = el('option', {value: r.key}, r.key);
        sel.appendChild(o);
      });
      sel.value = keep;
      if (!S.run && d.runs.length) {
        var want = decodeURIComponent((location.hash.match(/run=([^&]+)/) || [])[1] || '');
        select(d.runs.some(function (r) { return r.key === want; }) ? want : d.runs[0].key);
      }
    });
  }

  function select(key) {
    S.run = key; S.last = null; S.asked = null; S.version = null; S.selected = null; S.eventsKey = ''; S.zoomed = {};
    history.replaceState(null, '', '#run=' + encodeURIComponent(key));
    Array.prototype.forEach.call(document.querySelectorAll('#sd-runs li'), function (li) {
      li.classList.toggle('sd-on', li.dataset.key === key);
    });
    document.getElementById('sd-title').textContent = key;
    document.getElementById('sd-detail').hidden = true;
    var r = S.runs.filter(function (x) { return x.key === key; })[0] || {};
    var facts = document.getElementById('sd-facts');
    facts.textContent = '';
    [['status', r.status], ['ranks', r.ranks], ['path', r.path]].forEach(function (kv) {
      var s = el('span', {}, kv[0] + ': '); s.appendChild(el('b', {}, fmt(kv[1]))); facts.appendChild(s);
    });
    return Promise.all([loadCurves(), loadEvents(true), loadCompare()]);
  }

  // -- curves -------------------------------------------------------------------------------------
  function traceKey(t) { return t.metric + '|' + t.rank; }

  function lineTraces(t, i, perRank, run, dash) {
    var pal = S.style.palette;
    var name = (perRank ? 'rank ' + t.rank : t.metric) + (run ? ' · ' + run : '');
    var out = [{
      type: 'scatter', mode: t.x.length < 60 ? 'lines+markers' : 'lines', name: name, x: t.x, y: t.y,
      line: {color: pal[i % pal.length], width: 1.6, dash: dash || 'solid'}, marker: {size: 4},
      meta: {key: traceKey(t), run: run || S.run, last: t.x.length ? t.x[t.x.length - 1] : null},
      hovertemplate: name.replace(/%/g, '%%') + '<br>step %{x}: %{y:.4g}<extra></extra>'
    }];
    if (t.nonfinite && t.nonfinite.length) {
      out.push({type: 'scatter', mode: 'markers', name: name + ' NaN/Inf', showlegend: false, yaxis: 'y2',
                x: t.nonfinite, y: t.nonfinite.map(function () { return 0.04; }),
                marker: {symbol: 'x', size: 9, color: '#c0122c'}, meta: {key: 'nonfinite|' + traceKey(t)},
                hovertemplate: name + ' is NaN/Inf at step %{x}<extra></extra>'});
    }
    return out;
  }

  function layout(c) {
    var l = {
      title: {text: c.title, x: 0.01, font: {size: 14}}, height: 320, margin: {l: 60, r: 20, t: 50, b: 40},
      hovermode: 'closest', uirevision: S.run + '|' + (S.other || ''),
      xaxis: {title: {text: 'step'}, zeroline: false},
      yaxis: {type: c.log_y ? 'log' : 'linear', zeroline: false, exponentformat: 'power'},
      yaxis2: {overlaying: 'y', range: [0, 1], visible: false, fixedrange: true},
      legend: {orientation: 'h', y: 1.0, yanchor: 'bottom', x: 1, xanchor: 'right', font: {size: 11}},
      shapes: marks(c).shapes, paper_bgcolor: '#ffffff', plot_bgcolor: '#fbfcfe'
    };
    c.fixedY = c.log_y ? null : constantY(c);
    if (c.fixedY !== null) {  // plotly draws a constant line on a -1..1 axis, where a fixed LR of 0.003 reads
      var v = c.fixedY;       // as 0: an axis around the value (autorange again once the line moves: poll)
      l.yaxis.range = [v - Math.abs(v) / 2, v + Math.abs(v) / 2];
      l.yaxis.autorange = false;
    }
    return l;
  }

  function constantY(c) {  // the one finite non-zero value every line of the chart holds, or null
    var seen = null, many = false;
    (c.traces || []).forEach(function (t) {
      (t.y || []).forEach(function (y) {
        if (y === null || !isFinite(y)) { return; }
        if (seen === null) { seen = y; } else if (y !== seen) { many = true; }
      });
    });
    return many || seen === 0 ? null : seen;
  }

  // Findings (severity-coloured dotted lines, a marker to hover or click), checkpoints (green) and
  // rollbacks (red dashed) on the charts they concern.
  function marks(c) {
    var shapes = [], traces = [];
    if (!S.events) { return {shapes: shapes, traces: traces}; }
    var ids = S.charts.map(function (x) { return x.id; });
    var shown = S.events.findings.filter(function (f) {
      if (f.step === null || f.step === undefined) { return false; }
      if (f.every_chart || c.per_rank) { return !c.per_rank || f.every_chart; }
      var wanted = f.charts.filter(function (x) { return ids.indexOf(x) >= 0; });
      if (!wanted.length) { wanted = [ids[0]]; }
      return wanted.indexOf(c.id) >= 0;
    });
    var colors = S.style.severity_colors;
    shown.forEach(function (f) {
      var on = S.selected === f.id;
      shapes.push({type: 'line', xref: 'x', yref: 'paper', x0: f.step, x1: f.step, y0: 0, y1: 1,
                   line: {color: colors[f.severity], width: on ? 3 : 1.5, dash: 'dot'}});
      if (f.end_step !== null && f.end_step !== undefined && f.end_step !== f.step) {
        shapes.push({type: 'rect', xref: 'x', yref: 'paper', x0: f.step, x1: f.end_step, y0: 0, y1: 1,
                     fillcolor: colors[f.severity], opacity: on ? 0.18 : 0.07, line: {width: 0}});
      }
    });
    if (shown.length) {
      traces.push({type: 'scatter', mode: 'markers', yaxis: 'y2', showlegend: false, name: 'findings',
                   x: shown.map(function (f) { return f.step; }), y: shown.map(function () { return 0.96; }),
                   customdata: shown.map(function (f) { return f.id; }),
                   marker: {symbol: 'triangle-down', size: 13, color: shown.map(function (f) { return colors[f.severity]; })},
                   hovertext: shown.map(function (f) { return f.severity + ' · ' + f.type + ' · step ' + f.step + '<br>' + f.message.slice(0, 160); }),
                   hoverinfo: 'text', meta: {key: 'findings'}});
    }
    var tl = S.events.timeline.filter(function (e) { return e.step !== null && e.step !== undefined; });
    tl.filter(function (e) { return e.kind === 'rollback'; }).forEach(function (e) {
      shapes.push({type: 'line', xref: 'x', yref: 'paper', x0: e.step, x1: e.step, y0: 0, y1: 1,
                   line: {color: '#c0122c', width: 2, dash: 'dash'}});
    });
    if (tl.length) {
      traces.push({type: 'scatter', mode: 'markers', yaxis: 'y2', showlegend: false, name: 'timeline',
                   x: tl.map(function (e) { return e.step; }), y: tl.map(function () { return 0.02; }),
                   marker: {symbol: tl.map(function (e) { return e.kind === 'rollback' ? 'x' : 'triangle-up'; }), size: 10,
                            color: tl.map(function (e) { return e.kind === 'rollback' ? '#c0122c' : '#2e9d5b'; })},
                   hovertext: tl.map(function (e) { return e.kind + ' · step ' + e.step + '<br>' + e.message; }),
                   hoverinfo: 'text', meta: {key: 'timeline'}});
    }
    return {shapes: shapes, traces: traces};
  }

  function chartTraces(c, otherChart) {
    var traces = [];
    c.traces.forEach(function (t, i) { traces = traces.concat(lineTraces(t, i, c.per_rank, null)); });
    if (otherChart) {
      otherChart.traces.forEach(function (t, i) { traces = traces.concat(lineTraces(t, i, c.per_rank, S.other, 'dash')); });
    }
    return traces.concat(marks(c).traces);
  }

  function loadCurves() {
    var run = S.run;
    var asks = [get('api/curves' + q(run, '&points=2000'))];
    if (S.other) { asks.push(get('api/curves' + q(S.other, '&points=1000'))); }
    return Promise.all(asks).then(function (res) {
      if (run !== S.run) { return; }
      var d = res[0], o = res[1];
      S.charts = d.charts; S.version = d.version; S.last = d.last_step; S.asked = d.last_step;
      var grid = document.getElementById('sd-charts');
      var ids = {};
      d.charts.forEach(function (c) { ids['sd-chart-' + c.id] = true; });
      Array.prototype.slice.call(grid.children).forEach(function (n) { if (!ids[n.id]) { Plotly.purge(n); grid.removeChild(n); } });
      d.charts.forEach(function (c) {
        var id = 'sd-chart-' + c.id;
        var div = document.getElementById(id);
        if (!div) {
          div = el('div', {id: id, 'class': 'st-chart' + (c.wide ? ' st-wide' : ''), 'data-chart': c.id});
          grid.appendChild(div);
        }
        var oc = o ? o.charts.filter(function (x) { return x.id === c.id; })[0] : null;
        Plotly.react(div, chartTraces(c, oc), layout(c), CONFIG);
        if (!div.dataset.wired) { wire(div, c.id); div.dataset.wired = '1'; }
      });
      if (!d.charts.length) { grid.textContent = 'No series recorded yet.'; }
      if (!performance.getEntriesByName('sd-drawn').length) { performance.mark('sd-drawn'); }
      count();
      status('step ' + fmt(S.last) + ' · updated ' + new Date().toLocaleTimeString());
    });
  }

  function wire(div, chartId) {
    div.on('plotly_click', function (ev) {
      var p = ev.points && ev.points[0];
      if (p && p.data.meta && p.data.meta.key === 'findings') { showFinding(p.customdata); }
    });
    div.on('plotly_relayout', function (ev) {
      if (ev['xaxis.range[0]'] !== undefined) { zoom(div, chartId, ev['xaxis.range[0]'], ev['xaxis.range[1]']); }
      else if (ev['xaxis.autorange']) { delete S.zoomed[chartId]; loadCurves(); }
    });
  }

  // A zoomed range asks the server again: full detail inside it, still min/max per bucket.
  function zoom(div, chartId, lo, hi) {
    S.zoomed[chartId] = [lo, hi];
    get('api/curves' + q(S.run, '&points=2000&lo=' + Math.floor(lo) + '&hi=' + Math.ceil(hi))).then(function (d) {
      var c = d.charts.filter(function (x) { return x.id === chartId; })[0];
      if (!c) { return; }
      var l = layout(c); l.xaxis.range = [lo, hi];
      Plotly.react(div, chartTraces(c, null), l, CONFIG);
    });
  }

  function count() {
    var n = 0;
    Array.prototype.forEach.call(document.querySelectorAll('#sd-charts .st-chart'), function (div) {
      (div.data || []).forEach(function (t) { if (t.meta && t.meta.last !== undefined) { n += t.x.length; } });
    });
    document.body.dataset.points = String(n);
    document.body.dataset.lastStep = String(S.last);
  }

  // Poll: only the points after the step asked for last time (one poll of overlap: a point written late
  // is still caught), appended to the lines that lack them.
  function poll() {
    if (!S.run || S.busy || !document.getElementById('sd-live').checked) { return; }
    S.busy = true;
    S.polls += 1;
    var run = S.run, after = S.asked === null ? -1 : S.asked;
    var work = get('api/curves' + q(run, '&after=' + after)).then(function (d) {
      if (run !== S.run) { return; }
      if (d.reload || d.version !== S.version) { return loadCurves(); }
      var byKey = {};
      d.traces.forEach(function (t) { byKey[traceKey(t)] = t; });
      var fresh = false;
      S.charts.forEach(function (c) {
        var div = document.getElementById('sd-chart-' + c.id);
        if (!div || S.zoomed[c.id]) { return; }
        var xs = [], ys = [], idx = [];
        (div.data || []).forEach(function (pt, i) {
          var m = pt.meta;
          if (!m || m.run !== S.run || !byKey[m.key]) { return; }
          var t = byKey[m.key], nx = [], ny = [];
          t.x.forEach(function (x, j) { if (m.last === null || x > m.last) { nx.push(x); ny.push(t.y[j]); } });
          if (nx.length) { xs.push(nx); ys.push(ny); idx.push(i); m.last = nx[nx.length - 1]; }
        });
        if (idx.length) { Plotly.extendTraces(div, {x: xs, y: ys}, idx); fresh = true; }
        if (c.fixedY !== null && c.fixedY !== undefined && ys.some(function (part) {
          return part.some(function (y) { return y !== null && isFinite(y) && y !== c.fixedY; });
        })) { c.fixedY = null; Plotly.relayout(div, {'yaxis.autorange': true}); }
      });
      var known = {};
      S.charts.forEach(function (c) { c.traces.forEach(function (t) { known[traceKey(t)] = true; }); });
      if (d.traces.some(function (t) { return !known[traceKey(t)]; })) { return loadCurves(); }  // a new metric
      S.asked = S.last;
      if (d.last_step !== null && (S.last === null || d.last_step > S.last)) { S.last = d.last_step; }
      if (fresh) { count(); }
      status('step ' + fmt(S.last) + ' · updated ' + new Date().toLocaleTimeString());
    }).then(function () { return loadEvents(false); }).then(function () {
      if (S.polls % 5 === 0) { return loadRuns(); }
    }).catch(function (e) { status('could not update: ' + e.message); });
    work.then(function () { S.busy = false; }, function () { S.busy = false; });
  }

  // -- findings, alerts, timeline -------------------------------------------------------------------
  function loadEvents(force) {
    var run = S.run;
    return get('api/events' + q(run)).then(function (d) {
      if (run !== S.run) { return; }
      var key = JSON.stringify([d.findings.map(function (f) { return [f.type, f.step, f.end_step, f.severity]; }),
                                d.alerts.length, d.timeline.length]);
      S.events = d;
      if (!force && key === S.eventsKey) { return; }
      S.eventsKey = key;
      renderFindings(); renderAlerts(); renderTimeline(); redrawMarks();
    });
  }

  function redrawMarks() {
    S.charts.forEach(function (c) {
      var div = document.getElementById('sd-chart-' + c.id);
      if (!div || !div.data) { return; }
      var keep = div.data.filter(function (t) { return !(t.meta && (t.meta.key === 'findings' || t.meta.key === 'timeline')); });
      var m = marks(c);
      var l = div.layout; l.shapes = m.shapes;
      Plotly.react(div, keep.concat(m.traces), l, CONFIG);
    });
  }

  function table(heads, rows) {
    var t = el('table'), th = el('thead'), tr = el('tr');
    heads.forEach(function (h) { tr.appendChild(el('th', {}, h)); });
    th.appendChild(tr); t.appendChild(th);
    var tb = el('tbody'); rows.forEach(function (r) { tb.appendChild(r); }); t.appendChild(tb);
    return t;
  }

  function renderFindings() {
    var box = document.getElementById('sd-findings');
    box.textContent = '';
    var fs = S.events.findings;
    if (!fs.length) { box.appendChild(el('div', {'class': 'st-none'}, 'No findings: nothing wrong was detected in this run.')); return; }
    box.appendChild(table(['Severity', 'Type', 'Step', 'Finding'], fs.map(function (f) {
      var tr = el('tr', {'class': 'sd-finding' + (S.selected === f.id ? ' sd-on' : ''), 'data-finding': f.id});
      var td = el('td'); td.appendChild(badge(f.severity)); tr.appendChild(td);
      tr.appendChild(el('td', {}, f.type));
      tr.appendChild(el('td', {}, f.step === null ? '–' : f.step + (f.end_step !== null && f.end_step !== undefined ? '–' + f.end_step : '')));
      tr.appendChild(el('td', {}, f.message));
      tr.addEventListener('click', function () { showFinding(f.id); });
      return tr;
    })));
    if (S.selected !== null) { showFinding(S.selected, true); }
  }

  function list(title, items) {
    var box = el('div');
    box.appendChild(el('b', {}, title));
    var ol = el('ol');
    items.forEach(function (x) { ol.appendChild(el('li', {}, x)); });
    box.appendChild(items.length ? ol : el('div', {'class': 'sd-muted'}, 'none recorded'));
    return box;
  }

  function showFinding(id, quiet) {
    var f = S.events.findings.filter(function (x) { return x.id === id; })[0];
    if (!f) { return; }
    S.selected = id;
    Array.prototype.forEach.call(document.querySelectorAll('tr.sd-finding'), function (tr) {
      tr.classList.toggle('sd-on', String(tr.dataset.finding) === String(id));
    });
    var d = document.getElementById('sd-detail');
    d.textContent = '';
    var h = el('h3'); h.appendChild(badge(f.severity)); h.appendChild(document.createTextNode(' ' + f.type + (f.step !== null ? ' at step ' + f.step : '')));
    d.appendChild(h);
    d.appendChild(el('p', {}, f.message));
    var ev = el('div', {'class': 'sd-ev'});
    Object.keys(f.evidence || {}).slice(0, 16).forEach(function (k) {
      var v = f.evidence[k];
      ev.appendChild(el('div', {}, k + ': ' + (typeof v === 'object' ? JSON.stringify(v).slice(0, 200) : fmt(v))));
    });
    d.appendChild(ev);
    d.appendChild(list('Probable causes', f.causes || []));
    d.appendChild(list('Fixes to try', (f.fixes || []).filter(function (x) { return x; })));
    d.hidden = false;
    if (!quiet) { redrawMarks(); d.scrollIntoView({block: 'nearest'}); }
  }

  function renderAlerts() {
    var box = document.getElementById('sd-alerts');
    box.textContent = '';
    var as = S.events.alerts;
    if (!as.length) { box.appendChild(el('div', {'class': 'st-none'}, 'No alerts were sent.')); return; }
    box.appendChild(table(['Severity', 'Step', 'Rank', 'Alert', 'Cause', 'Fix'], as.map(function (a) {
      var tr = el('tr'), td = el('td'); td.appendChild(badge(a.severity)); tr.appendChild(td);
      [fmt(a.step), a.rank, a.message, a.cause || '', a.fix || ''].forEach(function (x) { tr.appendChild(el('td', {}, x)); });
      return tr;
    })));
  }

  function renderTimeline() {
    var box = document.getElementById('sd-timeline');
    box.textContent = '';
    var tl = S.events.timeline;
    if (!tl.length) { box.appendChild(el('div', {'class': 'st-none'}, 'No checkpoints or rollbacks recorded.')); return; }
    box.appendChild(table(['Step', 'Rank', 'What', 'Message'], tl.map(function (e) {
      var tr = el('tr', {'class': 'sd-' + e.kind});
      [fmt(e.step), e.rank, e.kind, e.message].forEach(function (x) { tr.appendChild(el('td', {}, x)); });
      return tr;
    })));
  }

  // -- compare --------------------------------------------------------------------------------------
  function loadCompare() {
    var box = document.getElementById('sd-compare-table');
    box.textContent = '';
    if (!S.other || S.other === S.run) { return Promise.resolve(); }
    var a = S.run, b = S.other;
    return Promise.all([get('api/summary' + q(a)), get('api/summary' + q(b))]).then(function (res) {
      if (a !== S.run || b !== S.other) { return; }
      box.appendChild(el('h2', {}, a + ' vs ' + b));
      var sa = res[0].summary, sb = res[1].summary, rows = [];
      ['status', 'last_step', 'last_loss', 'min_loss', 'min_eval_loss', 'tokens_per_s', 'step_time_s', 'mfu', 'peak_cuda_gib', 'peak_rss_gib'].forEach(function (k) {
        var tr = el('tr'); tr.appendChild(el('th', {}, k)); tr.appendChild(el('td', {}, fmt(sa[k]))); tr.appendChild(el('td', {}, fmt(sb[k])));
        rows.push(tr);
      });
      var ca = res[0].config, cb = res[1].config;
      Object.keys(Object.assign({}, ca, cb)).sort().forEach(function (k) {
        if (ca[k] === cb[k]) { return; }
        var tr = el('tr', {'class': 'st-diff'}); tr.appendChild(el('th', {}, 'config ' + k));
        tr.appendChild(el('td', {}, ca[k] === undefined ? '–' : ca[k])); tr.appendChild(el('td', {}, cb[k] === undefined ? '–' : cb[k]));
        rows.push(tr);
      });
      var t = table(['', a, b + ' (dashed)'], rows); t.classList.add('st-meta'); t.id = 'sd-compare-summary';
      box.appendChild(t);
    });
  }

  document.getElementById('sd-compare').addEventListener('change', function (ev) {
    S.other = ev.target.value || null;
    loadCurves(); loadCompare();
  });

  loadRuns().catch(function (e) { status('could not load the runs: ' + e.message); });
  setInterval(poll, POLL_MS);
})();
