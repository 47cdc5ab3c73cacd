// CortexBuild console: small progressive enhancements; every page works without them.
"use strict";
document.addEventListener("submit", function (ev) {
  var form = ev.target;
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    ev.preventDefault();
    return;
  }
  var busy = form.getAttribute("data-busy");
  var button = form.querySelector("button[type=submit]");
  if (busy && button) {
    // Disable after the submission has started, so the button's value is sent.
    window.setTimeout(function () { button.disabled = true; button.textContent = busy; }, 0);
  }
});
// A button with data-copy="ID" copies the value of the field with that id.
document.addEventListener("click", function (ev) {
  var id = ev.target.getAttribute && ev.target.getAttribute("data-copy");
  if (!id) {
    return;
  }
  var field = document.getElementById(id);
  field.select();
  if (navigator.clipboard) {
    navigator.clipboard.writeText(field.value).then(function () { ev.target.textContent = "Copied"; });
  }
});
// A page answering a form that says data-replace-url="URL" (the page showing a new key's secret) makes its
// history entry the plain GET of URL: a reload then loads that page instead of sending the form again.
document.addEventListener("DOMContentLoaded", function () {
  var el = document.querySelector("[data-replace-url]");
  if (el && window.history && window.history.replaceState) {
    window.history.replaceState(null, "", el.getAttribute("data-replace-url"));
  }
});
