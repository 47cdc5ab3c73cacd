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
