// cudatrace HTML report: sortable tables, a filter for the entry point table, and a readiness marker.
// No network, no eval, no innerHTML: every string in the page came escaped from the server side.
"use strict";
(function () {
  var root = document.documentElement;
  var data = null;
  var node = document.getElementById("cudatrace-data");
  try {
    data = node ? JSON.parse(node.textContent) : null;
  } catch (err) {
    console.error("cudatrace: the embedded report document is not valid JSON");
  }

  function sortKey(cell) {
    var raw = cell.getAttribute("data-sort");
    var text = raw === null ? cell.textContent.trim() : raw;
    if (/^-?\d+(\.\d+)?(e-?\d+)?$/.test(text)) return parseFloat(text);
    return text.toLowerCase();
  }

  function sortTable(table, col, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = sortKey(a.cells[col]);
      var y = sortKey(b.cells[col]);
      if (typeof x !== typeof y) return (typeof x === "number" ? -1 : 1) * dir;
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(th.parentNode.cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    if (!table.tHead || !table.tHead.rows.length) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortTable(table, col, th); });
      th.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortTable(table, col, th); }
      });
    });
  });

  var filter = document.getElementById("entry-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      Array.prototype.forEach.call(document.querySelectorAll("#entries tbody tr"), function (tr) {
        tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  }

  var rows = data ? (data.entries || data.blockers || []) : null;
  root.setAttribute("data-cudatrace-ready", rows ? String(rows.length) : "no-data");
})();
