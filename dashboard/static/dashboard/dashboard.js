// memoryhub dashboard: a little progressive enhancement. Every page works without it.
//
// - <time datetime="…Z"> elements, rendered in UTC by the server, are shown in the
//   viewer's own time zone (the browser's), with the zone in the tooltip.
// - As-of forms send the viewer's zone along, so the server reads the time as they meant it.
// - The project switcher goes on change; "select all" ticks the approval queue's boxes;
//   forms with data-confirm ask first; Copy copies a new API key.
(function () {
  "use strict";

  var zone = "UTC";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { /* old browser: stay in UTC */ }

  function localTimes(root) {
    var full = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    var exact = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) { return; }
      el.textContent = full.format(when);
      el.title = exact.format(when) + " (" + zone + ")";
      el.dataset.zone = zone;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    document.documentElement.dataset.zone = zone;

    document.querySelectorAll('input[type="hidden"][name="tz"]').forEach(function (el) { el.value = zone; });

    document.querySelectorAll("[data-js-hide]").forEach(function (el) { el.hidden = true; });
    document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });

    document.querySelectorAll("input[data-select-all]").forEach(function (box) {
      var name = box.dataset.selectAll;
      box.addEventListener("change", function () {
        document.querySelectorAll('input[type="checkbox"][name="' + name + '"]').forEach(function (el) { el.checked = box.checked; });
      });
    });

    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) { event.preventDefault(); }
      });
    });

    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        var field = document.getElementById(button.dataset.copy);
        field.select();
        var done = function () { button.textContent = "Copied"; };
        if (navigator.clipboard) { navigator.clipboard.writeText(field.value).then(done, function () { document.execCommand("copy"); done(); }); }
        else { document.execCommand("copy"); done(); }
      });
    });
  });
})();
