// The runs list's "Compare selected": the first run ticked is the baseline (A), whatever the
// table's order, so the comparison's address lists the ids in the order they were ticked.
(function () {
  var form = document.getElementById("compare");
  if (!form) return;
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input[form=compare][name=ids]"));
  var order = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
  boxes.forEach(function (b) {
    b.addEventListener("change", function () {
      order = order.filter(function (v) { return v !== b.value; });
      if (b.checked) order.push(b.value);
    });
  });
  form.addEventListener("submit", function (e) {
    var ticked = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
    var ids = order.filter(function (v) { return ticked.indexOf(v) >= 0; });
    ticked.forEach(function (v) { if (ids.indexOf(v) < 0) ids.push(v); });
    e.preventDefault();
    location.href = form.getAttribute("action") + "?ids=" + encodeURIComponent(ids.join(","));
  });
})();
