// LogReport: the page's inline style sheet and scripts.

import Logbook
import Foundation

// MARK: - Style sheet and scripts

extension LogReport.Renderer {
    /// Light theme, system fonts; the level colors as custom properties.
    var styleSheet: String {
        let levels = zip(LogStatistics.levelNames, LogReport.levelColors).map { "--\($0): \($1);" }.joined(separator: " ")
        return """

            :root { \(levels) --other: \(LogReport.otherLevelColor);
              --fg: #1d232b; --muted: #5e6773; --faint: #8a929c; --line: #dfe3e8; --panel: #ffffff; --page: #f4f6f8;
              --accent: #2563eb; --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace; }
            * { box-sizing: border-box; }
            html { -webkit-text-size-adjust: 100%; }
            body { margin: 0; background: var(--page); color: var(--fg);
              font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans", Arial, sans-serif; }
            .wrap { max-width: 1240px; margin: 0 auto; padding: 0 24px; }
            header.top { background: var(--panel); border-bottom: 1px solid var(--line); padding: 22px 0 18px; }
            .eyebrow { font-size: 12px; font-weight: 600; letter-spacing: .06em; text-transform: uppercase; color: var(--accent); }
            h1 { font-size: 26px; line-height: 1.2; margin: 4px 0 6px; overflow-wrap: anywhere; }
            h2 { font-size: 18px; margin: 0 0 4px; display: flex; align-items: center; gap: 8px; }
            h3 { font-size: 14px; margin: 18px 0 4px; color: var(--muted); font-weight: 600; }
            .span { margin: 0 0 14px; font-variant-numeric: tabular-nums; }
            .span time { font-family: var(--mono); font-size: 13px; }
            .arrow, .muted { color: var(--muted); }
            .small { font-size: 12px; }
            .cards { display: flex; flex-wrap: wrap; gap: 10px; margin-bottom: 14px; }
            .card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 150px; background: #fafbfc; }
            .card-label { font-size: 12px; color: var(--muted); }
            .card-value { font-size: 20px; font-weight: 650; font-variant-numeric: tabular-nums; }
            .card.bad .card-value { color: #c81e1e; }
            .card.warn { border-color: #f3c36b; background: #fffaeb; }
            .chips { display: flex; flex-wrap: wrap; gap: 6px; }
            .chip { --c: var(--other); display: inline-flex; align-items: center; gap: 6px; padding: 2px 10px 2px 8px;
              border-radius: 999px; border: 1px solid color-mix(in srgb, var(--c) 45%, white);
              background: color-mix(in srgb, var(--c) 10%, white); font-size: 13px; white-space: nowrap; }
            .chip i { width: 9px; height: 9px; border-radius: 50%; background: var(--c); display: inline-block; }
            .chip b { font-variant-numeric: tabular-nums; }
            .chip.zero { opacity: .55; }
            .chip.small { font-size: 12px; padding: 0 8px 0 6px; }
            \(LogStatistics.levelNames.map { ".lv-\($0) { --c: var(--\($0)); }" }.joined(separator: " ")) .lv-other { --c: var(--other); }
            nav.toc { display: flex; gap: 18px; padding-top: 12px; padding-bottom: 4px; font-size: 13px; }
            nav.toc a { color: var(--accent); text-decoration: none; }
            nav.toc a:hover { text-decoration: underline; }
            main section { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 18px 20px; margin: 14px 0; }
            section.issues { border-color: #f0b429; background: #fff8e6; }
            section.issues h2 { color: #8a4b00; }
            section.issues p { margin: 2px 0 8px; color: #6b4a12; }
            section.issues ul { margin: 0; padding-left: 20px; font-family: var(--mono); font-size: 12.5px; white-space: pre-wrap; overflow-wrap: anywhere; }
            .icon { width: 20px; height: 20px; flex: none; }
            .note { margin: 0 0 10px; color: var(--muted); font-size: 13px; }
            .more { margin: 8px 0 0; color: var(--muted); font-size: 13px; font-style: italic; }
            .empty { color: var(--muted); margin: 6px 0; }
            .empty.ok { color: #137333; font-weight: 600; }
            .legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12.5px; margin: 0 0 4px; }
            .legend .key { display: inline-flex; align-items: center; gap: 5px; }
            .legend i { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
            svg.chart { display: block; width: 100%; height: auto; overflow: visible; }
            .chart-box, figure { overflow-x: auto; overflow-y: hidden; }
            svg.timeline { min-width: 720px; }
            svg.histogram { min-width: 400px; }
            svg.chart text { font-size: 11px; fill: var(--muted); font-variant-numeric: tabular-nums; }
            svg.chart .ylabel { text-anchor: end; }
            svg.chart .xlabel { text-anchor: middle; }
            svg.chart .xlabel.date { fill: var(--faint); font-size: 10.5px; }
            svg.chart .grid { stroke: #eceff2; stroke-width: 1; }
            svg.chart .axis, svg.chart .tick { stroke: #9aa3ad; stroke-width: 1; }
            svg.chart .bars { shape-rendering: crispEdges; }
            svg.chart .hover { fill: rgba(37, 99, 235, .10); }
            svg.chart .hit { fill: transparent; }
            svg.chart .hbar { fill: #6277d6; }
            svg.chart g[data-tip]:hover .hbar { fill: #3a4fb8; }
            svg.chart .marker { stroke-width: 1.5; stroke-dasharray: 4 3; }
            svg.chart .marker.p50 { stroke: #1d232b; }
            svg.chart .marker.p99 { stroke: #d32f2f; }
            svg.chart text.marker-label { font-weight: 600; font-size: 11.5px; }
            svg.chart text.marker-label.p50 { fill: #1d232b; }
            svg.chart text.marker-label.p99 { fill: #d32f2f; }
            .scroll { overflow-x: auto; }
            table.data { width: 100%; border-collapse: collapse; font-size: 13px; }
            table.data.wide { min-width: 940px; }
            table.data.args { min-width: 680px; }
            table.data th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; padding: 6px 8px;
              border-bottom: 2px solid var(--line); white-space: nowrap; position: relative; }
            table.data td { padding: 6px 8px; border-bottom: 1px solid #eef0f3; vertical-align: top; }
            table.data tbody tr:hover td { background: #f7f9fc; }
            table.data .num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
            table.sortable th[tabindex] { cursor: pointer; user-select: none; }
            table.sortable th[tabindex]:hover { color: var(--fg); }
            table.sortable th[aria-sort="ascending"]::after { content: " ▲"; font-size: 9px; }
            table.sortable th[aria-sort="descending"]::after { content: " ▼"; font-size: 9px; }
            td.template { min-width: 220px; max-width: 420px; overflow-wrap: anywhere; font-family: var(--mono); font-size: 12.5px; }
            .ph { color: var(--accent); background: #eaf1fe; border-radius: 3px; padding: 0 1px; }
            td.location { max-width: 260px; overflow-wrap: break-word; }
            code { font-family: var(--mono); font-size: 12px; }
            .function { color: var(--muted); font-size: 12px; overflow-wrap: anywhere; }
            td.loggers { max-width: 200px; }
            .logger { display: inline-block; background: #f0f2f5; border-radius: 4px; padding: 0 5px; margin: 1px 0;
              font-size: 12px; overflow-wrap: break-word; max-width: 100%; }
            td.time { font-family: var(--mono); font-size: 12px; white-space: nowrap; color: #39414b; }
            .share-bar { display: inline-block; width: 44px; height: 6px; margin-right: 8px; vertical-align: middle;
              background: #e6ebf2; border-radius: 3px; overflow: hidden; }
            .share-bar i { display: block; height: 100%; min-width: 1px; background: #5b8def; }
            .ctl { color: #b42318; background: #fdecea; border-radius: 3px; padding: 0 2px; font-family: var(--mono); font-size: .9em; }
            td.message div { font-family: var(--mono); font-size: 12px; line-height: 1.4; white-space: pre-wrap; overflow-wrap: anywhere;
              max-height: 8.4em; overflow: auto; max-width: 440px; }
            article.site { border-top: 1px solid var(--line); padding-top: 14px; margin-top: 14px; }
            article.site header { margin-bottom: 8px; }
            article.site .rank { color: var(--faint); font-weight: 600; }
            article.site header .template { font-family: var(--mono); font-size: 13.5px; font-weight: 600; overflow-wrap: anywhere; }
            .site-meta { color: var(--muted); font-size: 12.5px; margin-top: 2px; overflow-wrap: anywhere; }
            .position { color: var(--faint); font-size: 12px; }
            .histograms { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 420px), 1fr)); gap: 12px 28px; margin-top: 12px; }
            figure { margin: 0; }
            figcaption { font-size: 12.5px; margin-bottom: 2px; }
            footer { color: var(--muted); font-size: 12px; padding-top: 6px; padding-bottom: 28px; }
            #script-errors { margin: 0 24px 24px; padding: 10px; border: 2px solid #d32f2f; background: #fff0f0; color: #8b0000; white-space: pre-wrap; }
            #script-errors:empty { display: none; }
            #tooltip { position: fixed; z-index: 10; pointer-events: none; background: #1f2630; color: #fff; border-radius: 6px;
              padding: 7px 10px; font-size: 12px; line-height: 1.5; box-shadow: 0 4px 14px rgba(0,0,0,.25); max-width: 340px; }
            #tooltip .tip-head { font-weight: 600; margin-bottom: 2px; }
            #tooltip .tip-row { display: flex; align-items: center; gap: 6px; }
            #tooltip .tip-row i { width: 9px; height: 9px; border-radius: 2px; display: inline-block; }
            #tooltip .tip-row b { margin-left: auto; padding-left: 14px; font-variant-numeric: tabular-nums; }
            #tooltip .tip-total { border-top: 1px solid rgba(255,255,255,.25); margin-top: 3px; padding-top: 2px; }
            @media (max-width: 1000px) { svg.timeline text { font-size: 15px; } svg.timeline .xlabel.date { font-size: 14px; } }
            @media (max-width: 720px) { .wrap { padding: 0 12px; } main section { padding: 14px 12px; } h1 { font-size: 21px; } }

            """
    }

    /// The first script of the page: every later script error (or unhandled rejection) is
    /// appended to `<pre id="script-errors">`, held back until that element exists.
    var errorTrapScript: String {
        #"""

        (function () {
          "use strict";
          var pending = [];
          function record(text) {
            var box = document.getElementById("script-errors");
            if (box) { box.textContent += text + "\n"; } else { pending.push(text); }
          }
          window.onerror = function (message, source, line, column, error) {
            var where = line ? " (line " + line + (column ? ":" + column : "") + ")" : "";
            record(String(message) + where + (error && error.stack ? "\n" + error.stack : ""));
            return false;
          };
          window.addEventListener("unhandledrejection", function (event) {
            record("Unhandled rejection: " + String(event.reason));
          });
          document.addEventListener("DOMContentLoaded", function () { pending.splice(0).forEach(record); });
        })();

        """#
    }

    /// Sorting of `table.sortable` by a click on a heading, and tooltips: per column of the
    /// timeline charts, per bin of the histograms. Text only ever goes in through `textContent`.
    /// Marks the page ready (`data-ready="1"` on the body) as its last statement.
    var mainScript: String {
        let names = LogStatistics.levelNames.map { "\"\($0)\"" }.joined(separator: ",")
        return #"""
        (function () {
          "use strict";
          var LEVELS = [\#(names)];

          // Sortable tables: numbers by their data-v, text case-insensitively; first click on a
          // number sorts descending, on text ascending; the rank column restores the order.
          function sortKey(cell, numeric) {
            var value = cell ? cell.getAttribute("data-v") : null;
            if (numeric) { var number = parseFloat(value !== null ? value : cell ? cell.textContent : ""); return isNaN(number) ? -Infinity : number; }
            return (value !== null ? value : cell ? cell.textContent : "").trim().toLowerCase();
          }
          function sortTable(table, column, heading) {
            var numeric = heading.getAttribute("data-type") === "num";
            var current = heading.getAttribute("aria-sort");
            var ascending = current ? current === "descending" : !numeric || column === 0;
            var body = table.tBodies[0];
            var rows = Array.prototype.map.call(body.rows, function (row, index) {
              return { row: row, key: sortKey(row.cells[column], numeric), index: index };
            });
            rows.sort(function (a, b) {
              if (a.key < b.key) return ascending ? -1 : 1;
              if (a.key > b.key) return ascending ? 1 : -1;
              return a.index - b.index;
            });
            rows.forEach(function (entry) { body.appendChild(entry.row); });
            Array.prototype.forEach.call(heading.parentNode.cells, function (cell) { cell.removeAttribute("aria-sort"); });
            heading.setAttribute("aria-sort", ascending ? "ascending" : "descending");
          }
          Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
            if (!table.tHead || !table.tBodies.length) return;
            Array.prototype.forEach.call(table.tHead.rows[0].cells, function (heading, column) {
              heading.tabIndex = 0;
              heading.title = "Sort";
              heading.addEventListener("click", function () { sortTable(table, column, heading); });
              heading.addEventListener("keydown", function (event) {
                if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, column, heading); }
              });
            });
          });

          // Tooltip.
          var tip = document.createElement("div");
          tip.id = "tooltip";
          tip.setAttribute("role", "tooltip");
          tip.hidden = true;
          document.body.appendChild(tip);
          function element(tag, className, text) {
            var node = document.createElement(tag);
            if (className) node.className = className;
            if (text !== undefined) node.textContent = text;
            tip.appendChild(node);
            return node;
          }
          function place(event) {
            tip.hidden = false;
            var x = event.clientX + 14, y = event.clientY + 14;
            if (x + tip.offsetWidth > window.innerWidth - 4) x = event.clientX - 14 - tip.offsetWidth;
            if (y + tip.offsetHeight > window.innerHeight - 4) y = event.clientY - 14 - tip.offsetHeight;
            tip.style.left = Math.max(4, x) + "px";
            tip.style.top = Math.max(4, y) + "px";
          }
          function utc(ms) { return new Date(ms).toISOString().replace("T", " ").replace(/\.000Z$|Z$/, ""); }
          function formatCount(n) { return n.toLocaleString("en-US"); }

          // Timeline: the column under the pointer, its time range and counts per level.
          var hovered = null;
          function clearHover() { if (hovered) { hovered.setAttribute("visibility", "hidden"); hovered = null; } }
          function timelineTip(svg, event) {
            var data = window.LOGBOOK_TIMELINE;
            var matrix = svg.getScreenCTM();
            if (!data || !matrix) return false;
            var point = svg.createSVGPoint();
            point.x = event.clientX; point.y = event.clientY;
            point = point.matrixTransform(matrix.inverse());
            var left = parseFloat(svg.getAttribute("data-plot-left")), width = parseFloat(svg.getAttribute("data-plot-width"));
            var columns = parseInt(svg.getAttribute("data-columns"), 10);
            var index = Math.floor((point.x - left) / width * columns);
            if (!(index >= 0 && index < columns)) return false;
            var hover = svg.querySelector(".hover");
            if (hover) {
              hover.setAttribute("x", String(left + index * width / columns));
              hover.setAttribute("width", String(width / columns));
              hover.setAttribute("visibility", "visible");
              if (hovered !== hover) clearHover();
              hovered = hover;
            }
            var start = data.start + index * data.step, end = Math.min(start + data.step, data.end);
            start = Math.max(start, data.first);
            var counts = data.counts[index] || [0, 0, 0, 0, 0, 0, 0];
            var levels = svg.getAttribute("data-levels").split(" ").map(Number).sort(function (a, b) { return b - a; });
            tip.textContent = "";
            element("div", "tip-head", utc(start) + " – " + utc(end).slice(11) + " UTC");
            var total = 0;
            levels.forEach(function (level) {
              total += counts[level];
              if (!counts[level]) return;
              var row = element("div", "tip-row");
              var swatch = document.createElement("i");
              swatch.style.background = "var(--" + LEVELS[level] + ")";
              row.appendChild(swatch);
              row.appendChild(document.createTextNode(LEVELS[level]));
              var value = document.createElement("b");
              value.textContent = formatCount(counts[level]);
              row.appendChild(value);
            });
            var totalRow = element("div", "tip-row tip-total", "total");
            var totalValue = document.createElement("b");
            totalValue.textContent = formatCount(total);
            totalRow.appendChild(totalValue);
            place(event);
            return true;
          }

          document.addEventListener("mousemove", function (event) {
            var target = event.target instanceof Element ? event.target : null;
            var chart = target && target.closest("svg.timeline");
            if (chart && timelineTip(chart, event)) return;
            clearHover();
            var tipped = target && target.closest("[data-tip]");
            if (tipped) {
              tip.textContent = tipped.getAttribute("data-tip");
              place(event);
              return;
            }
            tip.hidden = true;
          });
          document.addEventListener("mouseleave", function () { clearHover(); tip.hidden = true; });

          document.body.dataset.ready = "1";
        })();

        """#
    }
}
